"""The fetch tests pass the mirror explicitly: a user's environment variable must not change their outcome."""

from __future__ import annotations

import pytest

from labeldp.data.fetch import MIRROR_ENV


@pytest.fixture(autouse=True)
def _no_env_mirror(monkeypatch):
    monkeypatch.delenv(MIRROR_ENV, raising=False)
