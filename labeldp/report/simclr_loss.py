"""000 Figure 3: the SimCLR pre-training loss per epoch, from the pre-training record.

The pre-training (:mod:`labeldp.simclr.pretrain`) writes ``pretrain.json`` with its per-epoch loss
curve; this module turns it into a figure (PNG and PDF, loss against epoch as in 000 Appendix D.2's
Figure 3), a tidy CSV and a Markdown page whose header says what ran: the dataset and whether it was
a stand-in, the encoder width, batch, epochs completed against planned, device and throughput.
000's curve is CIFAR-10 over 1,000 epochs of a width-64 ResNet-18; a run here states its own.

Usage::

    python -m labeldp.report.simclr_loss --record <results>/ssl/<base>-<tag>/<ssl_id>/pretrain.json \
        --dataset fashion_mnist --out-stem reports/figures/simclr_loss_fashion_mnist
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from labeldp.report.cli import run_writer
from labeldp.report.render import save_figure, write_atomic_text, write_csv

__all__ = ["read_loss_curve", "write_simclr_loss_figure"]


def read_loss_curve(record: dict[str, Any]) -> list[float]:
    """The per-epoch loss curve of a ``pretrain.json`` record.

    Raises:
      ValueError: the record has no finite loss curve (an unfinished or foreign file).
    """
    curve = record.get("loss_curve")
    if not isinstance(curve, list) or not curve:
        raise ValueError(
            "the pre-training record has no loss_curve: is it a finished labeldp.simclr.pretrain "
            "pretrain.json? Rerun the pretrain_simclr rule"
        )
    values = [float(v) for v in curve]
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"the pre-training loss curve has non-finite values: {values}")
    return values


def write_simclr_loss_figure(
    *, record_path: str | Path, dataset: str, out_stem: str | Path, standin: bool = False
) -> Path:
    """Writes ``<out_stem>.{png,pdf,csv,md}``: the SimCLR loss per epoch (000 Figure 3).

    Args:
      record_path: the pre-training's ``pretrain.json``.
      dataset: the image dataset it pre-trained on.
      out_stem: output path without suffix.
      standin: the images were a synthetic stand-in (said in every output).

    Returns:
      The Markdown page's path.
    """
    record = json.loads(Path(record_path).read_text())
    curve = read_loss_curve(record)
    cfg = record.get("config", {})
    stem = Path(out_stem)
    label = f"{dataset}{' (synthetic stand-in, not the real data)' if standin else ''}"
    epochs = list(range(1, len(curve) + 1))
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(epochs, curve, marker="o" if len(curve) <= 30 else None)
    ax.set_xlabel("epoch")
    ax.set_ylabel("SimCLR loss (NT-Xent)")
    ax.set_title(f"SimCLR pre-training loss, {label}", fontsize=9)
    save_figure(fig, stem.with_suffix(".png"), stem.with_suffix(".pdf"))
    plt.close(fig)
    write_csv(
        stem.with_suffix(".csv"),
        [{"dataset": dataset, "standin": standin, "epoch": e, "loss": v} for e, v in zip(epochs, curve)],
    )
    planned = cfg.get("epochs")
    lines = [
        f"# SimCLR pre-training loss (000 Figure 3), {label}",
        "",
        f"- record: `{record_path}`",
        (
            f"- encoder: ResNet-18 width {cfg.get('width')}, projection {cfg.get('projection_dim')}, temperature "
            f"{cfg.get('temperature')}; batch {cfg.get('batch_size')}, lr {cfg.get('learning_rate')}, "
            f"weight decay {cfg.get('weight_decay')}; {record.get('optimizer', '')}"
        ),
        (
            f"- epochs completed: {record.get('epochs_completed', len(curve))} of {planned} planned "
            "(000: 1,000 epochs of width 64 on CIFAR-10)"
        ),
        (
            f"- device: {record.get('device')}; {record.get('n_images')} images; "
            f"{record.get('images_per_second_this_process', float('nan')):.0f} images/s in the last process"
        ),
        "",
        "| epoch | loss |",
        "|---|---|",
    ]
    lines += [f"| {e} | {v:.4f} |" for e, v in zip(epochs, curve)]
    md = stem.with_suffix(".md")
    write_atomic_text(md, "\n".join(lines) + "\n")
    return md


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--record", required=True, help="pretrain.json of the pre-training")
    p.add_argument("--dataset", required=True)
    p.add_argument("--out-stem", required=True)
    p.add_argument("--standin", action="store_true", help="the images were a synthetic stand-in")
    a = p.parse_args(argv)
    return run_writer(
        write_simclr_loss_figure, record_path=a.record, dataset=a.dataset, out_stem=a.out_stem, standin=a.standin
    )


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
