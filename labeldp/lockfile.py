"""The locked environment: which lock files the suite ships, their hashes, and whether the
installed packages are the locked ones.

``requirements/lock.txt`` (every dependency but torch, made by ``uv pip compile`` with hashes for
Linux x86-64 / Python 3.11) and ``requirements/torch-cpu.txt`` (torch's CPU build) are installed
by ``requirements/install.sh``; ``requirements/refresh.sh`` remakes them. Every record stores
:func:`lock_status` in its ``environment``, so a number can be traced to the exact package set,
and a run made outside the locked environment says so (``installed_matches_lock: false`` with
the differing packages) instead of passing for a locked one.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import re
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
LOCK_FILES = ("requirements/lock.txt", "requirements/torch-cpu.txt")

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def normalise_name(name: str) -> str:
    """PEP 503 normalised project name (``Scikit_Learn`` -> ``scikit-learn``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_pins(path: str | Path) -> dict[str, str]:
    """The ``name==version`` pins of a requirements file (options, hashes and comments skipped).

    Args:
      path: a requirements file such as ``requirements/lock.txt``.

    Returns:
      ``{normalised name: version}``.

    Raises:
      ValueError: a package is pinned twice with different versions.
    """
    pins: dict[str, str] = {}
    for line in Path(path).read_text().splitlines():
        match = _PIN.match(line.strip())
        if match is None:
            continue
        name, version = normalise_name(match.group(1)), match.group(2)
        if pins.get(name, version) != version:
            raise ValueError(f"{path}: {name} is pinned twice ({pins[name]} and {version})")
        pins[name] = version
    return pins


def _installed_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def lock_status(root: str | Path | None = None) -> dict[str, Any]:
    """What a record states about the locked environment.

    Args:
      root: the checkout holding ``requirements/`` (default: the one this package is in).

    Returns:
      ``{"files": {path: sha256 or None when absent}, "installed_matches_lock": bool or None,
      "differences": [{"package", "locked", "installed"}, ...]}``; ``installed_matches_lock``
      is None when a lock file is missing (nothing to compare with).
    """
    return dict(_lock_status_cached(str(Path(root) if root is not None else REPO_ROOT)))


@functools.lru_cache(maxsize=4)
def _lock_status_cached(root: str) -> dict[str, Any]:
    files: dict[str, str | None] = {}
    pins: dict[str, str] = {}
    for rel in LOCK_FILES:
        path = Path(root) / rel
        if not path.is_file():
            files[rel] = None
            continue
        files[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        pins.update(read_pins(path))
    if any(sha is None for sha in files.values()):
        return {"files": files, "installed_matches_lock": None, "differences": []}
    differences = [
        {"package": name, "locked": locked, "installed": installed}
        for name, locked in sorted(pins.items())
        if (installed := _installed_version(name)) != locked
    ]
    return {"files": files, "installed_matches_lock": not differences, "differences": differences}
