"""Fetch rule: verified raw files (or synthetic stand-ins) plus a manifest listing them.

The manifest (written last, atomically) is the rule's output, so a killed fetch leaves no
output and is simply redone.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from labeldp.data.fetch import DataError, fetch_dataset, file_digests
from labeldp.data.rawformats import STANDIN_SIZES, make_standin_raw_files
from labeldp.records import now_utc, write_json_atomic


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--dataset", required=True)
    p.add_argument("--data-dir", required=True)
    p.add_argument(
        "--mirror",
        default=os.environ.get("LABELDP_DATA_MIRROR", ""),
        help="directory of verified raw files (default: env LABELDP_DATA_MIRROR)",
    )
    p.add_argument(
        "--census-path",
        default=os.environ.get("LABELDP_CENSUS_PATH", ""),
        help="the user's IPUMS 1940 extract (default: env LABELDP_CENSUS_PATH)",
    )
    p.add_argument("--pinned-sha256", default="")
    p.add_argument("--standin", action="store_true", help="write tiny SYNTHETIC raw-format files")
    p.add_argument("--standin-train", type=int, default=STANDIN_SIZES[0])
    p.add_argument("--standin-test", type=int, default=STANDIN_SIZES[1])
    p.add_argument("--manifest", required=True)
    a = p.parse_args()
    if a.standin:
        out_dir = Path(a.data_dir) / a.dataset
        out_dir.mkdir(parents=True, exist_ok=True)
        files = make_standin_raw_files(a.dataset, out_dir, n_train=a.standin_train, n_test=a.standin_test, seed=0)
        source = "synthetic_standin"
    else:
        try:
            files = fetch_dataset(
                a.dataset,
                data_dir=a.data_dir,
                mirror=a.mirror or None,
                pinned_sha256=a.pinned_sha256 or None,
                census_path=a.census_path or None,
            )
        except (DataError, ValueError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        source = "official"
    manifest = {
        "dataset": a.dataset,
        "source": source,
        "created": now_utc(),
        "files": [{"path": str(f), **file_digests(f)} for f in files],
    }
    write_json_atomic(a.manifest, manifest)
    print(f"{a.dataset}: {len(files)} files ({source})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
