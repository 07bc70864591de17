"""Adds every record's epsilon under each neighbouring relation (no retraining).

Rewrites, atomically and in place, each result record below the given directories whose
privacy section lacks ``epsilon_by_relation`` (labeldp.accounting.reaccount). Example, the
committed reports:

    python workflow/scripts/reaccount_records.py reports/*/results reports/*/ablation/results

Then rebuild the tables with the config that made them (see each report's README).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from labeldp import records  # noqa: E402
from labeldp.accounting.reaccount import reaccount_record  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dirs", nargs="+", help="directories searched for result records (*.json)")
    p.add_argument("--dry-run", action="store_true", help="report what would change, write nothing")
    a = p.parse_args(argv)
    revision = records.git_revision(REPO).get("commit")
    changed = unchanged = 0
    for d in a.dirs:
        if not Path(d).is_dir():
            print(f"error: {d} is not a directory of result records", file=sys.stderr)
            return 2
        for path in records.record_paths(d):
            rec, did = reaccount_record(records.read_record(path), revision=revision)
            if did:
                changed += 1
                if not a.dry_run:
                    records.write_record(path, rec)
                by_rel = rec["privacy"]["epsilon_by_relation"]
                print(
                    f"{path}: "
                    + ", ".join(
                        f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in sorted(by_rel.items())
                    )
                )
            else:
                unchanged += 1
    print(f"{'would re-account' if a.dry_run else 're-accounted'} {changed} records; {unchanged} already complete")
    return 0


if __name__ == "__main__":
    sys.exit(main())
