"""labeldp.training: mixup (001 Appendix B) and its plumbing into the weighted SGD step."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from labeldp.models import build_model
from labeldp.training import TrainConfig, make_weighted_sgd_step, mixup_batch, one_hot, train_weighted


def test_mixup_is_one_convex_combination_of_a_permuted_batch():
    rng = np.random.default_rng(0)
    b, k = 64, 10
    x = jnp.asarray(rng.random((b, 4, 4, 1), np.float32))
    y = rng.integers(0, k, b)
    w = jnp.asarray(one_hot(y, k))
    x_mix, w_mix = mixup_batch(x, w, jax.random.key(3), alpha=4.0)
    w_mix = np.asarray(w_mix)
    # targets stay distributions, each the mix of at most two one-hot rows
    np.testing.assert_allclose(w_mix.sum(axis=1), 1.0, rtol=1e-6)
    assert ((w_mix > 1e-7).sum(axis=1) <= 2).all()
    # the same lam and the same partner for inputs and targets: solve for the partner of each row
    two = (w_mix > 1e-7).sum(axis=1) == 2  # rows mixed with a partner of another class: w~[i, y_i] = lam
    assert two.sum() > b // 2
    lams = w_mix[np.arange(b), y][two]
    np.testing.assert_allclose(lams, lams[0], atol=1e-6)  # one lam for the whole batch
    lam = float(lams[0])
    x_np = np.asarray(x).reshape(b, -1)
    xm = np.asarray(x_mix).reshape(b, -1)
    for i in range(b):
        partner = (xm[i] - lam * x_np[i]) / (1.0 - lam)
        j = int(np.argmin(np.abs(x_np - partner).sum(axis=1)))
        np.testing.assert_allclose(partner, x_np[j], atol=1e-4)
        np.testing.assert_allclose(w_mix[i], lam * np.asarray(w)[i] + (1 - lam) * np.asarray(w)[j], atol=1e-5)


@pytest.mark.parametrize("alpha", [0.5, 4.0])
def test_mixup_weight_has_the_beta_distribution(alpha):
    # lam ~ Beta(alpha, alpha): mean 1/2, variance 1 / (4 (2 alpha + 1))
    b = 2
    x = jnp.zeros((b, 1))
    w = jnp.asarray([[1.0, 0.0], [0.0, 1.0]])
    keys = jax.random.split(jax.random.key(0), 4000)
    w_mix = jax.vmap(lambda kk: mixup_batch(x, w, kk, alpha=alpha)[1])(keys)
    lam = np.asarray(w_mix[:, 0, 0])  # row 0 keeps weight lam on class 0 whatever the permutation
    # (if pi(0) = 0 the row is unchanged: w~[0,0] = 1; drop those)
    lam = lam[np.asarray(w_mix[:, 0, 1]) > 0]
    assert abs(lam.mean() - 0.5) < 0.03
    assert lam.var() == pytest.approx(1.0 / (4 * (2 * alpha + 1)), rel=0.12)


def test_mixup_config_checks():
    with pytest.raises(ValueError, match="mixup_alpha"):
        TrainConfig(learning_rate=0.1, epochs=1, mixup_alpha=-1.0)
    model = build_model("mnist_cnn", input_shape=(28, 28, 1))
    import optax

    with pytest.raises(ValueError, match="cannot be combined"):
        make_weighted_sgd_step(model, optax.sgd(0.1), lambda w, logits: w, mixup_alpha=4.0)


def test_mixup_changes_training_and_is_seeded():
    rng = np.random.default_rng(1)
    x = rng.random((96, 28, 28, 1), np.float32)
    w = one_hot(rng.integers(0, 10, 96), 10)
    model = build_model("mnist_cnn", input_shape=(28, 28, 1))

    def fit(alpha, seed=0):
        cfg = TrainConfig(learning_rate=0.5, epochs=2, batch_size=32, mixup_alpha=alpha, progress=False)
        return train_weighted(model, x_train=x, target_weights=w, config=cfg, seed=seed).final_loss

    off, on, on_again = fit(0.0), fit(4.0), fit(4.0)
    assert on == on_again  # reproducible
    assert on != off  # mixup actually changed the batches


def test_mixup_pairs_real_rows_only_with_real_rows():
    b, k, real = 16, 4, 11
    mask = jnp.asarray([1.0] * real + [0.0] * (b - real))
    x = jnp.arange(b, dtype=jnp.float32)[:, None]  # x_i = i identifies the row
    w = jnp.asarray(one_hot(np.arange(b) % k, k))
    for seed in range(20):
        x_mix, _ = mixup_batch(x, w, jax.random.key(seed), alpha=1.0, mask=mask)
        lam_key, _ = jax.random.split(jax.random.key(seed))
        lam = float(jax.random.beta(lam_key, 1.0, 1.0))
        partners = np.rint((np.asarray(x_mix[:, 0]) - lam * np.arange(b)) / (1.0 - lam)).astype(int)
        assert sorted(partners[:real]) == list(range(real))  # a permutation of the real rows
        assert sorted(partners[real:]) == list(range(real, b))


def _sgd_updates(config, *, grads, params, steps):
    """The updates of :func:`labeldp.training.sgd_optimizer` for a fixed gradient, step by step."""
    from labeldp.training import sgd_optimizer

    tx = sgd_optimizer(config, total_steps=steps)
    state = tx.init(params)
    out = []
    for _ in range(steps):
        upd, state = tx.update(grads, state, params)
        out.append(np.asarray(upd))
    return np.stack(out)


def test_warmup_linear_decay_rises_to_the_peak_then_falls_to_zero():
    """001 Appendix B: the rate grows linearly from 0 over 15% of the steps, then decays linearly to 0."""
    steps, peak = 100, 0.02
    cfg = TrainConfig(learning_rate=peak, epochs=1, lr_schedule="warmup_linear_decay")
    lr = -_sgd_updates(cfg, grads=jnp.ones(()), params=jnp.zeros(()), steps=steps)
    warm = 15
    np.testing.assert_allclose(lr[: warm + 1], peak * np.arange(warm + 1) / warm, rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(lr[warm:], peak * (1 - np.arange(steps - warm) / (steps - warm)), rtol=1e-5, atol=1e-9)
    assert lr.argmax() == warm and lr[0] == 0.0 and lr[-1] < peak / (steps - warm) + 1e-9


def test_l2_penalty_is_the_gradient_of_c_times_the_squared_norm_and_defaults_are_plain_sgd():
    params = jnp.asarray([1.0, -2.0, 0.5])
    zero = jnp.zeros(3)
    cfg = TrainConfig(learning_rate=0.1, epochs=1, l2=1e-2)
    upd = _sgd_updates(cfg, grads=zero, params=params, steps=1)[0]
    np.testing.assert_allclose(upd, -0.1 * 2 * 1e-2 * np.asarray(params), rtol=1e-6)  # d/dw c|w|^2 = 2cw
    g = jnp.asarray([0.3, 0.1, -0.2])
    import optax

    plain = optax.sgd(0.1, momentum=0.9)
    state = plain.init(params)
    want = []
    for _ in range(3):
        u, state = plain.update(g, state, params)
        want.append(np.asarray(u))
    got = _sgd_updates(TrainConfig(learning_rate=0.1, epochs=1, momentum=0.9), grads=g, params=params, steps=3)
    np.testing.assert_array_equal(got, np.stack(want))


@pytest.mark.parametrize(
    "kw,match",
    [
        ({"lr_schedule": "cosine"}, "lr_schedule must be one of"),
        ({"warmup_fraction": 1.0}, "warmup_fraction"),
        ({"l2": -1.0}, "l2 must be"),
        ({"momentum": 1.0}, "momentum must be"),
    ],
)
def test_recipe_settings_are_checked(kw, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(learning_rate=0.1, epochs=1, **kw)


def test_a_variants_recipe_options_reach_the_train_config():
    from labeldp.methods.base import RunSpec
    from labeldp.methods.common import train_config

    spec = RunSpec(
        dataset="mnist",
        method="lp_2st",
        variant="recipe001",
        epsilon=1.0,
        delta=0.0,
        seed=0,
        hparams={"learning_rate": 0.02, "epochs": 2, "batch_size": 265},
        options={"momentum": 0.9, "lr_schedule": "warmup_linear_decay", "l2": 1e-4},
    )
    cfg = train_config(spec)
    assert (cfg.momentum, cfg.lr_schedule, cfg.warmup_fraction, cfg.l2) == (0.9, "warmup_linear_decay", 0.15, 1e-4)
    plain = train_config(
        RunSpec(
            dataset="mnist",
            method="rr",
            variant="default",
            epsilon=1.0,
            delta=0.0,
            seed=0,
            hparams={"learning_rate": 0.1, "epochs": 1, "batch_size": 64},
        )
    )
    assert (plain.momentum, plain.lr_schedule, plain.l2) == (0.0, "constant", 0.0)


def test_warmup_piecewise_rises_then_drops_by_ten_at_30_60_90_percent():
    """001 Appendix B (CIFAR): linear warm-up over 15% of the steps, then constant with 10x drops at 30/60/90%."""
    steps, peak = 100, 0.4
    lr = -_sgd_updates(
        TrainConfig(learning_rate=peak, epochs=1, lr_schedule="warmup_piecewise"),
        grads=jnp.ones(()),
        params=jnp.zeros(()),
        steps=steps,
    )
    np.testing.assert_allclose(lr[:16], peak * np.arange(16) / 15, rtol=1e-5, atol=1e-9)
    for lo, hi, value in ((15, 30, peak), (30, 60, peak / 10), (60, 90, peak / 100), (90, 100, peak / 1000)):
        np.testing.assert_allclose(lr[lo:hi], value, rtol=1e-5)


def test_epoch_warmup_step_decay_is_alibis_official_schedule_by_epoch():
    """train_cifar_alibi.py: lr (e + 1) / 30 in epoch e < 30, then lr 0.2 ** (e // 60); constant within an epoch."""
    per_epoch, epochs, peak = 2, 200, 0.1
    lr = -_sgd_updates(
        TrainConfig(learning_rate=peak, epochs=epochs, lr_schedule="epoch_warmup_step_decay"),
        grads=jnp.ones(()),
        params=jnp.zeros(()),
        steps=per_epoch * epochs,
    )
    want = np.asarray([peak * (e + 1) / 30 if e < 30 else peak * 0.2 ** (e // 60) for e in range(epochs)])
    np.testing.assert_allclose(lr, np.repeat(want, per_epoch), rtol=1e-5)
    assert lr[2 * 29] == pytest.approx(peak) and lr[2 * 60] == pytest.approx(0.2 * peak)


def test_nesterov_is_optaxs_nesterov_sgd_and_needs_momentum():
    import optax

    params, g = jnp.asarray([1.0, -2.0]), jnp.asarray([0.3, -0.1])
    ref = optax.sgd(0.1, momentum=0.9, nesterov=True)
    state, want = ref.init(params), []
    for _ in range(3):
        u, state = ref.update(g, state, params)
        want.append(np.asarray(u))
    got = _sgd_updates(
        TrainConfig(learning_rate=0.1, epochs=1, momentum=0.9, nesterov=True), grads=g, params=params, steps=3
    )
    np.testing.assert_array_equal(got, np.stack(want))
    assert not np.array_equal(
        got, _sgd_updates(TrainConfig(learning_rate=0.1, epochs=1, momentum=0.9), grads=g, params=params, steps=3)
    )
    with pytest.raises(ValueError, match="nesterov needs momentum"):
        TrainConfig(learning_rate=0.1, epochs=1, nesterov=True)


def test_confusion_matrix_counts_every_test_example_once_and_init_is_the_training_start():
    from labeldp.training import confusion_matrix, initial_params

    spec = build_model("mnist_cnn", input_shape=(28, 28, 1), num_classes=10)
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(50, 28, 28, 1)).astype(np.float32)
    y = rng.integers(0, 10, 50)
    params = initial_params(spec, 3)
    m = np.asarray(confusion_matrix(spec, params, x, y, 10))
    pred = np.argmax(np.asarray(spec.logits(params, jnp.asarray(x))), axis=-1)
    assert m.sum() == 50 and (m.sum(axis=1) == np.bincount(y, minlength=10)).all()
    assert (m.sum(axis=0) == np.bincount(pred, minlength=10)).all() and np.trace(m) == int((pred == y).sum())
    # train_weighted at step size 0 returns exactly the parameters it started from
    res = train_weighted(
        spec,
        x_train=x,
        target_weights=one_hot(y, 10),
        seed=3,
        config=TrainConfig(learning_rate=0.0, epochs=1, batch_size=16, progress=False),
    )
    for a, b in zip(jax.tree_util.tree_leaves(res.params), jax.tree_util.tree_leaves(params)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
