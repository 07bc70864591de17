"""Every published cell of 000's tables beside the best complete result any committed table holds for it.

A dated report's scorecard scores its own tables. A user asking "does the suite reproduce 000 Table 5a's RR at
eps 2?" needs the answer across reports: the cell may have been searched on a GPU in one report and probed with
another optimiser in a second. This module builds that view (issue 29's measure of progress) from the tidy table
CSVs only (each built only from result records and the published values):

- The cells: every published cell of the chosen tables (default 000's Tables 2, 3, 5a and 14) whose value is above
  ``chance_pct`` (an accuracy at chance says nothing of a method); a variant ending in ``reference_only`` (000 Table
  3's "w/ AMP" columns, whose accounting the suite cannot give) is listed apart, never scored.
- The evidence of a cell: the rows of any source CSV with the same paper table, dataset, published method and
  variant (tidy ``paper_method`` / ``paper_variant``) and eps, under the paper's selection (tidy ``selection``:
  the configuration with the best test mean, 000 D.2), run in full (every planned run and seed, at least
  ``min_seeds`` seeds), valid accounting, not reference-only, on the paper's metric.
- The cell's value: the best mean among them, as 000 D.2 selects over its grid; the search space is therefore the
  union of what the sources searched (Table 8's grid, or a setting off it that an experiment table tried), and the
  source table and its configuration are printed with every cell so the user sees which.
- Within tolerance: ``|best - paper| <= tolerance_points`` (strict: the std is shown, never used to pass).
- Why a cell is outside: ``explanations`` maps a cell key (:func:`cell_key`; ``eps*`` for every eps of the method)
  to a sentence and the report section with the experiment; a cell outside without one says so.

Usage: ``python -m labeldp.report.reproduction_status --config-json '<json>' --reference-dir D --out-dir R <csv...>``
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from labeldp.report.outputs import write_atomic_text, write_csv
from labeldp.report.reference import load_reference

__all__ = [
    "DEFAULTS",
    "PaperCell",
    "build_status",
    "cell_key",
    "load_explanations",
    "paper_cells",
    "render_markdown",
    "summarise",
]

#: The config block ``reproduction_status``'s defaults.
DEFAULTS = {
    "tables": ["2", "3", "5a", "14"],
    "metric": "test_accuracy_pct",
    "chance_pct": 15.0,
    "min_seeds": 3,
    "tolerance_points": 2.0,
}

#: Tidy CSV fields a source must have (a CSV built before them is named, with the fix, instead of being read).
REQUIRED_FIELDS = ("paper_method", "paper_variant", "selection", "column_metric")

REFERENCE_ONLY_SUFFIX = "reference_only"


@dataclasses.dataclass(frozen=True)
class PaperCell:
    """One published cell."""

    table: str
    dataset: str
    method: str
    variant: str
    epsilon: float
    value: float

    @property
    def reference_only(self) -> bool:
        """000 Table 3's "w/ AMP" columns: quoted from the paper, never computed by the suite."""
        return self.variant.endswith(REFERENCE_ONLY_SUFFIX)


def cell_key(table: str, dataset: str, method: str, variant: str, epsilon: float | str) -> str:
    """The key of a cell in ``explanations``: ``<table>/<dataset>/<method>[:<variant>]/eps<eps>``
    (e.g. ``5a/mnist/rr_debiased/eps2``; ``eps*`` matches every eps)."""
    eps = epsilon if isinstance(epsilon, str) else f"{epsilon:g}"
    return f"{table}/{dataset}/{method}{':' + variant if variant else ''}/eps{eps}"


def paper_cells(ref: Sequence[Mapping[str, Any]], *, tables: Sequence[str], metric: str) -> list[PaperCell]:
    """The distinct published cells of ``tables`` on ``metric`` (the reference file repeats some rows).

    Args:
      ref: rows of :func:`labeldp.report.reference.load_reference`.
      tables: paper table ids (``"5a"``).
      metric: the published metric (``test_accuracy_pct``).

    Returns:
      One cell per (table, dataset, method, variant, eps), in the reference's order; non-private rows (eps inf)
      are left out.
    """
    seen: dict[tuple, PaperCell] = {}
    for r in ref:
        if r["table"] not in tables or r["metric"] != metric or r["epsilon"] == "inf":
            continue
        c = PaperCell(
            r["table"], r["dataset"], r["method"], r.get("variant") or "", float(r["epsilon"]), float(r["value"])
        )
        key = (c.table, c.dataset, c.method, c.variant, c.epsilon)
        if key in seen and not math.isclose(seen[key].value, c.value):
            raise ValueError(f"the reference gives {cell_key(*key)} two values ({seen[key].value}, {c.value})")
        seen.setdefault(key, c)
    return list(seen.values())


def load_explanations(path: str | Path | None) -> dict[str, dict[str, str]]:
    """``{cell key: {"why": sentence, "section": report section}}`` from a YAML mapping (None: none).

    Raises:
      ValueError: an entry without ``why`` (names the key and the fix).
    """
    if not path:
        return {}
    data = yaml.safe_load(Path(path).read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of cell keys (e.g. '5a/mnist/rr/eps2') to {{why, section}}")
    out = {}
    for key, entry in data.items():
        if not isinstance(entry, dict) or not entry.get("why"):
            raise ValueError(f"{path}: entry {key!r} needs a 'why' sentence (and optionally the report 'section')")
        out[str(key)] = {"why": str(entry["why"]), "section": str(entry.get("section") or "")}
    return out


def _number(v: Any) -> float | None:
    if v in (None, "", "None"):
        return None
    x = float(v)
    return None if math.isnan(x) else x


def _is_true(v: Any) -> bool:
    return str(v).strip().lower() == "true"


def _complete(row: Mapping[str, Any], *, min_seeds: int) -> bool:
    n_runs, planned = _number(row.get("n_runs")), _number(row.get("n_planned_runs"))
    if n_runs is not None and planned is not None and n_runs < planned:
        return False  # a partly searched grid
    return int(_number(row.get("n_missing_seeds")) or 0) == 0 and int(_number(row.get("n_seeds")) or 0) >= min_seeds


def _evidence(row: Mapping[str, Any], *, metric: str, min_seeds: int) -> bool:
    return (
        row.get("status") == "ok"
        and row.get("selection") == "paper"
        and row.get("metric") == metric
        and (row.get("column_metric") or metric) == metric
        and _is_true(row.get("valid"))
        and not _is_true(row.get("reference_only"))
        and _number(row.get("mean")) is not None
        and _complete(row, min_seeds=min_seeds)
    )


def _source_name(path: Path) -> str:
    """``<report>/<table>`` for ``reports/<report>/tables/<table>.csv``."""
    return f"{path.parent.parent.name}/{path.stem}"


def _explanation(explanations: Mapping[str, Mapping[str, str]], cell: PaperCell) -> Mapping[str, str] | None:
    args = (cell.table, cell.dataset, cell.method, cell.variant)
    return explanations.get(cell_key(*args, cell.epsilon)) or explanations.get(cell_key(*args, "*"))


def build_status(
    *,
    csv_paths: Sequence[Path],
    ref: Sequence[Mapping[str, Any]],
    settings: Mapping[str, Any] | None = None,
    explanations: Mapping[str, Mapping[str, str]] | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per published cell, with its best complete evidence.

    Args:
      csv_paths: tidy table CSVs (any report's).
      ref: the published values (:func:`labeldp.report.reference.load_reference`).
      settings: the config block ``reproduction_status`` (:data:`DEFAULTS` fill what it omits).
      explanations: :func:`load_explanations`'s mapping.

    Returns:
      (rows, stale): ``stale`` names each source CSV of the chosen tables built before the fields this view needs
      (not read); a CSV of other tables is skipped.

    Raises:
      ValueError: an explanation whose key is no cell of the chosen tables (names the key).
    """
    s = {**DEFAULTS, **dict(settings or {})}
    explanations = dict(explanations or {})
    cells = paper_cells(ref, tables=[str(t) for t in s["tables"]], metric=s["metric"])
    known = {cell_key(c.table, c.dataset, c.method, c.variant, e) for c in cells for e in (c.epsilon, "*")}
    unknown = sorted(set(explanations) - known)
    if unknown:
        raise ValueError(
            f"explanations name no published cell of tables {s['tables']}: {unknown} (keys look like "
            "'5a/mnist/rr_debiased/eps2' or '3/mnist/labeldp_pro_selfspan:no_amp/eps*')"
        )
    by_cell: dict[tuple, list[dict[str, Any]]] = {}
    stale = []
    for p in map(Path, csv_paths):
        with open(p, newline="") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
        if not any(r.get("paper_table") in s["tables"] for r in rows):
            continue  # another paper table (or an empty one): nothing to read
        if any(field not in (reader.fieldnames or ()) for field in REQUIRED_FIELDS):
            stale.append(str(p))
            continue
        for r in rows:
            if r.get("paper_table") not in s["tables"] or not _evidence(
                r, metric=s["metric"], min_seeds=s["min_seeds"]
            ):
                continue
            key = (r["paper_table"], r["dataset"], r["paper_method"], r["paper_variant"], float(r["epsilon"]))
            by_cell.setdefault(key, []).append({**r, "source": _source_name(p)})
    out = []
    for c in cells:
        row: dict[str, Any] = {
            "paper_table": c.table,
            "dataset": c.dataset,
            "paper_method": c.method,
            "paper_variant": c.variant,
            "epsilon": f"{c.epsilon:g}",
            "paper": c.value,
            "key": cell_key(c.table, c.dataset, c.method, c.variant, c.epsilon),
            "status": "",
            "best": None,
            "std": None,
            "n_seeds": None,
            "abs_diff": None,
            "source": "",
            "column": "",
            "variant": "",
            "best_hparams": "",
            "n_candidates": 0,
            "why": "",
            "section": "",
        }
        found = by_cell.get((c.table, c.dataset, c.method, c.variant, c.epsilon), [])
        row["n_candidates"] = len(found)
        if c.reference_only:
            row["status"] = "reference only"
        elif c.value <= float(s["chance_pct"]):
            row["status"] = "at chance"
        elif not found:
            row["status"] = "not run"
        else:
            best = max(found, key=lambda r: float(r["mean"]))
            mean = float(best["mean"])
            row.update(
                best=mean,
                std=_number(best.get("std")),
                n_seeds=int(float(best["n_seeds"])),
                abs_diff=abs(mean - c.value),
                source=best["source"],
                column=best["column"],
                variant=best["variant"],
                best_hparams=best.get("best_hparams") or "",
            )
            row["status"] = "within" if row["abs_diff"] <= float(s["tolerance_points"]) else "outside"
        if row["status"] in ("outside", "not run"):
            e = _explanation(explanations, c)
            row["why"], row["section"] = (e["why"], e["section"]) if e else ("", "")
        out.append(row)
    return out, stale


def summarise(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per paper table (and ``all``): the scored cells (above chance, computable), those with evidence, within
    tolerance, and the cells outside or not run that no explanation covers."""
    out = []
    tables = list(dict.fromkeys(r["paper_table"] for r in rows))
    for t in [*tables, "all"]:
        rs = [r for r in rows if t in ("all", r["paper_table"])]
        scored = [r for r in rs if r["status"] in ("within", "outside", "not run")]
        out.append(
            {
                "paper_table": t,
                "cells": len(scored),
                "with_results": sum(r["status"] in ("within", "outside") for r in scored),
                "within": sum(r["status"] == "within" for r in scored),
                "outside": sum(r["status"] == "outside" for r in scored),
                "not_run": sum(r["status"] == "not run" for r in scored),
                "unexplained": sum(r["status"] in ("outside", "not run") and not r["why"] for r in scored),
                "at_chance": sum(r["status"] == "at chance" for r in rs),
                "reference_only": sum(r["status"] == "reference only" for r in rs),
            }
        )
    return out


def _fmt(x: Any, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def render_markdown(rows: Sequence[Mapping[str, Any]], stale: Sequence[str], settings: Mapping[str, Any]) -> str:
    """The status as Markdown: the definition, the per-table counts, the stale sources, then every cell."""
    s = {**DEFAULTS, **dict(settings or {})}
    lines = [
        "# Reproduction status: every published cell against the best complete result of any committed table",
        "",
        f"- cells: the published cells of 000 Tables {', '.join(map(str, s['tables']))} ({s['metric']}) above "
        f"{s['chance_pct']:g}% (chance); 'w/ AMP' reference-only columns listed, never scored",
        "- evidence: rows of the source tables below under the paper's selection (best test mean over the table's "
        f"search, 000 D.2), searched in full with at least {s['min_seeds']} seeds each, valid accounting; a cell "
        "takes the best of them, so its search space is the union of its sources' (Table 8's grid or settings off "
        "it: the source and configuration say which); held-out selections are not counted here (each report's "
        "scorecard shows them)",
        f"- within: |best - paper| <= {s['tolerance_points']:g} points (strict; the std is shown, never used to pass)",
        "- why: the experiment that explains a cell outside or not run (the report section named); 'no explanation "
        "yet' where none is written up",
        "- built only from the tables' tidy CSVs (themselves built only from result records and the published values)",
        "",
        "| paper table | cells | with results | within | outside | not run | outside or not run, unexplained | at chance (not scored) | reference only |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in summarise(rows):
        lines.append(
            f"| {r['paper_table']} | {r['cells']} | {r['with_results']} | {r['within']} | {r['outside']} | "
            f"{r['not_run']} | {r['unexplained']} | {r['at_chance']} | {r['reference_only']} |"
        )
    if stale:
        lines += ["", "Not read (built before the fields this view needs; rebuild them with their report's command):"]
        lines += [f"- `{p}`" for p in stale]
    lines += [
        "",
        "| cell | paper | best (mean +- std, seeds) | diff | status | source (table, column, variant, configuration) | why |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        best = "-" if r["best"] is None else f"{r['best']:.1f} +- {_fmt(r['std'])} ({r['n_seeds']})"
        src = f"{r['source']}, {r['column']}, {r['variant']}, {r['best_hparams']}" if r["source"] else "-"
        why = r["why"] + (f" (section: {r['section']})" if r["section"] else "") if r["why"] else ""
        if r["status"] in ("outside", "not run") and not why:
            why = "no explanation yet"
        lines.append(
            f"| {r['key']} | {r['paper']:g} | {best} | {_fmt(r['abs_diff'])} | {r['status']} | "
            f"{src.replace('|', '/')} | {why.replace('|', '/')} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config-json", required=True, help="the workflow config (its block reproduction_status)")
    p.add_argument("--reference-dir", required=True)
    p.add_argument("--out-dir", required=True)
    p.add_argument("csvs", nargs="+", help="tidy table CSVs of any report")
    a = p.parse_args(argv)
    settings = json.loads(a.config_json).get("reproduction_status") or {}
    rows, stale = build_status(
        csv_paths=[Path(c) for c in a.csvs],
        ref=load_reference(a.reference_dir),
        settings=settings,
        explanations=load_explanations(settings.get("explanations")),
    )
    out = Path(a.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "reproduction_status.csv", rows)
    write_atomic_text(out / "reproduction_status.md", render_markdown(rows, stale, settings))
    print(f"wrote {out / 'reproduction_status.md'}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
