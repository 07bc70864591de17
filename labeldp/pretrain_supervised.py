"""Trains one named supervised pre-training (the ``pretrain_supervised`` rule; :mod:`labeldp.pretraining`).

Non-private SGD on every training label of a public dataset (001 Appendix B: "a (non-private)
ResNet18 on the full CIFAR-100 training set"), with the entry's recipe, through the same loop as
every non-private run (:func:`labeldp.training.train_weighted`). Writes, each to a temporary name
first:

* ``DIR/state.msgpack``: the trained state (Flax serialization: parameters, and BatchNorm statistics);
* ``DIR/pretrain.json``: the entry, the data actually used (source, sizes: a stand-in says so), the
  test accuracy on the dataset's own test set, timings, environment.

CLI::

    python -m labeldp.pretrain_supervised --data data/prepared/cifar100-official-full.npz \
        --out-dir results/pretrained/cifar100_cifar_cnn/<id> --spec '<PretrainingSpec JSON>'

Same data, entry and seed give the same state on CPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import flax.serialization
import jax

from labeldp import records
from labeldp.atomic_io import write_bytes_atomic
from labeldp.data.prepare import load_prepared
from labeldp.models import build_model
from labeldp.pretraining import RECORD_FILE, STATE_FILE, PretrainingSpec
from labeldp.training import TrainConfig, accuracy_pct, one_hot, to_float_images, train_weighted

__all__ = ["pretrain", "main"]


def train_config_of(spec: PretrainingSpec) -> TrainConfig:
    """The entry's :class:`~labeldp.training.TrainConfig` (its recipe options by name)."""
    return TrainConfig(
        learning_rate=spec.learning_rate,
        epochs=spec.epochs,
        batch_size=spec.batch_size,
        mixup_alpha=spec.mixup_alpha,
        progress=False,
        **dict(spec.options),
    )


def pretrain(spec: PretrainingSpec, data) -> tuple[Any, dict[str, Any]]:
    """Trains ``spec`` on ``data`` (every label); returns (state, record)."""
    if data.name != spec.dataset:
        raise ValueError(f"pre-training {spec.name!r} is on {spec.dataset!r} but the data holds {data.name!r}")
    config = train_config_of(spec)
    model = build_model(spec.model, input_shape=tuple(data.x_train.shape[1:]), num_classes=int(data.num_classes))
    t0 = time.perf_counter()
    result = train_weighted(
        model,
        x_train=to_float_images(data.x_train),
        target_weights=one_hot(data.y_train, int(data.num_classes)),
        config=config,
        seed=spec.seed,
        desc=f"pretrain {spec.name}",
    )
    acc = accuracy_pct(model, result.params, to_float_images(data.x_test), data.y_test)
    record = {
        "name": spec.name,
        "model": spec.model,
        "config": spec.to_dict(),
        "dataset": {
            "name": data.name,
            "source": data.source,
            "synthetic_standin": bool(data.is_synthetic),
            "n_train": int(data.x_train.shape[0]),
            "n_test": int(data.x_test.shape[0]),
            "num_classes": int(data.num_classes),
            "subset": data.subset,
        },
        "privacy": "none needed: every label read is the public dataset's (no private label is used)",
        "metrics": {
            "test_accuracy_pct": acc,
            "final_train_loss": result.final_loss,
            "diverged": bool(result.diverged),
            "steps": int(result.steps),
        },
        "timings": {
            "train_seconds": result.train_seconds,
            "seconds_per_epoch": result.seconds_per_epoch,
            "total_seconds": time.perf_counter() - t0,
        },
        "environment": records.environment(),
        "created": records.now_utc(),
    }
    return jax.device_get(result.params), record


def write(out_dir: str | Path, state: Any, record: Mapping[str, Any]) -> None:
    """The state first, then the record (the rule's outputs; each atomically)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(out / STATE_FILE, flax.serialization.to_bytes(state))
    records.write_json_atomic(out / RECORD_FILE, record)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m labeldp.pretrain_supervised", description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="the public dataset's prepared .npz")
    p.add_argument("--out-dir", required=True)
    p.add_argument("--spec", required=True, help="PretrainingSpec as JSON (labeldp.pretraining)")
    a = p.parse_args(argv)
    d = json.loads(a.spec)
    spec = PretrainingSpec(**{**d, "options": dict(d.get("options") or {})})
    state, record = pretrain(spec, load_prepared(a.data))
    write(a.out_dir, state, record)
    print(
        f"pre-trained {spec.name}: test accuracy {record['metrics']['test_accuracy_pct']:.2f}% "
        f"in {record['timings']['train_seconds']:.0f}s -> {a.out_dir}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
