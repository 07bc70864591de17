"""Checks of a workflow config that its JSON schema cannot express (cross-references between keys).

:func:`validate_semantics` runs after the schema (:func:`labeldp.config.validate_config`) and before
any job: every error is a :class:`~labeldp.plan.ConfigError` naming the key to change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from labeldp import feature_datasets
from labeldp.methods import registry
from labeldp.plan import (
    SOURCE_RENDERERS,
    DATASET_KINDS,
    Column,
    ConfigError,
    columns,
    dataset_kind,
    grid_for,
    variant_options,
)

__all__ = ["validate_semantics"]


def _check_prior_budget(config: Mapping[str, Any], table: str, tcfg: Mapping[str, Any], col: Column) -> None:
    """003's prior-based randomizers spend eps1 on the prior: every eps of the table must exceed it
    (else eps2 = eps - eps1 <= 0), caught here before any job runs."""
    if not registry.is_implemented(col.method) or not getattr(
        registry.get_method(col.method), "USES_PRIVATE_PRIOR", False
    ):
        return
    from labeldp.regression.pipeline import (
        PRIOR_EPSILON,  # JAX-heavy: imported only for a prior-based column
    )

    opts = variant_options(config, col.method, col.variant)
    eps1 = float(opts.get("prior_epsilon", PRIOR_EPSILON.get(tcfg["dataset"], 0.0)))
    for eps in tcfg.get("epsilons", []):
        if not float(eps) > eps1:
            raise ConfigError(
                f"tables.{table}.epsilons: eps = {eps} does not exceed the prior budget eps1 = {eps1} of "
                f"{col.method} on {tcfg['dataset']} (eps2 = eps - eps1 must be > 0); drop that eps or lower "
                "the variant option prior_epsilon"
            )


def validate_semantics(config: Mapping[str, Any]) -> None:
    """Checks the schema cannot express; raises :class:`ConfigError` naming the key."""
    if config["grid"] not in config["grids"]:
        raise ConfigError(f"grid: {config['grid']!r} is not one of grids: {sorted(config['grids'])}")
    unknown = sorted(set(config.get("scorecard_tables") or ()) - set(config["tables"]))
    if unknown:
        raise ConfigError(
            f"scorecard_tables: {unknown} are not tables of this config; known: {sorted(config['tables'])}"
        )
    for table, tcfg in config["tables"].items():
        if tcfg.get("renderer") in SOURCE_RENDERERS:  # 000 Tables 11 and 12: built from other tables' records
            key = {
                "run_times": "sources",
                "intersection": "rows",
                "eps_curves": "panels",
                "not_run": None,
                "training_curves": None,
                "learning_curves": None,
                "confusion_matrices": None,
            }[tcfg["renderer"]]
            if tcfg["renderer"] == "learning_curves":
                src = tcfg["learning_source"]
                other = config["tables"].get(src["table"])
                if other is None or other.get("renderer") in SOURCE_RENDERERS:
                    raise ConfigError(
                        f"tables.{table}.learning_source.table: {src['table']!r} is not a table of "
                        f"this config with runs; tables: {sorted(config['tables'])}"
                    )
                unknown = sorted(set(src["columns"]) - {c.id for c in columns(other)})
                if unknown:
                    raise ConfigError(
                        f"tables.{table}.learning_source.columns: {unknown} are not columns of {src['table']}"
                    )
            if tcfg["renderer"] == "confusion_matrices":
                src = tcfg["confusion_source"]
                other = config["tables"].get(src["table"])
                if other is None or other.get("renderer") in SOURCE_RENDERERS:
                    raise ConfigError(
                        f"tables.{table}.confusion_source.table: {src['table']!r} is not a table of "
                        f"this config with runs; tables: {sorted(config['tables'])}"
                    )
                if src["column"] not in {c.id for c in columns(other)}:
                    raise ConfigError(
                        f"tables.{table}.confusion_source.column: {src['column']!r} is not a column of {src['table']}"
                    )
                missing = [
                    e for e in src["epsilons"] if not any(abs(float(e) - float(o)) < 1e-12 for o in other["epsilons"])
                ]
                if missing:
                    raise ConfigError(
                        f"tables.{table}.confusion_source.epsilons: {missing} are not eps of {src['table']}"
                    )
            if tcfg["renderer"] == "training_curves":
                src = tcfg["source"]
                other = config["tables"].get(src["table"])
                if other is None or other.get("renderer") in SOURCE_RENDERERS:
                    raise ConfigError(
                        f"tables.{table}.source.table: {src['table']!r} is not a table of this config "
                        f"with runs; tables: {sorted(config['tables'])}"
                    )
                if not any(abs(float(e) - float(src["epsilon"])) < 1e-12 for e in other["epsilons"]):
                    raise ConfigError(
                        f"tables.{table}.source.epsilon: {src['epsilon']} is not an eps of "
                        f"{src['table']} ({other['epsilons']})"
                    )
            for i, src in enumerate(tcfg[key] if key else []):
                other = config["tables"].get(src["table"])
                if other is None or other.get("renderer") in SOURCE_RENDERERS:
                    raise ConfigError(
                        f"tables.{table}.{key}[{i}].table: {src['table']!r} is not a table of this "
                        f"config with runs; tables: {sorted(config['tables'])}"
                    )
                if key == "rows":
                    ids = {c.id for c in columns(other)}
                    for col in [src["pro"], *src["baselines"]]:
                        if col not in ids:
                            raise ConfigError(
                                f"tables.{table}.rows[{i}]: {col!r} is not a column of {src['table']}; "
                                f"its columns: {sorted(ids)}"
                            )
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
            if col.variant != "default":
                variant_options(config, col.method, col.variant)
            _check_prior_budget(config, table, tcfg, col)
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
    for ds in config.get("datasets") or {}:
        if ds not in DATASET_KINDS:
            hint = (
                f" (a features dataset follows datasets.{feature_datasets.features_base(ds, DATASET_KINDS)}; "
                "set subset/standin there)"
                if dataset_kind(ds)
                else ""
            )
            raise ConfigError(f"datasets.{ds}: unknown dataset; known: {sorted(DATASET_KINDS)}{hint}")
