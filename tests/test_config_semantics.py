"""Config checks the schema cannot express (labeldp.config_semantics): the stopped-epoch column's requirements."""

from __future__ import annotations

import pytest

from labeldp.config import validate_config
from labeldp.plan import ConfigError
from tests.helpers import REPO, repo_config

SCHEMA = REPO / "workflow/schemas/config.schema.yaml"
TABLE = "alibi_official_recipe_cpu"
COLUMN = "alibi_official_heldout_stop"


def _stopped_column(cfg):
    return next(c for c in cfg["tables"][TABLE]["columns"] if c["id"] == COLUMN)


def test_the_protocol_configs_stopped_column_is_valid():
    validate_config(repo_config("protocol_cpu.yaml"), SCHEMA)


def _drop_selection(cfg):
    del _stopped_column(cfg)["selection_metric"]


def _final_selection(cfg):
    _stopped_column(cfg)["selection_metric"] = "validation_noisy_accuracy_pct"


def _no_curve_variant(cfg):
    _stopped_column(cfg)["variant"] = "heldout10"  # held out, but no per-epoch curves


def _no_heldout_variant(cfg):
    _stopped_column(cfg)["variant"] = "official_recipe_test_curve"  # curves, but no held-out release


def _auc_table(cfg):
    cfg["tables"][TABLE]["metric"] = "test_auc"


def _selection_without_metric(cfg):
    del _stopped_column(cfg)["metric"]


@pytest.mark.parametrize(
    "mutate, says",
    [
        (_drop_selection, "set selection_metric: heldout_stopped_validation_noisy_accuracy_pct"),
        (_final_selection, "set selection_metric: heldout_stopped_validation_noisy_accuracy_pct"),
        (_no_curve_variant, "alibi/heldout10 records no per-epoch held-out curve"),
        (_no_heldout_variant, "alibi/official_recipe_test_curve records no per-epoch held-out curve"),
        (_auc_table, "the table's is 'test_auc'"),
        (_selection_without_metric, "it goes with metric: heldout_stopped_test_accuracy_pct"),
    ],
)
def test_a_stopped_column_missing_what_it_reads_is_refused_naming_the_key(mutate, says):
    cfg = repo_config("protocol_cpu.yaml")
    mutate(cfg)
    with pytest.raises(ConfigError, match=rf"tables\.{TABLE}\.columns\.{COLUMN}") as err:
        validate_config(cfg, SCHEMA)
    assert says in str(err.value)
