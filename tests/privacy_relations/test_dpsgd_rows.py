"""Row checks of docs/privacy_relations.md: dpsgd."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest


from tests.privacy_relations.doc import *  # noqa: F401,F403  (the parsed table and shared helpers)


# ------------------------------------------------------------------------------------------
# DP-SGD family
# ------------------------------------------------------------------------------------------

CLIP = 1e-3  # far below the per-example gradient norms of the tiny CNN: every gradient is clipped


def _ravel(tree):
    import jax.flatten_util

    return np.asarray(jax.flatten_util.ravel_pytree(tree)[0], dtype=np.float64)


@pytest.fixture(scope="module")
def cnn_clipped_sum():
    """``f(num_classes) -> clipped(x, y, mask)``: the suite's clipped per-example sum on its CNN."""
    import jax
    import jax.numpy as jnp
    import optax

    from labeldp.dpsgd import Batch, DPSGDConfig, make_dpsgd_step
    from labeldp.models import build_model

    cache = {}

    def get(num_classes):
        if num_classes not in cache:
            model = build_model("mnist_cnn", input_shape=(8, 8, 1), num_classes=num_classes)
            params = model.init(jax.random.key(0))
            cfg = DPSGDConfig(clip_norm=CLIP, noise_multiplier=1.0, expected_batch_size=4, sampling="shuffle")
            step = make_dpsgd_step(optimizer=optax.sgd(0.1), config=cfg, model=model)
            assert step.pad_to == 4

            def clipped(x, y, mask):
                s, st = step.clipped_sum(
                    params,
                    Batch(x=jnp.asarray(x), y=jnp.asarray(y, jnp.int32), mask=jnp.asarray(mask, jnp.float32)),
                    jax.random.key(1),
                )
                return _ravel(s), {k: float(v) for k, v in st.items()}

            cache[num_classes] = clipped
        return cache[num_classes]

    return get


def _inputs(seed=0):
    return np.random.default_rng(seed).uniform(0, 1, (4, 8, 8, 1)).astype(np.float32)


def test_row_dpsgd(cnn_clipped_sum):
    from labeldp import accounting
    from labeldp.methods import dpsgd

    r = row("dpsgd")
    assert relations(r) == BOTH
    sens = l2_sensitivities(r)
    assert sens == {"add_or_remove": 1.0, "label_substitution": 2.0}
    x = _inputs()
    one = np.array([1, 0, 0, 0])
    # K = 2: the gradients of one input under its two labels are antiparallel, so after
    # clipping a = -b and the label change moves the clipped sum by exactly 2C.
    clipped = cnn_clipped_sum(2)
    a, st_a = clipped(x, [0, 0, 0, 0], one)
    b, st_b = clipped(x, [1, 0, 0, 0], one)
    assert st_a["norm_sum"] > 10 * CLIP and st_b["norm_sum"] > 10 * CLIP  # both really clipped
    assert np.linalg.norm(a) <= CLIP * (1 + 1e-5) and np.linalg.norm(b) <= CLIP * (1 + 1e-5)
    assert np.linalg.norm(a - b) == pytest.approx(sens["label_substitution"] * CLIP, rel=1e-4)
    # Within a batch: substituting one label moves the sum by 2C; removing an example by <= C.
    full = np.array([1, 1, 1, 0])
    s0, _ = clipped(x, [0, 1, 0, 0], full)
    s1, _ = clipped(x, [1, 1, 0, 0], full)
    assert np.linalg.norm(s0 - s1) == pytest.approx(2 * CLIP, rel=1e-4)
    s_removed, _ = clipped(x, [0, 1, 0, 0], np.array([0, 1, 1, 0]))
    assert np.linalg.norm(s0 - s_removed) <= sens["add_or_remove"] * CLIP * (1 + 1e-5)
    # K = 10 (the MNIST model): every pair of labels stays within 2C.
    clipped10 = cnn_clipped_sum(10)
    g = np.stack([clipped10(x, [c, 0, 0, 0], one)[0] for c in range(10)])
    assert np.all(np.linalg.norm(g, axis=1) <= CLIP * (1 + 1e-5))
    dist = np.linalg.norm(g[:, None] - g[None], axis=-1)
    assert dist.max() <= 2 * CLIP * (1 + 1e-5)
    # The accountant: without amplification, label substitution at sigma is add/remove at
    # sigma / (2C / C), i.e. dp_accounting's REPLACE_ONE is the sensitivity-2 Gaussian.
    factor = sens["label_substitution"] / sens["add_or_remove"]
    for sigma in (8.0, 30.0):
        kw = dict(sampling_rate=0.01, steps=50, delta=1e-5, amplification=False, value_discretization_interval=1e-3)
        sub = accounting.dpsgd_epsilon(noise_multiplier=sigma, neighboring_relation="label_substitution", **kw)
        half = accounting.dpsgd_epsilon(noise_multiplier=sigma / factor, neighboring_relation="add_or_remove", **kw)
        same = accounting.dpsgd_epsilon(noise_multiplier=sigma, neighboring_relation="add_or_remove", **kw)
        assert sub == pytest.approx(half, rel=1e-9)
        assert sub > 1.5 * same
    # Records store eps under both relations; the planner hands DP-SGD a calibration relation.
    rec = accounting.dpsgd_record(noise_multiplier=8.0, sampling_rate=0.01, steps=50, delta=1e-5, amplification=False)
    assert set(rec.epsilon_by_relation) == relations(r)
    assert dpsgd.CALIBRATES_WITH_ACCOUNTANT is True


def test_row_dpsgd_opacus():
    torch = pytest.importorskip("torch")
    pytest.importorskip("opacus")
    from opacus import GradSampleModule
    from opacus.optimizers import DPOptimizer

    from baselines import dpsgd_opacus

    r = row("dpsgd_opacus")
    assert relations(r) == BOTH
    sens = l2_sensitivities(r)
    assert sens == l2_sensitivities(row("dpsgd"))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))
    gsm = GradSampleModule(model, loss_reduction="sum")
    sigma = 1.3
    opt = DPOptimizer(
        torch.optim.SGD(gsm.parameters(), lr=0.0),
        noise_multiplier=sigma,
        max_grad_norm=CLIP,
        expected_batch_size=1,
        loss_reduction="sum",
    )
    x = torch.randn(1, 6) * 3.0

    def clipped(label):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(gsm(x), torch.tensor([label]), reduction="sum")
        loss.backward()
        opt.clip_and_accumulate()
        out = torch.cat([p.summed_grad.reshape(-1) for p in gsm.parameters()]).detach().double().numpy()
        raw = torch.cat([p.grad_sample.reshape(-1) for p in gsm.parameters()]).detach().double().numpy()
        return out, float(np.linalg.norm(raw))

    a, raw_a = clipped(0)
    b, raw_b = clipped(1)
    assert raw_a > 10 * CLIP and raw_b > 10 * CLIP
    assert np.linalg.norm(a) <= sens["add_or_remove"] * CLIP * (1 + 1e-6)
    assert np.linalg.norm(b) <= sens["add_or_remove"] * CLIP * (1 + 1e-6)
    assert np.linalg.norm(a - b) == pytest.approx(sens["label_substitution"] * CLIP, rel=1e-4)
    # Opacus adds N(0, (sigma C)^2) to the clipped sum: the noise the accountant's sigma means.
    assert opt.noise_multiplier * opt.max_grad_norm == pytest.approx(sigma * CLIP)
    # sigma and the relation come from this suite's calibration (the same as dpsgd's).
    src = inspect.getsource(dpsgd_opacus.run)
    assert "account_run(spec" in src and "epsilon_by_relation=dict(acc.epsilon_by_relation)" in src
    assert dpsgd_opacus.CALIBRATES_WITH_ACCOUNTANT is True


# -- LabelDP-Pro ---------------------------------------------------------------------------

_DIN, _HID, _K = 5, 6, 3


def _mlp(params, x):
    import jax.numpy as jnp

    return jnp.tanh(x @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"]


def _mlp_train(params, x, rng):
    del rng
    return _mlp(params, x)


def _tree_equal(a, b) -> bool:
    return np.array_equal(_ravel(a), _ravel(b))


def test_row_labeldp_pro():
    import jax
    import jax.numpy as jnp
    import optax

    from labeldp import accounting
    from labeldp import denoisers as D
    from labeldp.dpsgd import Batch, DPSGDConfig, make_dpsgd_step
    from labeldp.methods import labeldp_pro

    r = row("labeldp_pro")
    assert relations(r) == BOTH
    assert l2_sensitivities(r) == l2_sensitivities(row("dpsgd"))
    assert labeldp_pro.CALIBRATES_WITH_ACCOUNTANT is True
    # 1. No denoiser can be given labels: the common call signature has no label argument.
    for cls in (D.NoOp, D.SelfSpan, D.SelfConv, D.AltConv):
        assert list(inspect.signature(cls.__call__).parameters) == [
            "self",
            "noisy_grad",
            "logits_fn",
            "params",
            "x",
            "mask",
            "x_alt",
            "alt_mask",
        ], cls

    # 2. Inside the training step the denoiser receives the same inputs whatever the labels
    #    (except the noisy gradient), and for a fixed noisy gradient it returns the same output.
    @dataclasses.dataclass(frozen=True, eq=False)
    class Recording(D.Denoiser):
        """Logs the inputs the training step gives the denoiser ``box["inner"]``."""

        box: dict = dataclasses.field(default_factory=dict)

        def host_loop(self, *trees):
            return True  # run eagerly, so the recorded inputs are concrete arrays

        def __call__(self, noisy_grad, **kwargs):
            self.box["calls"].append(kwargs)
            return self.box["inner"](noisy_grad, **kwargs)

    k = jax.random.split(jax.random.key(0), 3)
    params = {
        "w1": jax.random.normal(k[0], (_DIN, _HID)),
        "b1": jnp.zeros(_HID),
        "w2": jax.random.normal(k[1], (_HID, _K)),
        "b2": jnp.zeros(_K),
    }
    rng = np.random.default_rng(11)
    x = jnp.asarray(rng.normal(size=(4, _DIN)), jnp.float32)
    x_alt = jnp.asarray(rng.normal(size=(5, _DIN)), jnp.float32)
    mask = jnp.asarray([1.0, 1.0, 1.0, 0.0])
    y1 = jnp.asarray([0, 1, 2, 0], jnp.int32)
    y2 = jnp.asarray([2, 0, 1, 0], jnp.int32)
    fixed_noisy = jax.tree_util.tree_map(lambda p: jnp.asarray(rng.normal(size=p.shape), p.dtype), params)
    small = dict(loop="fori")
    denoisers = {
        "noop": D.noop(),
        "alt_conv": D.alt_conv(steps=3, step_size=0.01, solver="matrix_free", **small),
        "self_conv": D.self_conv(steps=3, step_size=0.01, solver="matrix_free", **small),
        "self_span": D.self_span(iters=3, **small),
    }
    cfg = DPSGDConfig(clip_norm=1.0, noise_multiplier=1.0, expected_batch_size=4, sampling="shuffle")
    rec = Recording()
    step = make_dpsgd_step(
        logits_fn=_mlp_train, projection_logits_fn=_mlp, optimizer=optax.sgd(0.1), config=cfg, denoiser=rec
    )
    state = step.init(params)
    for name, inner in denoisers.items():
        rec.box.update(inner=inner, calls=[])
        for y in (y1, y2):
            step(state, Batch(x=x, y=y, mask=mask, x_alt=x_alt), jax.random.key(3))
        assert len(rec.box["calls"]) == 2, name
        c1, c2 = rec.box["calls"]
        assert set(c1) == {"logits_fn", "params", "x", "mask", "x_alt", "alt_mask"}, name
        for key in ("x", "mask", "x_alt", "alt_mask", "params"):
            assert (c1[key] is None and c2[key] is None) or _tree_equal(c1[key], c2[key]), (name, key)
        out1, _ = inner(fixed_noisy, **c1)
        out2, _ = inner(fixed_noisy, **c2)
        again, _ = inner(fixed_noisy, **c1)
        assert _tree_equal(out1, out2) and _tree_equal(out1, again), name
    # 3. Amplification: AltConv ignores which examples were sampled (it only reads the
    #    independent alternative batch); SelfConv / SelfSpan depend on it, so they break
    #    amplification and are accounted with q treated as 1.
    kw = dict(logits_fn=_mlp, params=params, x_alt=x_alt)
    alt = denoisers["alt_conv"]
    o_a, _ = alt(fixed_noisy, x=x, mask=mask, **kw)
    o_b, _ = alt(fixed_noisy, x=-x, mask=jnp.ones(4), **kw)
    assert _tree_equal(o_a, o_b)
    for name in ("self_conv", "self_span"):
        o_a, _ = denoisers[name](fixed_noisy, x=x, mask=mask, **kw)
        o_b, _ = denoisers[name](fixed_noisy, x=x, mask=jnp.asarray([1.0, 1.0, 0.0, 0.0]), **kw)
        assert not np.allclose(_ravel(o_a), _ravel(o_b)), name
    assert {n: d.breaks_amplification for n, d in denoisers.items()} == {
        "noop": False,
        "alt_conv": False,
        "self_conv": True,
        "self_span": True,
    }
    no_amp = accounting.dpsgd_event(noise_multiplier=5.0, sampling_rate=0.1, steps=3, amplification=False)
    import dp_accounting

    assert isinstance(no_amp.event, dp_accounting.GaussianDpEvent)  # no PoissonSampledDpEvent
    src = inspect.getsource(__import__("labeldp.methods.private_training", fromlist=["x"]).prepare_private_run)
    assert "if denoiser.breaks_amplification and amplification" in src and "reasons=tuple(reasons)" in src
