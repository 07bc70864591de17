"""Writing a report's files: text and CSV through a temporary name and a rename, figures as PNG and PDF, and a
renderer's whole set of outputs (:func:`write_report_files`)."""

from __future__ import annotations

import csv
import io
import math
import os
from pathlib import Path
from typing import Any, Callable

from labeldp.atomic_io import write_text_atomic

__all__ = ["write_atomic_text", "write_csv", "save_figure", "write_report_files", "renderer"]


def write_atomic_text(path: Path, text: str) -> None:
    """Writes ``text`` to ``path`` through a temporary file and a rename (:mod:`labeldp.atomic_io`)."""
    write_text_atomic(path, text)


def csv_float(value: Any) -> float | None:
    """A tidy CSV cell as a number.

    Args:
      value: the cell as read back (a string), or a number.

    Returns:
      The float; None for an empty cell, ``None``, a non-number or NaN (a cell with no value).
    """
    if value in (None, "", "None"):
        return None
    try:
        x = float(value)
    except ValueError:
        return None
    return None if math.isnan(x) else x


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """Writes ``rows`` (their first row's keys as the header) as CSV to a temporary name, then renames it."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0].keys()) if rows else ["table"])
    w.writeheader()
    for r in rows:
        w.writerow(r)
    write_atomic_text(path, buf.getvalue())


def save_figure(fig, png: Path, pdf: Path | None = None) -> None:
    """Writes ``fig`` as PNG (120 dpi) and PDF, each to a temporary name then renamed."""
    for path, kw in ((png, {"dpi": 120}), (pdf, {})):
        if path is None:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.stem}.part{path.suffix}")
        fig.savefig(tmp, bbox_inches="tight", **kw)  # a legend placed outside the axes is kept
        os.replace(tmp, path)


def write_report_files(
    out_dir: Path,
    name: str,
    *,
    rows: list[dict[str, Any]],
    markdown: str,
    draw: Callable[[Path, Path], None],
    plot_dir: Path | None = None,
    tex: bool = False,
) -> int:
    """Writes a renderer's outputs: ``<name>.csv`` (tidy rows), ``<name>.tex`` (when ``tex``: the markdown in a
    verbatim block), the plot ``draw(png, pdf)`` in ``plot_dir`` (default ``out_dir``), then ``<name>.md`` last,
    each through a temporary name and a rename. Returns 0 (the command's exit status)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_csv(out_dir / f"{name}.csv", rows)
    if tex:
        write_atomic_text(
            out_dir / f"{name}.tex",
            "% generated from result records (same content as the .md)\n"
            "\\begin{verbatim}\n" + markdown + "\n\\end{verbatim}\n",
        )
    plots = plot_dir or out_dir
    plots.mkdir(parents=True, exist_ok=True)
    draw(plots / f"{name}.png", plots / f"{name}.pdf")
    write_atomic_text(out_dir / f"{name}.md", markdown)
    print(f"wrote {out_dir / name}.*")
    return 0


def renderer(rows_of, markdown_of, draw_of, *, tex: bool = False):
    """A renderer's ``main(config, name, out_dir, plot_dir=None) -> 0`` (:data:`labeldp.report.build.RENDERERS`)
    from its three parts: ``rows_of(config, name)`` (the tidy rows), ``markdown_of(config, name, rows)`` and
    ``draw_of(config, name, rows, png, pdf)``; the files are written by :func:`write_report_files`."""

    def main(config, name: str, out_dir: Path, plot_dir: Path | None = None) -> int:
        rows = rows_of(config, name)
        return write_report_files(
            out_dir,
            name,
            rows=rows,
            markdown=markdown_of(config, name, rows),
            draw=lambda png, pdf: draw_of(config, name, rows, png, pdf),
            plot_dir=plot_dir,
            tex=tex,
        )

    return main
