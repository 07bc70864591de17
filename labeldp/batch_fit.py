"""Refuses, before any job, a planned run whose Poisson batch is larger than its training data.

The accountant assumes Poisson sampling at rate ``q = n1 / n <= 1``; a grid point with ``n1 > n``
cannot run. The training set's size is known before any job wherever the files fix it (the image
datasets' official splits, a stand-in's size, ``datasets.<name>.subset``); elsewhere (tabular data,
users) the run refuses it when it starts (:func:`labeldp.dpsgd.training_plan.make_training_plan`).
A method names its batch keys in ``SAMPLED_BATCH_KEYS`` (:mod:`labeldp.methods.base`).
"""

from __future__ import annotations

import functools
from typing import Any, Mapping

from labeldp import feature_datasets
from labeldp.data import views
from labeldp.data.rawformats import STANDIN_SIZES
from labeldp.data.registry import get_spec
from labeldp.methods import registry
from labeldp.plan import DATASET_KINDS, ConfigError, PlannedRun, dataset_cfg

__all__ = ["sampled_batch_keys", "training_units_bound", "check_batches_fit"]


@functools.lru_cache(maxsize=None)
def sampled_batch_keys(method: str) -> tuple[str, ...]:
    """A method's ``SAMPLED_BATCH_KEYS``: the hyper-parameters that are a Poisson sampler's expected
    batch size, which must not exceed the training units (``()`` if none or not implemented)."""
    if not registry.is_implemented(method):
        return ()
    return tuple(registry.declared(method, "SAMPLED_BATCH_KEYS", ()) or ())


def training_units_bound(config: Mapping[str, Any], dataset: str) -> int | None:
    """An upper bound on the training examples of ``dataset`` as the config prepares it, where the
    files fix it (image datasets and their features: the official split, a stand-in's size, or
    ``datasets.<name>.subset``); None where only the prepared data knows (tabular data, users)."""
    base = feature_datasets.features_base(dataset, DATASET_KINDS) or dataset
    if DATASET_KINDS.get(base) != "image":
        return None
    dcfg = dataset_cfg(config, base)
    # a view's (labeldp.data.views) base bounds it: a class-restricted view keeps fewer examples
    full = STANDIN_SIZES[0] if dcfg.get("standin") else get_spec(views.base_dataset(base)).train_examples
    if full is None:
        return None
    return min(int(full), int(dcfg["subset"])) if dcfg.get("subset") else int(full)


def check_batches_fit(config: Mapping[str, Any], by_table: Mapping[str, list[PlannedRun]]) -> None:
    """Refuses, before any job, a planned run whose Poisson batch exceeds its training data.

    Raises:
      ConfigError: naming the table, the grid point's key and value, the data's size and the fix.
    """
    bounds: dict[str, int | None] = {}
    for table, runs in by_table.items():
        for run in runs:
            spec = run.spec
            keys = sampled_batch_keys(spec.method)
            if not keys:
                continue
            if spec.dataset not in bounds:
                bounds[spec.dataset] = training_units_bound(config, spec.dataset)
            bound = bounds[spec.dataset]
            for key in keys:
                value = spec.hparams.get(key)
                if bound is not None and value is not None and int(value) > bound:
                    grid = (config["tables"][table] or {}).get("grid", table)
                    raise ConfigError(
                        f"tables.{table}: {spec.method} on {spec.dataset} samples batches of {key} = {value}, more "
                        f"than the {bound} training examples the config prepares; lower {key} in "
                        f"grids.{config.get('grid')}.{grid} (or its column's grid filter), or raise "
                        f"datasets.{feature_datasets.features_base(spec.dataset, DATASET_KINDS) or spec.dataset}"
                        ".subset"
                    )
