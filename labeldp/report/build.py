"""The ``table`` and ``figure`` rules' command: builds one configured table or figure from records.

Usage::

    python -m labeldp.report.build --table table5_mnist --config-json '<config>' --out-dir reports/tables \
        [--plot-dir reports/figures | --figure]

A table of cells (no ``renderer``) is built by :func:`labeldp.report.tables.write_table`; a table or figure with
a ``renderer`` by that renderer's module (:data:`RENDERERS`), each of which reads the cells or records of
the tables it names. This module imports them all; none of them imports it, so there is no cycle.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable, Sequence

from labeldp.report.confusion import main_confusion
from labeldp.report.eps_curves import main_eps_curves
from labeldp.report.intersection import main_intersection
from labeldp.report.learning_curves import main_learning_curves
from labeldp.report.lpmst_sweeps import main_grid_heatmap, main_top_k_violin
from labeldp.report.not_run import main_not_run
from labeldp.report.regression import main_regression
from labeldp.report.run_times import main_run_times
from labeldp.report.tables import write_table
from labeldp.report.training_curves import main_training_curves

__all__ = ["RENDERERS", "main"]

#: ``renderer`` -> ``(config, table, out_dir, plot_dir) -> exit status``.
RENDERERS: dict[str, Callable[..., int]] = {
    "run_times": main_run_times,  # 000 Table 11, from other tables' records
    "intersection": main_intersection,  # 000 Table 12, from other tables' cells
    "training_curves": main_training_curves,  # 000 Figure 2, from a table's records
    "confusion_matrices": main_confusion,  # 000 Figure 4, from a table's records
    "learning_curves": main_learning_curves,  # 001 Figure 3 and per-epoch diagnostics, from a table's records
    "grid_heatmap": main_grid_heatmap,  # 001 Figure 4, from tables' records
    "top_k_violin": main_top_k_violin,  # 001 Figure 5, from tables' records
    "eps_curves": main_eps_curves,  # 002's figures, from other tables' cells
    "regression": main_regression,  # 003's figures and Table G.3
    "not_run": main_not_run,  # proprietary data: "not run" beside the paper's values
}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--table", required=True)
    p.add_argument("--config-json", required=True)
    p.add_argument("--out-dir", required=True)
    p.add_argument("--figure", action="store_true", help="a figure target: draw <table>.png/.pdf in --out-dir")
    p.add_argument("--plot-dir", default=None, help="a table target: also draw <table>.png/.pdf there")
    args = p.parse_args(argv)
    config = json.loads(args.config_json)
    if args.table not in config["tables"]:
        raise SystemExit(f"error: unknown table {args.table!r}; known: {sorted(config['tables'])}")
    renderer = config["tables"][args.table].get("renderer")
    plot_dir = Path(args.plot_dir) if args.plot_dir else None
    if renderer is not None:
        return RENDERERS[renderer](config, args.table, Path(args.out_dir), plot_dir)
    return write_table(config, args.table, Path(args.out_dir), figure=args.figure, plot_dir=plot_dir)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
