"""000's published cells as the reproduction status reads them: their keys and the explanations of misses.

The reference file (:mod:`labeldp.report.reference`) repeats some rows; :func:`paper_cells` gives each published cell
once. A cell's key (:func:`cell_key`) names it in a report's ``explanations`` file, a YAML mapping from keys to the
sentence and report section of the experiment that explains why the cell is outside the tolerance or not run.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

__all__ = ["CELL_KEY_FIELDS", "REFERENCE_ONLY_SUFFIX", "PaperCell", "cell_key", "load_explanations", "paper_cells"]

#: A published variant with this suffix (000 Table 3's "w/ AMP" columns) is quoted, never computed by the suite.
REFERENCE_ONLY_SUFFIX = "reference_only"

CELL_KEY_FIELDS = ("table", "dataset", "method", "variant", "epsilon")


@dataclasses.dataclass(frozen=True)
class PaperCell:
    """One published cell."""

    table: str
    dataset: str
    method: str
    variant: str
    epsilon: float
    value: float

    @property
    def reference_only(self) -> bool:
        """000 Table 3's "w/ AMP" columns: quoted from the paper, never computed by the suite."""
        return self.variant.endswith(REFERENCE_ONLY_SUFFIX)


def cell_key(*, table: str, dataset: str, method: str, variant: str, epsilon: float | str) -> str:
    """The key of a published cell in ``explanations``.

    Args:
      table: the paper table (``"5a"``).
      dataset: its dataset (``mnist``).
      method: the published method (``rr_debiased``).
      variant: the published variant (``""`` where the paper prints one column per method).
      epsilon: the eps, or ``"*"`` for every eps of the method.

    Returns:
      ``<table>/<dataset>/<method>[:<variant>]/eps<eps>``, e.g. ``5a/mnist/rr_debiased/eps2``.
    """
    eps = epsilon if isinstance(epsilon, str) else f"{epsilon:g}"
    return f"{table}/{dataset}/{method}{':' + variant if variant else ''}/eps{eps}"


def paper_cells(ref: Sequence[Mapping[str, Any]], *, tables: Sequence[str], metric: str) -> list[PaperCell]:
    """The distinct published cells of ``tables`` on ``metric`` (the reference file repeats some rows).

    Args:
      ref: rows of :func:`labeldp.report.reference.load_reference`.
      tables: paper table ids (``"5a"``).
      metric: the published metric (``test_accuracy_pct``).

    Returns:
      One cell per (table, dataset, method, variant, eps), in the reference's order; non-private rows (eps inf)
      are left out.
    """
    seen: dict[tuple, PaperCell] = {}
    for r in ref:
        if r["table"] not in tables or r["metric"] != metric or r["epsilon"] == "inf":
            continue
        c = PaperCell(
            r["table"], r["dataset"], r["method"], r.get("variant") or "", float(r["epsilon"]), float(r["value"])
        )
        key = (c.table, c.dataset, c.method, c.variant, c.epsilon)
        if key in seen and not math.isclose(seen[key].value, c.value):
            where = cell_key(**dict(zip(CELL_KEY_FIELDS, key)))
            raise ValueError(f"the reference gives {where} two values ({seen[key].value}, {c.value})")
        seen.setdefault(key, c)
    return list(seen.values())


def load_explanations(path: str | Path | None) -> dict[str, dict[str, str]]:
    """``{cell key: {"why": sentence, "section": report section}}`` from a YAML mapping (None: none).

    Raises:
      ValueError: an entry without ``why`` (names the key and the fix).
    """
    if not path:
        return {}
    data = yaml.safe_load(Path(path).read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping of cell keys (e.g. '5a/mnist/rr/eps2') to {{why, section}}")
    out = {}
    for key, entry in data.items():
        if not isinstance(entry, dict) or not entry.get("why"):
            raise ValueError(f"{path}: entry {key!r} needs a 'why' sentence (and optionally the report 'section')")
        out[str(key)] = {"why": str(entry["why"]), "section": str(entry.get("section") or "")}
    return out
