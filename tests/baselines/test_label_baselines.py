"""Label-randomisation baselines of 000 Table 5: RR, RR-Debiased, ALIBI, LP-2ST.

Statistical tests draw from fixed seeds, so they are deterministic; their thresholds
(chi-square / KS p-values > 1e-4 after a Bonferroni split over rows) would fail a correct
implementation with probability < 1e-4 under a fresh seed, while a wrong transition matrix
(e.g. an off-by-one keep probability) is rejected by a wide margin at these sample sizes.
"""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from baselines import alibi, common, lp_2st, rr, rr_debiased
from labeldp import training
from labeldp.mechanisms import classification as cls
from labeldp.methods import registry
from labeldp.methods.base import MethodResult
from tests.helpers import P_MIN_LABEL_BASELINES as P_MIN, assert_label_event_reaccounts, label_method_spec


def _transition_counts(true_labels, noisy_labels, k):
    counts = np.zeros((k, k), dtype=np.int64)
    np.add.at(counts, (np.asarray(true_labels), np.asarray(noisy_labels)), 1)
    return counts


def assert_rows_match(counts, probs, p_min=P_MIN):
    """Each row of ``counts`` is a multinomial sample of the same row of ``probs``.

    Cells of probability 0 must be empty; the others get a chi-square goodness-of-fit test at
    level ``p_min / rows`` (Bonferroni).
    """
    rows = counts.shape[0]
    for y in range(rows):
        n = counts[y].sum()
        assert n > 0
        zero = probs[y] == 0
        assert counts[y][zero].sum() == 0, f"row {y}: output of probability 0 observed"
        expected = n * probs[y][~zero]
        assert expected.min() >= 5, "test too small for the chi-square approximation"
        if (~zero).sum() == 1:
            continue  # deterministic row, checked by the zero cells
        p = stats.chisquare(counts[y][~zero], expected).pvalue
        assert p > p_min / rows, f"row {y}: chi-square p = {p:.2e}\n{counts[y]}\n{probs[y]}"


# ---------------------------------------------------------------------------
# RR and RR-Debiased
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("module", [rr, rr_debiased])
@pytest.mark.parametrize("epsilon,k", [(0.5, 10), (2.0, 10), (1.0, 3)])
def test_rr_noise_has_rr_distribution(module, epsilon, k):
    y = np.repeat(np.arange(k), 20_000)
    noisy, weights = module.noisy_targets(y, num_classes=k, epsilon=epsilon, rng=np.random.default_rng([7, k]))
    assert noisy.shape == y.shape and weights.shape == (y.size, k)
    assert_rows_match(_transition_counts(y, noisy, k), cls.randomized_response_matrix(num_classes=k, epsilon=epsilon))
    if module is rr:
        np.testing.assert_array_equal(weights, np.eye(k, dtype=np.float32)[noisy])
    else:
        np.testing.assert_allclose(weights, cls.rr_debiased_weights(noisy, num_classes=k, epsilon=epsilon), rtol=1e-6)


def test_rr_and_rr_debiased_share_noisy_labels_for_a_seed():
    y = np.arange(500) % 10
    a, _ = rr.noisy_targets(y, num_classes=10, epsilon=1.0, rng=common.label_rng(3, common.STREAM_RANDOMIZED_RESPONSE))
    b, _ = rr_debiased.noisy_targets(
        y, num_classes=10, epsilon=1.0, rng=common.label_rng(3, common.STREAM_RANDOMIZED_RESPONSE)
    )
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("epsilon,k", [(0.01, 10), (0.5, 10), (2.0, 10), (8.0, 10), (1.0, 2), (0.3, 100)])
def test_rr_debiased_targets_are_unbiased(epsilon, k):
    """E[W | y] = one_hot(y), by enumerating the RR output distribution."""
    probs = cls.randomized_response_matrix(num_classes=k, epsilon=epsilon)  # P[y, out]
    y_all = np.arange(k)
    # The weights the module trains on for every possible noisy label (float64 path).
    w_out = cls.rr_debiased_weights(y_all, num_classes=k, epsilon=epsilon)
    expected = probs @ w_out  # E[W | y] row by row
    scale = max(1.0, np.abs(w_out).max())
    np.testing.assert_allclose(expected, np.eye(k), atol=1e-12 * scale * k)
    # The module's float32 targets are those weights.
    noisy, w = rr_debiased.noisy_targets(
        np.repeat(y_all, 3), num_classes=k, epsilon=epsilon, rng=np.random.default_rng(0)
    )
    np.testing.assert_allclose(w, w_out[noisy], rtol=1e-6, atol=1e-6 * scale)
    if epsilon < 5:
        assert w.min() < 0  # negative weights are intended


# ---------------------------------------------------------------------------
# ALIBI
# ---------------------------------------------------------------------------


def _fixed_logits_trainer(logits, calls):
    def fit_stage1(idx1, noisy1):
        calls.append((np.array(idx1), np.array(noisy1)))
        return logits

    return fit_stage1


def test_lp2st_stages_partition_and_query_each_label_once(monkeypatch):
    n, k, eps = 1000, 10, 1.0
    rng = np.random.default_rng(0)
    y = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k)) * 2.0
    # Spy on the randomizers: which labels reach them, and how often.
    seen = []
    real_rr, real_rwp = cls.randomized_response, cls.rr_with_prior

    def spy_rr(labels, **kw):
        seen.append(("randomized_response", np.array(labels)))
        return real_rr(labels, **kw)

    def spy_rwp(labels, priors, **kw):
        seen.append(("rr_with_prior", np.array(labels)))
        return real_rwp(labels, priors, **kw)

    monkeypatch.setattr(cls, "randomized_response", spy_rr)
    monkeypatch.setattr(cls, "rr_with_prior", spy_rwp)
    calls = []
    plan = lp_2st.plan_stages(
        y,
        num_classes=k,
        epsilon=eps,
        rng=np.random.default_rng([1, 4]),
        fit_stage1=_fixed_logits_trainer(logits, calls),
    )
    i1, i2 = plan.stage1_idx, plan.stage2_idx
    # Disjoint, covering, 40% / 60%.
    assert np.intersect1d(i1, i2).size == 0
    np.testing.assert_array_equal(np.sort(np.concatenate([i1, i2])), np.arange(n))
    assert i1.size == 400 and i2.size == 600
    # Each label queried exactly once: stage 1 by RR, then stage 2 by RRWithPrior.
    assert [m for m, _ in plan.query_log] == ["randomized_response", "rr_with_prior"]
    queried = np.concatenate([idx for _, idx in plan.query_log])
    assert queried.size == n and np.unique(queried).size == n
    np.testing.assert_array_equal(plan.query_log[0][1], i1)
    np.testing.assert_array_equal(plan.query_log[1][1], i2)
    assert [m for m, _ in seen] == ["randomized_response", "rr_with_prior"]
    np.testing.assert_array_equal(seen[0][1], y[i1])
    np.testing.assert_array_equal(seen[1][1], y[i2])
    # Stage 1 was trained on exactly the stage-1 RR labels, before stage 2 was queried.
    assert len(calls) == 1
    np.testing.assert_array_equal(calls[0][0], i1)
    np.testing.assert_array_equal(calls[0][1], plan.stage1_noisy)
    # The filter: k = round(mean k*), keep iff the noisy stage-1 label is in the top-k.
    assert plan.mean_k == pytest.approx(np.mean(plan.stage2_k))
    assert plan.filter_k == int(math.floor(np.mean(plan.stage2_k) + 0.5))
    expected_keep = []
    for j, i in enumerate(i1):
        ranked = sorted(range(k), key=lambda c: (-logits[i, c], c))
        expected_keep.append(plan.stage1_noisy[j] in ranked[: plan.filter_k])
    np.testing.assert_array_equal(plan.stage1_keep, np.array(expected_keep))
    assert 0 < plan.num_stage1_kept < i1.size
    # Stage-2 training set: all stage-2 labels plus the kept stage-1 labels.
    np.testing.assert_array_equal(plan.train_idx, np.concatenate([i2, i1[plan.stage1_keep]]))
    np.testing.assert_array_equal(
        plan.train_labels, np.concatenate([plan.stage2_noisy, plan.stage1_noisy[plan.stage1_keep]])
    )
    # Stage-2 priors are the stage-1 model's softmax: k* per example matches.
    np.testing.assert_array_equal(plan.stage2_k, cls.rr_with_prior_optimal_k(common.softmax(logits[i2]), epsilon=eps))


def test_lp2st_oracle_refuses_a_second_query():
    oracle = lp_2st.LabelOracle(np.arange(10) % 3, num_classes=3, epsilon=1.0, rng=np.random.default_rng(0))
    oracle.randomized_response([0, 1, 2])
    with pytest.raises(RuntimeError, match="twice"):
        oracle.rr_with_prior([2, 3], np.full((2, 3), 1 / 3))
    with pytest.raises(RuntimeError, match="twice"):
        oracle.randomized_response([4, 4])
    oracle.rr_with_prior([3, 4], np.full((2, 3), 1 / 3))
    np.testing.assert_array_equal(oracle.queried_indices, [0, 1, 2, 3, 4])


def test_lp2st_label_noise_has_mechanism_distributions():
    """Stage 1 ~ RR; stage 2 ~ RRWithPrior with the stage-1 model's softmax as prior."""
    n, k, eps = 150_000, 5, 1.0
    rng = np.random.default_rng(2)
    y = rng.integers(0, k, n)
    row = np.array([2.0, 1.2, 0.8, -0.5, -1.0])
    logits = np.tile(row, (n, 1))
    prior = common.softmax(row)
    k_star = int(cls.rr_with_prior_optimal_k(prior, epsilon=eps))
    assert 1 < k_star < k  # a non-trivial RRTop-k
    plan = lp_2st.plan_stages(
        y, num_classes=k, epsilon=eps, rng=np.random.default_rng(3), fit_stage1=_fixed_logits_trainer(logits, [])
    )
    assert_rows_match(
        _transition_counts(y[plan.stage1_idx], plan.stage1_noisy, k),
        cls.randomized_response_matrix(num_classes=k, epsilon=eps),
    )
    assert_rows_match(
        _transition_counts(y[plan.stage2_idx], plan.stage2_noisy, k),
        cls.rr_with_prior_probabilities(prior, epsilon=eps),
    )
    assert np.all(plan.stage2_k == k_star) and plan.filter_k == k_star
    # With the same prior everywhere, the kept stage-1 labels are those in the top-k* classes.
    top = np.argsort(-row, kind="stable")[:k_star]
    np.testing.assert_array_equal(plan.stage1_keep, np.isin(plan.stage1_noisy, top))


def test_lp2st_split_is_seeded_and_label_independent():
    a1, a2 = lp_2st.split_stages(1001, stage1_fraction=0.4, rng=np.random.default_rng(9))
    b1, b2 = lp_2st.split_stages(1001, stage1_fraction=0.4, rng=np.random.default_rng(9))
    np.testing.assert_array_equal(a1, b1)
    np.testing.assert_array_equal(a2, b2)
    assert a1.size == 400 and a2.size == 601
    assert lp_2st.filter_k(1.5, 10) == 2 and lp_2st.filter_k(1.49, 10) == 1
    assert lp_2st.filter_k(0.2, 10) == 1 and lp_2st.filter_k(12.0, 10) == 10


# ---------------------------------------------------------------------------
# Method contract and end-to-end runs
# ---------------------------------------------------------------------------

METHODS = [rr, rr_debiased, alibi, lp_2st]


def test_module_top_levels_are_light():
    code = (
        "import sys, baselines.rr, baselines.rr_debiased, baselines.alibi, baselines.lp_2st, "
        "baselines.common\n"
        "heavy = [m for m in ('numpy', 'jax', 'flax', 'optax', 'torch', 'scipy') if m in sys.modules]\n"
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("module", METHODS, ids=lambda m: m.NAME)
def test_registry_finds_method(module):
    from labeldp.methods.registry import get_method

    assert get_method(module.NAME) is module
    assert module.HYPERPARAMETERS == ("learning_rate", "epochs", "batch_size")
    # rr also runs on binary ads data with users (000 Table 7, labeldp.ads): "tabular"; LP-2ST also on
    # MovieLens' ratings (001 Table 3): "ratings"; every label baseline runs on SimCLR features of an image
    # dataset (000 Table 6): "features"
    expected = {"rr": ("image", "tabular", "features"), "lp_2st": ("image", "features", "ratings")}
    assert module.DATASET_KINDS == expected.get(module.NAME, ("image", "features"))


E2E_CASES = [(rr, {}), (rr_debiased, {}), (alibi, {}), (alibi, {"prior": "epoch"}), (lp_2st, {})]


@pytest.mark.parametrize("module,options", E2E_CASES, ids=["rr", "rr_debiased", "alibi", "alibi-prior_epoch", "lp_2st"])
def test_end_to_end_and_deterministic(module, options, data):
    epochs = 2 if module is alibi else 1  # ALIBI: epoch mode refreshes the prior once
    spec = label_method_spec(module.NAME, epsilon=1.0, seed=3, epochs=epochs, options=options)
    first = module.run(data, spec)
    assert isinstance(first, MethodResult)
    acc = first.metrics["test_accuracy_pct"]
    assert np.isfinite(acc) and 0.0 <= acc <= 100.0
    assert first.metrics["diverged"] in (False, True)
    assert np.isfinite(first.metrics["final_train_loss"]) or first.metrics["diverged"]
    privacy = first.privacy
    assert privacy.epsilon == 1.0 and privacy.delta == 0.0 and privacy.valid
    assert privacy.accounting is None and privacy.invalid_reason is None
    record = privacy.to_dict(target_epsilon=spec.epsilon)
    assert record["epsilon"] == 1.0 and record["delta"] == 0.0
    assert_label_event_reaccounts(record)
    assert 0.0 <= first.details["noisy_label_accuracy"] <= 1.0
    assert first.timings["train_seconds"] > 0
    # Same seed -> bitwise the same result (timings aside).
    second = module.run(data, spec)
    assert second.metrics == first.metrics
    assert second.details == first.details
    if module is lp_2st:
        d = first.details
        assert d["num_stage1"] + d["num_stage2"] == 256 and d["num_stage1"] == 102
        assert d["num_stage2_train"] == d["num_stage2"] + d["num_stage1_kept"]
        assert 1 <= d["filter_k"] <= 10 and 1.0 <= d["mean_k"] <= 10.0
        assert d["filter_k"] == int(math.floor(d["mean_k"] + 0.5))
    if module is alibi:
        assert first.details["prior"] == options.get("prior", "step")
        assert first.details["epoch_prior_refreshes"] == (1 if options else 0)


def test_lp_2st_mixup_hyperparameters_reach_each_stage(data):
    import dataclasses as dc

    base = label_method_spec("lp_2st", epsilon=1.0, seed=3)
    plain = lp_2st.run(data, base)
    assert plain.details["mixup_alpha"] == {"stage1": 0.0, "stage2": 0.0}
    mixed = lp_2st.run(data, dc.replace(base, hparams={**base.hparams, "mixup_alpha1": 4.0, "mixup_alpha2": 2.0}))
    assert mixed.details["mixup_alpha"] == {"stage1": 4.0, "stage2": 2.0}
    # mixup is post-processing of the randomised labels: the stage-1 queries and the privacy are
    # unchanged (stage 2's queries use the stage-1 model as prior, which mixup does change)
    for key in ("stage1_noisy_label_accuracy", "num_stage1", "num_stage2"):
        assert mixed.details[key] == plain.details[key]
    assert mixed.privacy == plain.privacy


def test_lp_2st_passes_each_stage_its_own_mixup(data, monkeypatch):
    import dataclasses as dc

    seen = []
    real_train = training.train_weighted

    def spy(*args, config, **kw):
        seen.append(config.mixup_alpha)
        return real_train(*args, config=config, **kw)

    monkeypatch.setattr(training, "train_weighted", spy)
    base = label_method_spec("lp_2st", epsilon=1.0, seed=3)
    lp_2st.run(data, dc.replace(base, hparams={**base.hparams, "mixup_alpha1": 4.0, "mixup_alpha2": 2.0}))
    assert seen == [4.0, 2.0]  # stage 1, then stage 2


def test_rr_run_matches_its_noise_step(data):
    """run() trains on exactly noisy_targets() drawn from default_rng([seed, stream])."""
    spec = label_method_spec("rr", epsilon=0.5, seed=4)
    result = rr.run(data, spec)
    noisy, _ = rr.noisy_targets(data.y_train, num_classes=10, epsilon=0.5, rng=np.random.default_rng([4, 1]))
    assert result.details["noisy_label_accuracy"] == np.mean(noisy == data.y_train)


@pytest.mark.parametrize("module", METHODS, ids=lambda m: m.NAME)
def test_rejects_non_private_runs(module, data):
    with pytest.raises(ValueError, match="finite epsilon"):
        module.run(data, label_method_spec(module.NAME, epsilon=math.inf))


@pytest.mark.parametrize("module", METHODS, ids=lambda m: m.NAME)
def test_rejects_unknown_options(module, data):
    with pytest.raises(ValueError, match="examples_per_user"):
        module.run(data, label_method_spec(module.NAME, options={"examples_per_user": 2}))


@pytest.mark.parametrize("module", [rr, rr_debiased], ids=lambda m: m.NAME)
def test_rr_family_trains_with_an_optimiser_variant_on_the_same_release(module, data):
    """Issue 29's optimiser experiment: a ``momentum`` variant changes the training, not the released
    labels or their eps; options outside the optimiser stay refused."""
    plain = module.run(data, label_method_spec(module.NAME, epochs=2))
    moment = module.run(data, label_method_spec(module.NAME, epochs=2, options={"momentum": 0.9}))
    assert moment.metrics["final_train_loss"] != plain.metrics["final_train_loss"]
    assert moment.details["noisy_label_accuracy"] == plain.details["noisy_label_accuracy"]  # the same release
    assert moment.privacy.to_dict(target_epsilon=1.0)["epsilon"] == plain.privacy.to_dict(target_epsilon=1.0)["epsilon"]
    with pytest.raises(ValueError, match="model"):
        module.run(data, label_method_spec(module.NAME, options={"model": "inception_001"}))


FIXED_BY_SEED = [
    m for m in registry.implemented_methods() if registry.declared(m, "LABEL_RELEASE_FIXED_BY_SEED", False)
]


def test_rr_family_and_alibi_declare_their_release_fixed_by_the_seed_and_lp_2st_does_not():
    assert {"rr", "rr_debiased", "alibi"} <= set(FIXED_BY_SEED) and "lp_2st" not in FIXED_BY_SEED


@pytest.mark.parametrize("method", FIXED_BY_SEED)
def test_a_release_fixed_by_the_seed_is_the_same_for_every_configuration(method, data):
    """What the search spend (labeldp.report.search_cost) relies on for a LABEL_RELEASE_FIXED_BY_SEED method: runs
    of one seed release the same labels whatever the learning rate, epochs or optimiser; another seed, others."""
    base = label_method_spec(method, epsilon=1.0, seed=5, epochs=1)
    other = dataclasses.replace(
        base,
        hparams={**base.hparams, "learning_rate": 0.02, "epochs": 2},
        options={"momentum": 0.9, **({"prior": "epoch"} if method == "alibi" else {})},  # ALIBI: refreshed prior
    )
    runs = [registry.get_method(method).run(data, s) for s in (base, other, dataclasses.replace(base, seed=6))]
    digests = [r.details["label_release_sha256"] for r in runs]
    assert digests[0] == digests[1] != digests[2]
    assert runs[0].details["label_rng"] == runs[1].details["label_rng"] != runs[2].details["label_rng"]
