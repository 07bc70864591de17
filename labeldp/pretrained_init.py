"""Starting a run from a network pre-trained on public labels (001 Table 1's starred rows).

001 Appendix B initialises the CIFAR-10 model "with the pre-trained weights" of a ResNet trained on
CIFAR-100; "the classifier is still randomly initialized because there is no clear correspondence
between the 100 classes of CIFAR-100 and the 10 classes of CIFAR-10", and nothing is frozen.
:func:`initial_state` does exactly that for any registered network: every parameter (and BatchNorm
statistic) comes from the pre-trained state except the **classifier**, the leaves whose shape
depends on the number of classes (found by building the network for K and K + 1 classes), which keep
the run's own seeded initialisation (:func:`labeldp.training.initial_params`).

The runner attaches the loaded states to the prepared data (:func:`attach`, from its
``--pretrained NAME=PATH`` arguments, which the workflow derives from the variants' ``init_from``;
:mod:`labeldp.pretraining`); a method calls :func:`initial_state` for its first model. Privacy: the
pre-training reads only the public dataset's labels, so a run's label-DP guarantee on its own labels is
unchanged; the record's ``details.init_from`` says which pre-training it started from.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

import flax.serialization
import jax
import jax.numpy as jnp
from flax import traverse_util

from labeldp.models import ModelSpec, build_model
from labeldp.data.views import held_dataset
from labeldp.pretraining import INIT_OPTION, RECORD_FILE, labels_of
from labeldp.training import initial_params

__all__ = ["PretrainedState", "load_pretrained", "attach", "classifier_keys", "transfer_state", "initial_state"]


@dataclasses.dataclass(frozen=True)
class PretrainedState:
    """A loaded pre-training: its state and what its ``pretrain.json`` says.

    Attributes:
      name: the config's pre-training key.
      state: the trained state (parameters, or ``{"params", "batch_stats"}`` for a BatchNorm model).
      record: the pre-training's record (config, data, test accuracy, timings).
      sha256: of the state file (the run's record keeps it).
    """

    name: str
    state: Any
    record: Mapping[str, Any]
    sha256: str

    def summary(self) -> dict[str, Any]:
        """What a run's record says of its starting point."""
        r = self.record
        return {
            "name": self.name,
            "model": r.get("model"),
            "dataset": r.get("dataset"),
            "config": r.get("config"),
            "test_accuracy_pct": r.get("metrics", {}).get("test_accuracy_pct"),
            "state_sha256": self.sha256,
            "classifier": "re-initialised (001 Appendix B); nothing frozen",
        }


def load_pretrained(name: str, path: str | Path) -> PretrainedState:
    """Loads the state file ``path`` and the ``pretrain.json`` beside it.

    Raises:
      FileNotFoundError: naming the file and the rule that writes it.
    """
    path = Path(path)
    record_path = path.parent / RECORD_FILE
    for p in (path, record_path):
        if not p.exists():
            raise FileNotFoundError(f"{p}: pre-training {name!r} has not run; build it with: snakemake {path}")
    raw = path.read_bytes()
    return PretrainedState(
        name=name,
        state=flax.serialization.msgpack_restore(raw),
        record=json.loads(record_path.read_text()),
        sha256=hashlib.sha256(raw).hexdigest(),
    )


def attach(data, paths: Mapping[str, str]):
    """``data`` with the pre-trained states ``{name: path}`` loaded into ``data.pretrained`` (the same
    object when ``paths`` is empty)."""
    if not paths:
        return data
    loaded = {name: load_pretrained(name, p) for name, p in paths.items()}
    return dataclasses.replace(data, pretrained=MappingProxyType(loaded))


def classifier_keys(model: ModelSpec) -> frozenset[tuple[str, ...]]:
    """The flattened state keys whose shape depends on the number of classes: the classifier's."""
    k = int(model.module.num_classes)
    other = build_model(model.name, input_shape=model.input_shape, num_classes=k + 1)

    def shapes(spec):
        tree = jax.eval_shape(spec.init, jax.random.key(0))
        return {key: leaf.shape for key, leaf in traverse_util.flatten_dict(tree).items()}

    a, b = shapes(model), shapes(other)
    return frozenset(key for key in a if a[key] != b.get(key))


def transfer_state(model: ModelSpec, pretrained: Any, fresh: Any) -> Any:
    """``fresh`` with every leaf but the classifier's replaced by ``pretrained``'s.

    Raises:
      ValueError: the two states are not the same network (a key or a non-classifier shape differs).
    """
    head = classifier_keys(model)
    pre, new = traverse_util.flatten_dict(pretrained), traverse_util.flatten_dict(fresh)
    if set(pre) != set(new):
        diff = sorted("/".join(k) for k in set(pre) ^ set(new))[:6]
        raise ValueError(f"the pre-trained state is not a {model.name!r} network: keys differ ({diff} ...)")
    out = {}
    for key, leaf in new.items():
        if key in head:
            out[key] = leaf
            continue
        if tuple(pre[key].shape) != tuple(leaf.shape):
            raise ValueError(
                f"pre-trained {'/'.join(key)} has shape {tuple(pre[key].shape)}, the run's {model.name!r} needs "
                f"{tuple(leaf.shape)} (another input shape?)"
            )
        out[key] = jnp.asarray(pre[key], dtype=leaf.dtype)
    return traverse_util.unflatten_dict(out)


def initial_state(model: ModelSpec, data, spec, *, seed: int) -> tuple[Any, dict[str, Any] | None]:
    """The state a run's first model starts from, and what its record says of it.

    Args:
      model: the run's network.
      data: the prepared data, with ``pretrained`` attached by the runner where a variant needs it.
      spec: the run; its option ``init_from`` names the pre-training (absent: a fresh initialisation).
      seed: the training seed of the first model (its classifier's initialisation).

    Returns:
      ``(None, None)`` without ``init_from`` (the training loop initialises as always), else the
      transferred state and :meth:`PretrainedState.summary`.

    Raises:
      ValueError: ``init_from`` names a pre-training the runner did not attach.
    """
    name = spec.options.get(INIT_OPTION)
    if not name:
        return None, None
    loaded = (getattr(data, "pretrained", None) or {}).get(name)
    if loaded is None:
        raise ValueError(
            f"variant {spec.variant!r} starts from pre-training {name!r}, which was not given to this run: "
            f"pass --pretrained {name}=<results_dir>/pretrained/{name}/<id>/state.msgpack (the workflow does)"
        )
    if loaded.record.get("model") not in (None, model.name):
        raise ValueError(
            f"pre-training {name!r} trained {loaded.record.get('model')!r}, this run trains {model.name!r}"
        )
    trained_on = str((loaded.record.get("dataset") or {}).get("name"))
    if labels_of(trained_on) == labels_of(held_dataset(data)):
        raise ValueError(
            f"pre-training {name!r} read {trained_on}'s labels, the private labels of this run on {held_dataset(data)}; "
            "pre-train on another (public) dataset"
        )
    return transfer_state(model, loaded.state, initial_params(model, seed)), loaded.summary()
