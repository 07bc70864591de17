"""000 Figure 5 and 002 Figure 1: how many examples each user has in Criteo Attribution.

Both papers show the distribution of examples (clicked impressions) per user, the reason 000 caps
each user at k examples (Table 7) and 002 compares caps (Table 3). This module counts them in the
prepared file (``user_train`` / ``user_test``: every clicked impression of every drawn user, before
the cap, :mod:`labeldp.data.sources.criteo_attribution`) and writes the histogram (PNG and PDF, log-scaled
counts), a tidy CSV and a Markdown page with the summary statistics and the share of users a cap k
truncates. A stand-in file says so in every output.

Usage::

    python -m labeldp.report.examples_per_user --data data/prepared/criteo_attribution-official-full.npz \
        --out-stem reports/figures/criteo_examples_per_user
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from labeldp.report.cli import run_writer
from labeldp.report.render import save_figure, write_atomic_text, write_csv

__all__ = ["examples_per_user", "write_examples_per_user_figure"]

#: The caps of 000 Table 7 and 002 Table 3.
CAPS = (1, 2, 5, 10)


def examples_per_user(user_ids: np.ndarray) -> np.ndarray:
    """Examples of each user (users numbered ``0..U-1`` as the prepared file numbers them).

    Raises:
      ValueError: no rows, or user ids that are not ``0..U-1`` with every user present.
    """
    users = np.asarray(user_ids, np.int64)
    if users.size == 0:
        raise ValueError("the split has no rows")
    counts = np.bincount(users)
    if users.min() < 0 or (counts == 0).any():
        raise ValueError(
            "user ids must number the split's users 0..U-1, each with at least one row; "
            "re-prepare the data with: snakemake <data_dir>/prepared/criteo_attribution-<tag>.npz"
        )
    return counts


def _load(path: Path) -> tuple[dict[str, np.ndarray], dict]:
    with np.load(path, allow_pickle=False) as z:
        if "user_train" not in z.files:
            raise ValueError(
                f"{path} has no user_train array: it is not a prepared Criteo Attribution file "
                "(prepare it with: snakemake <data_dir>/prepared/criteo_attribution-<tag>.npz)"
            )
        arrays = {k: np.asarray(z[k]) for k in ("user_train", "user_test") if k in z.files}
        meta = json.loads(str(z["metadata"])) if "metadata" in z.files else {}
    return arrays, meta


def write_examples_per_user_figure(*, data_path: str | Path, out_stem: str | Path) -> Path:
    """Writes ``<out_stem>.{png,pdf,csv,md}`` for the prepared file ``data_path``.

    Returns:
      The Markdown page's path.
    """
    arrays, meta = _load(Path(data_path))
    standin = str(meta.get("source", "")).startswith("synthetic") or meta.get("source") == "standin"
    name = f"{meta.get('dataset', 'criteo_attribution')}{' (synthetic stand-in, not the real data)' if standin else ''}"
    counts = {split.removeprefix("user_"): examples_per_user(users) for split, users in arrays.items()}
    stem = Path(out_stem)
    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    top = max(int(c.max()) for c in counts.values())
    bins = np.arange(1, top + 2) - 0.5
    for split, c in counts.items():
        ax.hist(c, bins=bins, histtype="step", label=f"{split} ({c.size} users)")
    ax.set_yscale("log")
    ax.set_xlabel("examples per user")
    ax.set_ylabel("users")
    ax.set_title(f"Examples per user, {name}", fontsize=9)
    ax.legend(fontsize=8)
    save_figure(fig, stem.with_suffix(".png"), stem.with_suffix(".pdf"))
    plt.close(fig)
    rows = []
    for split, c in counts.items():
        values, users = np.unique(c, return_counts=True)
        rows += [
            {"split": split, "standin": standin, "examples": int(v), "users": int(u)} for v, u in zip(values, users)
        ]
    write_csv(stem.with_suffix(".csv"), rows)
    lines = [
        f"# Examples per user (000 Figure 5, 002 Figure 1), {name}",
        "",
        f"- data: `{data_path}` (every clicked impression of each drawn user, before the per-user cap)",
        "",
        "| split | users | examples | mean | median | max | " + " | ".join(f"users above k = {k}" for k in CAPS) + " |",
        "|---" * (6 + len(CAPS)) + "|",
    ]
    for split, c in counts.items():
        above = " | ".join(f"{100.0 * np.mean(c > k):.1f}%" for k in CAPS)
        lines.append(
            f"| {split} | {c.size} | {int(c.sum())} | {c.mean():.2f} | {np.median(c):g} | {int(c.max())} | {above} |"
        )
    md = stem.with_suffix(".md")
    write_atomic_text(md, "\n".join(lines) + "\n")
    return md


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="the prepared Criteo Attribution file (.npz)")
    p.add_argument("--out-stem", required=True)
    a = p.parse_args(argv)
    return run_writer(write_examples_per_user_figure, data_path=a.data, out_stem=a.out_stem)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
