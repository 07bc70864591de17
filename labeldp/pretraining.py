"""Supervised pre-training on public data, as a variant's starting point (001 Table 1's starred rows).

001 Appendix B: "we train a (non-private) ResNet18 on the full CIFAR-100 training set and initialize
the CIFAR-10 model with the pre-trained weights. The classifier is still randomly initialized [...]
we did *not* freeze the pre-trained weights." CIFAR-100's labels are public data here (Abadi et al.
2016 treat them so), so the pre-training spends none of the private labels' budget.

A config names each pre-training under ``pretraining``::

    pretraining:
      cifar100_cifar_cnn: {dataset: cifar100, model: cifar_cnn, learning_rate: 0.2, epochs: 200,
                           batch_size: 256, momentum: 0.9, lr_schedule: warmup_piecewise, l2: 1.0e-4}

and a variant starts from it with the option ``init_from: cifar100_cifar_cnn``. The workflow trains
each named pre-training once (rule ``pretrain_supervised``, :mod:`labeldp.pretrain_supervised`) into
:func:`state_path`, a directory keyed by :func:`pretraining_id` (every field of the entry and the
prepared data's source and size), and gives that file to every job whose runs start from it
(:mod:`labeldp.pretrained_init` loads it and re-initialises the classifier).

This module is the plan side (no JAX): the entries, their ids and paths, and the checks that a
variant's ``init_from`` names an entry that trains the variant's network on another dataset's labels
(never the run's own: not a split view or the features of the same images) and is no stand-in where
the run's data is real.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shlex
from typing import Any, Mapping

from labeldp import feature_datasets
from labeldp.data import views
from labeldp.data.registry import DATASETS
from labeldp.data_layout import DATASET_KINDS, data_source, data_tag, dataset_kind, prepared_path
from labeldp.plan import ConfigError

__all__ = [
    "INIT_OPTION",
    "PretrainingSpec",
    "pretraining_specs",
    "pretraining_id",
    "state_path",
    "inputs_of_options",
    "check_init_options",
    "variant_model",
    "labels_of",
    "add_pretrained_argument",
    "parse_pretrained_args",
    "pretrained_args",
]

#: The variant option that names a pre-training (a key of the config's ``pretraining``).
INIT_OPTION = "init_from"

#: The file names in a pre-training's directory.
STATE_FILE, RECORD_FILE = "state.msgpack", "pretrain.json"


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainingSpec:
    """One named supervised pre-training (an entry of the config's ``pretraining``).

    Attributes:
      name: its key.
      dataset: the public dataset it trains on (every training label, non-private).
      model: the registered network (:mod:`labeldp.models`); the runs that start from it must train the same.
      learning_rate, epochs, batch_size: the SGD run.
      options: the training recipe (:data:`labeldp.methods.base.OPTIMIZER_OPTIONS`, ``augment``), e.g.
        001 Appendix B's CIFAR-100 recipe.
      mixup_alpha: mixup during pre-training (0: off).
      seed: its seed (initialisation, shuffling).
    """

    name: str
    dataset: str
    model: str
    learning_rate: float
    epochs: int
    batch_size: int
    options: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    mixup_alpha: float = 0.0
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "options": dict(self.options)}


_FIELDS = ("dataset", "model", "learning_rate", "epochs", "batch_size", "mixup_alpha", "seed")


def pretraining_specs(config: Mapping[str, Any]) -> dict[str, PretrainingSpec]:
    """Every entry of ``config["pretraining"]`` (empty when the key is absent)."""
    out = {}
    for name, entry in (config.get("pretraining") or {}).items():
        entry = dict(entry)
        for key in ("dataset", "model", "learning_rate", "epochs", "batch_size"):
            if key not in entry:
                raise ConfigError(f"pretraining.{name}.{key} is missing (see labeldp/pretraining.py)")
        if entry["dataset"] not in DATASETS:
            raise ConfigError(
                f"pretraining.{name}.dataset: {entry['dataset']!r} is not a dataset; known: {sorted(DATASETS)}"
            )
        options = {k: v for k, v in entry.items() if k not in _FIELDS}
        out[name] = PretrainingSpec(
            name=str(name),
            dataset=str(entry["dataset"]),
            model=str(entry["model"]),
            learning_rate=float(entry["learning_rate"]),
            epochs=int(entry["epochs"]),
            batch_size=int(entry["batch_size"]),
            options=options,
            mixup_alpha=float(entry.get("mixup_alpha", 0.0)),
            seed=int(entry.get("seed", 0)),
        )
    return out


def pretraining_id(config: Mapping[str, Any], spec: PretrainingSpec) -> str:
    """A short hash of the entry and of its prepared data's source and size: a changed recipe or data
    trains into a new directory, never over a finished one."""
    payload = json.dumps({**spec.to_dict(), "data": data_tag(config, spec.dataset)}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


def state_dir(config: Mapping[str, Any], name: str) -> str:
    """``<results_dir>/pretrained/<name>/<id>``: the pre-training's state and record."""
    specs = pretraining_specs(config)
    if name not in specs:
        raise ConfigError(f"{INIT_OPTION}: {name!r} is not an entry of pretraining; known: {sorted(specs)}")
    return os.path.join(str(config["results_dir"]), "pretrained", name, pretraining_id(config, specs[name]))


def state_path(config: Mapping[str, Any], name: str) -> str:
    """The trained state (Flax msgpack) of pre-training ``name``."""
    return os.path.join(state_dir(config, name), STATE_FILE)


def data_path(config: Mapping[str, Any], name: str) -> str:
    """The prepared data pre-training ``name`` trains on."""
    return prepared_path(config, pretraining_specs(config)[name].dataset)


def inputs_of_options(config: Mapping[str, Any], options_list) -> dict[str, str]:
    """``{name: state path}`` of the pre-trainings that runs with these option mappings start from."""
    names = sorted({str(o[INIT_OPTION]) for o in options_list if o.get(INIT_OPTION)})
    return {n: state_path(config, n) for n in names}


def variant_model(options: Mapping[str, Any], dataset: str) -> str | None:
    """The network a variant's runs on ``dataset`` train: its ``model`` option, the linear head on a features
    dataset, else the dataset's (a split view's base's) model; as :func:`labeldp.methods.common.build_model_for`."""
    if options.get("model"):
        return str(options["model"])
    if dataset_kind(dataset) == feature_datasets.FEATURES_KIND:
        return feature_datasets.FEATURES_MODEL
    spec = DATASETS.get(views.base_dataset(dataset))
    return spec.model if spec is not None else None


def check_init_options(config: Mapping[str, Any], *, where: str, options: Mapping[str, Any], dataset: str) -> None:
    """A variant's ``init_from`` must name a pre-training of ``config`` that trains the network the
    variant trains (its ``model`` option, else the dataset's model), on another dataset's public labels.

    Raises:
      ConfigError: naming ``where`` (the variant's key) and the fix.
    """
    name = options.get(INIT_OPTION)
    if name is None:
        return
    specs = pretraining_specs(config)
    if name not in specs:
        raise ConfigError(f"{where}.{INIT_OPTION}: {name!r} is not an entry of pretraining; known: {sorted(specs)}")
    spec = specs[name]
    model = variant_model(options, dataset)
    if model != spec.model:
        raise ConfigError(
            f"{where}.{INIT_OPTION}: pretraining.{name} trains {spec.model!r} but runs on {dataset} of this variant "
            f"train {model!r}; set the variant's model option or pretraining.{name}.model to the same network"
        )
    if labels_of(spec.dataset) == labels_of(dataset):
        raise ConfigError(
            f"{where}.{INIT_OPTION}: pretraining.{name} trains on {spec.dataset}, whose labels are {dataset}'s own "
            f"(private) ones ({labels_of(dataset)}'s); pre-train on another (public) dataset"
        )
    if data_source(config, dataset) == "official" and data_source(config, spec.dataset) != "official":
        raise ConfigError(
            f"{where}.{INIT_OPTION}: pretraining.{name} would train on a synthetic stand-in of {spec.dataset} while "
            f"{dataset} is real, and the run's outputs would not say so; set datasets.{spec.dataset}.standin: false "
            "(fetch it) or run on the stand-in"
        )


def labels_of(dataset: str) -> str:
    """The dataset whose training labels ``dataset``'s runs read: a split view's base, a features dataset's images."""
    base = feature_datasets.features_base(dataset, DATASET_KINDS) or dataset
    return views.base_dataset(base)


def pretrained_args(paths: Mapping[str, str]) -> str:
    """The runners' ``--pretrained NAME=PATH`` arguments for ``{name: state path}`` (shell-quoted)."""
    return " ".join(f"--pretrained {shlex.quote(f'{n}={p}')}" for n, p in sorted(paths.items()))


def add_pretrained_argument(parser) -> None:
    """Adds the runners' repeatable ``--pretrained NAME=PATH`` to an ``argparse`` parser (read back
    with :func:`parse_pretrained_args`)."""
    parser.add_argument(
        "--pretrained",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="a pre-trained state a variant's init_from names (labeldp.pretraining); repeatable",
    )


def parse_pretrained_args(values) -> dict[str, str]:
    """``{name: path}`` from ``NAME=PATH`` strings (the runners' ``--pretrained``).

    Raises:
      ValueError: a value without ``=`` or a name given twice.
    """
    out: dict[str, str] = {}
    for v in values or ():
        name, sep, path = str(v).partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--pretrained {v!r}: give NAME=PATH (a pretraining key and its state.msgpack)")
        if name in out:
            raise ValueError(f"--pretrained {name!r} is given twice")
        out[name] = path
    return out
