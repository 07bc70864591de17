"""A table's scope in its report: scored or an experiment, and what data its records ran on."""

from labeldp.report.table_scope import records_data_source, scored_table


def _rec(source="official", subset=None):
    return {"dataset": {"name": "mnist", "source": source, "subset": subset}}


def test_records_data_source_names_the_weakest_data_any_record_ran_on():
    assert records_data_source([]) == ""
    assert records_data_source([_rec(), _rec()]) == "official"
    assert records_data_source([_rec(), _rec(subset=2000)]) == "official subset"
    # one stand-in record (e.g. the non-private column's) taints the table, and wins over a subset
    assert records_data_source([_rec(), _rec(subset=2000), _rec(source="synthetic_standin")]) == "stand-in"


def test_a_report_scores_its_scorecard_tables_or_all_of_them():
    assert scored_table({}, "table5_mnist")  # no scorecard_tables: the report scores every table
    cfg = {"scorecard_tables": ["table5_mnist_dpsgd_grid_cpu"], "claim_tables": ["table14_pro_momentum_seeds_cpu"]}
    assert scored_table(cfg, "table5_mnist_dpsgd_grid_cpu")
    assert not scored_table(cfg, "table14_pro_momentum_seeds_cpu")  # claims evaluated, cells not scored
    assert not scored_table(cfg, "rr_family_momentum_eps2_cpu")
