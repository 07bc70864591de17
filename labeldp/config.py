"""Loading and validating the workflow config (JSON schema + semantic checks).

Errors name the offending key as a dotted path (``tables.table2.epsilons[0]``) and say what
is allowed, before any job runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import jsonschema
import yaml

from labeldp.config_semantics import validate_semantics
from labeldp.plan import ConfigError
from labeldp.data.registry import dataset_names  # the registry is the one list of datasets
from labeldp.data.views import VIEWS  # and its split views


def _path(error: jsonschema.ValidationError) -> str:
    out = ""
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top level>"


def _explain(error: jsonschema.ValidationError) -> str:
    desc = error.schema.get("description") if isinstance(error.schema, dict) else None
    msg = f"config error at {_path(error)}: {error.message}"
    if error.validator == "additionalProperties":
        msg += " (remove the key or fix its spelling)"
    if error.validator == "propertyNames":
        msg += f" (allowed: {error.schema.get('enum')})"
    if desc:
        msg += f" [{desc}]"
    return msg


def validate_config(config: Mapping[str, Any], schema_path: str | Path) -> None:
    """Validates ``config`` against the schema, then semantically.

    Raises:
      ConfigError: with one line per problem, each naming its key.
    """
    with open(schema_path) as f:
        schema = yaml.safe_load(f)

    schema["properties"]["datasets"]["propertyNames"] = {"enum": [*dataset_names(), *VIEWS]}
    validator = jsonschema.Draft7Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        raise ConfigError("\n".join(_explain(e) for e in errors))
    validate_semantics(config)


REPO = Path(__file__).resolve().parents[1]
BASE_CONFIG = REPO / "workflow/config/config.yaml"
SCHEMA = REPO / "workflow/schemas/config.schema.yaml"


def load_workflow_config(*overrides: str | Path) -> dict[str, Any]:
    """The workflow config as Snakemake sees it: ``workflow/config/config.yaml`` deep-merged
    with ``overrides`` (``--configfile`` order), ``reference_dir`` resolved against the
    repository, validated (raises :class:`ConfigError` naming the key)."""
    cfg = load_config(BASE_CONFIG, *overrides)
    ref = cfg.get("reference_dir") or "workflow/resources/reference"
    cfg["reference_dir"] = ref if Path(ref).is_absolute() else str(REPO / ref)
    validate_config(cfg, SCHEMA)
    return cfg


def load_config(*paths: str | Path) -> dict[str, Any]:
    """Loads and deep-merges YAML config files (later files override earlier ones)."""
    merged: dict[str, Any] = {}
    for p in paths:
        with open(p) as f:
            deep_update(merged, yaml.safe_load(f) or {})
    return merged


def deep_update(base: dict, new: Mapping) -> dict:
    for k, v in new.items():
        if isinstance(v, Mapping) and isinstance(base.get(k), dict):
            deep_update(base[k], v)
        else:
            base[k] = v
    return base


def gpu_slots_env(gpu_slots: Any) -> str:
    """Environment prefix for one training job when ``gpu_slots`` jobs share one GPU.

    ``snakemake --resources gpu_slots=N`` (``workflow/profiles/gpu``) lets N training or audit
    jobs run at once on one GPU (each rule asks for one slot). Each job then gets
    ``XLA_PYTHON_CLIENT_MEM_FRACTION`` = 0.9 / N, rounded down to 0.01, so N JAX processes fit in
    the GPU's memory together with headroom. Without the resource (CPU runs; Slurm, where each
    job has a GPU of its own through gres) no fraction is set.

    Args:
      gpu_slots: the value of the global ``gpu_slots`` resource: None when not given, else a
        positive integer.

    Returns:
      ``""`` or ``"XLA_PYTHON_CLIENT_MEM_FRACTION=0.xx "`` to put before the job's command.

    Raises:
      ConfigError: ``gpu_slots`` is not a positive integer, or so large that a job's share
        would round to zero.
    """
    if gpu_slots is None:
        return ""

    if isinstance(gpu_slots, bool) or not isinstance(gpu_slots, int) or gpu_slots < 1:
        raise ConfigError(
            f"--resources gpu_slots={gpu_slots!r}: give a positive integer, the number "
            "of training jobs that share one GPU (e.g. --resources gpu_slots=4)"
        )
    if gpu_slots > 90:
        raise ConfigError(
            f"--resources gpu_slots={gpu_slots}: at most 90 jobs can share one GPU "
            "(each gets 0.9 / gpu_slots of its memory, at least 0.01)"
        )
    fraction = (90 // gpu_slots) / 100
    return f"XLA_PYTHON_CLIENT_MEM_FRACTION={fraction:.2f} "


#: Size cap of the persistent compilation cache. Setting a cap also turns on JAX's file lock
#: around every cache read and write (``jax._src.lru_cache``), so concurrent jobs never read an
#: entry another job is still writing.
JAX_CACHE_MAX_BYTES = 2 * 1024**3


def jax_cache_env(cache_dir: Any, *, workdir: str | Path) -> str:
    """Environment prefix that gives every job JAX's persistent compilation cache.

    A training job of the smoke profile spends much of its time compiling the same XLA programs
    as the job before it (measured on this repository's 2-core CPU: a LabelDP-Pro smoke run took
    75 s cold and 41 s with a warm cache, with the same test accuracy). The cache stores compiled
    executables keyed by the program, the compile options, the JAX version and the device, so a
    hit runs the same executable that a fresh compile would build: records are unchanged on CPU
    (``tests/workflow/test_jax_cache.py`` trains twice, cold and warm, and compares).

    Args:
      cache_dir: the config's ``jax_compilation_cache_dir``: None (no cache) or a directory,
        relative to Snakemake's working directory unless absolute.
      workdir: Snakemake's working directory.

    Returns:
      ``""`` or ``"JAX_COMPILATION_CACHE_DIR=... JAX_... "`` to put before the job's command
      (every entry cached, whatever its compile time or size; at most :data:`JAX_CACHE_MAX_BYTES`,
      least recently used entries evicted first).

    Raises:
      ConfigError: ``cache_dir`` is neither None nor a non-empty string.
    """
    import shlex

    if cache_dir is None:
        return ""
    if not isinstance(cache_dir, str) or not cache_dir.strip():
        raise ConfigError(
            f"jax_compilation_cache_dir: give a directory (e.g. .cache/jax) or null to turn the "
            f"persistent compilation cache off, got {cache_dir!r}"
        )
    path = Path(workdir) / cache_dir if not Path(cache_dir).is_absolute() else Path(cache_dir)
    return (
        f"JAX_COMPILATION_CACHE_DIR={shlex.quote(str(path))} JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 "
        f"JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0 JAX_COMPILATION_CACHE_MAX_SIZE={JAX_CACHE_MAX_BYTES} "
    )
