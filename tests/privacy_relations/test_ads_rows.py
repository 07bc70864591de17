"""Row checks of docs/privacy_relations.md: ads data (000 Table 7 user level, 002 Hybrid)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from tests.privacy_relations.doc import *  # noqa: F401,F403  (the parsed table and shared helpers)

USERS, K = 60, 2


@pytest.fixture(scope="module")
def ads_data():
    """A tiny in-memory binary dataset with users and sensitive features (no files)."""
    from labeldp.data.tabular import PreparedTabular

    rng = np.random.default_rng(0)
    n, m = USERS * 3, 40
    meta = {
        "dataset": "criteo_attribution",
        "kind": "tabular",
        "task": "binary_classification",
        "source": "synthetic_standin",
        "label": "y",
        "label_lower": 0,
        "label_upper": 1,
        "label_integer": True,
        "cat_vocab_sizes": [4, 4],
        "categorical_features": ["campaign", "cat1"],
        "numerical_features": ["cost"],
        "sensitive_features": ["cat1"],
    }

    def split(rows):
        x_cat = rng.integers(0, 4, size=(rows, 2)).astype(np.int32)
        y = (rng.random(rows) < 1 / (1 + np.exp(-(x_cat[:, 0] - 1.5)))).astype(float)
        return rng.normal(size=(rows, 1)).astype(np.float32), x_cat, y

    xn, xc, y = split(n)
    tn, tc, ty = split(m)
    ty[:2] = [0, 1]
    return PreparedTabular(
        x_num_train=xn,
        x_cat_train=xc,
        y_train=y,
        x_num_test=tn,
        x_cat_test=tc,
        y_test=ty,
        name="criteo_attribution",
        source="synthetic_standin",
        subset=None,
        metadata=meta,
        user_train=np.repeat(np.arange(USERS), 3),
        user_test=np.arange(m),
    )


def _spec(method, hp, k=None, eps=2.0):
    from labeldp.methods.base import RunSpec

    return RunSpec(
        dataset="criteo_attribution",
        method=method,
        variant=f"k{k}" if k else "default",
        epsilon=eps,
        delta=1e-5,
        seed=0,
        hparams=hp,
        options={"examples_per_user": k} if k else {},
    )


def _direct_eps(q, steps, sigma, relation, delta=1e-5):
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    nr = {
        "add_or_remove": dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE,
        "label_substitution": dp_accounting.NeighboringRelation.REPLACE_ONE,
    }[relation]
    acc = pld_privacy_accountant.PLDAccountant(nr)
    acc.compose(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps
        )
    )
    return acc.get_epsilon(delta)


def _assert_both_relations_from_dp_accounting(res, q, steps, extra=0.0):
    for rel in ("add_or_remove", "label_substitution"):
        direct = extra + _direct_eps(q, steps, res.details["noise_multiplier"], rel)
        assert res.privacy.epsilon_by_relation[rel] == pytest.approx(direct, rel=2e-2), rel


def test_row_rr_user_level(ads_data):
    from labeldp.methods import registry
    from labeldp.mechanisms import user_level as U

    r = row("rr_user_level")
    assert_label_only_row(r)
    for k, eps in ((1, 1.0), (2, 1.0), (3, 0.7)):
        # brute force: the k-fold product of binary RR(eps/k) over all label vectors and outputs
        p = C.randomized_response_matrix(num_classes=2, epsilon=eps / k)
        worst = 0.0
        for y, y2, z in itertools.product(itertools.product((0, 1), repeat=k), repeat=3):
            worst = max(worst, sum(math.log(p[a, c] / p[b, c]) for a, b, c in zip(y, y2, z)))
        assert worst == pytest.approx(eps, abs=1e-12) == U.max_user_log_ratio(epsilon=eps, k=k, num_classes=2)
    res = registry.get_method("rr").run(
        ads_data, _spec("rr", {"learning_rate": 1e-2, "epochs": 1, "batch_size": 32}, k=K)
    )
    out = res.privacy.to_dict(target_epsilon=2.0)
    assert out["privacy_unit"] == "user" and out["epsilon"] == 2.0 and out["delta"] == 0.0
    assert set(out["epsilon_by_relation"]) == LABEL_ONLY and res.details["per_label_epsilon"] == 1.0


def _user_level_checks(ads_data, method):
    from labeldp.methods import registry

    r = row(f"{method}_user_level")
    assert relations(r) == BOTH
    assert l2_sensitivities(r) == {"add_or_remove": 1.0, "label_substitution": 2.0}
    hp = {
        "learning_rate": 1e-2,
        "epochs": 1,
        "batch_size": 12,
        "clip_norm": 1.0,
        "proj_step_size": "auto",
        "proj_steps": 5,
        "smoothing": 0.75,
    }
    res = registry.get_method(method).run(ads_data, _spec(method, hp, k=K))
    assert res.privacy.privacy_unit == "user"
    assert res.details["sampling_rate"] == pytest.approx(12 / USERS) and res.details["steps"] == USERS // 12
    _assert_both_relations_from_dp_accounting(res, 12 / USERS, USERS // 12)
    return res


def test_row_dpsgd_user_level(ads_data):
    import jax
    import jax.flatten_util
    import optax

    from labeldp.ads.model import AdsMLP, two_class_logits
    from labeldp.ads.train import init_params
    from labeldp.dpsgd import Batch, DPSGDConfig, make_dpsgd_step

    _user_level_checks(ads_data, "dpsgd")
    # all k labels of one user change: its clipped per-user vector moves by at most 2C, exactly 2C
    # when both per-user gradients are clipped and antiparallel (one example per user, K = 2)
    model = AdsMLP(hidden=(4,), vocab_sizes=(4, 4), embed_dims=(2, 2))
    xn, xc = ads_data.x_num_train[:6].reshape(3, 2, 1), ads_data.x_cat_train[:6].reshape(3, 2, 2)
    params = init_params(model, xn[:, 0], xc[:, 0], seed=0)
    clip = 1e-4
    step = make_dpsgd_step(
        optimizer=optax.sgd(0.1),
        logits_fn=two_class_logits(model),
        config=DPSGDConfig(
            clip_norm=clip, noise_multiplier=1.0, expected_batch_size=3, sampling="shuffle", unit="user"
        ),
    )
    flat = lambda t: np.asarray(jax.flatten_util.ravel_pytree(t)[0], np.float64)  # noqa: E731

    def total(y, mask=np.ones(3, bool)):
        return flat(
            step.clipped_sum(params, Batch(x=(xn, xc), y=np.asarray(y, np.int32), mask=mask), jax.random.PRNGKey(0))[0]
        )

    base = total([[0, 0], [1, 0], [0, 1]])
    moved = total([[1, 1], [1, 0], [0, 1]])
    assert np.linalg.norm(base - moved) <= 2 * clip * (1 + 1e-5)
    assert np.linalg.norm(base - total([[0, 0], [1, 0], [0, 1]], np.array([False, True, True]))) <= clip * (1 + 1e-5)
    one = lambda y: flat(
        step.clipped_sum(
            params,
            Batch(
                x=(xn[:1, :1], xc[:1, :1]),
                y=np.asarray([[y]], np.int32),  # noqa: E731
                mask=np.ones(1, bool),
            ),
            jax.random.PRNGKey(0),
        )[0]
    )
    assert np.linalg.norm(one(0) - one(1)) == pytest.approx(2 * clip, rel=1e-4)


def test_row_labeldp_pro_user_level(ads_data):
    import inspect

    from labeldp.denoisers import UserSum

    res = _user_level_checks(ads_data, "labeldp_pro")
    assert res.details["denoiser"] == "alt_conv_per_user"
    params = inspect.signature(UserSum.__call__).parameters
    assert not {"y", "labels", "targets"} & set(params)  # the denoiser is never given labels
    assert res.privacy.valid


HYBRID_HP = {
    "learning_rate": 1e-2,
    "epochs": 1,
    "batch_size": 32,
    "dp_learning_rate": 1e-2,
    "dp_epochs": 1,
    "dp_batch_size": 30,
    "clip_norm": 1.0,
}


def test_row_hybrid(ads_data):
    import importlib

    from labeldp.ads.hybrid import debiased_rr_weights

    r = row("hybrid")
    assert relations(r) == BOTH and l2_sensitivities(r) == {"add_or_remove": 1.0, "label_substitution": 2.0}
    res = importlib.import_module("baselines.hybrid").run(ads_data, _spec("hybrid", HYBRID_HP, eps=2.0))
    e1, e2 = res.details["epsilon1"], res.details["epsilon2"]
    assert e1 == pytest.approx(1.2) and e1 + e2 == pytest.approx(2.0)
    n = len(ads_data.y_train)
    _assert_both_relations_from_dp_accounting(res, 30 / n, n // 30, extra=e1)
    assert res.privacy.epsilon <= 2.0 + 1e-6
    # the debiased loss is a function of the noisy labels and eps1 only: post-processing
    w = debiased_rr_weights(np.array([0, 1, 1]), eps1=e1)
    assert np.allclose(w[1], w[2]) and np.allclose(w[0], w[1][::-1])


def test_row_hybrid_rr(ads_data):
    import importlib

    import jax.numpy as jnp

    from labeldp.ads.hybrid_run import _model
    from labeldp.ads.model import two_class_logits
    from labeldp.ads.train import init_params

    r = row("hybrid_rr")
    assert_label_only_row(r)
    assert max_log_ratio(C.randomized_response_matrix(num_classes=2, epsilon=1.3)) == pytest.approx(1.3)
    hp = {k: HYBRID_HP[k] for k in ("learning_rate", "epochs", "batch_size")}
    res = importlib.import_module("baselines.hybrid_rr").run(ads_data, _spec("hybrid_rr", hp, eps=1.3))
    assert res.privacy.epsilon == pytest.approx(1.3) and res.privacy.delta == 0.0 and res.privacy.accounting is None
    # the truncated model never reads the sensitive feature (cat1)
    _, model = _model(ads_data)
    xn, xc = ads_data.x_num_train[:5], ads_data.x_cat_train[:5]
    params = init_params(model, xn, xc, seed=0)
    xc2 = xc.copy()
    xc2[:, 1] = (xc[:, 1] + 1) % 4
    f = two_class_logits(model, truncated=True)
    assert jnp.allclose(f(params, (xn, xc)), f(params, (xn, xc2)))


def test_row_hybrid_dpsgd(ads_data):
    import importlib

    r = row("hybrid_dpsgd")
    assert relations(r) == BOTH and l2_sensitivities(r) == {"add_or_remove": 1.0, "label_substitution": 2.0}
    hp = {k: HYBRID_HP[k] for k in ("dp_learning_rate", "dp_epochs", "dp_batch_size", "clip_norm")}
    res = importlib.import_module("baselines.hybrid_dpsgd").run(ads_data, _spec("hybrid_dpsgd", hp, eps=2.0))
    n = len(ads_data.y_train)
    assert res.details["epsilon1"] == 0.0
    _assert_both_relations_from_dp_accounting(res, 30 / n, n // 30)


def test_row_hybrid_user_level(ads_data):
    import importlib

    from labeldp.ads.hybrid_user import K_MAX, user_level_delta
    from labeldp.mechanisms import user_level as U
    from labeldp.methods.base import RunSpec

    r = row("hybrid_user_level")
    assert relations(r) == BOTH and l2_sensitivities(r) == {"add_or_remove": 1.0, "label_substitution": 2.0}
    mod = importlib.import_module("baselines.hybrid_user_level")

    def spec(split, eps):
        return RunSpec(
            dataset="criteo_attribution",
            method="hybrid_user_level",
            variant=f"{split}_k{K}",
            epsilon=eps,
            delta=1e-5,
            seed=0,
            hparams=HYBRID_HP,
            options={"examples_per_user": K, "phase_split": split},
        )

    # RR split: RR at eps/k on each of the user's k labels, exactly eps for the user's k labels
    import labeldp.ads.hybrid as H  # phase 1's RR, looked up where train_hybrid calls it

    calls, real_rr = [], H.randomized_response

    def spy(y, **kw):
        calls.append((len(y), kw["epsilon"]))
        return real_rr(y, **kw)

    H.randomized_response = spy
    try:
        rr = mod.run(ads_data, spec("rr", 1.4))
    finally:
        H.randomized_response = real_rr
    assert calls == [(USERS * K, pytest.approx(1.4 / K))]
    assert U.max_user_log_ratio(epsilon=1.4, k=K, num_classes=2) == pytest.approx(1.4)
    assert rr.privacy.epsilon == pytest.approx(1.4) and rr.privacy.delta == 0.0
    # Hybrid split: phase 2's item-level eps from dp_accounting directly, k times, plus eps1
    res = mod.run(ads_data, spec("hybrid", 2.0))
    e1 = res.details["epsilon1"]
    q, steps = HYBRID_HP["dp_batch_size"] / (USERS * K), int(USERS * K_MAX // HYBRID_HP["dp_batch_size"])
    assert res.details["phase2_steps"] == steps and res.details["sampling_rate"] == pytest.approx(q)
    for rel in ("add_or_remove", "label_substitution"):
        # soundness from dp_accounting directly: at the item delta that Proposition 6 turns into the
        # run's delta for the stored eps, the run's item-level eps is at most the stored eps / k
        e = (res.privacy.epsilon_by_relation[rel] - e1) / K
        d = 1e-5 * math.expm1(e) / math.expm1(K * e)
        direct = _direct_eps(q, steps, res.details["noise_multiplier"], rel, d)
        assert direct <= e * (1 + 1e-3), rel
        assert direct >= e * 0.97, rel  # and not loose
        assert user_level_delta(item_epsilon=e, item_delta=d, k=K) == pytest.approx(1e-5)
    assert res.privacy.epsilon <= 2.0 + 1e-6 and res.privacy.delta <= 1e-5 * (1 + 1e-9)
