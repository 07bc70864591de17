"""A run's identity: the readable, path-safe ids its record lives under.

``run_id`` is ``<dataset>/<method>/<variant>[-shuffle][-labelsub]/eps<eps>/<hp_id>/seed<seed>``,
the record's path below the results directory; the same computation always gets the same id
(a grid that lists an optional hyper-parameter at its default names the run as one that does not),
so a finished record is found again by every table and profile that plans it.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Mapping

from labeldp.methods import registry
from labeldp.methods.base import RunSpec

__all__ = ["format_eps", "hp_id", "cell_path", "grid_point_path", "seed_part", "run_id", "optional_hyperparameters"]

_ABBREV = {
    "learning_rate": "lr",
    "epochs": "ep",
    "batch_size": "bs",
    "clip_norm": "C",
    "proj_steps": "ps",
    "proj_step_size": "pss",
    "smoothing": "lam",
    "momentum": "mom",
    "mixup_alpha1": "mix1a",
    "mixup_alpha2": "mix2a",
    "mesh_size": "mesh",
    "num_clusters": "nclu",
}


def format_eps(eps: float) -> str:
    """Path-safe epsilon tag: ``inf`` or the shortest repr (``0.1``, ``2.0``).

    Args:
      eps: the cell's target epsilon.

    Returns:
      The tag used in ``eps<tag>`` directories.
    """
    return "inf" if math.isinf(eps) else repr(float(eps))


def hp_id(hparams: Mapping[str, Any], *, defaults: Mapping[str, Any] | None = None) -> str:
    """A readable, path-safe id of a grid point (``bs1024-ep10-lr0.1``).

    Args:
      hparams: the grid point's hyper-parameters.
      defaults: a method's optional hyper-parameters with their defaults; one at its default is
        left out, so the same computation has one id whether or not a grid lists the axis.

    Returns:
      The parts ``<abbrev><value>`` in key order, joined by ``-``; ``default`` when none is left.
    """
    parts = []
    for k in sorted(hparams):
        v = hparams[k]
        if defaults and k in defaults and v == defaults[k]:
            continue
        if isinstance(v, float):
            v = repr(v)
        parts.append(f"{_ABBREV.get(k, k)}{v}")
    return "-".join(parts) if parts else "default"


def cell_path(spec: RunSpec) -> str:
    """The directories of :func:`run_id` above the grid point (the cell's).

    Args:
      spec: any run of the cell.

    Returns:
      ``<dataset>/<method>/<variant>[-shuffle][-labelsub]/eps<eps>``.
    """
    variant = spec.variant + ("" if spec.sampling == "poisson" else f"-{spec.sampling}")
    if spec.calibration_relation == "label_substitution":
        variant += "-labelsub"
    return f"{spec.dataset}/{spec.method}/{variant}/eps{format_eps(spec.epsilon)}"


def grid_point_path(spec: RunSpec) -> str:
    """The directory of :func:`run_id` that holds one grid point's seeds.

    It is the same for every seed, so a planner forms it once per grid point and appends
    :func:`seed_part` (``run_id(spec) == grid_point_path(spec) + "/" + seed_part(spec.seed)``).

    Args:
      spec: any run of the grid point (its seed is ignored).

    Returns:
      ``<cell_path>/<hp_id>``, optional hyper-parameters at their defaults left out.
    """
    return f"{cell_path(spec)}/{hp_id(spec.hparams, defaults=optional_hyperparameters(spec.method))}"


def seed_part(seed: int) -> str:
    """The last component of :func:`run_id`.

    Args:
      seed: the run's seed.

    Returns:
      ``seed<seed>``.
    """
    return f"seed{seed}"


def run_id(spec: RunSpec) -> str:
    """The record's path below the results directory.

    Non-default batch sampling, and noise calibrated under label substitution (``-labelsub``), get
    their own directory, so records of different sampling schemes or calibrations never stand in
    for each other.

    Args:
      spec: the run.

    Returns:
      ``<dataset>/<method>/<variant>[-shuffle][-labelsub]/eps<eps>/<hp_id>/seed<seed>``.
    """
    return f"{grid_point_path(spec)}/{seed_part(spec.seed)}"


@functools.lru_cache(maxsize=None)
def optional_hyperparameters(method: str) -> Mapping[str, Any]:
    """A method's optional hyper-parameters with their defaults (cached: the planner asks per run).

    Args:
      method: a registry name.

    Returns:
      Its ``OPTIONAL_HYPERPARAMETERS``; ``{}`` if it has none or is not implemented.
    """
    if not registry.is_implemented(method):
        return {}
    return registry.declared(method, "OPTIONAL_HYPERPARAMETERS", {}) or {}
