"""A run's ids (labeldp/run_identity.py): readable, path-safe, and one id per computation."""

import dataclasses
import math
import os

from labeldp import plan, run_identity
from labeldp.methods.base import RunSpec
from tests.helpers import repo_config


def _spec(**kw) -> RunSpec:
    base = dict(
        dataset="mnist",
        method="lp_2st",
        variant="default",
        epsilon=1.0,
        delta=1e-5,
        seed=2,
        hparams={"learning_rate": 0.1, "epochs": 10, "batch_size": 64},
    )
    return RunSpec(**{**base, **kw})


def test_hp_id_is_readable_and_order_independent():
    ids = run_identity.hp_id
    assert ids({"learning_rate": 0.1, "epochs": 10}) == ids({"epochs": 10, "learning_rate": 0.1})
    assert ids({"learning_rate": 0.1, "epochs": 10, "batch_size": 1024}) == "bs1024-ep10-lr0.1"
    assert ids({}) == "default"


def test_run_id_is_the_cell_the_grid_point_and_the_seed():
    spec = _spec()
    assert run_identity.run_id(spec) == "mnist/lp_2st/default/eps1.0/bs64-ep10-lr0.1/seed2"
    assert run_identity.run_id(spec).startswith(run_identity.cell_path(spec) + "/")
    assert run_identity.cell_path(_spec(epsilon=math.inf)) == "mnist/lp_2st/default/epsinf"
    # the planner's names are these functions (re-exported), so a table finds the records a sweep wrote
    assert plan.run_id is run_identity.run_id and plan.cell_path is run_identity.cell_path


def test_every_planned_record_path_is_the_results_dir_and_the_run_id():
    """The planner forms a grid point's directory once for all its seeds: every planned run's record path
    is still ``<results_dir>/<run_id>.json``, the grid point's directory that of each of its seeds."""
    cfg = repo_config("smoke.yaml", seeds=[0, 1, 2])
    runs = [r for rs in plan.runs_by_table(cfg).values() for r in rs]
    assert len(runs) > 100
    for r in runs:
        assert r.record_path == os.path.join(str(cfg["results_dir"]), run_identity.run_id(r.spec) + ".json")
    # grid points with several seeds share their directory (the case the planner's shortcut serves)
    assert len({os.path.dirname(r.record_path) for r in runs}) < len({r.record_path for r in runs})


def test_an_optional_hyperparameter_at_its_default_names_the_same_run():
    """LP-2ST's ``temperature`` defaults to 1.0: a grid that lists it at 1.0 plans the run a grid
    without the axis plans; any other value is another run."""
    spec = _spec()
    at_default = dataclasses.replace(spec, hparams={**spec.hparams, "temperature": 1.0})
    other = dataclasses.replace(spec, hparams={**spec.hparams, "temperature": 0.5})
    assert run_identity.run_id(at_default) == run_identity.run_id(spec)
    assert run_identity.run_id(other) != run_identity.run_id(spec) and "temperature0.5" in run_identity.run_id(other)


def test_sampling_and_label_substitution_calibration_get_their_own_cells():
    spec = _spec(method="dpsgd")
    shuffled = dataclasses.replace(spec, sampling="shuffle")
    labelsub = dataclasses.replace(spec, calibration_relation="label_substitution")
    paths = {run_identity.cell_path(s) for s in (spec, shuffled, labelsub)}
    assert len(paths) == 3
    assert run_identity.cell_path(shuffled).endswith("default-shuffle/eps1.0")
    assert run_identity.cell_path(labelsub).endswith("default-labelsub/eps1.0")
