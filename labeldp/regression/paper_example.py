"""003's worked example, exactly: Table 1's distribution, Figure 2's optimal unbiased randomizer,
and the RR-on-Bins counterexample of Section 3 (target ``unbiased_figure2``).

003 Table 1 is a distribution over ``X = {a, b}`` and ``Y = {0, 1, 2}``. Section 3 computes the
optimal RR-on-Bins randomizer at eps = 0.5 for its label prior (the map ``Phi(0) ~ 0.396``,
``Phi(1) = Phi(2) ~ 0.720``), shows that the Bayes-optimal predictor on its noisy labels moves
(``f(a) = 0.542``, ``f(b) = 0.558`` against the true 0.4 and 0.7) and loses (squared loss 2.726
against 2.625 in the paper's units, a ratio of 1.038). Figure 2 plots the prior and the optimal
UNBIASED randomizer of 003 Algorithm 1 at eps = 0.5 on a fine output grid: every output lies
outside [0, 2], and Theorem 6 bounds the outputs an optimum needs by ``2 |Y| = 6``.

No data, no training: :func:`example_record` computes every number with the suite's mechanisms
(:func:`labeldp.mechanisms.regression_unbiased.optimal_unbiased_randomizer`, HiGHS;
:func:`labeldp.mechanisms.regression_bins.rr_on_bins`); the rule ``paper_example_record`` stores it
as a record, and ``paper_example_figure`` draws the figure from that record only.

Usage::

    python -m labeldp.regression.paper_example record --epsilon 0.5 --num-outputs 2001 --out R.json
    python -m labeldp.regression.paper_example figure --record R.json --out-dir reports/figures
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from labeldp import records
from labeldp.atomic_io import write_text_atomic
from labeldp.mechanisms.regression_bins import rr_on_bins
from labeldp.mechanisms.regression_unbiased import optimal_unbiased_randomizer
from labeldp.report.render import save_figure

__all__ = ["TABLE1", "LABELS", "example_record", "render_figure2"]

LABELS = np.array([0.0, 1.0, 2.0])
#: 003 Table 1: P(x, y) for x in (a, b) (rows) and y in LABELS (columns).
TABLE1 = np.array([[0.35, 0.10, 0.05], [0.25, 0.15, 0.10]])
#: Mass below which an output of the LP solution counts as unused.
USED = 1e-9


def _bayes(expected_output: np.ndarray) -> np.ndarray:
    """The Bayes-optimal predictor per x for the squared loss when label y is seen as a randomized
    label with mean ``expected_output[y]``: ``E[E[M(y)] | x]``."""
    return (TABLE1 @ expected_output) / TABLE1.sum(axis=1)


def _true_loss(pred: np.ndarray) -> float:
    """``E_{(x, y) ~ Table 1} (pred(x) - y)^2``."""
    return float(np.sum(TABLE1 * (pred[:, None] - LABELS[None, :]) ** 2))


def example_record(*, epsilon: float, num_outputs: int) -> dict[str, Any]:
    """Every number of 003's example at ``epsilon`` (the record's ``metrics`` and ``details``).

    Args:
      epsilon: the randomizers' eps (003: 0.5).
      num_outputs: the output grid of Algorithm 1 (003: "a fine grid").

    Returns:
      ``{"metrics", "details", "privacy", "timings"}``.
    """
    prior = TABLE1.sum(axis=0)
    t0 = time.perf_counter()
    opt = optimal_unbiased_randomizer(LABELS, prior, epsilon=epsilon, num_outputs=num_outputs)
    lp_seconds = time.perf_counter() - t0
    m, o = np.asarray(opt.matrix), np.asarray(opt.outputs)
    used = m.max(axis=0) > USED
    bins = rr_on_bins(LABELS, prior, epsilon=epsilon)
    bm, bo = np.asarray(bins.matrix), np.asarray(bins.outputs)
    bins_pred, true_pred = _bayes(bm @ bo), _bayes(LABELS)
    mu = m[:, used]
    ratio = float(np.max(mu[:, None, :] / mu[None, :, :]))  # max over y, y' and used outputs of M[y, o] / M[y', o]
    metrics = {
        "optimal_unbiased_noisy_label_mse": float(prior @ (m * (o[None, :] - LABELS[:, None]) ** 2).sum(axis=1)),
        "optimal_unbiased_max_bias": float(np.max(np.abs(m @ o - LABELS))),
        "optimal_unbiased_max_dp_ratio": ratio,
        "optimal_unbiased_outputs_used": int(used.sum()),
        "optimal_unbiased_outputs_inside_label_range": int(np.sum(used & (o >= LABELS[0]) & (o <= LABELS[-1]))),
        "rr_on_bins_bayes_loss": _true_loss(bins_pred),
        "true_bayes_loss": _true_loss(true_pred),
    }
    metrics["rr_on_bins_loss_ratio"] = metrics["rr_on_bins_bayes_loss"] / metrics["true_bayes_loss"]
    details = {
        "table1": TABLE1.tolist(),
        "labels": LABELS.tolist(),
        "prior": prior.tolist(),
        "optimal_unbiased": {"outputs": o[used].tolist(), "matrix": m[:, used].tolist()},
        "rr_on_bins": {
            "outputs": bo.tolist(),
            "label_to_output": [int(v) for v in bins.label_to_output],
            "matrix": bm.tolist(),
        },
        "bayes_predictor": {"true": true_pred.tolist(), "rr_on_bins": bins_pred.tolist()},
    }
    privacy = {
        "epsilon": float(epsilon),
        "delta": 0.0,
        "valid": True,
        "neighboring_relation": "label_substitution",
        "epsilon_by_relation": {"label_substitution": float(epsilon)},
        "mechanism": "003 Algorithm 1 (optimal unbiased randomizer) and RR-on-Bins, each eps-label-DP",
    }
    return {"metrics": metrics, "details": details, "privacy": privacy, "timings": {"lp_seconds": lp_seconds}}


def render_figure2(record: Mapping[str, Any], *, out_dir: Path, name: str) -> list[Path]:
    """003 Figure 2 from a record: (a) the prior, (b) the optimal unbiased randomizer's pmf per
    input label; with ``<name>.md`` / ``.csv`` holding the numbers. Returns the written paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d, mt = record["details"], record["metrics"]
    outs, mat = np.asarray(d["optimal_unbiased"]["outputs"]), np.asarray(d["optimal_unbiased"]["matrix"])
    eps = record["privacy"]["epsilon"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, 3.2))
    ax1.bar(d["labels"], d["prior"], width=0.5, color="0.5")
    ax1.set(title="(a) prior P over Y", xlabel="label y", ylabel="probability", xticks=d["labels"])
    width = 0.12 * max(1.0, float(np.ptp(outs)) / 8)
    for j, y in enumerate(d["labels"]):
        ax2.bar(outs + (j - 1) * width, mat[j], width=width, label=f"y = {y:g}")
    ax2.axvspan(d["labels"][0], d["labels"][-1], color="0.9", zorder=0, label="[0, 2]")
    ax2.set(title=f"(b) optimal unbiased randomizer, eps = {eps:g}", xlabel="randomized label", ylabel="Pr[M(y)]")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    png, pdf = out_dir / f"{name}.png", out_dir / f"{name}.pdf"
    save_figure(fig, png, pdf)
    rows = ["label,output,probability"] + [
        f"{y:g},{o:.6g},{mat[j, i]:.6g}" for j, y in enumerate(d["labels"]) for i, o in enumerate(outs)
    ]
    csv = out_dir / f"{name}.csv"
    write_text_atomic(csv, "\n".join(rows) + "\n")
    md = out_dir / f"{name}.md"
    g = (record.get("environment") or {}).get("git") or {}
    git = f"{str(g.get('commit', '?'))[:12]}{'+dirty' if g.get('dirty') else ''}"
    write_text_atomic(
        md,
        "\n".join(
            [
                f"# {name}: 003 Figure 2, the optimal unbiased randomizer of the example prior (eps = {eps:g})",
                "",
                f"- built from the record `{record['record_path']}` (git {git}); exact: no data, no training",
                f"- prior (003 Table 1's label marginal): {', '.join(f'P({y:g}) = {p:.2f}' for y, p in zip(d['labels'], d['prior']))}",
                f"- optimal unbiased randomizer (003 Algorithm 1, HiGHS, {record['config']['num_outputs']} grid outputs): "
                f"{mt['optimal_unbiased_outputs_used']} outputs used (Theorem 6: at most 6), "
                f"{mt['optimal_unbiased_outputs_inside_label_range']} inside [0, 2] (the paper: none); max |bias| "
                f"{mt['optimal_unbiased_max_bias']:.1e}; noisy-label MSE {mt['optimal_unbiased_noisy_label_mse']:.4g}",
                f"- RR-on-Bins at eps {eps:g} (003 Section 3): Phi(0) = {d['rr_on_bins']['outputs'][0]:.3f}, "
                f"Phi(1) = Phi(2) = {d['rr_on_bins']['outputs'][1]:.3f} (paper: 0.396, 0.720); Bayes predictor on its noisy "
                f"labels f(a) = {d['bayes_predictor']['rr_on_bins'][0]:.3f}, f(b) = {d['bayes_predictor']['rr_on_bins'][1]:.3f} "
                f"(paper: 0.542, 0.558; true 0.4, 0.7); squared-loss ratio {mt['rr_on_bins_loss_ratio']:.4f} "
                f"(paper: 2.726 / 2.625 = {2.726 / 2.625:.4f})",
                "",
                "| output | " + " | ".join(f"Pr[M({y:g}) = output]" for y in d["labels"]) + " |",
                "|---|" + "---|" * len(d["labels"]),
                *(
                    f"| {o:.4f} | " + " | ".join(f"{mat[j, i]:.4f}" for j in range(len(d["labels"]))) + " |"
                    for i, o in enumerate(outs)
                ),
            ]
        )
        + "\n",
    )
    plt.close(fig)
    return [md, csv, png, pdf]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="compute the example and write its record")
    r.add_argument("--epsilon", type=float, required=True)
    r.add_argument("--num-outputs", type=int, required=True)
    r.add_argument("--out", required=True)
    f = sub.add_parser("figure", help="draw 003 Figure 2 from a record")
    f.add_argument("--record", required=True)
    f.add_argument("--out-dir", required=True)
    f.add_argument("--name", default="unbiased_figure2")
    a = p.parse_args(argv)
    if a.cmd == "record":
        rec = {
            "schema_version": 1,
            "kind": "paper_example",
            "example": "003 Table 1 / Figure 2",
            "config": {"epsilon": a.epsilon, "num_outputs": a.num_outputs},
            **example_record(epsilon=a.epsilon, num_outputs=a.num_outputs),
            "environment": records.environment(),
            "created": records.now_utc(),
        }
        records.write_json_atomic(a.out, rec)
        return 0
    rec = json.loads(Path(a.record).read_text())
    rec["record_path"] = a.record
    render_figure2(rec, out_dir=Path(a.out_dir), name=a.name)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
