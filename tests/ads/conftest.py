"""Shared fixtures of the ads tests."""

from __future__ import annotations

import pytest

from labeldp.data import criteo_attribution
from labeldp.data.tabular import load_prepared_tabular


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A prepared SYNTHETIC Criteo Attribution stand-in (2,500 raw rows, users and sensitive features)."""
    d = tmp_path_factory.mktemp("attribution")
    criteo_attribution.write_standin(d / "raw", n_rows=2500, seed=1)
    return load_prepared_tabular(criteo_attribution.prepare_dataset(raw_dir=d / "raw", out_path=d / "p.npz",
                                                                    source="synthetic_standin"))
