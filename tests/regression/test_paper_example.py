"""003's worked example (labeldp.regression.paper_example): the paper's numbers, exactly."""

from __future__ import annotations

import json

import numpy as np
import pytest

from labeldp.regression import paper_example


@pytest.fixture(scope="module")
def record():
    return paper_example.example_record(epsilon=0.5, num_outputs=2001)


def test_rr_on_bins_reproduces_003_section_3(record):
    d, m = record["details"], record["metrics"]
    assert d["rr_on_bins"]["outputs"] == pytest.approx([0.396, 0.720], abs=5e-4)  # Phi(0), Phi(1) = Phi(2)
    assert d["rr_on_bins"]["label_to_output"] == [0, 1, 1]
    assert d["bayes_predictor"]["true"] == pytest.approx([0.4, 0.7])
    assert d["bayes_predictor"]["rr_on_bins"] == pytest.approx([0.542, 0.558], abs=5e-4)
    assert m["rr_on_bins_loss_ratio"] == pytest.approx(2.726 / 2.625, abs=2e-4)


def test_the_optimal_unbiased_randomizer_is_unbiased_private_and_off_the_label_range(record):
    m, opt = record["metrics"], record["details"]["optimal_unbiased"]
    assert m["optimal_unbiased_max_bias"] < 1e-9
    assert m["optimal_unbiased_max_dp_ratio"] <= np.exp(0.5) * (1 + 1e-9)
    assert m["optimal_unbiased_outputs_inside_label_range"] == 0  # 003: every output outside [0, 2]
    mat = np.asarray(opt["matrix"])
    assert np.allclose(mat.sum(axis=1), 1.0) and (mat >= 0).all()
    # Theorem 6: an optimum needs at most 2|Y| = 6 outputs; the grid may split one output's mass over
    # neighbouring grid points, so count clusters of used outputs
    outs = np.asarray(opt["outputs"])
    clusters = 1 + int(np.sum(np.diff(outs) > 0.05))
    assert clusters <= 6


def test_a_coarser_grid_cannot_beat_a_finer_one(record):
    coarse = paper_example.example_record(epsilon=0.5, num_outputs=201)
    assert (
        coarse["metrics"]["optimal_unbiased_noisy_label_mse"]
        >= record["metrics"]["optimal_unbiased_noisy_label_mse"] - 1e-9
    )


def test_the_figure_is_drawn_from_the_record_only(tmp_path, record):
    rec = {**record, "config": {"epsilon": 0.5, "num_outputs": 2001}, "record_path": "r.json", "environment": {}}
    paths = paper_example.render_figure2(json.loads(json.dumps(rec)), out_dir=tmp_path, name="unbiased_figure2")
    assert all(p.stat().st_size > 0 for p in paths)
    assert "Phi(0) = 0.396" in (tmp_path / "unbiased_figure2.md").read_text()
