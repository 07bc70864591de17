"""The 1940 Census "fetch": locate and check the manually made IPUMS extract.

The extract cannot be downloaded (an IPUMS account is needed): :func:`fetch_census_extract`
checks that the configured file exists, has the label column (CSV) or its DDI codebook
(fixed-width), and matches a pinned sha256 if one is given; otherwise it raises
:class:`DataMissingError` with exact instructions. Called by
:func:`labeldp.data.fetch.fetch_dataset`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from labeldp.data.fetch.checksums import DataMissingError, verify_file
from labeldp.data.fetch.transfer import log
from labeldp.data.rawformats.ipums_extract import (
    CENSUS1940_CATEGORICAL_FEATURES,
    CENSUS1940_DEFAULT_FILENAME,
    CENSUS1940_LABEL,
    CENSUS1940_NUMERICAL_FEATURES,
)
from labeldp.data.registry import DatasetSpec


def census_ddi_path(path: Path) -> Path:
    name = path.name
    for suffix in (".gz", ".dat"):
        if name.lower().endswith(suffix):
            name = name[: -len(suffix)]
    return path.with_name(name + ".xml")


def census_header(path: Path) -> list[str]:
    import gzip

    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    opener = gzip.open if gz else open
    with opener(path, "rt", encoding="latin1", newline="") as fh:  # type: ignore[operator]
        first = fh.readline()
    return [c.strip().strip('"').upper() for c in first.split(",")]


def fetch_census_extract(
    spec: DatasetSpec, data_dir: Path, census_path: str | os.PathLike | None, pinned: str | None, quiet: bool
) -> list[Path]:
    path = Path(census_path) if census_path else data_dir / spec.name / CENSUS1940_DEFAULT_FILENAME
    where = (
        f"Put the extract at: {path}\n(that is the configured census_path"
        + ("" if census_path else ", here the default <data_dir>/census1940/" + CENSUS1940_DEFAULT_FILENAME)
        + "; set census_path in the workflow config to use another location)."
    )
    if not path.is_file():
        raise DataMissingError(
            f"census1940: the IPUMS 1940 full-count extract was not found at {path}.\n\n"
            f"{spec.manual_instructions}\n{where}"
        )
    files = [path]
    lower = path.name.lower()
    if ".csv" in lower:
        columns = census_header(path)
        if CENSUS1940_LABEL not in columns:
            raise DataMissingError(
                f"census1940: {path} has no {CENSUS1940_LABEL} column (header: {columns[:30]}). "
                f"Make a new IPUMS extract that includes {CENSUS1940_LABEL}.\n\n{spec.manual_instructions}\n{where}"
            )
        absent = [v for v in CENSUS1940_CATEGORICAL_FEATURES + CENSUS1940_NUMERICAL_FEATURES if v not in columns]
        if absent:
            print(
                f"[labeldp.data] warning: {path} lacks the default census features {absent}; fine only if "
                "the workflow config selects other features.",
                file=sys.stderr,
            )
    elif ".dat" in lower:
        ddi = census_ddi_path(path)
        if not ddi.is_file():
            raise DataMissingError(
                f"census1940: {path} is a fixed-width IPUMS file, which cannot be read without its DDI "
                f"codebook; expected it at {ddi} (download the 'DDI' link next to the extract on IPUMS).\n\n"
                f"{spec.manual_instructions}\n{where}"
            )
        if f'name="{CENSUS1940_LABEL}"' not in ddi.read_text(encoding="utf-8", errors="replace"):
            raise DataMissingError(
                f"census1940: the DDI codebook {ddi} does not define {CENSUS1940_LABEL}; the extract lacks the "
                f"label variable.\n\n{spec.manual_instructions}\n{where}"
            )
        files.append(ddi)
    else:
        raise DataMissingError(
            f"census1940: {path} is neither an IPUMS CSV (.csv / .csv.gz) nor a fixed-width file "
            f"(.dat / .dat.gz with its .xml DDI codebook).\n\n{spec.manual_instructions}\n{where}"
        )
    if pinned:
        verify_file(path, sha256=pinned)
    log(f"census extract {path} found" + (" and verified" if pinned else ""), quiet)
    return files
