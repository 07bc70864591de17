"""A table's scope in its report: whether the report's scorecard scores it, and what data its records ran on.

Both are written into every tidy table CSV (:func:`labeldp.report.render.tidy_rows`), so that a reader of the CSV
alone (the reproduction status, :mod:`labeldp.report.reproduction_status`) tells a report's protocol tables from its
experiments, and official data from stand-ins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["records_data_source", "scored_table"]


def scored_table(config: Mapping[str, Any], table: str) -> bool:
    """Whether a report's scorecard scores ``table``'s cells.

    Args:
      config: the workflow config (its ``scorecard_tables``: a dated report's protocol tables; absent: all).
      table: a table id.

    Returns:
      True for a table of the report's protocol; False for its experiment tables (a setting found off the paper's
      grid, or chosen on one seed), whose cells are shown but not the paper's protocol.
    """
    chosen = config.get("scorecard_tables")
    return chosen is None or table in chosen


def records_data_source(records: Sequence[Mapping[str, Any]]) -> str:
    """What data a table's records ran on.

    Args:
      records: the table's result records (every column's, the non-private one's included).

    Returns:
      ``official`` (every record on the official data in full), ``official subset`` (some on a subset of it),
      ``stand-in`` (some on synthetic stand-in data, the smoke profile's; this wins over a subset), or ``""`` (no
      record).
    """
    if not records:
        return ""
    if any(r["dataset"].get("source") != "official" for r in records):
        return "stand-in"
    if any(r["dataset"].get("subset") for r in records):
        return "official subset"
    return "official"
