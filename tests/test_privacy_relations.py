"""docs/privacy_relations.md against the code: one property check per row of its table.

The table states, for every mechanism / method of the suite, the neighbouring relation its
guarantee is stated for and the sensitivity its noise is calibrated to. This module parses the
table, requires exactly the expected set of rows (a new row without a check fails, a removed row
fails, a new method without a row fails), and runs ``test_row_<id>`` for each row: a check that
would fail if the row's stated relation or sensitivity were wrong for the code.

Kept small (tiny shapes, few accountant calls): the whole module runs in well under a minute on
two shared CPU cores.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from labeldp.mechanisms import classification as C

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "privacy_relations.md"

HEADER = ["id", "method", "relation its guarantee is stated for", "sensitivity", "mechanism", "checked by"]
EXPECTED_IDS = {
    "rr", "rr_debiased", "rr_with_prior", "lp_2st", "alibi",
    "dpsgd", "dpsgd_opacus", "labeldp_pro",
    "regression_laplace", "regression_staircase", "regression_rr_on_bins",
    "regression_optimal_unbiased", "regression_prior",
    "kmeans_priors",
}
LABEL_ONLY = {"label_substitution"}
BOTH = {"add_or_remove", "label_substitution"}


# ------------------------------------------------------------------------------------------
# Parsing the table
# ------------------------------------------------------------------------------------------


def _cells(line: str) -> list[str]:
    line = line.strip()
    assert line.startswith("|") and line.endswith("|"), line
    return [c.strip() for c in re.split(r"(?<!\\)\|", line[1:-1])]


def parse_table(text: str) -> tuple[list[str], list[dict[str, str]]]:
    """The first markdown table whose header starts with ``| id |``: (header, rows)."""
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if re.match(r"^\|\s*id\s*\|", l))
    header = _cells(lines[start])
    assert set(lines[start + 1].replace("|", "").strip()) <= set("-: "), "no separator line"
    rows = []
    for line in lines[start + 2:]:
        if not line.strip().startswith("|"):
            break
        cells = _cells(line)
        assert len(cells) == len(header), f"row has {len(cells)} cells, header {len(header)}: {line[:80]}"
        rows.append(dict(zip(header, cells)))
    return header, rows


def ticks(cell: str) -> list[str]:
    """The backticked tokens of a cell."""
    return re.findall(r"`([^`]+)`", cell)


TEXT = DOC.read_text(encoding="utf-8")
HEAD, ROWS = parse_table(TEXT)
BY_ID = {}
for _r in ROWS:
    _ids = ticks(_r["id"])
    assert len(_ids) == 1, f"id cell must hold one backticked id: {_r['id']!r}"
    BY_ID[_ids[0]] = _r


def row(rid: str) -> dict[str, str]:
    return BY_ID[rid]


def relations(r: dict[str, str]) -> set[str]:
    return {t for t in ticks(r["relation its guarantee is stated for"]) if t in BOTH}


def sensitivity_tokens(r: dict[str, str]) -> list[str]:
    return ticks(r["sensitivity"])


def l1_sensitivity(r) -> float:
    vals = [float(t.split("=", 1)[1]) for t in sensitivity_tokens(r) if t.startswith("L1=")]
    assert len(vals) == 1, f"row {r['id']} must state one `L1=<number>`"
    return vals[0]


def l2_sensitivities(r) -> dict[str, float]:
    """``{"add_or_remove": a, "label_substitution": b}`` from ``L2=C`` / ``L2=2C`` (in units of C)."""
    vals = []
    for t in sensitivity_tokens(r):
        m = re.fullmatch(r"L2=(\d*\.?\d*)C", t)
        if m:
            vals.append(float(m.group(1) or 1.0))
    assert len(vals) == 2, f"row {r['id']} must state `L2=C` and `L2=2C`-style tokens, got {vals}"
    return {"add_or_remove": vals[0], "label_substitution": vals[1]}


def assert_label_only_row(r):
    """A label-only randomizer states label substitution and nothing for add/remove."""
    assert relations(r) == LABEL_ONLY, r["id"]
    assert "n/a" in r["relation its guarantee is stated for"], r["id"]


def max_log_ratio(mat: np.ndarray) -> float:
    """max over outputs o (columns) and label pairs of log(P[y, o] / P[y', o]); inf if unbounded."""
    mat = np.asarray(mat, dtype=np.float64)
    hi, lo = mat.max(axis=0), mat.min(axis=0)
    used = hi > 0
    if np.any(lo[used] <= 0):
        return math.inf
    return float(np.max(np.log(hi[used]) - np.log(lo[used])))


def spy(monkeypatch, module, name: str) -> list[dict[str, Any]]:
    """Replaces ``module.name`` with a wrapper that logs (args, kwargs) of every call."""
    real = getattr(module, name)
    calls: list[dict[str, Any]] = []

    def wrapper(*args, **kwargs):
        calls.append({"args": [np.array(a) for a in args], **kwargs})
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return calls


def assert_pure_label_dp_record(module, r, eps=1.5):
    """The method's privacy record: (eps, 0) under label substitution only, no accountant."""
    from baselines.common import pure_label_dp

    out = pure_label_dp(eps, module.MECHANISM).to_dict(target_epsilon=eps)
    assert set(out["epsilon_by_relation"]) == relations(r) == LABEL_ONLY
    assert out["neighboring_relation"] == "label_substitution"
    assert out["epsilon"] == eps and out["delta"] == 0.0 and out["accounting"] is None
    assert not getattr(module, "CALIBRATES_WITH_ACCOUNTANT", False), \
        "a label randomizer must not get a calibration relation from the planner"


# ------------------------------------------------------------------------------------------
# The table itself
# ------------------------------------------------------------------------------------------


def test_header_is_exact():
    assert HEAD == HEADER


def test_ids_are_exactly_the_expected_set():
    ids = [ticks(r["id"])[0] for r in ROWS]
    assert len(ids) == len(set(ids)), f"duplicate ids: {sorted(i for i in ids if ids.count(i) > 1)}"
    assert set(ids) == EXPECTED_IDS, (
        f"rows without a check: {sorted(set(ids) - EXPECTED_IDS)}; "
        f"checked ids without a row: {sorted(EXPECTED_IDS - set(ids))}")


def test_every_row_names_its_check_and_the_check_exists():
    module = sys.modules[__name__]
    for rid, r in BY_ID.items():
        name = f"test_row_{rid}"
        assert ticks(r["checked by"]) == [name], f"row {rid}: 'checked by' must be `{name}`"
        assert callable(getattr(module, name, None)), f"no check {name} for row {rid}"
    defined = {n[len("test_row_"):] for n in dir(module) if n.startswith("test_row_")}
    assert defined == EXPECTED_IDS


def test_every_relation_cell_names_a_known_relation():
    from labeldp import accounting

    assert set(accounting.RELATIONS) == BOTH
    for rid, r in BY_ID.items():
        assert relations(r), f"row {rid} names no relation in backticks"
        if relations(r) == LABEL_ONLY:
            assert "n/a" in r["relation its guarantee is stated for"], rid


def test_every_private_method_of_the_registry_has_a_row():
    from labeldp.methods import registry

    methods = set()
    for name in registry.implemented_methods():
        try:
            registry.get_method(name)
        except (TypeError, KeyError):
            continue  # a helper module in a method package, not a method
        methods.add(name)
    assert methods - {"nonprivate"} <= set(BY_ID), \
        f"methods without a row in docs/privacy_relations.md: {sorted(methods - {'nonprivate'} - set(BY_ID))}"


def test_intro_factor_matches_the_accountant():
    """The intro's numbers: sigma 1.7556, q = 1024/60000, 585 steps, delta 1e-5."""
    from labeldp import accounting

    intro = " ".join(TEXT.split("| id |")[0].replace("**", "").split())
    assert "sigma 1.7556" in intro and "1024/60000" in intro and "585 steps" in intro
    eps = {rel: accounting.dpsgd_epsilon(noise_multiplier=1.7556, sampling_rate=1024 / 60000, steps=585,
                                         delta=1e-5, neighboring_relation=rel)
           for rel in accounting.RELATIONS}
    assert f"eps {eps['add_or_remove']:.2f} under add/remove" in intro
    assert f"eps {eps['label_substitution']:.2f} under label substitution" in intro
    assert eps["label_substitution"] / eps["add_or_remove"] == pytest.approx(1.9, abs=0.05)


# ------------------------------------------------------------------------------------------
# Classification label randomizers
# ------------------------------------------------------------------------------------------


def test_row_rr(monkeypatch):
    from baselines import rr

    r = row("rr")
    assert_label_only_row(r)
    assert "pairwise" in sensitivity_tokens(r)
    for k in (2, 4, 10):
        for eps in (0.1, 1.0, 4.0):
            p = C.randomized_response_matrix(num_classes=k, epsilon=eps)
            np.testing.assert_allclose(p.sum(1), 1.0, rtol=0, atol=1e-12)
            assert max_log_ratio(p) == pytest.approx(eps, rel=1e-12)  # exactly e^eps: tight
    # The sampler follows the matrix (keep rate), so the bound is the one that runs.
    k, eps = 4, 1.0
    y = np.repeat(np.arange(k), 5000)
    out = C.randomized_response(y, num_classes=k, epsilon=eps, rng=np.random.default_rng(0))
    keep = C.randomized_response_matrix(num_classes=k, epsilon=eps)[0, 0]
    assert abs(np.mean(out == y) - keep) < 4 * math.sqrt(keep * (1 - keep) / y.size)
    # The baseline queries every label exactly once, at the run's eps, and trains on a
    # function of the noisy labels only.
    calls = spy(monkeypatch, C, "randomized_response")
    noisy, targets = rr.noisy_targets(y[:50], num_classes=k, epsilon=eps, rng=np.random.default_rng(1))
    assert len(calls) == 1 and calls[0]["epsilon"] == eps
    np.testing.assert_array_equal(calls[0]["args"][0], y[:50])
    np.testing.assert_array_equal(targets, np.eye(k, dtype=np.float32)[noisy])
    assert_pure_label_dp_record(rr, r)


def test_row_rr_debiased(monkeypatch):
    from baselines import rr, rr_debiased

    r = row("rr_debiased")
    assert_label_only_row(r)
    assert "pairwise" in sensitivity_tokens(r)
    k, eps = 5, 0.7
    assert max_log_ratio(C.randomized_response_matrix(num_classes=k, epsilon=eps)) == pytest.approx(eps, rel=1e-12)
    y = np.arange(40) % k
    calls = spy(monkeypatch, C, "randomized_response")
    noisy, w = rr_debiased.noisy_targets(y, num_classes=k, epsilon=eps, rng=np.random.default_rng(2))
    # One RR query per label at the full eps (not a second query, not a split budget) ...
    assert len(calls) == 1 and calls[0]["epsilon"] == eps
    np.testing.assert_array_equal(calls[0]["args"][0], y)
    # ... and the weights are a function of the noisy labels only (post-processing).
    np.testing.assert_allclose(w, C.rr_debiased_weights(noisy, num_classes=k, epsilon=eps), rtol=1e-6)
    assert list(inspect.signature(C.rr_debiased_weights).parameters) == [
        "noisy_labels", "num_classes", "epsilon", "dtype"], "the weights must not see true labels"
    # Same draw as rr for the same generator: RR plus post-processing, nothing more.
    noisy_rr, _ = rr.noisy_targets(y, num_classes=k, epsilon=eps, rng=np.random.default_rng(2))
    np.testing.assert_array_equal(noisy, noisy_rr)
    assert_pure_label_dp_record(rr_debiased, r)


def test_row_rr_with_prior():
    r = row("rr_with_prior")
    assert_label_only_row(r)
    assert "pairwise" in sensitivity_tokens(r)
    rng = np.random.default_rng(3)
    for eps in (0.1, 1.0, 4.0):
        for _ in range(10):
            prior = rng.dirichlet(np.full(6, 0.4))
            p = C.rr_with_prior_probabilities(prior, epsilon=eps)
            np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-12)
            assert max_log_ratio(p) <= eps + 1e-12
            for k in range(1, 7):
                assert max_log_ratio(C.rr_top_k_matrix(prior, k=k, epsilon=eps)) <= eps + 1e-12
        # tight at k = K (plain RR)
        assert max_log_ratio(C.rr_top_k_matrix(np.full(6, 1 / 6), k=6, epsilon=eps)) == pytest.approx(eps)
    # k depends on the prior only: two label vectors, the same k; the sampler follows the matrix.
    prior = np.array([0.5, 0.3, 0.15, 0.05])
    eps = 1.0
    n = 24000
    y1 = np.repeat(np.arange(4), n // 4)
    res1 = C.rr_with_prior(y1, np.tile(prior, (n, 1)), epsilon=eps, rng=np.random.default_rng(4))
    res2 = C.rr_with_prior((y1 + 1) % 4, np.tile(prior, (n, 1)), epsilon=eps, rng=np.random.default_rng(4))
    np.testing.assert_array_equal(res1.k, res2.k)
    mat = C.rr_with_prior_probabilities(prior, epsilon=eps)
    for c in range(4):
        emp = np.bincount(res1.noisy_labels[y1 == c], minlength=4) / (n // 4)
        np.testing.assert_allclose(emp, mat[c], atol=0.03)


def test_row_lp_2st(monkeypatch):
    from baselines import common, lp_2st

    r = row("lp_2st")
    assert_label_only_row(r)
    assert "pairwise" in sensitivity_tokens(r)
    n, k, eps = 60, 3, 1.2
    rng = np.random.default_rng(5)
    y = rng.integers(0, k, n)
    logits = rng.normal(size=(n, k))
    fits = []

    def fit_stage1(idx1, noisy1):
        fits.append((np.array(idx1), np.array(noisy1)))
        return logits

    rr_calls = spy(monkeypatch, C, "randomized_response")
    rwp_calls = spy(monkeypatch, C, "rr_with_prior")
    plan = lp_2st.plan_stages(y, num_classes=k, epsilon=eps, rng=np.random.default_rng(6), fit_stage1=fit_stage1)
    i1, i2 = plan.stage1_idx, plan.stage2_idx
    # The stages partition the examples.
    assert np.intersect1d(i1, i2).size == 0
    np.testing.assert_array_equal(np.sort(np.concatenate([i1, i2])), np.arange(n))
    # Every label is queried exactly once, each query at the FULL eps: parallel composition.
    queried = np.concatenate([idx for _, idx in plan.query_log])
    assert queried.size == n and np.unique(queried).size == n
    assert [c["epsilon"] for c in rr_calls] == [eps] and [c["epsilon"] for c in rwp_calls] == [eps]
    # Stage 2's prior comes from the stage-1 model, fed only the stage-1 noisy labels.
    assert len(fits) == 1
    np.testing.assert_array_equal(fits[0][0], i1)
    np.testing.assert_array_equal(fits[0][1], plan.stage1_noisy)
    np.testing.assert_allclose(rwp_calls[0]["args"][1], common.softmax(logits[i2]))
    # The split does not depend on the labels.
    plan2 = lp_2st.plan_stages((y + 1) % k, num_classes=k, epsilon=eps, rng=np.random.default_rng(6),
                               fit_stage1=lambda a, b: logits)
    np.testing.assert_array_equal(plan2.stage1_idx, i1)
    # The oracle refuses a second query of any label.
    oracle = lp_2st.LabelOracle(y, num_classes=k, epsilon=eps, rng=np.random.default_rng(7))
    oracle.randomized_response([0, 1, 2])
    with pytest.raises(RuntimeError, match="twice"):
        oracle.rr_with_prior([2, 3], np.full((2, k), 1 / k))
    with pytest.raises(RuntimeError, match="twice"):
        oracle.randomized_response([0])
    assert_pure_label_dp_record(lp_2st, r)


def test_row_alibi(monkeypatch):
    from baselines import alibi

    r = row("alibi")
    assert_label_only_row(r)
    l1 = l1_sensitivity(r)
    k = 4
    onehot = np.eye(k)
    assert {float(np.abs(onehot[i] - onehot[j]).sum()) for i in range(k) for j in range(k) if i != j} == {l1}
    for eps in (0.2, 1.0, 5.0):
        b = C.alibi_scale(epsilon=eps)
        assert b == pytest.approx(l1 / eps, rel=1e-15)
        # Log-density ratio over labels at sampled outputs: <= eps, and = eps at z = e_0.
        z = C.alibi_noisy_labels(np.arange(400) % k, num_classes=k, epsilon=eps, rng=np.random.default_rng(8))
        ll = C.alibi_log_likelihood(z, epsilon=eps)
        ref = np.stack([stats.laplace.logpdf(z - onehot[c], scale=b).sum(-1) for c in range(k)], axis=1)
        np.testing.assert_allclose(ll, ref, rtol=1e-10, atol=1e-10)
        assert np.max(ll.max(1) - ll.min(1)) <= eps + 1e-9
        at_e0 = C.alibi_log_likelihood(onehot[:1], epsilon=eps)
        assert float(at_e0.max() - at_e0.min()) == pytest.approx(eps, rel=1e-12)
    # The released noise has scale 2 / eps (mean |Laplace(b)| = b).
    eps = 1.0
    y = np.arange(4000) % k
    z = C.alibi_noisy_labels(y, num_classes=k, epsilon=eps, rng=np.random.default_rng(9))
    assert np.mean(np.abs(z - onehot[y])) == pytest.approx(l1 / eps, rel=0.05)
    # The baseline noises every label once at eps; its soft labels are a function of z.
    calls = spy(monkeypatch, C, "alibi_noisy_labels")
    z2, soft = alibi.noisy_soft_labels(y[:30], num_classes=k, epsilon=eps, rng=np.random.default_rng(10))
    assert len(calls) == 1 and calls[0]["epsilon"] == eps
    np.testing.assert_allclose(soft, C.alibi_posterior(z2, None, epsilon=eps))
    assert_pure_label_dp_record(alibi, r)


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
                s, st = step.clipped_sum(params, Batch(x=jnp.asarray(x), y=jnp.asarray(y, jnp.int32),
                                                       mask=jnp.asarray(mask, jnp.float32)), jax.random.key(1))
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
    rec = accounting.dpsgd_record(noise_multiplier=8.0, sampling_rate=0.01, steps=50, delta=1e-5,
                                  amplification=False)
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
    opt = DPOptimizer(torch.optim.SGD(gsm.parameters(), lr=0.0), noise_multiplier=sigma, max_grad_norm=CLIP,
                      expected_batch_size=1, loss_reduction="sum")
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
            "self", "noisy_grad", "logits_fn", "params", "x", "mask", "x_alt", "alt_mask"], cls
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
    params = {"w1": jax.random.normal(k[0], (_DIN, _HID)), "b1": jnp.zeros(_HID),
              "w2": jax.random.normal(k[1], (_HID, _K)), "b2": jnp.zeros(_K)}
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
    step = make_dpsgd_step(logits_fn=_mlp_train, projection_logits_fn=_mlp, optimizer=optax.sgd(0.1),
                           config=cfg, denoiser=rec)
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
        "noop": False, "alt_conv": False, "self_conv": True, "self_span": True}
    no_amp = accounting.dpsgd_event(noise_multiplier=5.0, sampling_rate=0.1, steps=3, amplification=False)
    import dp_accounting

    assert isinstance(no_amp.event, dp_accounting.GaussianDpEvent)  # no PoissonSampledDpEvent
    src = inspect.getsource(__import__("labeldp.methods.private_training", fromlist=["x"]).train_private)
    assert "if breaks and amplification_requested" in src and "valid = False" in src


# ------------------------------------------------------------------------------------------
# Regression randomizers (paper 003)
# ------------------------------------------------------------------------------------------


def _delta_token(r):
    assert "Delta=upper-lower" in sensitivity_tokens(r), r["id"]


def _additive_checks(kind, r):
    from labeldp.mechanisms import regression as R

    noise_fn = R.laplace_noise if kind == "laplace" else R.staircase_noise
    mech = R.laplace_mechanism if kind == "laplace" else R.staircase_mechanism
    matrix_fn = R.laplace_transition_matrix if kind == "laplace" else R.staircase_transition_matrix
    lower, upper = -1.0, 2.0
    delta = upper - lower
    for eps in (0.3, 1.0, 3.0):
        noise = noise_fn(epsilon=eps, sensitivity=delta)
        assert noise.sensitivity == delta
        ys = np.linspace(lower, upper, 7)
        o = np.linspace(lower - 8 * delta / eps, upper + 8 * delta / eps, 2001)
        logf = np.log(noise.pdf(o[None, :] - ys[:, None]))
        worst = float(np.max(logf.max(0) - logf.min(0)))
        assert worst <= eps + 1e-9
        assert worst == pytest.approx(eps, rel=1e-6)  # attained by y = lower vs y = upper
        # A label outside the range (a larger sensitivity) would break the bound.
        far = np.log(noise.pdf(o - (upper + delta))) - np.log(noise.pdf(o - lower))
        assert np.max(np.abs(far)) > 1.5 * eps
        # Discrete variants, exact matrices, clipped and unclipped.
        for clip in (True, False):
            t = matrix_fn(epsilon=eps, lower=0, upper=4, clip=clip)
            assert t.epsilon_dp_ratio() <= eps + 1e-9
            assert t.epsilon_dp_ratio() == pytest.approx(eps, rel=1e-6)
    # The mechanism calibrates to the range and refuses labels outside it.
    with pytest.raises(ValueError, match="lower, upper"):
        mech(np.array([upper + 0.5]), epsilon=1.0, lower=lower, upper=upper, rng=np.random.default_rng(0))
    eps = 1.0
    y = np.full(20000, 0.5)
    out = mech(y, epsilon=eps, lower=lower, upper=upper, rng=np.random.default_rng(12))
    assert np.mean((out - y) ** 2) == pytest.approx(noise_fn(epsilon=eps, sensitivity=delta).variance(), rel=0.1)


def test_row_regression_laplace():
    r = row("regression_laplace")
    assert_label_only_row(r)
    _delta_token(r)
    _additive_checks("laplace", r)
    from labeldp.mechanisms import regression as R

    assert R.laplace_noise(epsilon=0.5, sensitivity=3.0).param == pytest.approx(3.0 / 0.5)  # Lap(Delta/eps)


def test_row_regression_staircase():
    r = row("regression_staircase")
    assert_label_only_row(r)
    _delta_token(r)
    _additive_checks("staircase", r)


def _support_and_prior(seed, k=5):
    rng = np.random.default_rng(seed)
    sup = np.sort(rng.choice(np.arange(0.0, 20.0, 0.5), size=k, replace=False))
    return sup, rng.dirichlet(np.ones(k))


def test_row_regression_rr_on_bins():
    from labeldp.mechanisms import regression as R

    r = row("regression_rr_on_bins")
    assert_label_only_row(r)
    assert "pairwise" in sensitivity_tokens(r)
    for seed, eps in ((0, 0.5), (1, 1.0), (2, 3.0)):
        sup, probs = _support_and_prior(seed)
        for mech in (R.rr_on_bins(sup, probs, epsilon=eps), R.debiased_rr(sup, epsilon=eps),
                     R.rr_on_bins_from_map(sup, epsilon=eps, label_outputs=[1.0, 1.0, 4.0, 4.0, 9.0])):
            assert mech.epsilon_dp_ratio() <= eps + 1e-12
            assert max_log_ratio(mech.matrix) == pytest.approx(mech.epsilon_dp_ratio())
            m = mech.outputs.size
            q = 1.0 / (math.exp(eps) + m - 1)
            vals = np.unique(np.round(mech.matrix / q, 9))  # every entry is q or e^eps q
            assert set(vals) <= {1.0, round(math.exp(eps), 9)}
        assert R.debiased_rr(sup, epsilon=eps).epsilon_dp_ratio() == pytest.approx(eps, rel=1e-12)


def test_row_regression_optimal_unbiased():
    from labeldp.mechanisms import regression as R

    r = row("regression_optimal_unbiased")
    assert_label_only_row(r)
    assert "pairwise" in sensitivity_tokens(r)
    for seed, eps in ((3, 0.5), (4, 2.0)):
        sup, probs = _support_and_prior(seed, k=4)
        mech = R.optimal_unbiased_randomizer(sup, probs, epsilon=eps)
        used = mech.matrix.max(0) > 0
        assert max_log_ratio(mech.matrix[:, used]) <= eps * (1 + 1e-9) + 1e-12
        assert mech.is_unbiased()
        np.testing.assert_allclose(mech.matrix.sum(1), 1.0, atol=1e-9)


def test_row_regression_prior():
    from labeldp.mechanisms import regression as R

    r = row("regression_prior")
    assert_label_only_row(r)
    l1 = l1_sensitivity(r)
    for eps in (0.2, 1.0, 4.0):
        b = R.prior_noise_scale(eps)
        assert b == pytest.approx(l1 / eps)
        # Neighbouring histograms (one label moves from bin 2 to bin 0): ratio <= e^eps, tight.
        h = np.array([3.0, 0.0, 5.0, 1.0])
        h2 = h + np.array([1.0, 0.0, -1.0, 0.0])
        assert np.abs(h - h2).sum() == l1
        z = h + np.random.default_rng(13).laplace(0, 3 * b, size=(5000, 4))
        z = np.concatenate([z, [h2 + np.array([1.0, 0, -1.0, 0])]])  # a point where the bound is attained
        lr = stats.laplace.logpdf(z - h, scale=b).sum(1) - stats.laplace.logpdf(z - h2, scale=b).sum(1)
        assert np.max(np.abs(lr)) <= eps + 1e-9
        assert np.max(np.abs(lr)) == pytest.approx(eps, rel=1e-9)
    # The sampler's noise has that scale.
    sup = np.arange(3000.0)
    noisy = R.noisy_histogram(np.array([0.0]), support=sup, epsilon=1.0, rng=np.random.default_rng(14))
    counts = np.zeros(sup.size)
    counts[0] = 1
    assert np.mean(np.abs(noisy - counts)) == pytest.approx(l1 / 1.0, rel=0.07)
    # Algorithm 3 spends eps1 (prior) + eps2 (randomizer): basic composition.
    labels = np.random.default_rng(15).choice([0.0, 1.0, 2.0], size=50)
    res = R.label_randomizer(labels, support=[0.0, 1.0, 2.0], epsilon1=0.3, epsilon2=0.9,
                             rng=np.random.default_rng(16), randomizer="rr_on_bins")
    assert res.epsilon == pytest.approx(1.2)
    assert res.randomizer.epsilon_dp_ratio() <= 0.9 + 1e-12


# ------------------------------------------------------------------------------------------
# k-means priors (001 Algorithm 4)
# ------------------------------------------------------------------------------------------


def test_row_kmeans_priors():
    r = row("kmeans_priors")
    assert_label_only_row(r)
    l1 = l1_sensitivity(r)
    for eps in (0.1, 1.0, 3.0):
        a = C.discrete_laplace_parameter(epsilon=eps)
        assert a == pytest.approx(eps / l1)
        # Two neighbouring (cluster, class) tables: one count -1, another +1.
        h = np.array([4, 1, 0])
        h2 = np.array([3, 1, 1])
        assert np.abs(h - h2).sum() == l1
        rad = 6
        grid = np.stack(np.meshgrid(*[np.arange(v - rad, v + rad + 1) for v in h], indexing="ij"), -1).reshape(-1, 3)
        lr = stats.dlaplace.logpmf(grid - h, a).sum(-1) - stats.dlaplace.logpmf(grid - h2, a).sum(-1)
        assert np.max(np.abs(lr)) <= eps + 1e-9
        assert np.max(np.abs(lr)) == pytest.approx(eps, rel=1e-9)  # tight
    # The sampler's noise is discrete Laplace with that parameter.
    eps = 1.0
    rel = C.discrete_laplace_histogram(np.zeros((200, 50), dtype=np.int64), epsilon=eps,
                                       rng=np.random.default_rng(17))
    assert rel.epsilon == eps
    assert np.var(rel.noisy_counts) == pytest.approx(stats.dlaplace.var(eps / l1), rel=0.1)
    # The clusters come from the features only.
    rng = np.random.default_rng(18)
    feats = np.concatenate([rng.normal(c, 0.1, size=(20, 2)) for c in (0.0, 3.0, 6.0)])
    y = rng.integers(0, 3, 60)
    p1 = C.kmeans_priors(feats, y, num_clusters=3, num_classes=3, epsilon=eps, rng=np.random.default_rng(19))
    p2 = C.kmeans_priors(feats, (y + 1) % 3, num_clusters=3, num_classes=3, epsilon=eps,
                         rng=np.random.default_rng(19))
    np.testing.assert_array_equal(p1.cluster_ids, p2.cluster_ids)
    assert p1.epsilon == eps
