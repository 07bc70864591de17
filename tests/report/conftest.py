"""Fixtures shared by the table tests (tests/report/test_tables*.py)."""

import pytest

from tests.helpers import install_fake_methods, repo_config

T5_METHODS = ["rr", "rr_debiased", "lp_2st", "alibi", "dpsgd", "labeldp_pro"]


@pytest.fixture
def table5_cfg(tmp_path, monkeypatch):
    """The repo config with 000 Table 5a's methods faked: lr 0.1 and 0.2, seeds 0-2, eps 0.1 and 1."""
    install_fake_methods(monkeypatch, T5_METHODS, axes=("learning_rate",))
    c = repo_config(results_dir=str(tmp_path / "results"))
    c["seeds"] = [0, 1, 2]
    c["grids"]["full"]["table5a"]["learning_rate"] = [0.1, 0.2]
    c["tables"]["table5_mnist"]["epsilons"] = [0.1, 1.0]
    return c
