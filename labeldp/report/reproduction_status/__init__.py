"""Every published cell of 000's tables beside the best complete result the committed tables hold for it.

What a cell, its evidence and its status are: :mod:`labeldp.report.reproduction_status.build` (also printed by
``python -m labeldp.report.reproduction_status --help``).

Usage: ``python -m labeldp.report.reproduction_status --config-json '<json>' --reference-dir D --out-dir R <csv...>``
"""

from labeldp.report.reproduction_status.build import DEFAULTS, REQUIRED_FIELDS, Status, build_status, summarise
from labeldp.report.reproduction_status.cli import main
from labeldp.report.reproduction_status.markdown import render_markdown

__all__ = ["DEFAULTS", "REQUIRED_FIELDS", "Status", "build_status", "main", "render_markdown", "summarise"]
