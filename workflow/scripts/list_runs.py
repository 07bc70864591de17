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
from labeldp.config import load_workflow_config  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--table", required=True)
    p.add_argument("--methods", default="", help="comma-separated method ids (default: all)")
    p.add_argument("--eps", default="", help="comma-separated epsilons (default: all; 'inf' = non-private)")
    p.add_argument("--configfile", action="append", default=[], help="config overrides, in order")
    a = p.parse_args()
    cfg = load_workflow_config(*a.configfile)
    methods = set(filter(None, a.methods.split(",")))
    eps = {math.inf if e == "inf" else float(e) for e in filter(None, a.eps.split(","))}
    for r in plan.select_runs(cfg, [a.table], methods=methods, epsilons=eps):
        print(r.record_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
