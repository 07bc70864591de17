"""Label-randomisation baselines of 000 Table 5: RR, RR-Debiased, ALIBI, LP-2ST.

Statistical tests draw from fixed seeds, so they are deterministic; their thresholds
(chi-square / KS p-values > 1e-4 after a Bonferroni split over rows) would fail a correct
implementation with probability < 1e-4 under a fresh seed, while a wrong transition matrix
(e.g. an off-by-one keep probability) is rejected by a wide margin at these sample sizes.
"""

from __future__ import annotations

import math
import subprocess
import sys

import flax.linen as nn
import jax
import numpy as np
import pytest
from scipy import stats

from baselines import alibi, common, lp_2st, rr, rr_debiased
from labeldp import training
from labeldp.mechanisms import classification as cls
from labeldp.methods.base import MethodResult, RunSpec
from labeldp.methods.common import build_model_for, train_config
from labeldp.models import ModelSpec, num_params
from labeldp.training import to_float_images
from tests.helpers import assert_label_event_reaccounts, fake_mnist_images

P_MIN = 1e-4


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


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 4.0])
def test_alibi_noise_is_laplace(epsilon):
    k = 10
    y = np.arange(6000) % k
    z, soft = alibi.noisy_soft_labels(y, num_classes=k, epsilon=epsilon, rng=np.random.default_rng(11))
    noise = z - np.eye(k)[y]
    b = 2.0 / epsilon
    p = stats.kstest(noise.ravel(), "laplace", args=(0.0, b)).pvalue
    assert p > P_MIN, f"KS p = {p:.2e} against Laplace(0, {b})"
    # Uniform-prior posterior, checked against brute-force Bayes with the Laplace likelihood.
    loglik = cls.alibi_log_likelihood(z, epsilon=epsilon)
    brute = np.exp(loglik - loglik.max(-1, keepdims=True))
    brute /= brute.sum(-1, keepdims=True)
    np.testing.assert_allclose(soft, brute, rtol=1e-9, atol=1e-12)


def test_alibi_refinement_uses_model_softmax_as_prior():
    k, n, eps = 10, 300, 0.5
    rng = np.random.default_rng(5)
    y = rng.integers(0, k, n)
    z, _ = alibi.noisy_soft_labels(y, num_classes=k, epsilon=eps, rng=rng)
    logits = rng.normal(size=(n, k)) * 3
    refined = alibi.refine_soft_labels(z, logits, epsilon=eps)
    prior = np.exp(logits - logits.max(-1, keepdims=True))
    prior /= prior.sum(-1, keepdims=True)
    log_post = cls.alibi_log_likelihood(z, epsilon=eps) + np.log(prior)
    brute = np.exp(log_post - log_post.max(-1, keepdims=True))
    brute /= brute.sum(-1, keepdims=True)
    np.testing.assert_allclose(refined, brute, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(refined.sum(-1), 1.0, atol=1e-12)
    # The per-step targets (jax, float32) are the same posterior, and carry no gradient.
    import jax
    import jax.numpy as jnp

    step = np.asarray(
        jax.jit(lambda zz, ll: alibi.step_targets(zz, ll, epsilon=eps))(
            jnp.asarray(z, jnp.float32), jnp.asarray(logits, jnp.float32)
        )
    )
    np.testing.assert_allclose(step, refined, atol=2e-5)
    grad = jax.grad(lambda ll: jnp.sum(alibi.step_targets(jnp.asarray(z, jnp.float32), ll, epsilon=eps)[:, 0]))(
        jnp.asarray(logits, jnp.float32)
    )
    assert np.all(np.asarray(grad) == 0)


# ---------------------------------------------------------------------------
# LP-2ST
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


def _fake_data(n_train=256, n_test=128, k=10, seed=0):
    return fake_mnist_images(n_train, n_test, k, seed)


def _spec(method, *, epsilon=1.0, seed=0, epochs=1, options=None):
    return RunSpec(
        dataset="mnist",
        method=method,
        variant="default",
        epsilon=epsilon,
        delta=0.0,
        seed=seed,
        hparams={"learning_rate": 0.1, "epochs": epochs, "batch_size": 64},
        options=options or {},
    )


@pytest.fixture(scope="module")
def data():
    return _fake_data()


E2E_CASES = [(rr, {}), (rr_debiased, {}), (alibi, {}), (alibi, {"prior": "epoch"}), (lp_2st, {})]


@pytest.mark.parametrize("module,options", E2E_CASES, ids=["rr", "rr_debiased", "alibi", "alibi-prior_epoch", "lp_2st"])
def test_end_to_end_and_deterministic(module, options, data):
    epochs = 2 if module is alibi else 1  # ALIBI: epoch mode refreshes the prior once
    spec = _spec(module.NAME, epsilon=1.0, seed=3, epochs=epochs, options=options)
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

    base = _spec("lp_2st", epsilon=1.0, seed=3)
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

    from labeldp import training

    seen = []
    real_train = training.train_weighted

    def spy(*args, config, **kw):
        seen.append(config.mixup_alpha)
        return real_train(*args, config=config, **kw)

    monkeypatch.setattr(training, "train_weighted", spy)
    base = _spec("lp_2st", epsilon=1.0, seed=3)
    lp_2st.run(data, dc.replace(base, hparams={**base.hparams, "mixup_alpha1": 4.0, "mixup_alpha2": 2.0}))
    assert seen == [4.0, 2.0]  # stage 1, then stage 2


def test_rr_run_matches_its_noise_step(data):
    """run() trains on exactly noisy_targets() drawn from default_rng([seed, stream])."""
    spec = _spec("rr", epsilon=0.5, seed=4)
    result = rr.run(data, spec)
    noisy, _ = rr.noisy_targets(data.y_train, num_classes=10, epsilon=0.5, rng=np.random.default_rng([4, 1]))
    assert result.details["noisy_label_accuracy"] == np.mean(noisy == data.y_train)


@pytest.mark.parametrize("module", METHODS, ids=lambda m: m.NAME)
def test_rejects_non_private_runs(module, data):
    with pytest.raises(ValueError, match="finite epsilon"):
        module.run(data, _spec(module.NAME, epsilon=math.inf))


@pytest.mark.parametrize("module", METHODS, ids=lambda m: m.NAME)
def test_rejects_unknown_options(module, data):
    with pytest.raises(ValueError, match="examples_per_user"):
        module.run(data, _spec(module.NAME, options={"examples_per_user": 2}))


def test_alibi_trains_with_its_official_recipe_options_and_refuses_init_and_augmentation(data):
    """The variant ``official_recipe`` (Nesterov momentum, weight decay, ALIBI's epoch schedule) changes
    what is trained and keeps the label mechanism and its eps; of the recipe's options outside the optimiser,
    only ``model`` is honoured (test_alibi_model_option_trains_the_chosen_network_on_the_same_release)."""
    recipe = {"momentum": 0.9, "nesterov": True, "lr_schedule": "epoch_warmup_step_decay", "l2": 5e-5}
    plain = alibi.run(data, _spec("alibi", epochs=2))
    official = alibi.run(data, _spec("alibi", epochs=2, options=recipe))
    assert official.metrics["final_train_loss"] != plain.metrics["final_train_loss"]
    assert official.details["noisy_label_accuracy"] == plain.details["noisy_label_accuracy"]  # the same release
    assert (
        official.privacy.to_dict(target_epsilon=1.0)["epsilon"] == plain.privacy.to_dict(target_epsilon=1.0)["epsilon"]
    )
    for refused in ({"init_from": "cifar100_pretrain"}, {"augment": "crop_flip_cutout"}, {"augment_pad": 2}):
        with pytest.raises(ValueError, match=next(iter(refused))):
            alibi.run(data, _spec("alibi", options=refused))
    with pytest.raises(ValueError, match="unknown model"):
        alibi.run(data, _spec("alibi", options={"model": "no_such_net"}))


def test_alibi_model_option_trains_the_chosen_network_on_the_same_release(data, monkeypatch):
    """``model: mnist_cnn_torch_defaults`` trains that network (9,066 parameters, not the default CNN's
    15,210) on the same label release (same noisy vectors: same noisy-label accuracy) with the same eps."""
    trained = []
    real_train = training.train_weighted

    def spy(model, **kw):
        result = real_train(model, **kw)
        trained.append((model.name, num_params(result.params)))
        return result

    monkeypatch.setattr(training, "train_weighted", spy)
    plain = alibi.run(data, _spec("alibi"))
    torch_net = alibi.run(data, _spec("alibi", options={"model": "mnist_cnn_torch_defaults"}))
    assert trained == [("mnist_cnn", 15_210), ("mnist_cnn_torch_defaults", 9_066)]
    assert torch_net.details["model"] == "mnist_cnn_torch_defaults" and "model" not in plain.details
    assert torch_net.details["noisy_label_accuracy"] == plain.details["noisy_label_accuracy"]
    assert torch_net.details["soft_label_accuracy_uniform_prior"] == plain.details["soft_label_accuracy_uniform_prior"]
    assert torch_net.metrics["final_train_loss"] != plain.metrics["final_train_loss"]
    assert torch_net.privacy == plain.privacy
    assert torch_net.privacy.to_dict(target_epsilon=1.0)["epsilon"] == 1.0


class _TinyBatchNormNet(nn.Module):
    """A BatchNorm network small enough to compile in a second (the registered ones, 001's Inception and
    ResNet, take ~45 s on the 2-core CPU): Conv -> BatchNorm -> ReLU -> Dense."""

    num_classes: int = 10

    @nn.compact
    def __call__(self, x, *, train: bool = False):
        x = nn.Conv(4, (3, 3), use_bias=False)(x)
        x = nn.relu(nn.BatchNorm(use_running_average=not train, momentum=0.9)(x))
        return nn.Dense(self.num_classes)(x.reshape((x.shape[0], -1)))


def test_alibi_per_step_trains_a_batch_norm_network():
    """ALIBI's per-step posterior on a BatchNorm network (the state ``{"params", "batch_stats"}`` of 001's
    networks, :class:`labeldp.models.ModelSpec`): the BatchNorm step takes the targets from its training-mode
    logits; the parameters and the running statistics both move."""
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (24, 8, 8, 1)).astype(np.float32)
    z, _ = alibi.noisy_soft_labels(rng.integers(0, 10, 24), num_classes=10, epsilon=1.0, rng=rng)
    model = ModelSpec(
        name="tiny_bn", module=_TinyBatchNormNet(), input_shape=(8, 8, 1), has_dropout=False, has_batch_norm=True
    )
    config = train_config(_spec("alibi"), progress=False)
    result = alibi.train_alibi_per_step(model, x_train=x, noisy_onehot=z, epsilon=1.0, config=config, seed=0)
    assert set(result.params) == {"params", "batch_stats"} and np.isfinite(result.final_loss)
    start = model.init(jax.random.split(jax.random.key(0))[1])  # train_weighted's initialisation for seed 0
    for part in ("params", "batch_stats"):
        moved = jax.tree_util.tree_map(
            lambda a, b: bool(np.any(np.asarray(a) != np.asarray(b))), start[part], result.params[part]
        )
        assert all(jax.tree_util.tree_leaves(moved)), part


def test_alibi_test_curve_diagnostic_observes_without_changing_the_run(data):
    """The diagnostic curve has one test accuracy per epoch, ends at the record's metric, and leaves the
    training untouched: the same run without it gives the same final model (same loss and accuracy)."""
    plain = alibi.run(data, _spec("alibi", epochs=3))
    curved = alibi.run(data, _spec("alibi", epochs=3, options={"test_curve_diagnostic": True}))
    curve = curved.details["test_accuracy_by_epoch"]
    assert len(curve) == 3
    assert curve[-1] == curved.metrics["test_accuracy_pct"] == plain.metrics["test_accuracy_pct"]
    assert curved.metrics["final_train_loss"] == plain.metrics["final_train_loss"]
    assert "test_accuracy_by_epoch" not in plain.details
    assert "never the cell's value" in curved.details["test_curve_note"]
    with pytest.raises(ValueError, match="needs prior 'step'"):
        alibi.run(data, _spec("alibi", options={"test_curve_diagnostic": True, "prior": "epoch"}))
    with pytest.raises(ValueError, match="true or false"):
        alibi.run(data, _spec("alibi", options={"test_curve_diagnostic": "yes"}))


def test_alibi_epoch_observer_cannot_set_targets(data):
    x = to_float_images(data.x_train)
    z, _ = alibi.noisy_soft_labels(np.asarray(data.y_train), num_classes=10, epsilon=1.0, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="must return None"):
        alibi.train_alibi_per_step(
            build_model_for(data),
            x_train=x,
            noisy_onehot=z,
            epsilon=1.0,
            config=train_config(_spec("alibi")),
            seed=0,
            on_epoch_end=lambda epoch, params: z,
        )


@pytest.mark.parametrize("module", [rr, rr_debiased], ids=lambda m: m.NAME)
def test_rr_family_trains_with_an_optimiser_variant_on_the_same_release(module, data):
    """Issue 29's optimiser experiment: a ``momentum`` variant changes the training, not the released
    labels or their eps; options outside the optimiser stay refused."""
    plain = module.run(data, _spec(module.NAME, epochs=2))
    moment = module.run(data, _spec(module.NAME, epochs=2, options={"momentum": 0.9}))
    assert moment.metrics["final_train_loss"] != plain.metrics["final_train_loss"]
    assert moment.details["noisy_label_accuracy"] == plain.details["noisy_label_accuracy"]  # the same release
    assert moment.privacy.to_dict(target_epsilon=1.0)["epsilon"] == plain.privacy.to_dict(target_epsilon=1.0)["epsilon"]
    with pytest.raises(ValueError, match="model"):
        module.run(data, _spec(module.NAME, options={"model": "inception_001"}))
