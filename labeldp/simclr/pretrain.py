"""SimCLR pre-training with resumable orbax checkpoints (000 Appendix D.2; Chen et al. 2020).

000 D.2 pre-trains ResNet-18 (CIFAR stem) on the unlabeled CIFAR-10 training images with Adam,
learning rate 1e-3, weight decay 1e-6, batch 1024, for 1,000 epochs. Here:

* the optimizer is ``add_decayed_weights(wd)`` then ``adam(lr)``: coupled L2 decay, as PyTorch's
  ``Adam(weight_decay=...)`` (the paper's code base) does;
* the order of epoch ``e`` is ``numpy.random.default_rng([seed, e]).permutation(n)``, the last
  partial batch is dropped (one batch of all n images when n < batch size), and the two views of
  step ``t`` use ``fold_in(key(seed), t)``: the run is a deterministic function of (images, config);
* every ``checkpoint_every`` epochs and at the end, parameters, BatchNorm statistics, the Adam state,
  the epoch and the loss curve go to ``<out_dir>/checkpoints`` through orbax-checkpoint (which
  writes a temporary directory and renames it when complete; the last 2 are kept). A run killed at
  any point restarts from the last complete checkpoint and, on CPU, reaches bit-identical
  parameters to an uninterrupted run (``tests/simclr/test_pretrain.py`` kills one with SIGKILL);
* labels are never loaded.

CLI (the ``pretrain_simclr`` rule)::

    python -m labeldp.simclr.pretrain --data PREPARED.npz --out-dir DIR --config '{"epochs": 10, ...}'

writes ``DIR/encoder.msgpack`` (the encoder's parameters and BatchNorm statistics, flax
serialization) and ``DIR/pretrain.json`` (config, per-epoch loss curve, throughput, device), each to a
temporary name first.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, Mapping, NamedTuple

import numpy as np

from labeldp.atomic_io import write_bytes_atomic
from labeldp.records import write_json_atomic

__all__ = ["SimCLRConfig", "PretrainResult", "make_step", "pretrain", "main"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class SimCLRConfig:
    """SimCLR pre-training configuration (defaults: 000 D.2; temperature: SimCLR's CIFAR value).

    Attributes:
      width: channels of ResNet-18's first stage (64: the standard network, 512-d features).
      projection_dim: output size of the projection head.
      epochs: passes over the training images.
      batch_size: images per step (2x views per step).
      learning_rate: Adam's step size.
      weight_decay: coupled L2 decay.
      temperature: NT-Xent's tau.
      checkpoint_every: epochs between checkpoints.
      seed: data order, augmentation and initialisation.
    """

    width: int = 64
    projection_dim: int = 128
    epochs: int = 1000
    batch_size: int = 1024
    learning_rate: float = 1e-3
    weight_decay: float = 1e-6
    temperature: float = 0.5
    checkpoint_every: int = 10
    seed: int = 0

    def __post_init__(self):
        for name in ("width", "projection_dim", "epochs", "checkpoint_every"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"SimCLR config: {name} must be an integer >= 1, got {v!r} (fix ssl.{name})")
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 2:
            raise ValueError(
                f"SimCLR config: batch_size must be an integer >= 2 (NT-Xent needs negatives), got "
                f"{self.batch_size!r} (fix ssl.batch_size)"
            )
        for name in ("learning_rate", "temperature"):
            if not float(getattr(self, name)) > 0:
                raise ValueError(f"SimCLR config: {name} must be > 0, got {getattr(self, name)!r} (fix ssl.{name})")
        if not float(self.weight_decay) >= 0:
            raise ValueError(f"SimCLR config: weight_decay must be >= 0, got {self.weight_decay!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"SimCLR config: seed must be an integer >= 0, got {self.seed!r}")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "SimCLRConfig":
        """Builds a config, refusing unknown keys (with the known ones in the message)."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"SimCLR config: unknown keys {unknown}; known: {sorted(known)}")
        return cls(**dict(d))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class PretrainResult(NamedTuple):
    """What :func:`pretrain` returns (also written to ``pretrain.json``)."""

    encoder_path: Path
    record_path: Path
    record: dict


def load_images(path: str | os.PathLike) -> np.ndarray:
    """The training images of a prepared image dataset (uint8 NHWC); labels are not read."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"{path}: no prepared dataset here; build it first (snakemake data/prepared/<dataset>-<source>-<size>.npz)"
        )
    with np.load(path, allow_pickle=False) as npz:
        if "x_train" not in npz.files:
            raise ValueError(f"{path}: not a prepared image dataset (no x_train); give the .npz of an image dataset")
        x = npz["x_train"]
    if x.ndim != 4 or x.dtype != np.uint8:
        raise ValueError(
            f"{path}: x_train must be uint8 images (n, H, W, C), got {x.dtype} {x.shape}; SimCLR "
            "pre-trains on an image dataset, not on features or tabular data"
        )
    return x


def make_step(model, tx, *, temperature: float):
    """The jitted SimCLR training step (two augmented views, NT-Xent loss, one optimizer update)."""
    import jax
    import jax.numpy as jnp
    import optax

    from labeldp.simclr.augment import augment_batch
    from labeldp.simclr.ntxent import nt_xent

    @jax.jit
    def step(params, batch_stats, opt_state, images, key):
        k1, k2 = jax.random.split(key)
        views = jnp.concatenate([augment_batch(k1, images), augment_batch(k2, images)], axis=0)

        def loss_fn(p):
            z, upd = model.apply({"params": p, "batch_stats": batch_stats}, views, train=True, mutable=["batch_stats"])
            n = images.shape[0]
            return nt_xent(z[:n], z[n:], temperature=temperature), upd["batch_stats"]

        (loss, new_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), new_stats, opt_state, loss

    return step


def pretrain(
    images: np.ndarray, *, config: SimCLRConfig, out_dir: str | os.PathLike, progress: bool = True
) -> PretrainResult:
    """Pre-trains SimCLR on ``images``, resuming from ``out_dir/checkpoints`` when one exists.

    Args:
      images: (n, H, W, C) uint8 training images (no labels).
      config: :class:`SimCLRConfig`.
      out_dir: where checkpoints, ``encoder.msgpack`` and ``pretrain.json`` go.
      progress: show a progress bar (loss, images per second).

    Returns:
      :class:`PretrainResult`.
    """
    import flax.serialization
    import jax
    import optax
    import orbax.checkpoint as ocp
    from tqdm.auto import tqdm

    from labeldp.simclr.resnet import SimCLRNet

    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    n = int(images.shape[0])
    bs = min(int(config.batch_size), n)
    if bs < 2:
        raise ValueError(f"SimCLR needs at least 2 images, got {n}")
    steps_per_epoch = n // bs
    model = SimCLRNet(width=config.width, projection_dim=config.projection_dim)
    variables = model.init(jax.random.key(config.seed), np.zeros((2, *images.shape[1:]), np.float32), train=False)
    tx = optax.chain(optax.add_decayed_weights(config.weight_decay), optax.adam(config.learning_rate))
    state = {
        "params": variables["params"],
        "batch_stats": variables["batch_stats"],
        "opt_state": tx.init(variables["params"]),
        "epoch": np.zeros((), np.int64),
        "loss_curve": np.full((config.epochs,), np.nan, np.float64),
    }
    cfg_path = out / "simclr_config.json"  # a checkpoint directory belongs to one configuration
    if cfg_path.exists() and json.loads(cfg_path.read_text()) != config.to_dict():
        raise ValueError(
            f"{out} holds checkpoints of another SimCLR configuration ({cfg_path}); give a new --out-dir "
            "(the workflow names it by the ssl id) or delete that directory to start over"
        )
    if not cfg_path.exists():
        write_json_atomic(cfg_path, config.to_dict())
    mngr = ocp.CheckpointManager(out / "checkpoints", options=ocp.CheckpointManagerOptions(max_to_keep=2, create=True))
    resumed_from = mngr.latest_step()
    if resumed_from is not None:
        abstract = jax.tree_util.tree_map(ocp.utils.to_shape_dtype_struct, state)
        state = mngr.restore(resumed_from, args=ocp.args.StandardRestore(abstract))
    start = int(state["epoch"])
    params, stats, opt_state = state["params"], state["batch_stats"], state["opt_state"]
    loss_curve = np.asarray(state["loss_curve"], np.float64).copy()
    step = make_step(model, tx, temperature=float(config.temperature))
    x_dev = jax.device_put(images)
    base = jax.random.key(config.seed + 1)
    seconds, seen = 0.0, 0
    bar = tqdm(total=(config.epochs - start) * steps_per_epoch, desc="simclr", disable=not progress)
    for epoch in range(start, config.epochs):
        order = np.random.default_rng([config.seed, epoch]).permutation(n)
        losses = []
        t0 = time.perf_counter()
        for b in range(steps_per_epoch):
            idx = order[b * bs : (b + 1) * bs]
            key = jax.random.fold_in(base, epoch * steps_per_epoch + b)
            params, stats, opt_state, loss = step(params, stats, opt_state, x_dev[idx], key)
            losses.append(loss)
            bar.update(1)
            if b % 10 == 0:
                bar.set_postfix(
                    loss=f"{float(loss):.3f}",
                    img_s=f"{(seen + (b + 1) * bs) / max(seconds + time.perf_counter() - t0, 1e-9):.0f}",
                )
        loss_curve[epoch] = float(np.mean([float(v) for v in losses]))
        seconds += time.perf_counter() - t0
        seen += steps_per_epoch * bs
        if (epoch + 1) % config.checkpoint_every == 0 or epoch + 1 == config.epochs:
            mngr.save(
                epoch + 1,
                args=ocp.args.StandardSave(
                    {
                        "params": params,
                        "batch_stats": stats,
                        "opt_state": opt_state,
                        "epoch": np.asarray(epoch + 1, np.int64),
                        "loss_curve": loss_curve,
                    }
                ),
            )
            mngr.wait_until_finished()
    bar.close()
    mngr.close()
    enc = {"params": params["encoder"], "batch_stats": stats["encoder"]}
    enc_path = out / "encoder.msgpack"
    write_bytes_atomic(enc_path, flax.serialization.to_bytes(jax.device_get(enc)))
    dev = jax.devices()[0]
    record = {
        "config": config.to_dict(),
        "epochs_completed": int(config.epochs),
        "resumed_from_epoch": None if resumed_from is None else int(resumed_from),
        "loss_curve": [None if math.isnan(v) else float(v) for v in loss_curve],
        "final_loss": float(loss_curve[-1]),
        "n_images": n,
        "input_shape": list(images.shape[1:]),
        "steps_per_epoch": steps_per_epoch,
        "effective_batch_size": bs,
        "representation_dim": 8 * config.width,
        "seconds_this_process": seconds,
        "images_per_second_this_process": seen / seconds if seconds else None,
        "device": f"{dev.platform}:{getattr(dev, 'device_kind', '')}",
        "jax_backend": jax.default_backend(),
        "optimizer": "add_decayed_weights(weight_decay) + adam(learning_rate) (coupled L2, as torch Adam)",
        "labels_read": False,
    }

    rec_path = write_json_atomic(out / "pretrain.json", record)
    return PretrainResult(enc_path, Path(rec_path), record)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labeldp.simclr.pretrain", description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="prepared image dataset (.npz with uint8 x_train)")
    parser.add_argument("--out-dir", required=True, help="checkpoints, encoder.msgpack and pretrain.json go here")
    parser.add_argument("--config", default="{}", help="JSON of SimCLRConfig fields (workflow config key ssl)")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    try:
        cfg = SimCLRConfig.from_dict(json.loads(args.config))
        images = load_images(args.data)
        res = pretrain(images, config=cfg, out_dir=args.out_dir, progress=not args.no_progress)
    except (ValueError, FileNotFoundError, json.JSONDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{res.encoder_path}: {res.record['epochs_completed']} epochs, final loss {res.record['final_loss']:.4f}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
