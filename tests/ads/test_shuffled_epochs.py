"""The ads models' one non-private loop (labeldp.ads.train.run_shuffled_epochs; RR on ads data and Hybrid's
phase 1 both train through it)."""

from __future__ import annotations

import types

import jax
import numpy as np

from labeldp.ads import train


def _spy_step(losses):
    seen = []

    def step(state, batch, key):
        seen.append((np.asarray(batch.x[0])[:, 0].copy(), np.asarray(batch.mask).copy(), np.asarray(key).copy()))
        return state + 1, types.SimpleNamespace(loss=np.float32(losses[len(seen) - 1]))

    return step, seen


def test_every_row_is_seen_once_per_epoch_and_padding_is_masked():
    n, bs, epochs = 10, 4, 3
    x_num = np.arange(n, dtype=np.float32)[:, None]
    step, seen = _spy_step([1.0] * 9)
    run = train.run_shuffled_epochs(
        step,
        0,
        x_num=x_num,
        x_cat=np.zeros((n, 1), np.int32),
        targets=np.zeros(n),
        batch_size=bs,
        epochs=epochs,
        rng=np.random.default_rng(0),
        key=jax.random.PRNGKey(0),
        stop_on_divergence=True,
    )
    assert run.steps == run.state == 9 and len(run.losses) == 9 and run.epoch_losses == [1.0] * 3
    for e in range(epochs):
        rows = np.concatenate([x[m] for x, m, _ in seen[3 * e : 3 * e + 3]])
        assert sorted(rows.tolist()) == list(range(n))  # each real row once; the wrapped-around rows are masked
    keys = [k.tolist() for _, _, k in seen]
    assert keys == [jax.random.fold_in(jax.random.PRNGKey(0), t).tolist() for t in range(9)]


def test_a_non_finite_epoch_stops_only_when_asked():
    kw = dict(
        x_num=np.zeros((4, 1), np.float32),
        x_cat=np.zeros((4, 1), np.int32),
        targets=np.zeros(4),
        batch_size=2,
        epochs=3,
        key=jax.random.PRNGKey(1),
    )
    step, _ = _spy_step([1.0, np.nan] + [1.0] * 4)
    stop = train.run_shuffled_epochs(step, 0, rng=np.random.default_rng(0), stop_on_divergence=True, **kw)
    assert stop.diverged and stop.steps == 2 and len(stop.epoch_losses) == 1
    step, _ = _spy_step([1.0, np.nan] + [1.0] * 4)
    go = train.run_shuffled_epochs(step, 0, rng=np.random.default_rng(0), stop_on_divergence=False, **kw)
    assert go.diverged and go.steps == 6
