"""The audit table: each audited run's claimed eps under each relation next to its audited
lower bound, built only from the audit records; and the check that fails loudly.

Usage (the ``audit_table`` and ``audit`` rules)::

    python -m labeldp.audit.table --config-json '<config>' --out-dir reports/audit
    python -m labeldp.audit.table --check reports/audit/audit.csv

Verdicts. The canary game changes one label, so the guarantee it tests is eps under label
substitution: an audited lower bound above it is a FAILED privacy test (a bug in a mechanism,
its accounting or the audit) and ``--check`` exits 1 naming the run. The verdict uses the
family-wise bound: each run's guess counts are re-bounded at confidence
``1 - (1 - confidence) / (runs x guess counts)`` (Bonferroni over every run of the table), so the
chance of any false FAIL is at most ``1 - confidence``. A claim above the largest bound the game
can give (every guess right) cannot fail at this size; the table says so. ``--check`` also exits
1 when a planned run has no record (unless ``--allow-missing``): a gate that audited nothing
must not pass. A lower bound above the
add/remove eps (the papers' convention for DP-SGD) but not above the label-substitution one is
no contradiction of any stated guarantee; it is marked and printed, since it would show that
the add/remove eps understates the label-DP cost.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from labeldp import records
from labeldp.audit.one_run import epsilon_lower_bound
from labeldp.audit.plan import audit_runs
from labeldp.plan import calibration_relation, columns, format_eps
from labeldp.report.render import write_atomic_text

FAIL = "FAIL: lower bound above the label-substitution eps"
ABOVE_ADD_REMOVE = "above the add/remove eps (paper convention), within the label-DP eps"
CONSISTENT = "consistent"


def _fmt(v: Any) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, str):
        return v
    return f"{v:.3g}"


def audit_rows(config: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per planned audited run (a missing record is a ``not run`` row)."""
    acfg = config["audit"]
    labels = {c.id: c.label for c in columns(config["tables"][acfg["table"]])}
    rows = []
    planned = audit_runs(config)
    for run in planned:
        row = {
            "column": run.column,
            "label": labels[run.column],
            "method": run.spec.method,
            "target_epsilon": run.spec.epsilon,
            "seed": run.spec.seed,
            "calibration_relation": calibration_relation(config, acfg["table"], run.spec.method) or "",
            "status": "not run",
            "family_lower_bound": None,
            "largest_detectable": None,
            "epsilon_add_or_remove": None,
            "epsilon_label_substitution": None,
            "delta": None,
            "valid": None,
            "audited_lower_bound": None,
            "confidence": None,
            "num_canaries": None,
            "num_guesses": None,
            "num_correct": None,
            "train_subset": None,
            "test_accuracy_pct": None,
            "source": None,
            "verdict": "not run (no audit record)",
        }
        if os.path.exists(run.record_path):
            rec = records.read_record(run.record_path)
            au, priv = rec["audit"], rec["privacy"]
            by_rel = {k: records.decode_epsilon(v) for k, v in (priv.get("epsilon_by_relation") or {}).items()}
            lb = float(au["epsilon_lower_bound"])
            fam, top = _family_bounds(au, n_runs=len(planned))
            sub, ar = by_rel.get("label_substitution"), by_rel.get("add_or_remove")
            if sub is None:
                verdict = "not evaluable: the record states no label-substitution eps"
            elif fam > sub or not priv["valid"]:
                verdict = FAIL if fam > sub else f"invalid accounting: {priv.get('invalid_reason')}"
            elif ar is not None and fam > ar:
                verdict = ABOVE_ADD_REMOVE
            else:
                verdict = CONSISTENT + (
                    f" (cannot fail at this size: the largest bound is {top:.2f})" if sub >= top else ""
                )
            row.update(
                status="ok",
                epsilon_add_or_remove=ar,
                epsilon_label_substitution=sub,
                delta=float(priv["delta"]),
                valid=bool(priv["valid"]),
                audited_lower_bound=lb,
                family_lower_bound=fam,
                largest_detectable=top,
                confidence=float(au["confidence"]),
                num_canaries=int(au["num_canaries"]),
                num_guesses=int(au["best_num_guesses"]),
                num_correct=int(au["best_num_correct"]),
                train_subset=int(au["train_subset"]),
                test_accuracy_pct=rec["metrics"].get("test_accuracy_pct"),
                source=rec["dataset"]["source"],
                verdict=verdict,
            )
        rows.append(row)
    return rows


def _family_bounds(au: Mapping[str, Any], *, n_runs: int) -> tuple[float, float]:
    """(the run's bound at the family-wise confidence, the largest bound its game could give)."""
    rows = au["per_count"]
    conf = 1.0 - (1.0 - float(au["confidence"])) / (max(n_runs, 1) * len(rows))
    kw = dict(num_canaries=int(au["num_canaries"]), delta=float(au["delta"]), confidence=conf)
    fam = max(
        epsilon_lower_bound(num_guesses=int(r["num_guesses"]), num_correct=int(r["num_correct"]), **kw) for r in rows
    )
    top = max(
        epsilon_lower_bound(num_guesses=int(r["num_guesses"]), num_correct=int(r["num_guesses"]), **kw) for r in rows
    )
    return fam, top


def render_markdown(config: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> str:
    acfg = config["audit"]
    conf = {r["confidence"] for r in rows if r["confidence"] is not None}
    lines = [
        f"# Label-canary privacy audit ({acfg['table']} runs, dataset {config['tables'][acfg['table']]['dataset']})",
        "",
        f"- generated: {records.now_utc()}",
        f"- git revision: {records.git_revision(exclude=(str(config['reports_dir']), str(config['results_dir']))).get('commit')}",
        f"- game: {acfg['num_canaries']} label canaries among the first {acfg['train_subset']} training examples; "
        "each canary has two candidate labels and a secret fair bit picks the one it is trained with (changing "
        "a bit is a label substitution); the auditor guesses bits from the trained model's log-probabilities "
        "at the canaries, abstaining on the least confident (Steinke, Nasr & Jagielski 2023, one run)",
        f"- lower bound: eps that (eps, delta)-label-DP training cannot exceed given the guesses, at confidence "
        f"{', '.join(str(c) for c in sorted(conf)) or acfg.get('confidence', 0.95)}: per run (Bonferroni over its "
        "guess counts) and family-wise (Bonferroni over every run and guess count of this table; the verdicts use "
        "it); largest detectable: the family-wise bound if every guess were right",
        "- claimed eps: from the accountant for what ran, under each relation (`n/a`: a label randomizer has no "
        "add/remove guarantee; it is exactly eps-label-DP under label substitution)",
        f"- verdicts: `{FAIL}` fails `snakemake audit`; `{ABOVE_ADD_REMOVE}` is printed as a warning",
        f"- seeds: {acfg['seeds']}; grid `{config['grid']}`",
    ]
    if any(r["source"] not in (None, "official") for r in rows):
        lines.append("- **WARNING: some runs use SYNTHETIC stand-in or subset data (smoke profile); not a result.**")
    lines += [
        "",
        "| method | eps target | seed | eps (add/remove) | eps (label subst.) | audited lower bound "
        "(per run / family-wise) | largest detectable | correct / guesses | test acc. (%) | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['label']} | {format_eps(r['target_epsilon'])} | {r['seed']} | {_fmt(r['epsilon_add_or_remove'])} | "
            f"{_fmt(r['epsilon_label_substitution'])} | {_fmt(r['audited_lower_bound'])} / "
            f"{_fmt(r['family_lower_bound'])} | {_fmt(r['largest_detectable'])} | "
            + (f"{r['num_correct']} / {r['num_guesses']}" if r["status"] == "ok" else "-")
            + f" | {_fmt(r['test_accuracy_pct'])} | {r['verdict']} |"
        )
    return "\n".join(lines) + "\n"


def write_table(config: Mapping[str, Any], out_dir: str | os.PathLike) -> list[dict[str, Any]]:
    rows = audit_rows(config)
    out = Path(out_dir)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else ["column"])
    w.writeheader()
    w.writerows(rows)
    write_atomic_text(out / "audit.csv", buf.getvalue())
    write_atomic_text(out / "audit.md", render_markdown(config, rows))
    return rows


def check(csv_path: str | os.PathLike, *, allow_missing: bool = False) -> int:
    """0 when every planned run was audited (unless ``allow_missing``) and no family-wise lower
    bound exceeds its label-DP eps; else prints each failure and returns 1."""
    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    fails = [r for r in rows if r["verdict"] == FAIL]
    warns = [r for r in rows if r["verdict"] == ABOVE_ADD_REMOVE]
    for r in warns:
        print(
            f"WARNING: {r['label']} eps {r['target_epsilon']} seed {r['seed']}: audited lower bound "
            f"{float(r['family_lower_bound']):.3f} exceeds the add/remove eps {float(r['epsilon_add_or_remove']):.3f} "
            "(the paper's convention), within the label-DP eps",
            file=sys.stderr,
        )
    for r in fails:
        print(
            f"PRIVACY TEST FAILED: {r['label']} eps {r['target_epsilon']} seed {r['seed']}: audited lower bound "
            f"{float(r['family_lower_bound']):.3f} > claimed label-substitution eps "
            f"{float(r['epsilon_label_substitution']):.3f}",
            file=sys.stderr,
        )
    missing = [r for r in rows if r["status"] != "ok" or r["verdict"].startswith("not evaluable")]
    for r in missing:
        print(
            f"{'NOTE' if allow_missing else 'AUDIT INCOMPLETE'}: {r['label']} eps {r['target_epsilon']} seed "
            f"{r['seed']}: {r['verdict']}",
            file=sys.stderr,
        )
    print(
        f"audit: {len(rows) - len(missing)} audited runs, {len(fails)} failed, {len(warns)} above the add/remove "
        f"eps, {len(missing)} not run or not evaluable"
    )
    return 1 if fails or (missing and not allow_missing) else 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config-json")
    p.add_argument("--out-dir")
    p.add_argument("--check", metavar="CSV", help="check a written audit table; exit 1 on a failed privacy test")
    p.add_argument("--allow-missing", action="store_true", help="with --check: runs without a record do not fail it")
    a = p.parse_args(argv)
    if a.check:
        return check(a.check, allow_missing=a.allow_missing)
    if not (a.config_json and a.out_dir):
        p.error("--config-json and --out-dir are required (or --check CSV)")
    rows = write_table(json.loads(a.config_json), a.out_dir)
    print(f"wrote {a.out_dir}/audit.md ({len(rows)} rows)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
