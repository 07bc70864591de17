"""The DP loop's diagnostics along training (labeldp.dpsgd.loop): 000 Figure 2's curves."""

from __future__ import annotations

import numpy as np
import pytest

from labeldp.dpsgd.loop import DPLoopResult


def _result(losses, norms):
    return DPLoopResult(
        state=None,
        steps=len(losses),
        losses=list(losses),
        clipped_fraction=[0.0] * len(losses),
        diagnostics={},
        diverged=False,
        seconds=0.0,
        grad_norms=list(norms),
    )


@pytest.mark.parametrize("steps,points", [(585, 100), (100, 100), (7, 100), (250, 40)])
def test_curves_are_block_means_of_the_per_step_values(steps, points):
    losses = np.linspace(2.3, 0.1, steps)
    norms = np.arange(steps, dtype=float)
    c = _result(losses, norms).curves(points=points)
    every = c["steps_per_point"]
    assert len(c["loss"]) == len(c["grad_norm"]) == -(-steps // every) <= points
    for i, (lo, gn) in enumerate(zip(c["loss"], c["grad_norm"])):
        block = slice(i * every, (i + 1) * every)
        assert lo == pytest.approx(losses[block].mean()) and gn == pytest.approx(norms[block].mean())
    # every step counts once: the block means weighted by their sizes give the overall mean
    sizes = [min(every, steps - i * every) for i in range(len(c["loss"]))]
    assert np.average(c["grad_norm"], weights=sizes) == pytest.approx(norms.mean())
