"""labeldp.methods.base: the held-out selection rule shared by the runner and the audit planner."""

from __future__ import annotations

import math

import pytest

from labeldp import selection
from labeldp.methods import registry
from labeldp.methods.base import SELECTION_OPTIONS, heldout_selection_options, runner_heldout_selection
from tests.helpers import label_method_spec


def test_the_rule_reads_only_the_selection_options_in_their_order():
    options = {"validation_epsilon": 0.5, "momentum": 0.9, "validation_fraction": 0.1}
    assert heldout_selection_options(options) == list(SELECTION_OPTIONS)
    assert runner_heldout_selection(selection_by_runner=True, options=options) == list(SELECTION_OPTIONS)
    assert runner_heldout_selection(selection_by_runner=False, options=options) == []
    assert runner_heldout_selection(selection_by_runner=True, options={"momentum": 0.9}) == []


@pytest.mark.parametrize("method", registry.implemented_methods())
@pytest.mark.parametrize("options", [{}, {"validation_fraction": 0.1}, {"validation_epsilon": math.inf}])
def test_runner_and_planner_agree_for_every_method(method, options):
    """The runner (selection.selected_by_runner: the imported module's flag) and the audit planner
    (registry.declared: the flag read from the module's source, without importing it) reach the same answer;
    both apply runner_heldout_selection, so they can disagree only through the flag, which this checks directly."""
    declared = registry.declared(method, "HELDOUT_SELECTION_BY_RUNNER", False)
    imported = getattr(registry.get_method(method), "HELDOUT_SELECTION_BY_RUNNER", False)
    assert declared == imported
    planned = bool(runner_heldout_selection(selection_by_runner=bool(declared), options=options))
    ran = selection.selected_by_runner(registry.get_method(method), label_method_spec(method, options=options))
    assert ran == planned == (bool(options) and bool(imported))


def test_some_method_selects_through_the_runner_and_dpsgd_selects_itself():
    flags = {
        m: bool(registry.declared(m, "HELDOUT_SELECTION_BY_RUNNER", False)) for m in registry.implemented_methods()
    }
    assert any(flags.values())
    assert flags["dpsgd"] is False
    assert set(SELECTION_OPTIONS) <= set(registry.get_method("dpsgd").OPTIONS)
