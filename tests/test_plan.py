import math
from pathlib import Path

import pytest

from labeldp import batch_fit, plan
from labeldp.methods import registry
from labeldp.config import validate_config
from labeldp.plan import ConfigError

from tests.helpers import REPO, install_fake_methods, repo_config

SCHEMA = REPO / "workflow/schemas/config.schema.yaml"


def test_default_and_profile_configs_are_valid():
    for extra in ((), ("smoke.yaml",), ("quick.yaml",)):
        validate_config(repo_config(*extra), SCHEMA)


#: configs layered on another (``--configfile gpu_report.yaml <file>``), validated in their layering below
_LAYERED = {"gpu_report_ablation.yaml", "gpu_report_label_dp_exact.yaml", "labeldp_pro_cpu.yaml"}


@pytest.mark.parametrize(
    "name",
    sorted(p.name for p in (REPO / "workflow/config").glob("*.yaml") if p.name not in _LAYERED | {"config.yaml"}),
)
def test_every_config_file_validates_on_the_default_config(name):
    """Schema and semantic checks (claim_tables, scorecard_tables, variants, ...) of each config file as
    ``--configfile <file>`` loads it; planning the larger ones takes minutes, so that is left to their reports."""
    from labeldp.config import load_workflow_config

    cfg = load_workflow_config(REPO / "workflow/config" / name)
    assert cfg["tables"]


@pytest.mark.parametrize(
    "files",
    [
        ("cpu_report.yaml",),
        ("gpu_report.yaml",),
        ("gpu_report.yaml", "gpu_report_ablation.yaml"),
        ("table6_fashion_mnist_cpu.yaml",),
        ("gpu_report.yaml", "labeldp_pro_cpu.yaml"),
        ("gpu_report.yaml", "gpu_report_label_dp_exact.yaml", "labeldp_pro_cpu.yaml"),
    ],
)
def test_dated_report_configs_are_valid_and_plan(files):
    """The committed report configs validate and plan; the ablation's FISTA column lands on the
    committed ablation records' paths."""
    from labeldp.config import load_workflow_config

    cfg = load_workflow_config(*(REPO / "workflow/config" / f for f in files))
    runs = plan.all_runs(cfg)
    assert runs
    batch_fit.check_batches_fit(cfg, plan.runs_by_table(cfg))  # no grid point samples more than its data
    if files == ("gpu_report.yaml", "labeldp_pro_cpu.yaml"):
        # every column but the converged one is Table 5a's own runs (the GPU report's records);
        # the converged columns run LabelDP-Pro's own lr and n2 32, at lambda 1 and 0.85 (MNIST's best);
        # the lambda 0.85 column at eps 0.1-2 is the same records as Table 2's smoothed column
        t5 = {r.record_path for r in plan.select_runs(cfg, ["table5_mnist"])}
        pro = plan.select_runs(cfg, ["table5_mnist_pro_cpu"])
        others = {r.record_path for r in pro if r.spec.variant != "converged_n32"}
        assert others and others <= t5
        conv = [r for r in pro if r.spec.variant == "converged_n32"]
        assert len(conv) == 2 * 6 * 3 and all(r.record_path not in t5 for r in conv)
        assert {
            (
                r.spec.hparams["learning_rate"],
                r.spec.hparams["smoothing"],
                r.spec.options["alt_batch_size"],
                r.spec.options["vertices"],
                r.spec.options["projection_start"],
            )
            for r in conv
        } == {(1.0, 1.0, 32, "clipped", "predicted"), (1.0, 0.85, 32, "clipped", "predicted")}
        lam1 = [r for r in conv if r.spec.hparams["smoothing"] == 1.0]
        assert (
            sum((REPO / r.record_path).exists() for r in lam1 if r.spec.epsilon <= 0.5 and r.spec.epsilon >= 0.1) == 9
        )
        t2 = {r.record_path for r in plan.select_runs(cfg, ["table2_pro_cpu"])}
        assert {r.record_path for r in conv if r.spec.hparams["smoothing"] == 0.85 and r.spec.epsilon >= 0.1} <= t2
    if "gpu_report_ablation.yaml" in files:
        fista = [p for p in runs if "/labeldp_pro/altconv_fista/eps0.1/" in p and p.endswith("seed0.json")]
        assert fista == [
            "reports/gpu-2026-11-22/ablation/results/mnist/labeldp_pro/altconv_fista/eps0.1/"
            "bs1024-C5.0-ep10-lr0.2-pssauto-ps100-lam0.75/seed0.json"
        ]
        assert (REPO / fista[0]).exists()
        # FISTA at n2 = 1024: 200 iterations land on the committed records, with that batch
        n1024 = [
            r
            for r in plan.select_runs(cfg, ["ablation_mnist"], methods={"labeldp_pro"}, epsilons={0.1}, seeds={0})
            if r.spec.variant == "altconv_fista_n1024"
        ]
        assert sorted(r.spec.hparams["proj_steps"] for r in n1024) == [200, 500]
        assert all(r.spec.options["alt_batch_size"] == 1024 for r in n1024)
        s200 = next(r.record_path for r in n1024 if r.spec.hparams["proj_steps"] == 200)
        assert s200.endswith("altconv_fista_n1024/eps0.1/bs1024-C5.0-ep10-lr0.2-pssauto-ps200-lam0.75/seed0.json")
        assert (REPO / s200).exists()


def test_method_only_spans_its_own_axes():
    cfg = repo_config()
    t = "table5_mnist"
    col = plan.Column(
        id="nonprivate", label="", method="nonprivate", variant="default", ref_method=None, ref_variant=None
    )
    runs = plan.cell_runs(cfg, t, col, math.inf)
    # non-private ignores clip norm and projection axes: 4 lr x 3 epochs x 1 batch x 3 seeds
    assert len(runs) == 4 * 3 * 1 * 3
    assert all("clip_norm" not in r.spec.hparams for r in runs)
    assert len({r.record_path for r in runs}) == len(runs)


def test_optional_axes_are_searched_only_where_the_grid_lists_them():
    col = plan.Column(id="lp_2st", label="", method="lp_2st", variant="default", ref_method=None, ref_variant=None)
    full = plan.cell_runs(repo_config(), "table5_mnist", col, 1.0)
    # the full grid lists LP-2ST's mixup axes: 4 lr x 3 epochs x 3 stage-1 x 2 stage-2 alphas x 3 seeds
    assert len(full) == 4 * 3 * 3 * 2 * 3
    assert {(r.spec.hparams["mixup_alpha1"], r.spec.hparams["mixup_alpha2"]) for r in full} == {
        (a1, a2) for a1 in (0.0, 4.0, 8.0) for a2 in (0.0, 4.0)
    }
    assert len({r.record_path for r in full}) == len(full)
    ids = {
        (r.spec.hparams["mixup_alpha1"], r.spec.hparams["mixup_alpha2"]): r.record_path.split("/")[-2]
        for r in full
        if r.spec.hparams["learning_rate"] == 0.2 and r.spec.hparams["epochs"] == 10
    }
    # an optional axis at its default is left out of the id: one computation, one record name
    assert ids[(0.0, 0.0)] == "bs1024-ep10-lr0.2"
    assert ids[(4.0, 0.0)] == "bs1024-ep10-lr0.2-mix1a4.0"
    assert ids[(8.0, 4.0)] == "bs1024-ep10-lr0.2-mix1a8.0-mix2a4.0"
    # the quick grid does not list them: the default (no mixup) is used, with the same id
    quick = plan.cell_runs(repo_config("quick.yaml"), "table5_mnist", col, 1.0)
    assert all("mixup_alpha1" not in r.spec.hparams for r in quick)
    assert {r.record_path.split("/")[-2] for r in quick} == {"bs1024-ep10-lr0.2"}
    # methods without the optional axes never span them
    dp = plan.Column(id="dpsgd", label="", method="dpsgd", variant="default", ref_method=None, ref_variant=None)
    assert all("mixup_alpha1" not in r.spec.hparams for r in plan.cell_runs(repo_config(), "table5_mnist", dp, 1.0))


def test_unimplemented_methods_are_not_planned_and_say_why(monkeypatch):
    cfg = repo_config()
    # Table 5a plans exactly its implemented columns (+ the non-private reference) ...
    runs = plan.table_runs(cfg, "table5_mnist")
    implemented = {c.method for c in plan.columns(cfg["tables"]["table5_mnist"]) if registry.is_implemented(c.method)}
    assert {r.spec.method for r in runs} == implemented | {"nonprivate"}
    # ... and a method without a module is not planned and says why.
    real = registry.is_implemented
    monkeypatch.setattr(registry, "is_implemented", lambda name: name != "rr" and real(name))
    runs = plan.table_runs(cfg, "table5_mnist")
    assert "rr" not in {r.spec.method for r in runs}
    ok, why = plan.cell_status(cfg, "table5_mnist", plan.columns(cfg["tables"]["table5_mnist"])[0])
    assert not ok and "not implemented" in why
    t7 = {c.id: c for c in plan.columns(cfg["tables"]["table7"])}
    for col in ("dpsgd_k2", "labeldp_pro_k5", "nonprivate"):  # user-level methods run on Criteo Attribution
        assert plan.cell_status(cfg, "table7", t7.get(col) or plan.nonprivate_column(cfg["tables"]["table7"]))[0]


def test_fixed_hparams_and_filters(monkeypatch):
    install_fake_methods(monkeypatch, ["labeldp_pro"], axes=("learning_rate", "smoothing"))
    cfg = repo_config()
    cols = {c.id: c for c in plan.columns(cfg["tables"]["table2"])}
    vanilla = plan.cell_runs(cfg, "table2", cols["vanilla"], 0.1)
    smoothed = plan.cell_runs(cfg, "table2", cols["smoothed"], 0.1)
    assert {r.spec.hparams["smoothing"] for r in vanilla} == {1.0}
    assert {r.spec.hparams["smoothing"] for r in smoothed} == {0.7, 0.75, 0.8, 0.85}
    assert vanilla[0].spec.variant == "altconv_vanilla"
    assert vanilla[0].spec.options["denoiser"] == "alt_conv"


def test_runs_shared_between_tables_are_planned_once(monkeypatch):
    install_fake_methods(monkeypatch, ["dpsgd", "labeldp_pro"], axes=("learning_rate",))
    cfg = repo_config("smoke.yaml")
    t3 = {r.record_path for r in plan.table_runs(cfg, "table3")}
    t5 = {r.record_path for r in plan.table_runs(cfg, "table5_mnist")}
    assert t3 & t5  # NoOp == DP-SGD and AltConv == LabelDP-Pro runs are the same files
    all_runs = plan.all_runs(cfg)
    assert t3 | t5 <= set(all_runs)


def test_private_runs_carry_delta_and_nonprivate_delta_zero(monkeypatch):
    install_fake_methods(monkeypatch, ["dpsgd"])
    cfg = repo_config("smoke.yaml")
    runs = plan.table_runs(cfg, "table5_mnist")
    assert {r.spec.delta for r in runs if r.spec.method == "dpsgd"} == {cfg["delta"]}
    assert {r.spec.delta for r in runs if r.spec.method == "nonprivate"} == {0.0}


@pytest.mark.parametrize(
    "mutate, key",
    [
        (lambda c: c["tables"]["table2"].__setitem__("epsilons", [-0.1, 1.0]), "tables.table2.epsilons[0]"),
        (lambda c: c["tables"]["table3"].__setitem__("epsilons", [0.0]), "tables.table3.epsilons[0]"),
        (lambda c: c.__setitem__("seeds", []), "seeds"),
        (lambda c: c.__setitem__("seeds", [-1]), "seeds[0]"),
        (lambda c: c.__setitem__("delta", 0), "delta"),
        (lambda c: c.__setitem__("accountant", "moments"), "accountant"),
        (lambda c: c["tables"]["table5_mnist"].__setitem__("dataset", "svhn"), "tables.table5_mnist.dataset"),
        (
            lambda c: c["tables"]["table5_mnist"]["columns"].append({"id": "x", "method": "magic"}),
            "tables.table5_mnist.columns.x.method",
        ),
        (lambda c: c.__setitem__("grid", "huge"), "grid"),
        (lambda c: c.__setitem__("sedes", [0]), "sedes"),
        (lambda c: c["datasets"].__setitem__("svhn", {}), "datasets"),
        (lambda c: c["tables"].__setitem__("scorecard", dict(c["tables"]["table2"])), "tables"),
        (lambda c: c["tables"].__setitem__("fetch_mnist", dict(c["tables"]["table2"])), "tables"),
        (lambda c: c["tables"].__setitem__("table 2", dict(c["tables"]["table2"])), "tables"),
    ],
)
def test_bad_config_names_the_key(mutate, key):
    cfg = repo_config()
    mutate(cfg)
    with pytest.raises(ConfigError) as err:
        validate_config(cfg, SCHEMA)
    assert key in str(err.value)


def test_a_config_may_add_its_own_table():
    cfg = repo_config()
    cfg["tables"]["ablation_mnist"] = dict(cfg["tables"]["table5_mnist"], claims=[])
    validate_config(cfg, SCHEMA)


def test_raw_dir_is_the_layout_of_the_fetch_and_standin_rules(tmp_path):
    assert plan.raw_dir(tmp_path, "mnist", "official") == str(tmp_path / "raw" / "mnist")
    assert plan.raw_dir("data", "kmnist", "standin") == str(Path("data") / "standin" / "kmnist")
    with pytest.raises(ValueError, match="source must be one of"):
        plan.raw_dir("data", "mnist", "mirror")
    for source in ("official", "standin"):  # the fetch rules write into raw_root/<dataset>
        assert str(Path(plan.raw_root("data", source)) / "mnist") == plan.raw_dir("data", "mnist", source)
    with pytest.raises(ValueError, match="source must be one of"):
        plan.raw_root("data", "mirror")
    cfg = {"datasets": {"kmnist": {"standin": True}, "mnist": {"standin": False}}}
    assert plan.data_source(cfg, "kmnist") == "standin"
    assert plan.data_source(cfg, "mnist") == "official"
    assert plan.data_source(cfg, "cifar10") == "official"


def test_calibration_relation_reaches_dpsgd_family_runs_only():
    """The table's relation is given to accountant-calibrated methods only; their label-exact
    records get their own directory, the label randomizers share theirs between both tables."""
    from labeldp.config import load_workflow_config

    cfg = load_workflow_config(
        REPO / "workflow/config/gpu_report.yaml", REPO / "workflow/config/gpu_report_label_dp_exact.yaml"
    )
    exact = {
        (r.spec.method, r.spec.epsilon, r.spec.seed): r
        for r in plan.select_runs(cfg, ["table5_mnist_label_dp_exact"], epsilons={1.0})
    }
    paper = {
        (r.spec.method, r.spec.epsilon, r.spec.seed): r for r in plan.select_runs(cfg, ["table5_mnist"], epsilons={1.0})
    }
    for m in ("dpsgd", "labeldp_pro"):
        assert exact[(m, 1.0, 0)].spec.calibration_relation == "label_substitution"
        assert "/default-labelsub/" in exact[(m, 1.0, 0)].record_path
        assert paper[(m, 1.0, 0)].spec.calibration_relation is None  # the papers' convention
        assert "calibration_relation" not in paper[(m, 1.0, 0)].spec.to_dict()  # specs of older runs unchanged
        assert "-labelsub" not in paper[(m, 1.0, 0)].record_path
    for m in ("rr", "rr_debiased", "lp_2st", "alibi"):
        assert exact[(m, 1.0, 0)].spec.calibration_relation is None
        assert exact[(m, 1.0, 0)].record_path == paper[(m, 1.0, 0)].record_path
    cfg2 = dict(cfg, calibration_relation="label_substitution")
    assert plan.calibration_relation(cfg2, "table5_mnist", "dpsgd_opacus") == "label_substitution"
    assert plan.table_relation(cfg2, "table5_mnist") == "label_substitution"


def test_bad_calibration_relation_names_the_key():
    cfg = repo_config(calibration_relation="replace_one")
    with pytest.raises(ConfigError, match="calibration_relation"):
        validate_config(cfg, SCHEMA)


def test_scorecard_tables_must_be_tables_of_the_config():
    validate_config(repo_config(scorecard_tables=["table5_mnist"]), SCHEMA)
    with pytest.raises(ConfigError, match=r"scorecard_tables: \['table99'\]"):
        validate_config(repo_config(scorecard_tables=["table99"]), SCHEMA)


def test_table7_states_000s_claim_at_every_cap():
    """000 Section 6: LabelDP-Pro above RR for every eps < 5, at every cap k of the table."""
    cfg = repo_config()
    t7 = cfg["tables"]["table7"]
    caps = sorted({c["ref_k"] for c in t7["columns"]})
    claims = {c["winner"]: c for c in t7["claims"]}
    assert caps == [2, 5, 10]
    for k in caps:
        c = claims[f"labeldp_pro_k{k}"]
        assert c["losers"] == [f"rr_k{k}"]
        assert c["epsilons"] == [e for e in t7["epsilons"] if e < 5]


def test_a_column_not_run_in_a_config_plans_nothing_and_says_why():
    cfg = repo_config()
    t3 = cfg["tables"]["table3"]
    for c in t3["columns"]:
        if c["id"] == "selfconv_no_amp":
            c["not_run"] = "one step takes 147 s on this CPU"
    validate_config(cfg, SCHEMA)
    cols = {c.id: c for c in plan.columns(t3)}
    ok, why = plan.cell_status(cfg, "table3", cols["selfconv_no_amp"])
    assert not ok and why == "not run in this config: one step takes 147 s on this CPU"
    planned = plan.table_runs(cfg, "table3")
    assert not [r for r in planned if r.spec.variant == "selfconv_no_amp"]
    assert [r for r in planned if r.spec.variant == "selfspan_no_amp"]  # the other columns still plan
    t3["columns"][0]["not_run"] = ""
    with pytest.raises(ConfigError):
        validate_config(cfg, SCHEMA)


def test_a_batch_larger_than_the_data_is_refused_before_any_job_naming_the_key():
    cfg = repo_config("smoke.yaml")
    batch_fit.check_batches_fit(cfg, plan.runs_by_table(cfg))  # the smoke grid fits its subsets
    cfg["datasets"]["mnist"] = {"subset": 32, "standin": False}  # the smoke grid's DP batch is 64
    with pytest.raises(
        ConfigError,
        match=r"batch_size = 64, more than the 32 training examples.*lower batch_size in "
        r"grids\.smoke\..*datasets\.mnist\.subset",
    ):
        batch_fit.check_batches_fit(cfg, plan.runs_by_table(cfg))


def test_the_data_bound_is_the_split_the_stand_in_or_the_subset_and_unknown_for_tabular_data():
    cfg = repo_config()
    cfg["datasets"]["mnist"] = {"subset": None, "standin": False}
    assert batch_fit.training_units_bound(cfg, "mnist") == 60000
    cfg["datasets"]["cifar10"] = {"subset": 100000, "standin": True}
    assert batch_fit.training_units_bound(cfg, "cifar10") == 512  # the stand-in writer's size
    cfg["datasets"]["cifar10"] = {"subset": 300, "standin": False}
    assert batch_fit.training_units_bound(cfg, "cifar10") == 300
    assert batch_fit.training_units_bound(cfg, "criteo_attribution") is None  # users: known once prepared
    assert set(batch_fit.sampled_batch_keys("hybrid")) == {"dp_batch_size"} and batch_fit.sampled_batch_keys("rr") == ()


def test_the_configs_have_no_duplicate_keys():
    """YAML keeps the last of two equal keys silently: a second table named like an existing one would replace it
    (000's Figure 4 once replaced 003's `figure4`)."""
    import yaml

    class Strict(yaml.SafeLoader):
        pass

    def mapping(loader, node, deep=False):
        keys = [k.value for k, _ in node.value if isinstance(k, yaml.ScalarNode) and k.value != "<<"]
        dup = sorted({k for k in keys if keys.count(k) > 1})
        assert not dup, f"duplicate keys {dup} at line {node.start_mark.line + 1}"
        return loader.construct_mapping(node, deep=deep)

    Strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    for path in sorted((REPO / "workflow" / "config").glob("*.yaml")):
        yaml.load(path.read_text(), Loader=Strict)


def test_001_nets_config_puts_001s_networks_and_augmentation_in_001s_tables_and_smoke_keeps_the_small_cnn():
    from labeldp.config import load_workflow_config

    tables = ["lpmst_table4_mnist", "lpmst_table4_fashion_mnist", "lpmst_table5", "lpmst_table1"]
    cfg = load_workflow_config(REPO / "workflow/config/lpmst_001_nets.yaml")
    validate_config(cfg, SCHEMA)
    runs = plan.select_runs(cfg, tables)
    assert {r.spec.method for r in runs} == {"lp_mst", "lp_2st", "nonprivate"}
    for r in runs:
        want = "resnet18_v2_cifar" if r.spec.dataset == "cifar10" else "inception_001"
        assert r.spec.options["model"] == want and r.spec.options["augment"] == "crop_flip_cutout", r.spec
    smoke = plan.select_runs(repo_config("smoke.yaml"), tables)
    assert smoke and all("model" not in r.spec.options and "augment" not in r.spec.options for r in smoke)
