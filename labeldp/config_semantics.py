"""Checks of a workflow config that its JSON schema cannot express (cross-references between keys).

:func:`validate_semantics` runs after the schema (:func:`labeldp.config.validate_config`) and before
any job: every error is a :class:`~labeldp.plan.ConfigError` naming the key to change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from labeldp import feature_datasets, pretraining
from labeldp.heldout_stopping import STOPPED_SELECTION_METRIC, STOPPED_TEST_METRIC
from labeldp.methods import registry
from labeldp.regression import PRIOR_EPSILON
from labeldp.plan import (
    SOURCE_RENDERERS,
    DATASET_KINDS,
    Column,
    ConfigError,
    columns,
    dataset_kind,
    grid_for,
)
from labeldp.variants import all_variant_options, variant_options

__all__ = ["validate_semantics"]


def _check_prior_budget(config: Mapping[str, Any], table: str, tcfg: Mapping[str, Any], col: Column) -> None:
    """003's prior-based randomizers spend eps1 on the prior: every eps of the table must exceed it
    (else eps2 = eps - eps1 <= 0), caught here before any job runs."""
    if not registry.is_implemented(col.method) or not registry.declared(col.method, "USES_PRIVATE_PRIOR", False):
        return
    opts = variant_options(config, col.method, col.variant)
    eps1 = float(opts.get("prior_epsilon", PRIOR_EPSILON.get(tcfg["dataset"], 0.0)))
    for eps in tcfg.get("epsilons", []):
        if not float(eps) > eps1:
            raise ConfigError(
                f"tables.{table}.epsilons: eps = {eps} does not exceed the prior budget eps1 = {eps1} of "
                f"{col.method} on {tcfg['dataset']} (eps2 = eps - eps1 must be > 0); drop that eps or lower "
                "the variant option prior_epsilon"
            )


def _check_stopped_metric(table: str, tcfg: Mapping[str, Any], col: Column, options: Mapping[str, Any]) -> None:
    """A column read at the honest stopping epoch (labeldp.heldout_stopping) needs the curves it is read from,
    the table's test accuracy to stand for, and its configuration chosen the same honest way."""
    ccfg = next(c for c in tcfg["columns"] if c["id"] == col.id)
    where = f"tables.{table}.columns.{col.id}"
    stopped = ccfg.get("metric") == STOPPED_TEST_METRIC
    if ccfg.get("selection_metric") == STOPPED_SELECTION_METRIC and not stopped:
        raise ConfigError(
            f"{where}.selection_metric: {STOPPED_SELECTION_METRIC} chooses on the held-out accuracy at the stopping "
            f"epoch; it goes with metric: {STOPPED_TEST_METRIC} (set it, or select on validation_noisy_accuracy_pct)"
        )
    if not stopped:
        return
    if tcfg["metric"] != "test_accuracy_pct":
        raise ConfigError(
            f"{where}.metric: {STOPPED_TEST_METRIC} stands for the table metric test_accuracy_pct, the table's is "
            f"{tcfg['metric']!r}; move the column to a test-accuracy table"
        )
    if ccfg.get("selection_metric") != STOPPED_SELECTION_METRIC:
        raise ConfigError(
            f"{where}.selection_metric: a column read at the honest stopping epoch chooses its configuration there "
            f"too; set selection_metric: {STOPPED_SELECTION_METRIC}"
        )
    if not options.get("validation_fraction") or options.get("test_curve_diagnostic") is not True:
        raise ConfigError(
            f"{where}.variant: {col.method}/{col.variant} records no per-epoch held-out curve; "
            f"{STOPPED_TEST_METRIC} needs a variant with validation_fraction and test_curve_diagnostic: true"
        )


def validate_semantics(config: Mapping[str, Any]) -> None:
    """Checks the schema cannot express; raises :class:`ConfigError` naming the key."""
    if config["grid"] not in config["grids"]:
        raise ConfigError(f"grid: {config['grid']!r} is not one of grids: {sorted(config['grids'])}")
    all_variant_options(config)  # every variant resolves (its `extends` chain), used by a table or not
    for key in ("scorecard_tables", "claim_tables"):
        unknown = sorted(set(config.get(key) or ()) - set(config["tables"]))
        if unknown:
            raise ConfigError(f"{key}: {unknown} are not tables of this config; known: {sorted(config['tables'])}")
    if config.get("claim_tables") and config.get("scorecard_tables") is None:
        raise ConfigError(
            "claim_tables: without scorecard_tables every table is scored, claims included; set scorecard_tables "
            "(the tables whose cells are scored) or drop claim_tables"
        )
    for table in config.get("claim_tables") or ():
        if config["tables"][table].get("renderer") in SOURCE_RENDERERS:
            raise ConfigError(
                f"claim_tables: {table!r} is built from other tables (renderer "
                f"{config['tables'][table]['renderer']!r}) and has no cells of its own to evaluate claims on; drop it"
            )
        if not config["tables"][table].get("claims"):
            raise ConfigError(
                f"claim_tables: {table!r} has no claims; give it a `claims` list or drop it from claim_tables"
            )
    for table, tcfg in config["tables"].items():
        if tcfg.get("renderer") in SOURCE_RENDERERS:  # built from other tables' records (000 Tables 11, 12, ...)
            _check_sources(config, table, tcfg)
            continue
        ds = tcfg["dataset"]
        if dataset_kind(ds) is None:
            raise ConfigError(
                f"tables.{table}.dataset: unknown dataset {ds!r}; known: {sorted(DATASET_KINDS)} "
                f"and <image dataset>{feature_datasets.FEATURES_SUFFIX} (SimCLR features)"
            )
        for i, eps in enumerate(tcfg.get("epsilons", [])):
            if not float(eps) > 0:
                raise ConfigError(f"tables.{table}.epsilons[{i}] = {eps}: epsilon must be > 0")
        for col in columns(tcfg):
            known = set(config.get("known_methods", [])) | set(registry.implemented_methods())
            if col.method not in known:
                raise ConfigError(
                    f"tables.{table}.columns.{col.id}.method: unknown method {col.method!r}; known: {sorted(known)}"
                )
            options = variant_options(config, col.method, col.variant)
            pretraining.check_init_options(
                config, where=f"variants.{col.method}.{col.variant}", options=options, dataset=ds
            )
            _check_prior_budget(config, table, tcfg, col)
            _check_stopped_metric(table, tcfg, col, options)
        col_ids = {c.id for c in columns(tcfg)}
        for i, claim in enumerate(tcfg.get("claims", [])):
            if ("agree" in claim) == ("winner" in claim or "losers" in claim):
                raise ConfigError(
                    f"tables.{table}.claims[{i}]: give either winner + losers (an ordering claim) "
                    "or agree: [a, b] (an agreement check), not both or neither"
                )
            for who in claim["agree"] if "agree" in claim else [claim["winner"], *claim["losers"]]:
                if who not in col_ids:
                    raise ConfigError(
                        f"tables.{table}.claims[{i}]: {who!r} is not a column id of {table}; columns: {sorted(col_ids)}"
                    )
        grid_for(config, tcfg)
    pretraining.pretraining_specs(config)  # every entry complete, on a known dataset
    for ds in config.get("datasets") or {}:
        if ds not in DATASET_KINDS:
            hint = (
                f" (a features dataset follows datasets.{feature_datasets.features_base(ds, DATASET_KINDS)}; "
                "set subset/standin there)"
                if dataset_kind(ds)
                else ""
            )
            raise ConfigError(f"datasets.{ds}: unknown dataset; known: {sorted(DATASET_KINDS)}{hint}")


#: Where each source-built renderer names its source tables: (key, one mapping or a list of them).
_SOURCE_KEYS = {
    "run_times": ("sources", True),
    "intersection": ("rows", True),
    "eps_curves": ("panels", True),
    "training_curves": ("source", False),
    "learning_curves": ("learning_source", False),
    "confusion_matrices": ("confusion_source", False),
    "grid_heatmap": ("heatmap_panels", True),
    "top_k_violin": ("violin_sources", True),
    "not_run": (None, False),
}


def _has_eps(tcfg: Mapping[str, Any], eps: Any) -> bool:
    return any(abs(float(eps) - float(e)) < 1e-12 for e in tcfg["epsilons"])


def _check_sources(config: Mapping[str, Any], table: str, tcfg: Mapping[str, Any]) -> None:
    """A source-built table's sources are tables with runs, and the columns and eps it names are theirs."""
    key, many = _SOURCE_KEYS[tcfg["renderer"]]
    if key is None:
        return
    for where, src in [(f"{key}[{i}]", s) for i, s in enumerate(tcfg[key])] if many else [(key, tcfg[key])]:
        other = config["tables"].get(src["table"])
        if other is None or other.get("renderer") in SOURCE_RENDERERS:
            raise ConfigError(
                f"tables.{table}.{where}.table: {src['table']!r} is not a table of this config with "
                f"runs; tables: {sorted(config['tables'])}"
            )
        ids = {c.id for c in columns(other)}
        named = [src["pro"], *src["baselines"]] if key == "rows" else list(src.get("columns", []))
        named += [src["column"]] if "column" in src else []
        unknown = [c for c in named if c not in ids]
        if unknown:
            raise ConfigError(
                f"tables.{table}.{where}: {', '.join(map(repr, unknown))} is not a column of "
                f"{src['table']}; its columns: {sorted(ids)}"
            )
        eps = list(src.get("epsilons", [])) + ([src["epsilon"]] if "epsilon" in src else [])
        missing = [e for e in eps if not _has_eps(other, e)]
        if missing:
            raise ConfigError(
                f"tables.{table}.{where}.epsilon: {missing} is not an eps of {src['table']} ({other['epsilons']})"
            )
