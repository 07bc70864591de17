"""Property tests of labeldp.dpsgd (000 Algorithm 1) and the PyTorch twins of the Table 10 models."""

from __future__ import annotations

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from labeldp import denoisers as D
from labeldp.dpsgd import (
    Batch,
    DPSGDConfig,
    cross_entropy,
    default_pad_to,
    make_dpsgd_step,
    make_sgd_step,
    num_steps,
    poisson_batches,
    sample_alt_batch,
    shuffled_batches,
)

DIN, HID, K = 5, 8, 3


def mlp_init(seed=0, scale=1.0):
    k = jax.random.split(jax.random.key(seed), 4)
    return {
        "w1": scale * jax.random.normal(k[0], (DIN, HID)) / np.sqrt(DIN),
        "b1": 0.1 * jax.random.normal(k[1], (HID,)),
        "w2": scale * jax.random.normal(k[2], (HID, K)) / np.sqrt(HID),
        "b2": jnp.zeros((K,)),
    }


def mlp(params, x):
    h = jnp.tanh(x @ params["w1"] + params["b1"])
    return h @ params["w2"] + params["b2"]


def mlp_train(params, x, rng):
    del rng
    return mlp(params, x)


def data(n, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    x = jnp.asarray(scale * rng.normal(size=(n, DIN)), jnp.float32)
    y = jnp.asarray(rng.integers(0, K, size=n), jnp.int32)
    return x, y


def ravel(tree):
    return np.asarray(jax.flatten_util.ravel_pytree(tree)[0])


def dp_step(config, *, lr=0.1, denoiser=None, logits_fn=mlp_train):
    return make_dpsgd_step(
        logits_fn=logits_fn, projection_logits_fn=mlp, optimizer=optax.sgd(lr), config=config, denoiser=denoiser
    )


# ------------------------------------------------------------------------------------------
# Noise, clipping, equivalence with SGD
# ------------------------------------------------------------------------------------------


def test_noise_std_is_sigma_C_over_n1():
    """With inputs x = 0 the gradient w.r.t. the (bias-free) weight is exactly 0: g~ is pure noise."""
    sigma, clip, n1 = 1.7, 2.5, 16
    cfg = DPSGDConfig(clip_norm=clip, noise_multiplier=sigma, expected_batch_size=n1, sampling="shuffle")
    params = {"w": jnp.ones((40, 25))}
    step = dp_step(cfg, logits_fn=lambda p, x, r: x @ p["w"][:, :K])
    x = jnp.zeros((n1, 40))
    y = jnp.zeros((n1,), jnp.int32)
    batch = Batch(x=x, y=y, mask=jnp.ones(n1))
    samples = np.concatenate(
        [ravel(step.noisy_gradient(params, batch, jax.random.key(s))[0]) for s in range(5)]
    )  # 5 x 1000 coordinates
    expected = sigma * clip / n1
    assert cfg.noise_std == pytest.approx(expected)
    assert abs(samples.mean()) < 4 * expected / np.sqrt(samples.size)
    # sample std of N=5000 normals: relative sd ~ 1/sqrt(2N) = 1%; allow 5%
    assert abs(samples.std() / expected - 1) < 0.05
    # different keys give different noise, the same key the same noise
    a = ravel(step.noisy_gradient(params, batch, jax.random.key(0))[0])
    b = ravel(step.noisy_gradient(params, batch, jax.random.key(0))[0])
    np.testing.assert_array_equal(a, b)


def test_clipping_bounds_each_example():
    clip = 0.5
    cfg = DPSGDConfig(clip_norm=clip, noise_multiplier=0.0, expected_batch_size=6, sampling="shuffle")
    step = dp_step(cfg)
    params = mlp_init(scale=3.0)
    x, y = data(6, scale=5.0)
    raw_norms = []
    for i in range(6):
        mask = jnp.zeros(6).at[i].set(1.0)
        total, stats = step.clipped_sum(params, Batch(x=x, y=y, mask=mask), jax.random.key(0))
        raw = jax.grad(lambda p: cross_entropy(mlp(p, x[i : i + 1])[0], y[i]))(params)
        raw_norm = np.linalg.norm(ravel(raw))
        raw_norms.append(raw_norm)
        norm = np.linalg.norm(ravel(total))
        assert norm <= clip * (1 + 1e-5)
        if raw_norm > clip:
            assert norm == pytest.approx(clip, rel=1e-5)
            assert float(stats["num_clipped"]) == 1.0
        else:
            np.testing.assert_allclose(ravel(total), ravel(raw), rtol=1e-5, atol=1e-7)
    assert max(raw_norms) > clip  # the test exercised clipping
    total, _ = step.clipped_sum(params, Batch(x=x, y=y, mask=jnp.ones(6)), jax.random.key(0))
    assert np.linalg.norm(ravel(total)) <= 6 * clip * (1 + 1e-5)


def test_no_noise_huge_clip_equals_sgd():
    n = 12
    x, y = data(n, seed=1)
    params = mlp_init(seed=1)
    cfg = DPSGDConfig(clip_norm=1e6, noise_multiplier=0.0, expected_batch_size=n, sampling="shuffle")
    dp = dp_step(cfg, lr=0.3)
    sgd = make_sgd_step(logits_fn=mlp_train, optimizer=optax.sgd(0.3))
    batch = Batch(x=x, y=y, mask=jnp.ones(n, bool))
    s_dp, info = dp(dp.init(params), batch, jax.random.key(0))
    s_sgd, info_sgd = sgd(sgd.init(params), batch, jax.random.key(0))
    np.testing.assert_allclose(ravel(s_dp.params), ravel(s_sgd.params), rtol=1e-5, atol=1e-7)
    assert float(info.loss) == pytest.approx(float(info_sgd.loss), rel=1e-5)
    assert float(info.clipped_fraction) == 0.0 and int(s_dp.step) == 1


def test_soft_label_loss_matches_int_label():
    logits = jnp.array([0.3, -1.2, 2.0])
    assert float(cross_entropy(logits, jnp.int32(2))) == pytest.approx(float(cross_entropy(logits, jnp.eye(3)[2])))
    w = jnp.array([0.2, -0.5, 1.3])  # RR-debiasing weights may be negative
    assert float(cross_entropy(logits, w)) == pytest.approx(float(-(w * jax.nn.log_softmax(logits)).sum()), rel=1e-6)
    # a DP step with one-hot targets equals the step with int labels
    n = 8
    x, y = data(n, seed=2)
    cfg = DPSGDConfig(clip_norm=0.3, noise_multiplier=0.8, expected_batch_size=n)
    step = dp_step(cfg)
    st = step.init(mlp_init(seed=2))
    a, _ = step(st, Batch(x=x, y=y, mask=jnp.ones(n)), jax.random.key(3))
    b, _ = step(st, Batch(x=x, y=jax.nn.one_hot(y, K), mask=jnp.ones(n)), jax.random.key(3))
    np.testing.assert_allclose(ravel(a.params), ravel(b.params), rtol=1e-5, atol=1e-7)


# ------------------------------------------------------------------------------------------
# Poisson batches: padding, masks, chunks
# ------------------------------------------------------------------------------------------


def test_masked_padded_step_equals_unmasked_step():
    n_real, pad_to = 7, 12
    x, y = data(n_real, seed=4)
    cfg = DPSGDConfig(clip_norm=0.5, noise_multiplier=1.3, expected_batch_size=8, pad_to=pad_to)
    step = dp_step(cfg)
    st = step.init(mlp_init(seed=4))
    junk_x, junk_y = data(pad_to - n_real, seed=99, scale=30.0)  # padding rows are garbage
    padded = Batch(
        x=jnp.concatenate([x, junk_x]),
        y=jnp.concatenate([y, junk_y]),
        mask=np.r_[np.ones(n_real, bool), np.zeros(pad_to - n_real, bool)],
    )
    real = Batch(x=x, y=y, mask=np.ones(n_real, bool))
    key = jax.random.key(5)
    a, ia = step(st, padded, key)
    b, ib = step(st, real, key)
    np.testing.assert_allclose(ravel(a.params), ravel(b.params), rtol=1e-5, atol=1e-7)
    assert float(ia.num_units) == n_real == float(ib.num_units)
    assert float(ia.loss) == pytest.approx(float(ib.loss), rel=1e-5)
    # an oversized batch (two chunks of pad_to) gives the same step as one large chunk
    step_small = dp_step(DPSGDConfig(clip_norm=0.5, noise_multiplier=1.3, expected_batch_size=8, pad_to=4))
    c, ic = step_small(st, padded, key)  # 12 rows -> 3 chunks of 4
    np.testing.assert_allclose(ravel(c.params), ravel(a.params), rtol=1e-5, atol=1e-7)
    assert float(ic.num_units) == n_real


def test_poisson_sampler():
    n, q, pad_to = 500, 0.1, default_pad_to(50)
    assert pad_to == int(np.ceil(50 + 6 * np.sqrt(50)))
    sizes = []
    for idx, mask in poisson_batches(n, sampling_rate=q, rng=0, pad_to=pad_to, num_batches=300):
        assert idx.shape == mask.shape and idx.size % pad_to == 0 and mask.dtype == bool
        real = idx[mask]
        assert len(np.unique(real)) == real.size and real.max() < n
        sizes.append(mask.sum())
    assert abs(np.mean(sizes) - n * q) < 4 * np.sqrt(n * q * (1 - q) / 300)
    assert np.var(sizes) > 0  # the batch size varies
    # a batch larger than pad_to is kept whole (padded to a multiple), never truncated
    ((idx, mask),) = list(poisson_batches(10, sampling_rate=1.0, rng=1, pad_to=4, num_batches=1))
    assert idx.size == 12 and mask.sum() == 10 and set(idx[mask]) == set(range(10))
    # same seed -> same batches
    a = [i for i, _ in poisson_batches(n, sampling_rate=q, rng=7, pad_to=pad_to, num_batches=3)]
    b = [i for i, _ in poisson_batches(n, sampling_rate=q, rng=7, pad_to=pad_to, num_batches=3)]
    assert all(np.array_equal(u, v) for u, v in zip(a, b))
    assert num_steps(n=60000, expected_batch_size=1024, epochs=10) == 585


def test_shuffled_and_alt_samplers():
    batches = list(shuffled_batches(10, batch_size=3, rng=0))
    assert len(batches) == 3 and all(m.all() for _, m in batches)
    assert len(set(np.concatenate([i for i, _ in batches]))) == 9
    batches = list(shuffled_batches(10, batch_size=3, rng=0, drop_remainder=False))
    assert len(batches) == 4 and batches[-1][1].sum() == 1
    assert len(list(shuffled_batches(10, batch_size=3, rng=0, num_batches=7))) == 7
    alt = sample_alt_batch(100, size=20, rng=0)
    assert alt.size == 20 and len(set(alt)) == 20


# ------------------------------------------------------------------------------------------
# Per-user clipping
# ------------------------------------------------------------------------------------------


def test_per_user_sum_then_clip():
    n_users, k = 4, 3
    x, y = data(n_users * k, seed=6, scale=4.0)
    xu, yu = x.reshape(n_users, k, DIN), y.reshape(n_users, k)
    params = mlp_init(seed=6, scale=3.0)
    clip = 0.4
    step = dp_step(DPSGDConfig(clip_norm=clip, noise_multiplier=0.0, expected_batch_size=n_users, unit="user"))
    big = dp_step(DPSGDConfig(clip_norm=1e6, noise_multiplier=0.0, expected_batch_size=n_users, unit="user"))
    key = jax.random.key(0)
    for u in range(n_users):
        mask = jnp.zeros(n_users).at[u].set(1.0)
        total, _ = step.clipped_sum(params, Batch(x=xu, y=yu, mask=mask), key)
        assert np.linalg.norm(ravel(total)) <= clip * (1 + 1e-5)
        # without clipping, a user's gradient is the SUM of its k example gradients
        unclipped, _ = big.clipped_sum(params, Batch(x=xu, y=yu, mask=mask), key)
        ref = jax.grad(lambda p: sum(cross_entropy(mlp(p, xu[u])[j], yu[u, j]) for j in range(k)))(params)
        np.testing.assert_allclose(ravel(unclipped), ravel(ref), rtol=1e-5, atol=1e-6)
        if np.linalg.norm(ravel(ref)) > clip:  # clip applies to the sum, not to each example
            np.testing.assert_allclose(
                ravel(total), ravel(ref) * clip / np.linalg.norm(ravel(ref)), rtol=1e-4, atol=1e-7
            )
    # a (users, k) mask drops single examples inside a user
    m2 = jnp.ones((n_users, k)).at[0, 1].set(0.0)
    t2, st = big.clipped_sum(params, Batch(x=xu, y=yu, mask=m2), key)
    ref = jax.grad(
        lambda p: sum(
            cross_entropy(mlp(p, xu[u])[j], yu[u, j])
            for u in range(n_users)
            for j in range(k)
            if not (u == 0 and j == 1)
        )
    )(params)
    np.testing.assert_allclose(ravel(t2), ravel(ref), rtol=1e-5, atol=1e-6)
    assert float(st["num_units"]) == n_users and float(st["num_examples"]) == n_users * k - 1


# ------------------------------------------------------------------------------------------
# Determinism and denoisers in the step
# ------------------------------------------------------------------------------------------


def run_steps(step, seed, n_steps=3):
    x, y = data(40, seed=8)
    st = step.init(mlp_init(seed=8))
    key = jax.random.key(seed)
    for idx, mask in poisson_batches(40, sampling_rate=0.25, rng=seed, pad_to=step.pad_to, num_batches=n_steps):
        key, sk = jax.random.split(key)
        alt = sample_alt_batch(40, size=10, rng=seed + 1)
        st, _ = step(st, Batch(x=x[idx], y=y[idx], mask=mask, x_alt=x[alt]), sk)
    return ravel(st.params)


@pytest.mark.parametrize("denoiser", [None, D.alt_conv(steps=6, chunk=4), D.self_conv(steps=5, loop="fori")])
def test_same_seed_same_numbers(denoiser):
    cfg = DPSGDConfig(clip_norm=0.5, noise_multiplier=1.1, expected_batch_size=10)
    step = dp_step(cfg, denoiser=denoiser)
    a, b = run_steps(step, seed=3), run_steps(step, seed=3)
    np.testing.assert_array_equal(a, b)  # bitwise
    assert not np.array_equal(a, run_steps(step, seed=4))


def test_denoised_step_uses_projection():
    """A step with a denoiser applies exactly G alpha~ (python and fused fori paths agree)."""
    n = 8
    x, y = data(n, seed=9)
    cfg = DPSGDConfig(clip_norm=0.5, noise_multiplier=2.0, expected_batch_size=n, pad_to=10)
    mask = np.r_[np.ones(n, bool), np.zeros(2, bool)]
    xb = jnp.concatenate([x, jnp.zeros((2, DIN))])
    yb = jnp.concatenate([y, jnp.zeros(2, jnp.int32)])
    x_alt = data(6, seed=10)[0]
    batch = Batch(x=xb, y=yb, mask=mask, x_alt=x_alt)
    params = mlp_init(seed=9)
    key = jax.random.key(1)
    for den in (D.self_conv(steps=7), D.alt_conv(steps=7), D.self_span(iters=5)):
        outs = []
        for loop in ("python", "fori"):
            step = dp_step(cfg, lr=1.0, denoiser=dataclasses_replace(den, loop=loop))
            noisy, _ = step.noisy_gradient(params, batch, key)
            new, info = step(step.init(params), batch, key)
            outs.append(ravel(new.params))
        np.testing.assert_allclose(outs[0], outs[1], rtol=1e-5, atol=1e-6)
        kw = dict(logits_fn=mlp, params=params, x=xb, mask=jnp.asarray(mask, jnp.float32), x_alt=x_alt)
        expected, _ = den(noisy, **kw)
        np.testing.assert_allclose(outs[0], ravel(params) - ravel(expected), rtol=1e-5, atol=1e-6)


def dataclasses_replace(obj, **kw):
    import dataclasses

    return dataclasses.replace(obj, **kw)


def test_config_validation():
    with pytest.raises(ValueError):
        DPSGDConfig(clip_norm=0.0, noise_multiplier=1.0, expected_batch_size=4)
    with pytest.raises(ValueError):
        DPSGDConfig(clip_norm=1.0, noise_multiplier=1.0, expected_batch_size=4, sampling="nope")
    cfg = DPSGDConfig(clip_norm=1.0, noise_multiplier=1.0, expected_batch_size=1024)
    assert cfg.padded_batch_size == 1024 + 192
    assert (
        DPSGDConfig(clip_norm=1.0, noise_multiplier=1.0, expected_batch_size=1024, sampling="shuffle").padded_batch_size
        == 1024
    )
    with pytest.raises(ValueError):
        make_dpsgd_step(logits_fn=mlp_train, optimizer=optax.sgd(0.1), config=cfg, denoiser=D.alt_conv())


# ------------------------------------------------------------------------------------------
# PyTorch twins (baselines/torch_models.py)
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name,shape", [("mnist_cnn", (28, 28, 1)), ("cifar_cnn", (32, 32, 3))])
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_torch_twin_matches_flax(name, shape, padding):
    torch = pytest.importorskip("torch")
    from baselines.torch_models import build_torch_model, load_flax_params, num_params as torch_num_params
    from labeldp.models import build_model, num_params

    spec = build_model(name, input_shape=shape, padding=padding)
    params = spec.init(jax.random.key(0))
    twin = build_torch_model(name, input_shape=shape, padding=padding).eval()
    assert torch_num_params(twin) == num_params(params)
    if name == "mnist_cnn" and padding == "SAME":
        assert num_params(params) == 15210
    load_flax_params(twin, params)
    x = np.random.default_rng(0).random((3, *shape), dtype=np.float32)
    with torch.no_grad():
        out = twin(torch.from_numpy(x).permute(0, 3, 1, 2)).numpy()
    np.testing.assert_allclose(out, np.asarray(spec.logits(params, jnp.asarray(x))), atol=1e-5)
