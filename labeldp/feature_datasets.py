"""Datasets of frozen self-supervised features (000 Section 5.3 / Table 6).

A *features dataset* ``<base>_simclr`` exists for every image dataset ``<base>`` of the registry
(``cifar10_simclr``, ``fashion_mnist_simclr``, ...): the representations of ``<base>``'s train and
test images under a SimCLR encoder pre-trained on ``<base>``'s unlabeled training images
(:mod:`labeldp.ssl`). The same rules build it for any image dataset (``workflow/rules/ssl.smk``):

1. ``pretrain_simclr``: ``<results_dir>/ssl/<base>-<source>-<size>/<ssl_id>/encoder.msgpack`` and
   ``pretrain.json`` (the loss curve), from the prepared ``<base>`` images; labels never read.
2. ``features``: ``<data_dir>/prepared/<base>_simclr-<source>-<size>-<ssl_id>.npz``, built once and
   shared by every run of every table on ``<base>_simclr``.

The features dataset follows its base dataset's ``datasets.<base>`` options (subset, stand-in): a
table on ``cifar10_simclr`` in the smoke profile uses the CIFAR-10 stand-in, and every output says
so. ``<ssl_id>`` names the pre-training configuration (config key ``ssl``), so features from a
different encoder never reuse a file.

Nothing here reads labels: the encoder and the features are functions of the (public) images only,
so label-DP methods may use them freely (000 Section 5.3).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

__all__ = [
    "FEATURES_SUFFIX",
    "FEATURES_KIND",
    "FEATURES_MODEL",
    "features_base",
    "ssl_config",
    "ssl_id",
    "encoder_dir",
    "features_path",
]

FEATURES_SUFFIX = "_simclr"
FEATURES_KIND = "features"
#: The registered network a features dataset trains (a linear classifier on the frozen representations).
FEATURES_MODEL = "linear"

#: The SimCLR pre-training of 000 Appendix D.2 (ResNet-18 with the CIFAR stem, Adam lr 1e-3, weight
#: decay 1e-6, batch 1024, 1,000 epochs); the config key ``ssl`` overrides any field.
DEFAULT_SSL = {
    "width": 64,
    "projection_dim": 128,
    "epochs": 1000,
    "batch_size": 1024,
    "learning_rate": 1.0e-3,
    "weight_decay": 1.0e-6,
    "temperature": 0.5,
    "checkpoint_every": 10,
    "seed": 0,
}


def features_base(dataset: str, image_datasets: Mapping[str, str]) -> str | None:
    """The image dataset a features dataset is built from (``cifar10`` for ``cifar10_simclr``), or
    None when ``dataset`` is not a features dataset.

    Args:
      dataset: a dataset id.
      image_datasets: dataset id -> kind (``labeldp.plan.DATASET_KINDS``).
    """
    if not dataset.endswith(FEATURES_SUFFIX):
        return None
    base = dataset[: -len(FEATURES_SUFFIX)]
    return base if image_datasets.get(base) == "image" else None


def ssl_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The SimCLR configuration the workflow pre-trains with: :data:`DEFAULT_SSL` updated by the
    config's ``ssl`` block."""
    return {**DEFAULT_SSL, **dict(config.get("ssl") or {})}


def ssl_id(config: Mapping[str, Any]) -> str:
    """A readable, collision-free name of the pre-training configuration, e.g.
    ``simclr-w64-ep1000-bs1024-s0-1a2b3c4d`` (the hash covers every field)."""
    cfg = ssl_config(config)
    digest = hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()[:8]
    return f"simclr-w{cfg['width']}-ep{cfg['epochs']}-bs{cfg['batch_size']}-s{cfg['seed']}-{digest}"


def encoder_dir(config: Mapping[str, Any], base: str, data_tag: str) -> str:
    """Where the pre-training of ``base`` writes (checkpoints, ``encoder.msgpack``, ``pretrain.json``).

    Args:
      config: the workflow config.
      base: the image dataset.
      data_tag: ``<source>-<size>`` of the base's prepared file (``official-full``, ``standin-n512``).
    """
    return str(Path(config["results_dir"]) / "ssl" / f"{base}-{data_tag}" / ssl_id(config))


def features_path(config: Mapping[str, Any], dataset: str, data_tag: str) -> str:
    """The features file of ``dataset`` (``<base>_simclr``) for the base's ``data_tag``."""
    return str(Path(config["data_dir"]) / "prepared" / f"{dataset}-{data_tag}-{ssl_id(config)}.npz")
