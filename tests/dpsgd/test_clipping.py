"""The book-keeping clipped sum equals the vmap(grad) reference (labeldp.dpsgd.clipping).

For every model with a tapped forward (000's MNIST CNN with SAME and VALID padding, the linear
probe, the ads MLP with embeddings, plain and truncated), per example and per user: the clipped
sum, the per-unit norms and the step statistics agree to float32 tolerance, on padded batches
(masked rows contribute nothing), with norms on both sides of C, C tiny and C huge, chunked or not.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from labeldp.ads.model import AdsMLP, two_class_logits
from labeldp.dpsgd import Batch, DPSGDConfig, cross_entropy, make_dpsgd_step
from labeldp.dpsgd.clipping import bookkeeping_clipped_sum, resolve_formulation, vmap_clipped_sum
from labeldp.dpsgd.tape import Tape
from labeldp.models import build_model

RTOL = 2e-5


def _image_case(name, padding, unit, rng, b=24, k=3):
    shape = {"mnist_cnn": (28, 28, 1), "cifar_cnn": (32, 32, 3)}.get(name, (20,))
    if name == "cifar_cnn":
        b = 12
    spec = build_model(name, input_shape=shape, padding=padding)
    params = spec.init(jax.random.key(1))
    lead = (b,) if unit == "example" else (b // k, k)
    x = jnp.asarray(rng.random((*lead, *shape), dtype=np.float32))
    y = jnp.asarray(rng.integers(0, 10, lead), jnp.int32)
    mask = (rng.random(lead) < 0.75).astype(np.float32)
    mask.reshape(-1)[-3:] = 0.0  # trailing padding rows
    return spec.train_logits, spec.tapped, params, x, y, jnp.asarray(mask)


def _ads_case(truncated, unit, rng, b=24, k=4):
    model = AdsMLP(
        hidden=(8, 4), vocab_sizes=(3, 6), embed_dims=(3, 2), sensitive_cat=(True, False), sensitive_num=(False, True)
    )
    lead = (b,) if unit == "example" else (b // k, k)
    xn = jnp.asarray(rng.normal(size=(*lead, 2)).astype(np.float32))
    xc = jnp.asarray(rng.integers(0, 3, (*lead, 2)), jnp.int32)  # small vocabularies: users repeat rows
    y = jnp.asarray(rng.integers(0, 2, lead), jnp.int32)
    mask = jnp.asarray((rng.random(lead) < 0.8).astype(np.float32))
    params = model.init(jax.random.key(2), (xn.reshape(-1, 2), xc.reshape(-1, 2)))
    logits = two_class_logits(model, truncated=truncated)
    return logits, logits.tapped, params, (xn, xc), y, mask


CASES = [
    ("mnist_cnn", "SAME"),
    ("mnist_cnn", "VALID"),
    ("cifar_cnn", "SAME"),
    ("linear", "SAME"),
    ("ads", False),
    ("ads", True),
]


def _case(case, unit, seed=0):
    rng = np.random.default_rng(seed)
    if case[0] == "ads":
        return _ads_case(case[1], unit, rng)
    return _image_case(case[0], case[1], unit, rng)


def _reference_norms(logits_fn, params, x, y, mask, unit, key=None):
    """Per-unit gradient norms straight from vmap(grad) (the unit's masked summed loss; dropout
    keys split per unit from ``key``, as the engine does)."""
    if unit == "example":
        x = jax.tree_util.tree_map(lambda a: a[:, None], x)
        y, mask = y[:, None], mask[:, None]

    def unit_loss(p, xu, yu, mu, ku):
        return jnp.sum(jax.vmap(cross_entropy)(logits_fn(p, xu, ku), yu) * mu)

    keys = jax.random.split(jax.random.key(0) if key is None else key, mask.shape[0])
    g = jax.vmap(jax.grad(unit_loss), in_axes=(None, 0, 0, 0, 0))(params, x, y, mask, keys)
    return jnp.sqrt(sum(jnp.sum(jnp.square(a.reshape(a.shape[0], -1)), 1) for a in jax.tree_util.tree_leaves(g)))


def _assert_trees_close(a, b, rtol=RTOL):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    for u, v in zip(la, lb):
        scale = float(jnp.max(jnp.abs(u))) + 1e-12
        assert float(jnp.max(jnp.abs(u - v))) <= rtol * scale, (u.shape, float(jnp.max(jnp.abs(u - v))), scale)


@functools.lru_cache(maxsize=None)
def _case_reference(case, unit):
    """The case's data, its per-unit norms and its reference compiled once, C a traced argument (the
    shared sweep step's form; a case's clip levels reuse the program): one program returns the per-unit
    norms of :func:`_reference_norms` and the vmap(grad) clipped sum with its statistics."""
    logits_fn, tapped, params, x, y, mask = _case(case, unit)

    def reference(p, x, y, m, c):
        clipped, stats = vmap_clipped_sum(
            logits_fn=logits_fn,
            loss_fn=cross_entropy,
            unit=unit,
            clip_norm=c,
            params=p,
            x=x,
            y=y,
            mask=m,
            key=jax.random.key(0),
        )
        return _reference_norms(logits_fn, p, x, y, m, unit), clipped, stats

    reference = jax.jit(reference)
    norms = reference(params, x, y, mask, jnp.float32(1.0))[0]  # the per-unit norms, once per case
    return tapped, (params, x, y, mask), norms, reference


@functools.lru_cache(maxsize=None)
def _bookkeeping(case, unit, chunk_size):
    """The book-keeping clipped sum of the case, compiled once per chunk size with C traced."""
    tapped = _case_reference(case, unit)[0]

    def fast(p, x, y, m, c):
        return bookkeeping_clipped_sum(
            tapped_fn=tapped,
            loss_fn=cross_entropy,
            unit=unit,
            clip_norm=c,
            chunk_size=chunk_size,
            params=p,
            x=x,
            y=y,
            mask=m,
        )

    return jax.jit(fast)


@pytest.mark.parametrize("unit", ["example", "user"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}")
@pytest.mark.parametrize("clip", ["tiny", "median", "huge"])
@pytest.mark.parametrize("chunk_size", [None, 5])
def test_bookkeeping_equals_vmap_reference(case, unit, clip, chunk_size):
    _, (params, x, y, mask), norms, reference = _case_reference(case, unit)
    bookkeeping = _bookkeeping(case, unit, chunk_size)
    real = np.asarray(mask).reshape(norms.shape[0], -1).sum(1) > 0
    # C below every norm, between the two middle real norms (half clipped, half not), above all
    mid = np.sort(np.asarray(norms)[real])[real.sum() // 2 - 1 : real.sum() // 2 + 1]
    clip_norm = jnp.float32({"tiny": 1e-4, "median": float(mid.mean()), "huge": 1e4}[clip])
    _, ref, ref_stats = reference(params, x, y, mask, clip_norm)
    fast, stats = bookkeeping(params, x, y, mask, clip_norm)
    _assert_trees_close(ref, fast)
    for key in ("num_examples", "num_units", "num_clipped"):
        assert float(stats[key]) == float(ref_stats[key])
    for key in ("loss_sum", "norm_sum"):
        assert float(stats[key]) == pytest.approx(float(ref_stats[key]), rel=RTOL)
    if clip == "tiny":  # every real unit is clipped
        assert float(ref_stats["num_clipped"]) == real.sum()
    if clip == "huge":  # nothing clipped
        assert float(ref_stats["num_clipped"]) == 0
    if clip == "median":  # both sides of C occur
        assert 0 < float(ref_stats["num_clipped"]) < real.sum()
    assert float(stats["norm_sum"]) == pytest.approx(float(jnp.sum(norms * real)), rel=RTOL)


@pytest.mark.parametrize("case", CASES[:3], ids=lambda c: f"{c[0]}-{c[1]}")
def test_per_unit_norms_equal_reference_norms(case):
    """norm_sum over a batch of one real unit is that unit's norm, for each unit in turn."""
    _, (params, x, y, mask), _, reference = _case_reference(case, "example")
    norms = reference(params, x, y, jnp.ones_like(mask), jnp.float32(1.0))[0]  # every row real
    fn = _bookkeeping(case, "example", 7)
    for i in range(0, norms.shape[0], 5):
        one = jnp.zeros_like(mask).at[i].set(1.0)
        assert float(fn(params, x, y, one, jnp.float32(1.0))[1]["norm_sum"]) == pytest.approx(float(norms[i]), rel=RTOL)


def test_masked_rows_contribute_nothing():
    """Changing a padded row's features and label leaves the book-keeping sum unchanged."""
    logits_fn, tapped, params, x, y, mask = _case(("mnist_cnn", "SAME"), "example")
    mask = mask.at[0].set(0.0)
    run = jax.jit(
        lambda x, y: bookkeeping_clipped_sum(
            tapped_fn=tapped,
            loss_fn=cross_entropy,
            unit="example",
            clip_norm=0.5,
            chunk_size=4,
            params=params,
            x=x,
            y=y,
            mask=mask,
        )
    )
    a, sa = run(x, y)
    b, sb = run(x.at[0].set(1.0 - x[0]), y.at[0].set((y[0] + 1) % 10))
    for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_array_equal(np.asarray(u), np.asarray(v))
    assert float(sa["loss_sum"]) == float(sb["loss_sum"])


def test_soft_label_targets():
    """(K,) weight targets (RR-debiased, soft labels) go through the same path."""
    logits_fn, tapped, params, x, y, mask = _case(("mnist_cnn", "SAME"), "example")
    w = jax.nn.one_hot(y, 10) * 0.7 + 0.03
    ref, _ = vmap_clipped_sum(
        logits_fn=logits_fn,
        loss_fn=cross_entropy,
        unit="example",
        clip_norm=0.5,
        params=params,
        x=x,
        y=w,
        mask=mask,
        key=jax.random.key(0),
    )
    fast, _ = bookkeeping_clipped_sum(
        tapped_fn=tapped,
        loss_fn=cross_entropy,
        unit="example",
        clip_norm=0.5,
        chunk_size=8,
        params=params,
        x=x,
        y=w,
        mask=mask,
    )
    _assert_trees_close(ref, fast)


def test_resolve_formulation():
    assert resolve_formulation("auto", tapped_available=True, backend="cpu") == "bookkeeping"
    assert resolve_formulation("auto", tapped_available=False, backend="cpu") == "vmap_grad"
    assert resolve_formulation("auto", tapped_available=True, backend="gpu") == "vmap_grad"
    assert resolve_formulation("vmap_grad", tapped_available=True) == "vmap_grad"
    with pytest.raises(ValueError, match="needs a model with a `tapped` forward"):
        resolve_formulation("bookkeeping", tapped_available=False)
    with pytest.raises(ValueError, match="one of"):
        resolve_formulation("ghost", tapped_available=True)


def test_dropout_is_on_in_training_and_the_same_in_both_formulations():
    """The CIFAR-10 CNN's dropout: training logits differ from evaluation logits, each row's masks
    depend only on its own key (not on the rows around it), and the formulations agree (above)."""
    spec = build_model("cifar_cnn", input_shape=(32, 32, 3))
    params = spec.init(jax.random.key(0))
    x = jnp.asarray(np.random.default_rng(0).random((6, 32, 32, 3), dtype=np.float32))
    train, evaluation = spec.train_logits(params, x, jax.random.key(1)), spec.logits(params, x)
    assert float(jnp.max(jnp.abs(train - evaluation))) > 1e-4
    np.testing.assert_allclose(np.asarray(evaluation), np.asarray(spec.tapped(params, x, Tape(None))), atol=1e-5)
    keys = jax.random.split(jax.random.key(1), 6)
    one_by_one = jnp.concatenate(
        [spec.tapped(params, x[i : i + 1], Tape(None, dropout_keys=keys[i : i + 1])) for i in range(6)]
    )
    np.testing.assert_allclose(np.asarray(one_by_one), np.asarray(train), rtol=1e-5, atol=1e-6)


def test_a_model_without_a_tapped_forward_is_refused_bookkeeping():
    cfg = DPSGDConfig(clip_norm=1.0, noise_multiplier=1.0, expected_batch_size=8)
    logits = lambda p, x, rng: x @ p  # noqa: E731
    assert make_dpsgd_step(optimizer=optax.sgd(0.1), config=cfg, logits_fn=logits).formulation == "vmap_grad"
    with pytest.raises(ValueError, match="bookkeeping"):
        make_dpsgd_step(optimizer=optax.sgd(0.1), config=cfg, logits_fn=logits, formulation="bookkeeping")


def test_a_parameter_outside_the_tape_is_refused():
    """A tapped forward that skips a parameter would under-count the norm: refused."""
    spec = build_model("mnist_cnn", input_shape=(28, 28, 1))
    params = spec.init(jax.random.key(0))

    def partial_forward(p, x, tape: Tape):  # only Conv_0 through the tape, the rest by hand
        h = spec.tapped(p, x, Tape(None))
        return h + 0.0 * jnp.sum(tape.dense(("Conv_0",), x.reshape(x.shape[0], -1)[:, :9], p["Conv_0"]))

    x = jnp.zeros((4, 28, 28, 1))
    with pytest.raises(ValueError, match="does not match the parameters"):
        bookkeeping_clipped_sum(
            tapped_fn=partial_forward,
            loss_fn=cross_entropy,
            unit="example",
            clip_norm=1.0,
            chunk_size=None,
            params=params,
            x=x,
            y=jnp.zeros(4, jnp.int32),
            mask=jnp.ones(4),
        )


def test_step_with_either_formulation_gives_the_same_update():
    """A full noisy step (same key: same noise) with each formulation: same parameters."""
    spec = build_model("mnist_cnn", input_shape=(28, 28, 1))
    params = spec.init(jax.random.key(0))
    rng = np.random.default_rng(3)
    batch = Batch(
        x=jnp.asarray(rng.random((40, 28, 28, 1), dtype=np.float32)),
        y=jnp.asarray(rng.integers(0, 10, 40), jnp.int32),
        mask=jnp.asarray((np.arange(40) < 33).astype(np.float32)),
    )
    cfg = DPSGDConfig(clip_norm=0.5, noise_multiplier=2.0, expected_batch_size=32, pad_to=40)
    out = {}
    for f in ("vmap_grad", "bookkeeping"):
        step = make_dpsgd_step(optimizer=optax.sgd(0.5), config=cfg, model=spec, formulation=f, chunk_size=16)
        assert step.describe()["clipping_formulation"] == f
        out[f], _ = step(step.init(params), batch, jax.random.key(7))
    _assert_trees_close(out["vmap_grad"].params, out["bookkeeping"].params, rtol=1e-5)
