"""``python -m labeldp.report.reproduction_status``: the status of every published cell, as CSV and Markdown.

Usage: ``python -m labeldp.report.reproduction_status --config-json '<json>' --reference-dir D --out-dir R <csv...>``
(the config's block ``reproduction_status`` holds the settings and the explanations file; see
:mod:`labeldp.report.reproduction_status.build`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Sequence

import labeldp.report.reproduction_status.build as status_definition
from labeldp.report.outputs import write_atomic_text, write_csv
from labeldp.report.published_cells import load_explanations
from labeldp.report.reference import load_reference
from labeldp.report.reproduction_status.build import build_status
from labeldp.report.reproduction_status.markdown import render_markdown

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m labeldp.report.reproduction_status``: writes ``reproduction_status.{md,csv}`` to ``--out-dir``."""
    p = argparse.ArgumentParser(
        prog="python -m labeldp.report.reproduction_status",
        description=status_definition.__doc__,  # what a cell, its evidence and its status are
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config-json", required=True, help="the workflow config (its block reproduction_status)")
    p.add_argument("--reference-dir", required=True)
    p.add_argument("--out-dir", required=True)
    p.add_argument("csvs", nargs="+", help="tidy table CSVs of any report")
    a = p.parse_args(argv)
    settings = json.loads(a.config_json).get("reproduction_status") or {}
    status = build_status(
        csv_paths=[Path(c) for c in a.csvs],
        ref=load_reference(a.reference_dir),
        settings=settings,
        explanations=load_explanations(settings.get("explanations")),
    )
    out = Path(a.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "reproduction_status.csv", status.rows)
    write_atomic_text(out / "reproduction_status.md", render_markdown(status=status, settings=settings))
    print(f"wrote {out / 'reproduction_status.md'}")
    return 0
