"""NT-Xent (labeldp/simclr/ntxent.py) against a direct numpy reference."""

import numpy as np
import pytest

from labeldp.simclr.ntxent import nt_xent


def _reference(z1, z2, tau):
    z = np.concatenate([z1, z2]).astype(np.float64)
    z /= np.linalg.norm(z, axis=1, keepdims=True)
    n2 = len(z)
    n = n2 // 2
    total = 0.0
    for i in range(n2):
        j = (i + n) % n2
        sims = np.array([z[i] @ z[k] / tau for k in range(n2) if k != i])
        total += -(z[i] @ z[j] / tau) + np.log(np.sum(np.exp(sims)))
    return total / n2


@pytest.mark.parametrize("tau", [0.1, 0.5, 1.0])
def test_matches_the_definition(tau):
    rng = np.random.default_rng(0)
    z1, z2 = rng.normal(size=(6, 5)), rng.normal(size=(6, 5))
    assert float(nt_xent(z1, z2, temperature=tau)) == pytest.approx(_reference(z1, z2, tau), rel=1e-5)


def test_symmetric_in_the_views_and_scale_free():
    rng = np.random.default_rng(1)
    z1, z2 = rng.normal(size=(8, 4)), rng.normal(size=(8, 4))
    a = float(nt_xent(z1, z2, temperature=0.5))
    assert float(nt_xent(z2, z1, temperature=0.5)) == pytest.approx(a, rel=1e-6)
    assert float(nt_xent(3.0 * z1, 0.5 * z2, temperature=0.5)) == pytest.approx(a, rel=1e-5)  # cosine similarity


def test_aligned_views_score_better_than_unrelated_ones():
    rng = np.random.default_rng(2)
    z1 = rng.normal(size=(16, 8))
    aligned = float(nt_xent(z1, z1 + 0.01 * rng.normal(size=z1.shape), temperature=0.5))
    unrelated = float(nt_xent(z1, rng.normal(size=z1.shape), temperature=0.5))
    assert aligned < unrelated
    # the loss is at least the log of the number of negatives minus the best possible margin
    assert aligned > -1.0 / 0.5 * 2
