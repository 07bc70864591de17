"""Every published cell of 000's tables beside the best complete result the committed tables hold for it.

A dated report's scorecard scores its own tables. A user asking "does the suite reproduce 000 Table 5a's RR at
eps 2?" needs the answer across reports: the cell may have been searched on a GPU in one report and probed with
another optimiser in a second. This package builds that view (issue 29's measure of progress) from the tidy table
CSVs only (each built only from result records and the published values):

- The cells: every published cell of the chosen tables (default 000's Tables 2, 3, 5a and 14) whose value is above
  ``chance_pct`` (an accuracy at chance says nothing of a method); a variant ending in ``reference_only`` (000 Table
  3's "w/ AMP" columns, whose accounting the suite cannot give) is listed apart, never scored
  (:mod:`labeldp.report.published_cells`).
- The evidence of a cell: the rows of any source CSV with the same paper table, dataset, published method and
  variant (tidy ``paper_method`` / ``paper_variant``) and eps, under the paper's selection (tidy ``selection``:
  the configuration with the best test mean, 000 D.2), run in full (every planned run and seed, at least
  ``min_seeds`` seeds), valid accounting, not reference-only, not a validation column, official data in full, on
  the paper's metric, and (for the DP-SGD family) noise calibrated under the paper's neighbouring relation
  (``calibration_relation``, default add-or-remove; a label-DP-exact table calibrated under label substitution is
  another cell).
- The cell's value: the best mean among the rows of tables their report scores (tidy ``scored``: the report's
  protocol, e.g. Table 8's grid searched); the best row of the other tables (experiments: another optimiser, a
  setting chosen on one seed) is shown beside it, never counted. Source table and configuration are printed.
- Within tolerance: ``|best - paper| <= tolerance_points`` (strict: the std is shown, never used to pass).
- A cell outside with an experiment within tolerance: counted as reached by an experiment only where the experiment's
  mean is above the scored best (a best-mean selection over both would pick it); at or below it (the paper's value
  between a worse and a better configuration) it is counted apart (``experiment_below_scored``).
- Why a cell is outside: ``explanations`` maps a cell key (``eps*`` for every eps of the method) to a sentence and
  the report section with the experiment; a cell outside without one says so.

Usage: ``python -m labeldp.report.reproduction_status --config-json '<json>' --reference-dir D --out-dir R <csv...>``
"""

from labeldp.report.reproduction_status.build import DEFAULTS, REQUIRED_FIELDS, Status, build_status, summarise
from labeldp.report.reproduction_status.cli import main
from labeldp.report.reproduction_status.markdown import render_markdown

__all__ = ["DEFAULTS", "REQUIRED_FIELDS", "Status", "build_status", "main", "render_markdown", "summarise"]
