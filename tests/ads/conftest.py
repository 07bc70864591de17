"""Shared fixtures of the ads tests."""

from __future__ import annotations

import pytest

from tests.helpers import prepared_attribution


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A prepared SYNTHETIC Criteo Attribution stand-in (2,500 raw rows, users and sensitive features)."""
    return prepared_attribution(tmp_path_factory.mktemp("attribution"), n_rows=2500, seed=1)
