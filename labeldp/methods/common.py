"""Shared helpers for image-classification methods (model choice, train + evaluate)."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from labeldp.augment import DEFAULT_CUTOUT, DEFAULT_PAD

from labeldp.methods.base import RECIPE_OPTIONS, RunSpec  # noqa: F401 (RECIPE_OPTIONS: importable from here)
from labeldp.data.registry import DATASETS
from labeldp.models import FEATURES_MODEL, ModelSpec, build_model
from labeldp.pretrained_init import initial_state
from labeldp.rating_metrics import class_values_of, expected_value_rmse
from labeldp.training import (
    TrainConfig,
    accuracy_pct,
    audit_log_probs,
    confusion_matrix,
    initial_params,
    predict_logits,
    to_float_images,
    train_weighted,
)


def build_model_for(data, *, options: Mapping[str, Any] | None = None) -> ModelSpec:
    """The model of a run: the variant's ``model`` option (a registered network, e.g. 001's
    ``inception_001`` / ``resnet18_v2_cifar``) if ``options`` has one, else the dataset's model (000 Table
    10's CNNs; 001 Table 3's NCF on MovieLens, with the sizes the prepared file's ``metadata["model_sizes"]``
    states); the linear classifier for a features dataset (SimCLR representations, 000 Table 6).

    Raises:
      ValueError: a ``model`` option on a features dataset, or an unknown model.
    """
    chosen = (options or {}).get("model")
    if getattr(data, "kind", "image") == "features":
        if chosen is not None:
            raise ValueError(f"option model={chosen!r}: a features dataset trains its linear head ({FEATURES_MODEL!r})")
        return build_model(FEATURES_MODEL, input_shape=tuple(data.x_train.shape[1:]), num_classes=data.num_classes)
    model = chosen if chosen is not None else (DATASETS[data.name].model if data.name in DATASETS else None)
    if model is None:
        known = sorted(n for n, s in DATASETS.items() if s.model)
        raise ValueError(f"no model for dataset {data.name!r} (its DatasetSpec.model; datasets with one: {known})")
    sizes = dict((getattr(data, "metadata", None) or {}).get("model_sizes") or {})  # e.g. NCF's embedding tables
    return build_model(str(model), input_shape=tuple(data.x_train.shape[1:]), num_classes=data.num_classes, **sizes)


def train_config(spec: RunSpec, *, progress: bool = True) -> TrainConfig:
    """The :class:`~labeldp.training.TrainConfig` of a run: the grid point's learning rate, epochs and
    batch size, and the variant's :data:`RECIPE_OPTIONS` (default: 000 Table 8's plain SGD at a constant
    rate; a ``momentum`` grid axis is still read from the grid point)."""
    hp, opts = spec.hparams, spec.options
    return TrainConfig(
        learning_rate=float(hp["learning_rate"]),
        epochs=int(hp["epochs"]),
        batch_size=int(hp["batch_size"]),
        momentum=float(opts.get("momentum", hp.get("momentum", 0.0))),
        nesterov=bool(opts.get("nesterov", False)),
        lr_schedule=str(opts.get("lr_schedule", "constant")),
        warmup_fraction=float(opts.get("warmup_fraction", 0.15)),
        l2=float(opts.get("l2", 0.0)),
        augment=str(opts.get("augment", "none")),
        augment_pad=int(opts.get("augment_pad", DEFAULT_PAD)),
        augment_cutout=int(opts.get("augment_cutout", DEFAULT_CUTOUT)),
        progress=progress,
    )


def rating_metrics(model: ModelSpec, params, data) -> dict[str, float]:
    """``{"test_rmse": ...}`` where the dataset's classes are ordered values (001 Table 3's ratings: the
    softmax-expected rating's RMSE, :func:`labeldp.rating_metrics.expected_value_rmse`), else ``{}``."""
    values = class_values_of(data)
    if values is None:
        return {}
    logits = predict_logits(model, params, to_float_images(data.x_test))
    return {"test_rmse": expected_value_rmse(logits, data.y_test, values)}


def train_and_evaluate(
    model: ModelSpec,
    data,
    target_weights: np.ndarray,
    spec: RunSpec,
    *,
    desc: str,
    on_epoch_end=None,
    confusion: dict | None = None,
    provenance: dict | None = None,
) -> tuple[dict[str, Any], dict[str, float], Any]:
    """Trains on ``target_weights``; returns (metrics, timings, audit log-probs or None, see
    :func:`labeldp.training.audit_log_probs`). With a ``confusion`` dict, fills it with the test-set
    confusion matrices of the model at initialisation (``"init"``) and trained (``"test"``), 000 Figure 4.
    A variant's ``init_from`` starts the model from a pre-trained network (:mod:`labeldp.pretrained_init`);
    a ``provenance`` dict then gets ``{"init_from": <what the record says of it>}``."""
    x_train = to_float_images(data.x_train)
    init, init_summary = initial_state(model, data, spec, seed=spec.seed)
    if init_summary is not None:
        if provenance is None:  # a record must say where its model started
            raise ValueError(
                f"{desc}: variant {spec.variant!r} starts from a pre-training but its record would not say so"
            )
        provenance["init_from"] = init_summary
    result = train_weighted(
        model,
        x_train=x_train,
        target_weights=target_weights,
        config=train_config(spec),
        seed=spec.seed,
        init_params=init,
        desc=desc,
        on_epoch_end=on_epoch_end,
    )
    x_test = to_float_images(data.x_test)
    acc = accuracy_pct(model, result.params, x_test, data.y_test)
    if confusion is not None:
        k = int(data.num_classes)
        start = init if init is not None else initial_params(model, spec.seed)
        confusion["init"] = confusion_matrix(model, start, x_test, data.y_test, k)
        confusion["test"] = confusion_matrix(model, result.params, x_test, data.y_test, k)
    metrics = {
        "test_accuracy_pct": acc,
        "diverged": result.diverged or not np.isfinite(result.final_loss),
        "final_train_loss": result.final_loss,
        "steps": result.steps,
        **rating_metrics(model, result.params, data),
    }
    timings = {
        "train_seconds": result.train_seconds,
        "seconds_per_epoch": result.seconds_per_epoch,
        "sgd_forward": result.forward,
    }  # which forward pass the gradient ran through
    return metrics, timings, audit_log_probs(model, result.params, data)
