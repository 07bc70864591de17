"""Test helpers: the repository config, and fake methods for table tests."""

from __future__ import annotations

import json
import types
from pathlib import Path

import numpy as np

from labeldp import records
from labeldp.config import load_config, load_workflow_config
from labeldp.methods.base import RunSpec

REPO = Path(__file__).resolve().parents[1]

#: The label baselines' statistical tests' p-value threshold: a correct implementation fails one with
#: probability < 1e-4 under a fresh seed (the seeds are fixed, so a run is deterministic).
P_MIN_LABEL_BASELINES = 1e-4


def project_modules() -> dict[str, Path]:
    """Every module of the packages ``labeldp`` and ``baselines``: dotted name -> source path."""
    out = {}
    for pkg in ("labeldp", "baselines"):
        for path in (REPO / pkg).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def repo_config(*extra: str, **overrides):
    files = [REPO / "workflow/config/config.yaml"] + [REPO / "workflow/config" / e for e in extra]
    cfg = load_config(*files)
    cfg["reference_dir"] = str(REPO / "workflow/resources/reference")
    cfg.update(overrides)
    return cfg


def fake_method(name: str, axes=("learning_rate",), kinds=("image",)):
    return types.SimpleNamespace(NAME=name, HYPERPARAMETERS=tuple(axes), DATASET_KINDS=tuple(kinds), run=None)


def install_fake_methods(monkeypatch, names, axes=("learning_rate",)):
    """Makes ``names`` look implemented to the planner (and nothing else). The planner's cache of methods'
    optional axes is swapped for a fresh one for the test, so no fake's axes outlive it."""
    import functools

    from labeldp import run_identity
    from labeldp.methods import registry

    real_is, real_get, real_declared = registry.is_implemented, registry.get_method, registry.declared
    fakes = {n: fake_method(n, axes) for n in names}

    def declared(n, attr, *default):
        return getattr(fakes[n], attr, *default) if n in fakes else real_declared(n, attr, *default)

    monkeypatch.setattr(registry, "is_implemented", lambda n: n in fakes or real_is(n))
    monkeypatch.setattr(registry, "get_method", lambda n: fakes[n] if n in fakes else real_get(n))
    monkeypatch.setattr(registry, "declared", declared)
    fresh = functools.lru_cache(maxsize=None)(run_identity.optional_hyperparameters.__wrapped__)
    monkeypatch.setattr(run_identity, "optional_hyperparameters", fresh)  # the planner's axes and the run ids
    return fakes


def prepared_attribution(directory, *, n_rows: int = 2500, seed: int = 1):
    """A prepared SYNTHETIC Criteo Attribution stand-in (users and sensitive features) in ``directory``."""
    from labeldp.data.sources import criteo_attribution
    from labeldp.data.tabular import load_prepared_tabular

    criteo_attribution.write_standin(directory / "raw", n_rows=n_rows, seed=seed)
    return load_prepared_tabular(
        criteo_attribution.prepare_dataset(
            raw_dir=directory / "raw", out_path=directory / "p.npz", source="synthetic_standin"
        )
    )


def assert_label_event_reaccounts(privacy: dict) -> None:
    """A label randomizer's record stores a dp_accounting event under REPLACE_ONE, and the PLD
    accountant gives it exactly the record's epsilon at the record's delta (issue 30)."""
    from labeldp.accounting import label_events

    event = label_events.label_event_from_record(privacy)
    assert event is not None, f"no event in the privacy block of {privacy.get('mechanism')!r}"
    assert privacy["dp_accounting_relation"] == "REPLACE_ONE"
    eps = float(privacy["epsilon"])
    got = label_events.label_event_epsilon(event, delta=float(privacy["delta"]), scale=eps)
    assert eps * (1 - 1e-4) <= got <= eps + label_events.label_event_tolerance(event, epsilon=eps), (got, eps)


def fake_mnist_images(n_train=256, n_test=128, k=10, seed=0, source="fake"):
    """Random 28x28x1 uint8 images with random labels, shaped like prepared MNIST (name ``mnist``), for
    tests that run a method end to end without data."""
    rng = np.random.default_rng(seed)
    return types.SimpleNamespace(
        x_train=rng.integers(0, 256, (n_train, 28, 28, 1), dtype=np.uint8),
        y_train=rng.integers(0, k, n_train),
        x_test=rng.integers(0, 256, (n_test, 28, 28, 1), dtype=np.uint8),
        y_test=rng.integers(0, k, n_test),
        num_classes=k,
        name="mnist",
        source=source,
        subset=None,
    )


def write_prepared_mnist(path: Path, n_train: int = 192, n_test: int = 64) -> Path:
    """A prepared-data file (``.npz``) of random MNIST-shaped images and labels (a synthetic stand-in), for
    the sweep and audit runners, which load their data from a path."""
    rng = np.random.default_rng(0)
    meta = {"num_classes": 10, "dataset": "mnist", "source": "synthetic_standin", "subset": None, "kind": "image"}
    np.savez(
        path,
        x_train=rng.integers(0, 256, (n_train, 28, 28, 1), dtype=np.uint8),
        y_train=rng.integers(0, 10, n_train),
        x_test=rng.integers(0, 256, (n_test, 28, 28, 1), dtype=np.uint8),
        y_test=rng.integers(0, 10, n_test),
        metadata=np.asarray(json.dumps(meta)),
    )
    return path


def audit_config(tmp_path, **audit):
    """``workflow/config/audit.yaml`` writing under ``tmp_path``, its ``audit`` block updated with ``audit``."""
    cfg = load_workflow_config(REPO / "workflow/config/audit.yaml")
    cfg["results_dir"] = str(tmp_path / "results")
    cfg["reports_dir"] = str(tmp_path / "reports")
    cfg["audit"] = {**cfg["audit"], **audit}
    return cfg


def user_package(tmp_path, monkeypatch, package: str, modules: dict[str, str]):
    """Writes ``modules`` (name -> source) as the package ``package`` of a user's own under
    ``tmp_path`` and puts it on ``sys.path``, as a project outside this repository would be."""
    pkg = tmp_path / package
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name, source in modules.items():
        (pkg / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    return pkg


def dpsgd_spec(options, *, variant: str, batch_size: int):
    """A one-epoch DP-SGD run on MNIST at eps 1 (smoke profile) with the variant's ``options``."""
    return RunSpec(
        dataset="mnist",
        method="dpsgd",
        variant=variant,
        epsilon=1.0,
        delta=1e-5,
        seed=0,
        hparams={"learning_rate": 0.05, "epochs": 1, "batch_size": batch_size, "clip_norm": 1.0},
        options=options,
        profile="smoke",
    )


def planted_record(
    run,
    *,
    metrics,
    source="official",
    n_train=60000,
    n_test=10000,
    eps_achieved=None,
    delta=None,
    valid=True,
    reason=None,
    relation=None,
    details=None,
):
    """A hand-made record of planned ``run`` with ``metrics`` (the report tests' planted grids).

    ``delta``: the record's delta (default the spec's); ``relation``: a ``neighboring_relation``
    for the privacy block (default none stated); ``details``: a ``details`` block (default none)."""
    spec = run.spec
    privacy = {
        "target_epsilon": records.encode_epsilon(spec.epsilon),
        "epsilon": records.encode_epsilon(spec.epsilon if eps_achieved is None else eps_achieved),
        "delta": spec.delta if delta is None else delta,
        "valid": valid,
        "invalid_reason": reason,
        "mechanism": "test",
    }
    if relation is not None:
        privacy["neighboring_relation"] = relation
    rec = {
        "schema_version": 1,
        "run_id": run.run_id,
        "dataset": {"name": spec.dataset, "source": source, "n_train": n_train, "n_test": n_test, "subset": None},
        "method": spec.method,
        "variant": spec.variant,
        "seed": spec.seed,
        "hparams": dict(spec.hparams),
        "privacy": privacy,
        "metrics": dict(metrics),
        "timings": {},
        "environment": {"cpu": "testcpu", "jax_backend": "cpu", "cpu_count": 2},
        "config": {},
        "created": "now",
    }
    if details is not None:
        rec["details"] = dict(details)
    return rec


def write_table_record(cfg, run, acc, *, diverged=False, eps_achieved=None, valid=True, reason=None):
    """Writes a planted record of ``run`` with test accuracy ``acc`` (the table tests' planted grids)."""
    metrics = {"test_accuracy_pct": acc, "diverged": diverged}
    rec = planted_record(run, metrics=metrics, eps_achieved=eps_achieved, valid=valid, reason=reason)
    records.write_record(run.record_path, rec)


def label_method_spec(method: str, *, epsilon: float = 1.0, seed: int = 0, epochs: int = 1, options=None) -> RunSpec:
    """A label baseline's run on MNIST-shaped data: lr 0.1, batch 64, ``epochs``, pure eps (delta 0)."""
    return RunSpec(
        dataset="mnist",
        method=method,
        variant="default",
        epsilon=epsilon,
        delta=0.0,
        seed=seed,
        hparams={"learning_rate": 0.1, "epochs": epochs, "batch_size": 64},
        options=options or {},
    )
