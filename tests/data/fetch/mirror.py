"""What the fetch tests share: the checksum-verified mirror beside the repository and file listings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from labeldp.data.fetch import MIRROR_ENV

# The checksum-verified mirror lives next to the repository: <repo>/../shared/data.
_DEFAULT_MIRROR = Path(__file__).resolve().parents[3].parent / "shared" / "data"
MIRROR = Path(os.environ.get(MIRROR_ENV) or _DEFAULT_MIRROR)

needs_mirror = pytest.mark.skipif(
    not (MIRROR / "mnist").is_dir(),
    reason=f"shared data mirror not found at {MIRROR} (set {MIRROR_ENV} to the mirror directory)",
)


def files_under(d: Path) -> list[str]:
    """Every file under ``d``, relative, sorted."""
    return sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file())


def part_files(d: Path) -> list[Path]:
    """The temporary ``.part-`` files left under ``d`` (an atomic write leaves none)."""
    return [p for p in d.rglob("*") if ".part-" in p.name]


def flip_byte(path: Path, offset: int = 1000) -> None:
    """Corrupts ``path`` in place: one byte inverted."""
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))
