"""The table of docs/privacy_relations.md, parsed, and helpers the row checks share."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest  # noqa: F401 (the row checks take it through the star import)
from scipy import stats  # noqa: F401 (the row checks take it through the star import)


from labeldp.mechanisms import classification as C  # noqa: E402,F401 (the row checks take it through the star import)

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "privacy_relations.md"

HEADER = ["id", "method", "relation its guarantee is stated for", "sensitivity", "mechanism", "checked by"]
EXPECTED_IDS = {
    "kmeans_histogram_prior",
    "rr",
    "rr_debiased",
    "rr_with_prior",
    "lp_2st",
    "lp_mst",
    "alibi",
    "dpsgd",
    "dpsgd_opacus",
    "labeldp_pro",
    "regression_laplace",
    "regression_staircase",
    "regression_rr_on_bins",
    "regression_optimal_unbiased",
    "regression_prior",
    "laplace",
    "laplace_clipped",
    "staircase",
    "staircase_clipped",
    "rr_on_bins",
    "optimal_unbiased",
    "kmeans_priors",
    "rr_with_prior_kmeans",
    "rr_user_level",
    "dpsgd_user_level",
    "labeldp_pro_user_level",
    "hybrid",
    "hybrid_rr",
    "hybrid_dpsgd",
    "hybrid_user_level",
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
    for line in lines[start + 2 :]:
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
    from labeldp.accounting.label_events import pure_epsilon_event

    out = pure_label_dp(eps, module.MECHANISM, event=pure_epsilon_event(epsilon=eps)).to_dict(target_epsilon=eps)
    assert set(out["epsilon_by_relation"]) == relations(r) == LABEL_ONLY
    assert out["neighboring_relation"] == "label_substitution" and out["dp_accounting_relation"] == "REPLACE_ONE"
    assert out["epsilon"] == eps and out["delta"] == 0.0 and out["accounting"] is None
    assert not getattr(module, "CALIBRATES_WITH_ACCOUNTANT", False), (
        "a label randomizer must not get a calibration relation from the planner"
    )
