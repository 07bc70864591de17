"""The frozen SimCLR encoder's representations of a dataset (000 Section 5.3), and a linear probe.

:func:`extract_features` evaluates the encoder (BatchNorm with its running statistics) in batches of a
fixed size, padding the last one, so every row is a function of its own image only: the features of
any subset equal the matching rows of the whole extraction, and the file is deterministic.

CLI (the ``features`` rule)::

    python -m labeldp.simclr.features --data PREPARED.npz --encoder-dir DIR --out FEATURES.npz \\
        --dataset-name cifar10_simclr

writes (temporary name, then rename) float32 ``x_train`` / ``x_test`` (n, 8 * width), the labels
``y_train`` / ``y_test`` copied from PREPARED.npz, and ``metadata`` (JSON): ``kind: "features"``, the
base dataset, its source (official or synthetic stand-in) and subset, and ``encoder``: the sha256 of
``encoder.msgpack``, the pre-training summary and a non-private linear-probe test accuracy.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from labeldp.data.prepare import atomic_savez

__all__ = ["load_encoder", "extract_features", "linear_probe_accuracy", "write_features", "main"]

FORMAT_VERSION = 1


def load_encoder(encoder_dir: str | Path) -> tuple[dict, dict]:
    """``(variables, pretrain record)`` of a finished pre-training directory."""
    import flax.serialization

    d = Path(encoder_dir)
    enc, rec = d / "encoder.msgpack", d / "pretrain.json"
    if not enc.is_file() or not rec.is_file():
        raise FileNotFoundError(
            f"{d}: no finished SimCLR pre-training (encoder.msgpack and pretrain.json); run "
            "python -m labeldp.simclr.pretrain (the pretrain_simclr rule) first"
        )
    variables = flax.serialization.msgpack_restore(enc.read_bytes())
    return variables, json.loads(rec.read_text())


def extract_features(variables: dict, images: np.ndarray, *, width: int, batch_size: int = 512) -> np.ndarray:
    """Representations (n, 8 * width) float32 of uint8 NHWC ``images`` under the frozen encoder.

    Args:
      variables: ``{"params": ..., "batch_stats": ...}`` of the encoder (:func:`load_encoder`).
      images: (n, H, W, C) uint8.
      width: the encoder's first-stage width (from the pre-training config).
      batch_size: rows per forward pass (fixed; the last batch is padded).

    Returns:
      (n, 8 * width) float32.
    """
    import jax
    import jax.numpy as jnp

    from labeldp.simclr.resnet import ResNet18

    model = ResNet18(width=width)
    fwd = jax.jit(lambda v, x: model.apply(v, x.astype(jnp.float32) / 255.0, train=False))
    n = images.shape[0]
    out = np.empty((n, 8 * width), np.float32)
    for s in range(0, n, batch_size):
        chunk = images[s : s + batch_size]
        pad = batch_size - chunk.shape[0]
        if pad:
            chunk = np.concatenate([chunk, np.zeros((pad, *chunk.shape[1:]), chunk.dtype)])
        out[s : s + batch_size] = np.asarray(fwd(variables, chunk))[: batch_size - pad]
    return out


def linear_probe_accuracy(
    f_train: np.ndarray, y_train: np.ndarray, f_test: np.ndarray, y_test: np.ndarray, *, seed: int = 0
) -> float:
    """Test accuracy (%) of a multinomial logistic regression on standardised features.

    A NON-PRIVATE diagnostic of encoder quality (000 reports 90.9% on CIFAR-10): it reads the true
    training labels, and its only output is this number in the features' metadata. No private
    method uses it.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(f_train)
    clf = LogisticRegression(max_iter=500, random_state=seed).fit(scaler.transform(f_train), y_train)
    return float(100.0 * np.mean(clf.predict(scaler.transform(f_test)) == y_test))


def write_features(*, data: str | Path, encoder_dir: str | Path, out: str | Path, dataset_name: str) -> dict[str, Any]:
    """Extracts train and test features and writes the features file; returns its metadata."""
    data = Path(data)
    if not data.is_file():
        raise FileNotFoundError(f"{data}: no prepared dataset; build it first")
    with np.load(data, allow_pickle=False) as npz:
        missing = {"x_train", "y_train", "x_test", "y_test", "metadata"} - set(npz.files)
        if missing:
            raise ValueError(f"{data}: not a prepared image dataset (missing {sorted(missing)})")
        arrays = {k: npz[k] for k in ("x_train", "y_train", "x_test", "y_test")}
        base_meta = json.loads(str(npz["metadata"][()]))
    if arrays["x_train"].ndim != 4 or arrays["x_train"].dtype != np.uint8:
        raise ValueError(
            f"{data}: x_train must be uint8 images (n, H, W, C), got {arrays['x_train'].dtype} "
            f"{arrays['x_train'].shape}"
        )
    variables, record = load_encoder(encoder_dir)
    width = int(record["config"]["width"])
    f_train = extract_features(variables, arrays["x_train"], width=width)
    f_test = extract_features(variables, arrays["x_test"], width=width)
    probe = linear_probe_accuracy(f_train, arrays["y_train"], f_test, arrays["y_test"])
    meta = {
        "dataset": dataset_name,
        "kind": "features",
        "format_version": FORMAT_VERSION,
        "num_classes": int(base_meta["num_classes"]),
        "source": base_meta["source"],
        "subset": base_meta.get("subset"),
        "base_dataset": base_meta.get("dataset"),
        "encoder": {
            "sha256": hashlib.sha256((Path(encoder_dir) / "encoder.msgpack").read_bytes()).hexdigest(),
            "pretrain": {
                k: record.get(k)
                for k in (
                    "config",
                    "epochs_completed",
                    "final_loss",
                    "device",
                    "images_per_second_this_process",
                    "n_images",
                )
            },
            "representation_dim": int(f_train.shape[1]),
            "linear_probe_test_accuracy_pct": probe,
        },
    }
    atomic_savez(
        Path(out),
        {
            "x_train": f_train,
            "y_train": arrays["y_train"].astype(np.int64),
            "x_test": f_test,
            "y_test": arrays["y_test"].astype(np.int64),
            "metadata": np.array(json.dumps(meta)),
        },
    )
    return meta


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labeldp.simclr.features", description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--encoder-dir", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--dataset-name", required=True)
    args = parser.parse_args(argv)
    try:
        meta = write_features(
            data=args.data, encoder_dir=args.encoder_dir, out=args.out, dataset_name=args.dataset_name
        )
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        f"{args.out}: {meta['dataset']} features dim {meta['encoder']['representation_dim']}, linear probe "
        f"{meta['encoder']['linear_probe_test_accuracy_pct']:.1f}%"
    )
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
