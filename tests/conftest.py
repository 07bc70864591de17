"""Shared fixtures: repository paths and the data mirror."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def mirror_dir() -> Path | None:
    env = os.environ.get("LABELDP_DATA_MIRROR")
    if env and Path(env).is_dir():
        return Path(env)
    default = REPO.parent / "shared" / "data"
    return default if default.is_dir() else None


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def mirror() -> Path:
    m = mirror_dir()
    if m is None:
        pytest.skip("no data mirror: set LABELDP_DATA_MIRROR to a directory of verified raw files")
    return m
