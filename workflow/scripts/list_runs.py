"""Prints the record paths of a slice of a table's planned runs (Snakemake targets).

Example: run DP-SGD and LabelDP-Pro of Table 5a at eps 0.1 and 1 only:
    snakemake --cores 2 $(python workflow/scripts/list_runs.py --table table5_mnist \\
        --methods dpsgd,labeldp_pro --eps 0.1,1.0 --configfile workflow/config/quick.yaml)
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from labeldp import plan  # noqa: E402
from labeldp.config import load_config, validate_config  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--table", required=True)
    p.add_argument("--methods", default="", help="comma-separated method ids (default: all)")
    p.add_argument("--eps", default="", help="comma-separated epsilons (default: all; 'inf' = non-private)")
    p.add_argument("--configfile", action="append", default=[], help="config overrides, in order")
    a = p.parse_args()
    cfg = load_config(REPO / "workflow/config/config.yaml", *a.configfile)
    validate_config(cfg, REPO / "workflow/schemas/config.schema.yaml")
    methods = set(filter(None, a.methods.split(",")))
    eps = {math.inf if e == "inf" else float(e) for e in filter(None, a.eps.split(","))}
    for r in plan.table_runs(cfg, a.table):
        if methods and r.spec.method not in methods:
            continue
        if eps and r.spec.epsilon not in eps:
            continue
        print(r.record_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
