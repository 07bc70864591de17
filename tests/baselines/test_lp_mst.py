"""LP-MST with T stages (001 Algorithm 3): every label queried once, the stages' training sets, the
reuse filter, LP-2ST as its T = 2 case, and clear errors for bad stage options."""

from __future__ import annotations

import dataclasses as dc

import numpy as np
import pytest

from baselines import lp_2st, lp_mst
from labeldp import accounting
from tests.helpers import assert_label_event_reaccounts, fake_mnist_images, label_method_spec


def _logits_from_noisy(n, k, seed):
    """A stage callback whose logits depend on the labels only through the noisy labels it is given."""
    calls = []

    def fit_stage(t, idx, noisy):
        calls.append((t, np.array(idx), np.array(noisy)))
        rng = np.random.default_rng([seed, t])
        logits = rng.normal(size=(n, k))
        logits[idx[::2], noisy[::2]] += 3.0  # "learns" half of its training labels
        return logits

    return fit_stage, calls


@pytest.mark.parametrize("fractions", [(1 / 3, 1 / 3, 1 / 3), (0.5, 0.3, 0.2), (0.25, 0.25, 0.25, 0.25)])
def test_every_label_is_queried_exactly_once_and_stages_follow_the_shares(fractions):
    n, k = 300, 5
    y = np.random.default_rng(0).integers(0, k, n)
    fit_stage, calls = _logits_from_noisy(n, k, seed=1)
    oracle = lp_mst.LabelOracle(y, num_classes=k, epsilon=1.0, rng=np.random.default_rng(2))
    plans = lp_mst.plan_multi_stage(
        y,
        num_classes=k,
        epsilon=1.0,
        rng=np.random.default_rng(2),
        fit_stage=fit_stage,
        fractions=fractions,
        oracle=oracle,
    )
    assert len(plans) == len(fractions) == len(calls)
    assert np.array_equal(np.sort(oracle.queried_indices), np.arange(n))  # a partition, each label once
    assert [m for m, _ in oracle.log] == ["randomized_response"] + ["rr_with_prior"] * (len(fractions) - 1)
    cum = np.concatenate([[0], np.round(np.cumsum(fractions) * n).astype(int)])
    assert [p.idx.size for p in plans] == list(np.diff(cum))
    assert plans[0].filter_k == k and np.all(plans[0].k == k) and plans[0].num_reused == 0


def test_later_stages_reuse_exactly_the_earlier_labels_in_the_previous_models_top_k():
    n, k = 400, 6
    y = np.random.default_rng(3).integers(0, k, n)
    fit_stage, calls = _logits_from_noisy(n, k, seed=4)
    plans = lp_mst.plan_multi_stage(
        y, num_classes=k, epsilon=2.0, rng=np.random.default_rng(5), fit_stage=fit_stage, fractions=(0.3, 0.3, 0.4)
    )
    for t in (2, 3):
        plan, prev = plans[t - 1], plans[: t - 1]
        prev_logits = fit_stage(t - 1, calls[t - 2][1], calls[t - 2][2])  # the same callback, same seed: same logits
        prev_idx = np.concatenate([p.idx for p in prev])
        prev_noisy = np.concatenate([p.noisy for p in prev])
        order = np.argsort(-prev_logits[prev_idx], axis=-1, kind="stable")[:, : plan.filter_k]
        keep = np.any(order == prev_noisy[:, None], axis=-1)
        assert plan.filter_k == int(np.floor(plan.k.mean() + 0.5))
        assert np.array_equal(plan.train_idx, np.concatenate([plan.idx, prev_idx[keep]]))
        assert np.array_equal(plan.train_labels, np.concatenate([plan.noisy, prev_noisy[keep]]))
        assert plan.num_reused == int(keep.sum()) and 0 < plan.num_reused < prev_idx.size
        # RRWithPrior's output always lies in the prior's top-k* of the previous model
        top = np.argsort(-prev_logits[plan.idx], axis=-1, kind="stable")
        assert all(plan.noisy[i] in top[i, : plan.k[i]] for i in range(plan.idx.size))
        assert np.array_equal(calls[t - 1][1], plan.train_idx)  # stage t trained on that set


def test_a_changed_label_changes_only_its_own_randomised_label():
    """Label DP by parallel composition (001 Observation 4): with the same randomness, neighbouring label
    vectors give the same noisy labels everywhere but at the changed index (its stage's query is the only
    one that reads it; later priors read only randomised labels, which are equal here up to that index)."""
    n, k = 240, 4
    y = np.random.default_rng(6).integers(0, k, n)
    fractions = (0.4, 0.3, 0.3)
    rng_split = np.random.default_rng(7)
    last_stage = lp_mst.split_into_stages(n, fractions=fractions, rng=rng_split)[-1]
    j = int(last_stage[0])  # in the last stage: every prior before its query is unaffected
    y2 = y.copy()
    y2[j] = (y[j] + 1) % k
    out = []
    for labels in (y, y2):
        fit_stage, _ = _logits_from_noisy(n, k, seed=8)
        plans = lp_mst.plan_multi_stage(
            labels, num_classes=k, epsilon=1.0, rng=np.random.default_rng(7), fit_stage=fit_stage, fractions=fractions
        )
        noisy = np.empty(n, dtype=np.int64)
        for p in plans:
            noisy[p.idx] = p.noisy
        out.append(noisy)
    differs = np.flatnonzero(out[0] != out[1])
    assert set(differs.tolist()) <= {j}


@pytest.mark.parametrize(
    "options,match",
    [
        ({"stages": 0}, "stages must be an integer >= 1"),
        ({"stages": 2.5}, "stages must be an integer >= 1"),
        ({"stages": 3, "stage_fractions": [0.5, 0.5]}, "3 positive shares summing to 1"),
        ({"stages": 2, "stage_fractions": [0.7, 0.7]}, "summing to 1"),
        ({"stages": 3, "stage1_fraction": 0.4}, "stage1_fraction is LP-2ST's"),
        ({"stages": 3, "temprature": 1.0}, "temprature"),
    ],
)
def test_bad_stage_options_are_refused_with_the_fix(options, match):
    data = _fake_data()
    with pytest.raises(ValueError, match=match):
        lp_mst.run(data, label_method_spec("lp_mst", options=options))


def test_lp_mst_with_two_stages_is_lp_2st():
    data = _fake_data()
    spec = label_method_spec("lp_mst", options={"stages": 2}, seed=2)
    mst = lp_mst.run(data, spec)
    two = lp_2st.run(data, dc.replace(spec, method="lp_2st", options={}))
    assert mst.metrics == two.metrics
    assert mst.details["per_stage"][0]["test_accuracy_pct"] == two.details["stage1_test_accuracy_pct"]
    assert mst.details["per_stage"][1]["filter_k"] == two.details["filter_k"]
    assert mst.details["per_stage"][1]["num_reused"] == two.details["num_stage1_kept"]


def test_three_stage_run_records_each_stage_and_is_pure_label_dp():
    data = _fake_data()
    res = lp_mst.run(
        data,
        label_method_spec(
            "lp_mst", options={"stages": 3, "momentum": 0.9, "lr_schedule": "warmup_linear_decay", "l2": 1e-4}, seed=1
        ),
    )
    d = res.details
    assert d["stages"] == 3 and len(d["per_stage"]) == 3
    assert sum(s["num_queried"] for s in d["per_stage"]) == data.y_train.size
    assert d["per_stage"][-1]["test_accuracy_pct"] == res.metrics["test_accuracy_pct"]
    assert d["recipe"] == {
        "momentum": 0.9,
        "nesterov": False,
        "lr_schedule": "warmup_linear_decay",
        "warmup_fraction": 0.15,
        "l2": 1e-4,
    }
    assert res.privacy.epsilon == 1.0 and res.privacy.delta == 0.0 and res.privacy.valid
    assert res.privacy.neighboring_relation is accounting.LABEL_SUBSTITUTION
    assert_label_event_reaccounts(res.privacy.to_dict(target_epsilon=1.0))
    one = lp_mst.run(data, label_method_spec("lp_mst", options={"stages": 1}, seed=1))  # LP-1ST: RR on every label
    assert one.details["per_stage"][0]["num_queried"] == data.y_train.size
    assert one.details["per_stage"][0]["num_reused"] == 0


def _fake_data(n_train=192, n_test=64, k=10, seed=0):
    return fake_mnist_images(n_train, n_test, k, seed)


def test_top_k_accuracy_is_the_share_of_labels_among_the_top_k_logits():
    rng = np.random.default_rng(0)
    logits, labels = rng.normal(size=(500, 6)), rng.integers(0, 6, 500)
    acc = lp_mst.top_k_accuracy_pct(logits, labels)
    assert len(acc) == 6 and acc[-1] == 100.0 and all(a <= b for a, b in zip(acc, acc[1:]))
    assert acc[0] == pytest.approx(100.0 * np.mean(logits.argmax(axis=1) == labels))
    brute = [100.0 * np.mean([y in np.argsort(-row)[:k] for row, y in zip(logits, labels)]) for k in range(1, 7)]
    assert acc == pytest.approx(brute)


def test_lp_2st_records_the_stage1_top_k_accuracy_and_takes_the_split_and_temperature_from_the_grid():
    data = _fake_data()
    grid_spec = dc.replace(
        label_method_spec("lp_2st"),
        hparams={**label_method_spec("lp_2st").hparams, "stage1_fraction": 0.6, "temperature": 0.5},
    )
    res = lp_2st.run(data, grid_spec)
    d = res.details
    assert d["stage1_fraction"] == 0.6 and d["temperature"] == 0.5
    top = d["stage1_test_top_k_accuracy_pct"]
    assert len(top) == data.num_classes and top[-1] == 100.0 and top[0] == pytest.approx(d["stage1_test_accuracy_pct"])
    as_options = lp_2st.run(
        data, dc.replace(label_method_spec("lp_2st"), options={"stage1_fraction": 0.6, "temperature": 0.5})
    )
    assert as_options.metrics == res.metrics  # an axis and an option are the same setting
    both = dc.replace(grid_spec, options={"temperature": 0.5})
    with pytest.raises(ValueError, match="temperature is both a grid axis and an option"):
        lp_2st.run(data, both)


def test_on_ratings_lp_mst_records_the_expected_ratings_rmse_and_images_have_none(tmp_path):
    """001 Table 3: on MovieLens (a ratings dataset) LP-1ST / LP-2ST train the NCF network and record the
    test RMSE of the softmax-expected rating beside the accuracy; on images there is no such metric."""
    from labeldp.data.prepare import load_prepared
    from labeldp.data.rawformats import make_standin_raw_files
    from labeldp.data.sources import movielens_1m
    from labeldp.methods.common import build_model_for

    make_standin_raw_files("movielens_1m", tmp_path / "raw", n_train=480, n_test=120, seed=0)
    data = load_prepared(
        movielens_1m.prepare_dataset(
            raw_dir=tmp_path / "raw", out_path=tmp_path / "p.npz", subset=None, source="synthetic_standin"
        )
    )
    assert build_model_for(data).name == "ncf"
    for method, options in (("lp_mst", {"stages": 1}), ("lp_2st", {})):
        spec = dc.replace(label_method_spec(method, epsilon=2.0, options=options), dataset="movielens_1m")
        result = (lp_mst if method == "lp_mst" else lp_2st).run(data, spec)
        assert 0.0 < result.metrics["test_rmse"] < 4.0
        assert_label_event_reaccounts(result.privacy.to_dict(target_epsilon=2.0))
    images = lp_mst.run(_fake_data(), label_method_spec("lp_mst", options={"stages": 1}))
    assert "test_rmse" not in images.metrics


def test_lp_1st_trains_001s_inception_with_augmentation_and_records_both():
    import types

    rng = np.random.default_rng(0)
    data = types.SimpleNamespace(  # tiny 8x8 "MNIST": the Inception is global-pooled, any size >= 4 works
        x_train=rng.integers(0, 256, (48, 8, 8, 1), dtype=np.uint8),
        y_train=rng.integers(0, 10, 48),
        x_test=rng.integers(0, 256, (16, 8, 8, 1), dtype=np.uint8),
        y_test=rng.integers(0, 10, 16),
        num_classes=10,
        name="mnist",
        source="fake",
        subset=None,
    )
    options = {"stages": 1, "momentum": 0.9, "model": "inception_001", "augment": "crop_flip_cutout"}
    options |= {"augment_pad": 2, "augment_cutout": 3}
    spec = dc.replace(
        label_method_spec("lp_mst", options=options), hparams={"learning_rate": 0.05, "epochs": 1, "batch_size": 32}
    )
    res = lp_mst.run(data, spec)
    assert res.details["model"] == "inception_001"
    assert res.details["augment"] == {"kind": "crop_flip_cutout", "pad": 2, "cutout": 3}
    assert res.metrics["steps"] == 2 and np.isfinite(res.metrics["final_train_loss"])
    assert 0.0 <= res.metrics["test_accuracy_pct"] <= 100.0
    plain = lp_mst.run(_fake_data(n_train=64, n_test=16), label_method_spec("lp_mst", options={"stages": 1}))
    assert plain.details["model"] == "mnist_cnn" and plain.details["augment"] == {"kind": "none"}
