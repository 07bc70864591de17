"""The ads model and its training (000 Table 7 / 002): one logit presented as (0, z) is binary
cross-entropy; a user's gradient is the sum over its k examples, clipped as ONE unit; training on
planted-signal data learns."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
from sklearn.metrics import roc_auc_score

from labeldp.ads.model import AdsMLP, embedding_dims, two_class_logits
from labeldp.ads.train import AdsTrainConfig, init_params, predict_proba, train_on_labels, train_user_level
from labeldp.dpsgd import Batch, DPSGDConfig, cross_entropy, make_dpsgd_step


def _data(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    x_cat = rng.integers(0, 6, size=(n, 2)).astype(np.int32)
    x_num = rng.normal(size=(n, 1)).astype(np.float32)
    effect = np.array([-2.0, -1.0, 0.0, 0.5, 1.0, 2.0])
    p = 1 / (1 + np.exp(-(effect[x_cat[:, 0]] + 0.8 * x_num[:, 0])))
    return x_num, x_cat, (rng.random(n) < p).astype(np.int32)


def _model(b=0.0):
    return AdsMLP(hidden=(16, 8), vocab_sizes=(6, 6), embed_dims=(3, 3), output_bias=b)


def test_two_class_logits_give_binary_cross_entropy():
    model = _model()
    x_num, x_cat, y = _data(50)
    params = init_params(model, x_num, x_cat, seed=0)
    z = model.apply(params, (x_num, x_cat))
    ce = jax.vmap(cross_entropy)(two_class_logits(model)(params, (x_num, x_cat)), jnp.asarray(y))
    bce = optax.sigmoid_binary_cross_entropy(z, jnp.asarray(y, jnp.float32))
    np.testing.assert_allclose(np.asarray(ce), np.asarray(bce), rtol=1e-5, atol=1e-6)


def test_embedding_rules():
    assert embedding_dims([10, 10_000], rule="fixed8") == (8, 8)
    assert embedding_dims([16, 10_000, 1], rule="2V^0.25") == (4, 20, 2)


def test_nonprivate_training_learns_the_planted_signal():
    x_num, x_cat, y = _data()
    model = _model()
    res = train_on_labels(
        model,
        x_num=x_num[:3000],
        x_cat=x_cat[:3000],
        y=y[:3000],
        config=AdsTrainConfig(learning_rate=1e-2, epochs=3, batch_size=256),
        seed=0,
    )
    auc = roc_auc_score(y[3000:], predict_proba(model, res.params, x_num[3000:], x_cat[3000:]))
    assert not res.diverged and auc > 0.75


def test_a_users_gradient_is_the_sum_over_its_examples_clipped_as_one_unit():
    model = _model()
    x_num, x_cat, y = _data(12)
    users, k, clip = 4, 3, 0.05
    xn, xc, yu = x_num.reshape(users, k, 1), x_cat.reshape(users, k, 2), y.reshape(users, k)
    params = init_params(model, x_num, x_cat, seed=1)
    logits = two_class_logits(model)
    step = make_dpsgd_step(
        optimizer=optax.sgd(0.1),
        logits_fn=logits,
        config=DPSGDConfig(
            clip_norm=clip, noise_multiplier=0.0, expected_batch_size=users, sampling="shuffle", unit="user"
        ),
    )
    total, stats = step.clipped_sum(params, Batch(x=(xn, xc), y=yu, mask=np.ones(users, bool)), jax.random.PRNGKey(0))

    def example_loss(p, i):
        return cross_entropy(logits(p, (x_num[i : i + 1], x_cat[i : i + 1]))[0], y[i])

    flat = lambda t: np.concatenate([np.ravel(a) for a in jax.tree_util.tree_leaves(t)])  # noqa: E731
    expected = 0.0
    for u in range(users):
        g_user = sum(flat(jax.grad(example_loss)(params, u * k + j)) for j in range(k))
        expected = expected + g_user * min(1.0, clip / np.linalg.norm(g_user))
        # clipping each example first would give a different (smaller or equal) vector
    np.testing.assert_allclose(flat(total), expected, rtol=2e-4, atol=1e-7)
    assert float(stats["num_units"]) == users and float(stats["num_clipped"]) == users


def _noiseless_plan(*, users, n1, steps):
    """A plan with sigma 0 (no privacy: a test double of the accountant's record)."""
    import types

    from labeldp.dpsgd.training_plan import DPTrainingPlan

    return DPTrainingPlan(
        n=users,
        expected_batch_size=n1,
        sampling="poisson",
        steps=steps,
        amplification=True,
        accounting=types.SimpleNamespace(noise_multiplier=0.0),
        seconds=0.0,
    )


def test_user_level_dpsgd_runs_the_accounted_number_of_steps_and_learns_without_noise():
    x_num, x_cat, y = _data(3000)
    users, k = 1000, 3
    model = _model()
    res = train_user_level(
        model,
        x_num=x_num.reshape(users, k, 1),
        x_cat=x_cat.reshape(users, k, 2),
        y=y.reshape(users, k),
        config=AdsTrainConfig(learning_rate=1e-2, epochs=2, batch_size=100),
        clip_norm=10.0,
        plan=_noiseless_plan(users=users, n1=100, steps=20),
        seed=0,
    )
    assert res.steps == 20 and not res.diverged
    xt_num, xt_cat, yt = _data(1000, seed=5)
    assert roc_auc_score(yt, predict_proba(model, res.params, xt_num, xt_cat)) > 0.7
