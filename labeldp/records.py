"""The result record: one JSON file per run, the only input tables are built from.

Record format (schema version 1). Every method writes exactly these top-level keys:

``schema_version``   int, 1.
``run_id``           str, ``<dataset>/<method>/<variant>[-shuffle][-labelsub]/eps<eps>/<hp_id>/seed<seed>``.
``table_keys``       list of workflow targets the run was planned for (informational).
``dataset``          dict: ``name``, ``source`` (``official`` or ``synthetic_standin``),
                     ``n_train``, ``n_test``, ``subset`` (None = full split).
``method``           str, method id (``nonprivate``, ``rr``, ``rr_debiased``, ``lp_2st``,
                     ``alibi``, ``dpsgd``, ``labeldp_pro``, ...).
``variant``          str, method variant (``default``, ``no_amp``, ``amp_reference_only``, ...).
``seed``             int.
``hparams``          dict of the hyper-parameters actually used.
``privacy``          dict: ``target_epsilon`` (float or ``"inf"``), ``epsilon`` (achieved,
                     from the accountant for what ran; ``"inf"`` for non-private), ``delta``,
                     ``valid`` (bool: is (epsilon, delta) a valid guarantee for what ran),
                     ``invalid_reason`` (str or None), ``mechanism`` (str), ``accounting``
                     (dict from the accountant: accountant, noise multiplier, sampling rate,
                     steps, amplification, event) or None for pure-DP label randomizers.
``metrics``          dict: ``test_accuracy_pct`` (classification) or ``test_auc`` /
                     ``test_mse``; ``diverged`` (bool: a NaN/inf loss was seen); others.
``timings``          dict: ``train_seconds``, ``seconds_per_epoch``, ``total_seconds``; for the
                     non-private weighted-SGD loop also ``sgd_forward`` (``model`` or ``tapped``:
                     which forward pass the gradient ran through, :mod:`labeldp.dpsgd.sgd_step`).
``environment``      dict: package versions, python, platform, hostname, cpu, ``machine`` (clock,
                     bogomips, usable CPUs, memory: :mod:`labeldp.machine`; since 2026-12-07),
                     gpu (JAX devices), git revision and whether the tree was dirty, and ``lock``: the
                     lock files' sha256 and whether the installed packages are the locked
                     ones (:func:`labeldp.lockfile.lock_status`).
``config``           dict: the workflow config profile and the run spec as given.
``created``          ISO-8601 UTC timestamp.

Records are written to a temporary name in the destination directory and renamed, so a
killed job never leaves a half-written record.
"""

from __future__ import annotations

import datetime as _dt
import functools
import importlib.metadata
import json
import math
import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any, Mapping

from labeldp.atomic_io import write_text_atomic
from labeldp.lockfile import lock_status
from labeldp.machine import cpu_model, describe

SCHEMA_VERSION = 1

REQUIRED_KEYS = (
    "schema_version",
    "run_id",
    "dataset",
    "method",
    "variant",
    "seed",
    "hparams",
    "privacy",
    "metrics",
    "timings",
    "environment",
    "config",
    "created",
)

_PACKAGES = (
    "labeldp",
    "jax",
    "jaxlib",
    "flax",
    "optax",
    "dp-accounting",
    "numpy",
    "scipy",
    "torch",
    "opacus",
    "scikit-learn",
    "pandas",
    "snakemake",
)


def package_versions() -> dict[str, str | None]:
    """Installed versions of the packages a result depends on (None if absent)."""
    return dict(_package_versions())


@functools.lru_cache(maxsize=1)
def _package_versions() -> dict[str, str | None]:
    """Read once per process (a sweep writes many records; the installed packages do not change)."""
    out: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_revision(repo_dir: str | os.PathLike | None = None, *, exclude: tuple[str, ...] = ()) -> dict[str, Any]:
    """The git commit of the code that ran, and whether the work tree had changes.

    Args:
      repo_dir: the checkout (default: the one this package is in).
      exclude: paths (absolute, or relative to the working directory) whose changes do not
        count as dirty, e.g. the report directory a table build is itself rewriting; paths
        outside the checkout are ignored.

    Returns:
      ``{"commit": ..., "dirty": ...}``; ``dirty`` is None when git cannot tell (from
      ``LABELDP_GIT_REVISION`` without ``.git``). Where ``.git`` exists and
      ``LABELDP_GIT_REVISION`` is set too, the detected revision is returned with the stated
      one beside it under ``"stated"`` (a copied ``.git`` can be an older snapshot than the
      tree, as on a lent GPU machine).
    """
    cwd = Path(repo_dir) if repo_dir else Path(__file__).resolve().parents[1]
    inside = []
    for p in exclude:  # relative paths are relative to the process's working directory
        try:
            inside.append(str((Path.cwd() / p).resolve().relative_to(cwd.resolve())))
        except ValueError:
            continue  # outside this checkout: its changes are not seen by git status anyway
    pathspec = ["--", "."] + [f":(exclude){p}" for p in inside] if inside else []
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", *pathspec],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=10,
        )
        if rev.returncode != 0:
            return _revision_from_env()
        if dirty.returncode != 0:  # unknown, never reported as clean
            found = {"commit": rev.stdout.strip(), "dirty": None}
        else:
            found = {"commit": rev.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        return _revision_from_env()
    stated = _revision_from_env()
    if stated["commit"] is not None:
        # both kept: what git sees here (a copied .git may be a stale snapshot) and what the
        # caller states the tree is; neither overrides the other
        found["stated"] = {"commit": stated["commit"], "dirty": stated["dirty"]}
    return found


def _revision_from_env() -> dict[str, Any]:
    """For copies of the work tree without ``.git`` (e.g. a lent GPU machine): the revision
    the caller states in ``LABELDP_GIT_REVISION`` (``<commit>`` or ``<commit>+dirty``)."""
    value = os.environ.get("LABELDP_GIT_REVISION", "").strip()
    if not value:
        return {"commit": None, "dirty": None}
    commit, _, flag = value.partition("+")
    return {"commit": commit, "dirty": flag == "dirty", "source": "LABELDP_GIT_REVISION"}


def environment(*, git_at_start: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Machine and software description stored with every record.

    Args:
      git_at_start: the revision taken when the run started (see
        :func:`labeldp.runner.build_record`); default: the revision now.
    """
    try:
        import jax

        devices = [f"{d.platform}:{getattr(d, 'device_kind', '')}" for d in jax.devices()]
        backend = jax.default_backend()
    except Exception:  # pragma: no cover - jax is a hard dependency
        devices, backend = [], "unknown"
    now = git_revision()
    git = dict(git_at_start) if git_at_start is not None else now
    out = {
        "packages": package_versions(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        # clock, bogomips, usable CPUs and memory: machines with one model name differed 2x in speed here
        "machine": describe().to_dict(),
        "jax_backend": backend,
        "jax_devices": devices,
        "git": git,
        "lock": lock_status(),
        # JAX's persistent compilation cache (labeldp.config.jax_cache_env); None: compiled here
        "jax_compilation_cache": os.environ.get("JAX_COMPILATION_CACHE_DIR") or None,
    }
    if now != git:
        out["git_at_write"] = now
    return out


def machine_description(env: Mapping[str, Any]) -> str:
    """One line naming the machine of a record's ``environment``: CPU model, JAX backend, the
    accelerator devices when the backend is not the CPU, and the CPU count."""
    backend = env.get("jax_backend")
    devices = ""
    if backend not in (None, "cpu"):
        devices = f": {', '.join(sorted(set(env.get('jax_devices') or [])))}"
    return f"{env.get('cpu')} ({backend}{devices}, {env.get('cpu_count')} cpus)"


def proc_status_kib(field: str) -> int:
    """A ``kB`` field of ``/proc/self/status`` (``VmRSS``, ``VmHWM``, ...); -1 where unavailable."""
    import re

    try:
        m = re.search(rf"^{field}:\s+(\d+)\s+kB", Path("/proc/self/status").read_text(), re.M)
    except OSError:  # pragma: no cover - not Linux
        return -1
    return int(m.group(1)) if m else -1


def reset_peak_rss() -> bool:
    """Resets this process's ``VmHWM`` to its current RSS (``/proc/self/clear_refs``), so a later
    ``proc_status_kib("VmHWM")`` is the peak of what ran since; False where that is impossible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_rss_mib() -> float | None:
    """Peak resident memory of this process so far, MiB (``getrusage``; None where unavailable).

    In a process that runs several runs (records of 2026-11-22/23 whose
    ``config.workflow.executor`` names the since-removed in-process runner) this is the peak
    over all of them up to now.
    """
    try:
        import resource

        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    except (ImportError, OSError):  # pragma: no cover - non-Unix
        return None
    return round(kib / 1024.0, 1)


def encode_epsilon(eps: float) -> float | str:
    """JSON-safe epsilon: ``"inf"`` for the non-private baseline."""
    return "inf" if eps is None or math.isinf(float(eps)) else float(eps)


def decode_epsilon(value: float | str) -> float:
    return math.inf if value in ("inf", None) else float(value)


def now_utc() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _json_default(obj: Any) -> Any:
    try:
        import numpy as np

        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, np.ndarray):
            return obj.tolist()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def validate_record(record: Mapping[str, Any]) -> None:
    """Raises ValueError naming the first missing or malformed key of a record."""
    missing = [k for k in REQUIRED_KEYS if k not in record]
    if missing:
        raise ValueError(f"result record is missing keys {missing}; see labeldp/records.py")
    priv = record["privacy"]
    for key in ("target_epsilon", "epsilon", "delta", "valid"):
        if key not in priv:
            raise ValueError(f"result record privacy section is missing {key!r}")
    if not isinstance(record["metrics"], Mapping):
        raise ValueError("result record 'metrics' must be a mapping")


def write_json_atomic(path: str | os.PathLike, obj: Any) -> Path:
    """Writes JSON to a temporary file in the same directory, then renames it into place."""
    text = json.dumps(obj, indent=2, sort_keys=True, default=_json_default, allow_nan=True) + "\n"
    return write_text_atomic(path, text)


def write_record(path: str | os.PathLike, record: Mapping[str, Any]) -> Path:
    """Validates and atomically writes one result record."""
    validate_record(record)
    return write_json_atomic(path, dict(record))


def record_paths(results_dir: str | os.PathLike) -> list[Path]:
    """Every run record under a results directory, sorted: its ``*.json`` files except those of the
    SimCLR pre-training (``<results_dir>/ssl/``: checkpoints, ``pretrain.json``), the supervised
    pre-trainings (``<results_dir>/pretrained/``, :mod:`labeldp.pretraining`), the papers' worked
    examples (``<results_dir>/examples/``, :mod:`labeldp.regression.paper_example`), and, at any depth,
    the sweeps' markers (``.sweeps/``: :mod:`labeldp.sweeps`, the audit's under ``audit/.sweeps/``) and
    the successive-halving selections (``.halving/``, :mod:`labeldp.halving`), which are not runs."""
    root = Path(results_dir)
    top = ("ssl", "pretrained", "examples")
    anywhere = {".sweeps", ".halving"}
    return sorted(
        p
        for p in root.rglob("*.json")
        if (parts := p.relative_to(root).parts)[0] not in top and not anywhere.intersection(parts[:-1])
    )


def read_record(path: str | os.PathLike) -> dict[str, Any]:
    with open(path) as f:
        record = json.load(f)
    validate_record(record)
    return record
