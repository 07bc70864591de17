"""The raw format of the Criteo Attribution Modeling for Bidding dataset (000 Table 7, 002): the
archive's and its member's names and the member's columns, shared by the preparation
(:mod:`labeldp.data.sources.criteo_attribution`) and the stand-in writer
(:mod:`labeldp.data.rawformats.criteo_attribution_standin`)."""

from __future__ import annotations

__all__ = ["ARCHIVE", "COLUMNS", "MEMBER"]

ARCHIVE = "criteo-research-attribution-dataset.zip"
MEMBER = "criteo_attribution_dataset.tsv.gz"
COLUMNS = (
    "timestamp",
    "uid",
    "campaign",
    "conversion",
    "conversion_timestamp",
    "conversion_id",
    "attribution",
    "click",
    "click_pos",
    "click_nb",
    "cost",
    "cpo",
    "time_since_last_click",
    *(f"cat{i}" for i in range(1, 10)),
)
