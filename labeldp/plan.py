"""From the workflow config to the list of runs each table needs (grids as data).

The Snakefile and the report builders both call this module, so a table is built from exactly
the runs that were planned for it. A run is planned only if its method is implemented (see
:mod:`labeldp.methods.registry`) and its dataset can be prepared; every other cell of a table
is reported as "not run" with the reason.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import math
from typing import Any, Mapping

from labeldp.config_error import ConfigError
from labeldp.methods import registry
from labeldp.methods.base import RunSpec
from labeldp.variants import variant_options

# The data layout (dataset kinds, raw / prepared paths) lives in labeldp.data_layout; re-exported here.
from labeldp.data_layout import (  # noqa: E402,F401
    DATASET_KINDS,
    PREPARABLE_KINDS,
    RAW_SUBDIRS,
    data_mirror,
    data_source,
    data_tag,
    dataset_cfg,
    dataset_kind,
    dataset_runnable,
    prepared_path,
    raw_dir,
    raw_root,
)

# A run's ids (the record paths) live in labeldp.run_identity; re-exported here.
from labeldp import run_identity  # noqa: E402
from labeldp.run_identity import (  # noqa: E402,F401
    cell_path,
    format_eps,
    grid_point_path,
    hp_id,
    optional_hyperparameters,
    run_id,
    seed_part,
)


@dataclasses.dataclass(frozen=True)
class PlannedRun:
    """A run and where its record goes."""

    spec: RunSpec
    record_path: str
    prepared_path: str

    @property
    def run_id(self) -> str:
        return run_id(self.spec)


@dataclasses.dataclass(frozen=True)
class Column:
    """One column of a table: a (method, variant) and its published counterpart."""

    id: str
    label: str
    method: str
    variant: str
    ref_method: str | None
    ref_variant: str | None
    reference_only: bool = False
    validation: bool = False
    fixed_hparams: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    hparam_filter: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    # a published value quoted from another paper (e.g. PATE-FM in 000 Table 6): its source; such a
    # column is never run, its cells show the quoted value labelled as quoted
    quoted: str | None = None
    # why this config does not run the column (e.g. its cost on this machine): no run is planned
    # and every cell says ``not run`` with this reason
    not_run: str | None = None


def columns(table_cfg: Mapping[str, Any]) -> list[Column]:
    out = []
    for c in table_cfg.get("columns", []):
        out.append(
            Column(
                id=c["id"],
                label=c.get("label", c["id"]),
                method=c["method"],
                variant=c.get("variant", "default"),
                ref_method=c.get("ref_method", c["method"]),
                ref_variant=c.get("ref_variant"),
                reference_only=bool(c.get("reference_only", False)),
                validation=bool(c.get("validation", False)),
                fixed_hparams=dict(c.get("fixed_hparams", {})),
                hparam_filter=dict(c.get("hparam_filter", {})),
                quoted=c.get("quoted"),
                not_run=c.get("not_run"),
            )
        )
    return out


def grid_for(config: Mapping[str, Any], table_cfg: Mapping[str, Any]) -> Mapping[str, list]:
    grids = config["grids"][config["grid"]]
    name = table_cfg["grid"]
    if name not in grids:
        raise ConfigError(f"grids.{config['grid']} has no grid {name!r} (needed by a table); add it")
    return grids[name]


def variant_delta(config: Mapping[str, Any], method: str, variant: str, value: Any) -> float:
    """The target delta of a variant's private runs: its option ``delta`` (000 Table 12(b) varies delta;
    the variant's name keeps its records apart, delta is not in the run id), else the config's ``delta``."""
    if value is None:
        return float(config["delta"])
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < float(value) < 1.0:
        raise ConfigError(f"variants.{method}.{variant}.delta must be a number in (0, 1), got {value!r}")
    return float(value)


def method_axes(method: str, grid: Mapping[str, Any] | None = None, column: Column | None = None) -> tuple[str, ...]:
    """The grid axes a method is searched over: its ``HYPERPARAMETERS``, then those of its
    ``OPTIONAL_HYPERPARAMETERS`` that ``grid`` lists or ``column`` fixes (see
    :mod:`labeldp.methods.base`)."""
    optional = run_identity.optional_hyperparameters(method)  # one name for tests to patch
    fixed = column.fixed_hparams if column is not None else {}
    extra = tuple(a for a in optional if a in (grid or {}) or a in fixed)
    return tuple(registry.declared(method, "HYPERPARAMETERS")) + extra


def grid_points(grid: Mapping[str, list], axes: tuple[str, ...], column: Column) -> list[dict[str, Any]]:
    values = []
    for ax in axes:
        if ax in column.fixed_hparams:
            values.append([column.fixed_hparams[ax]])
        elif ax in grid:
            vals = list(grid[ax])
            if ax in column.hparam_filter:
                flt = column.hparam_filter[ax]
                vals = [v for v in vals if _passes(v, flt)]
            values.append(vals)
        else:
            raise ConfigError(f"the grid has no axis {ax!r}, which the method needs; add it to the grid")
    return [dict(zip(axes, combo)) for combo in itertools.product(*values)]


def _passes(value: Any, flt: Mapping[str, Any]) -> bool:
    if "lt" in flt and not value < flt["lt"]:
        return False
    if "le" in flt and not value <= flt["le"]:
        return False
    return True


def cell_runs(config: Mapping[str, Any], table: str, column: Column, eps: float) -> list[PlannedRun]:
    """Every run (grid point x seed) behind one cell."""
    tcfg = config["tables"][table]
    dataset = tcfg["dataset"]
    grid = grid_for(config, tcfg)
    axes = method_axes(column.method, grid, column)
    options = variant_options(config, column.method, column.variant)
    delta = 0.0 if math.isinf(eps) else variant_delta(config, column.method, column.variant, options.pop("delta", None))
    relation = calibration_relation(config, table, column.method)
    relation = None if relation == "add_or_remove" else relation  # the spec's default (RunSpec)
    out = []
    data_path = prepared_path(config, dataset)
    results_dir = str(config["results_dir"])
    seeds = table_seeds(config, table)
    for hp in grid_points(grid, axes, column):
        point_dir = None  # the grid point's directory, the same for every seed (run_identity.grid_point_path)
        for seed in seeds:
            spec = RunSpec(
                dataset=dataset,
                method=column.method,
                variant=column.variant,
                epsilon=eps,
                delta=delta,
                seed=int(seed),
                hparams=hp,
                options=options,
                accountant=config["accountant"],
                profile=config["profile"],
                sampling=config.get("sampling", "poisson"),
                calibration_relation=relation,
            )
            if point_dir is None:
                point_dir = os.path.join(results_dir, grid_point_path(spec))
            path = os.path.join(point_dir, f"{seed_part(spec.seed)}.json")
            out.append(PlannedRun(spec=spec, record_path=path, prepared_path=data_path))
    return out


def table_seeds(config: Mapping[str, Any], table: str) -> list[int]:
    """The seeds of a table's runs: its own ``seeds`` (003's figures use 10), else the config's."""
    return [int(s) for s in (config["tables"][table].get("seeds") or config["seeds"])]


def calibration_relation(config: Mapping[str, Any], table: str, method: str) -> str | None:
    """The relation a table's runs of ``method`` calibrate their noise under, or None.

    Only methods whose noise the accountant calibrates (``CALIBRATES_WITH_ACCOUNTANT``) have
    one: the table's ``calibration_relation``, else the config's, else ``add_or_remove`` (the
    papers' convention). Label randomizers are exact per label and share their records
    between tables of either relation.
    """
    if not registry.is_implemented(method):
        return None
    if not registry.declared(method, "CALIBRATES_WITH_ACCOUNTANT", False):
        return None
    tcfg = config["tables"][table]
    return tcfg.get("calibration_relation") or config.get("calibration_relation") or "add_or_remove"


def table_relation(config: Mapping[str, Any], table: str) -> str:
    """The calibration relation a table states in its header (its own, else the config's)."""
    return config["tables"][table].get("calibration_relation") or config.get("calibration_relation") or "add_or_remove"


def cell_status(config: Mapping[str, Any], table: str, column: Column) -> tuple[bool, str]:
    """Whether a column can run here, and if not, why (shown in the table)."""
    tcfg = config["tables"][table]
    if column.quoted:
        return False, f"quoted from {column.quoted}, not run here"
    if column.not_run:
        return False, f"not run in this config: {column.not_run}"
    ok, why = dataset_runnable(config, tcfg["dataset"])
    if not ok:
        return False, why
    if not registry.is_implemented(column.method):
        return False, f"method {column.method} not implemented yet"
    if dataset_kind(tcfg["dataset"]) not in registry.declared(column.method, "DATASET_KINDS"):
        return False, f"method {column.method} does not support {tcfg['dataset']} yet"
    return True, ""


def table_epsilons(tcfg: Mapping[str, Any]) -> list[float]:
    return [float(e) for e in tcfg["epsilons"]]


#: Renderers of tables built from other tables' records (no runs of their own): 000 Table 11's timings
#: (``sources``), 000 Table 12's intersection points (``rows``), curves against eps (``panels``; 002's figures)
#: training curves of one cell per column (``source``; 000 Figure 2; ``learning_source``: 001 Figure 3),
#: confusion matrices (``confusion_source``;
#: 000 Figure 4) and the experiments on proprietary data,
#: which print "not run" (no sources).
SOURCE_RENDERERS = (
    "run_times",
    "intersection",
    "eps_curves",
    "training_curves",
    "learning_curves",
    "confusion_matrices",
    "grid_heatmap",
    "top_k_violin",
    "not_run",
)


def source_tables(tcfg: Mapping[str, Any]) -> list[str]:
    """The tables a :data:`SOURCE_RENDERERS` table is built from (in config order, once each)."""
    if tcfg.get("renderer") == "run_times":
        return list(dict.fromkeys(src["table"] for src in tcfg["sources"]))
    if tcfg.get("renderer") == "intersection":
        return list(dict.fromkeys(row["table"] for row in tcfg["rows"]))
    if tcfg.get("renderer") == "eps_curves":
        return list(dict.fromkeys(panel["table"] for panel in tcfg["panels"]))
    if tcfg.get("renderer") == "training_curves":
        return [tcfg["source"]["table"]]
    if tcfg.get("renderer") == "confusion_matrices":
        return [tcfg["confusion_source"]["table"]]
    if tcfg.get("renderer") == "learning_curves":
        return [tcfg["learning_source"]["table"]]
    if tcfg.get("renderer") == "grid_heatmap":
        return list(dict.fromkeys(panel["table"] for panel in tcfg["heatmap_panels"]))
    if tcfg.get("renderer") == "top_k_violin":
        return list(dict.fromkeys(src["table"] for src in tcfg["violin_sources"]))
    return []


def table_runs(config: Mapping[str, Any], table: str) -> list[PlannedRun]:
    """Every run a table needs (only runnable columns), including its non-private reference; a table of
    :data:`SOURCE_RENDERERS` (000 Tables 11 and 12) plans none of its own: its sources' runs (of its methods)."""
    tcfg = config["tables"][table]
    if tcfg.get("renderer") in SOURCE_RENDERERS:
        return _timed_runs(tcfg, lambda src: table_runs(config, src))
    runs: list[PlannedRun] = []
    for col in columns(tcfg):
        ok, _ = cell_status(config, table, col)
        if not ok:
            continue
        for eps in table_epsilons(tcfg):
            runs.extend(cell_runs(config, table, col, eps))
    np_col = nonprivate_column(tcfg)
    if np_col is not None and cell_status(config, table, np_col)[0]:
        runs.extend(cell_runs(config, table, np_col, math.inf))
    return runs


def _timed_runs(tcfg: Mapping[str, Any], runs_of) -> list[PlannedRun]:
    """A source-built table's runs: its sources' (``runs_of(table)``) runs (of its ``methods`` where it
    names them), each once."""
    seen: dict[str, PlannedRun] = {}
    methods = tcfg.get("methods")
    for src in source_tables(tcfg):
        for r in runs_of(src):
            if methods is None or r.spec.method in methods:
                seen.setdefault(r.record_path, r)
    return list(seen.values())


def nonprivate_column(tcfg: Mapping[str, Any]) -> Column | None:
    if not tcfg.get("nonprivate"):
        return None
    return Column(
        id="nonprivate",
        label="Non-private",
        method="nonprivate",
        variant=str(tcfg.get("nonprivate_variant", "default")),
        ref_method="non_private",
        ref_variant=None,
    )


def runs_by_table(config: Mapping[str, Any]) -> dict[str, list[PlannedRun]]:
    """:func:`table_runs` of every table (planned once; the Snakefile keeps it; a table of
    :data:`SOURCE_RENDERERS` reuses its sources' plans)."""
    out = {
        table: table_runs(config, table)
        for table, tcfg in config["tables"].items()
        if tcfg.get("renderer") not in SOURCE_RENDERERS
    }
    for table, tcfg in config["tables"].items():
        if tcfg.get("renderer") in SOURCE_RENDERERS:
            out[table] = _timed_runs(tcfg, lambda src: out.get(src, []))
    return {table: out[table] for table in config["tables"]}


def all_runs(
    config: Mapping[str, Any], by_table: Mapping[str, list[PlannedRun]] | None = None
) -> dict[str, PlannedRun]:
    """Every planned run of every table, keyed by record path (runs shared by tables once).

    ``by_table``: :func:`runs_by_table`'s result, when the caller has it."""
    out: dict[str, PlannedRun] = {}
    for runs in (by_table if by_table is not None else runs_by_table(config)).values():
        for r in runs:
            out.setdefault(r.record_path, r)
    return out


def check_known_tables(config: Mapping[str, Any], tables) -> None:
    """Raises ConfigError naming the first of ``tables`` the config does not define, and the known ones."""
    for t in tables:
        if t not in config["tables"]:
            raise ConfigError(f"unknown table {t!r}; known: {sorted(config['tables'])}")


def select_runs(config: Mapping[str, Any], tables, *, methods=(), epsilons=(), seeds=()) -> list[PlannedRun]:
    """The planned runs of ``tables`` (each once, plan order), optionally restricted to some
    methods, epsilons (``math.inf`` = non-private) and seeds.

    Raises:
      ConfigError: a table that the config does not define.
    """
    check_known_tables(config, tables)
    seen: dict[str, PlannedRun] = {}
    for t in tables:
        for r in table_runs(config, t):
            seen.setdefault(r.record_path, r)
    return [
        r
        for r in seen.values()
        if (not methods or r.spec.method in methods)
        and (not epsilons or r.spec.epsilon in epsilons)
        and (not seeds or r.spec.seed in seeds)
    ]
