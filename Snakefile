# Label-DP reproduction workflow. Default target: every table and figure (`rule all`).
#   full (GPUs):  snakemake --profile workflow/profiles/gpu   (--resources gpu_slots=N jobs per GPU)
#   smoke (CPU):  snakemake --cores 2 --configfile workflow/config/smoke.yaml
#   one table:    snakemake --cores 2 table5_mnist   (preview its cost first: python -m labeldp.plan_cost table5_mnist)
import os
import sys

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version

min_version("9.0")

configfile: os.path.join(workflow.basedir, "workflow/config/config.yaml")

# Jobs run with the interpreter that runs Snakemake (the venv) unless --use-conda puts the
# rule's conda environment first on PATH.
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
sys.path.insert(0, workflow.basedir)

from labeldp import plan as _plan
from labeldp import batch_fit as _batch_fit
from labeldp import data_layout as _data_layout
from labeldp import plan_cost as _plan_cost
from labeldp.config import gpu_slots_env, jax_cache_env, validate_config
from labeldp.plan import ConfigError

try:
    validate_config(config, os.path.join(workflow.basedir, "workflow/schemas/config.schema.yaml"))
except ConfigError as err:
    raise WorkflowError(f"Invalid configuration (fix the key named below; see workflow/config/config.yaml):\n{err}")

if not os.path.isabs(config.get("reference_dir", "")):
    config["reference_dir"] = os.path.join(workflow.basedir, config.get("reference_dir") or "workflow/resources/reference")

RESULTS = config["results_dir"]
REPORTS = config["reports_dir"]
LOGS = config["logs_dir"]
DATA = config["data_dir"]
TABLES = [t for t, c in config["tables"].items() if c.get("kind", "table") == "table"]
FIGURES = [t for t, c in config["tables"].items() if c.get("kind", "table") == "figure"]
# image datasets some table pre-trains SimCLR on (a `<base>_simclr` dataset): 000 Figure 3 per base
SIMCLR_BASES = _data_layout.simclr_bases(config)
# 000 Figure 5 / 002 Figure 1 (examples per user) where a table trains on Criteo Attribution's users
USER_FIGURE = any(t.get("dataset") == "criteo_attribution" for t in config["tables"].values())
TABLE_RUNS = _plan.runs_by_table(config)
try:
    _batch_fit.check_batches_fit(config, TABLE_RUNS)  # a batch larger than the data fails here, before any job
except ConfigError as err:
    raise WorkflowError(f"Invalid configuration (fix the key named below):\n{err}")
RUNS = _plan.all_runs(config, TABLE_RUNS)
# One training job per sweep (runs sharing all but grid point and seed; labeldp/sweeps.py), at most
# config `sweep_max_runs` runs each; tables depend on the sweeps' markers.
from labeldp import sweeps as _sweeps

SWEEPS = _sweeps.workflow_sweeps(config, TABLE_RUNS)
SWEEP_OF_RECORD = _sweeps.sweep_of_record(SWEEPS)

# `--resources gpu_slots=N` (workflow/profiles/gpu): N training/audit jobs share one GPU, each
# with XLA_PYTHON_CLIENT_MEM_FRACTION = 0.9 / N. Not given: no fraction (CPU; Slurm gres).
# Every JAX job also gets the persistent compilation cache (config jax_compilation_cache_dir; null: off).
try:
    JOB_ENV = gpu_slots_env(getattr(workflow.global_resources.get("gpu_slots"), "value", None)) + jax_cache_env(
        config.get("jax_compilation_cache_dir"), workdir=os.getcwd())
except ConfigError as err:
    raise WorkflowError(str(err))

wildcard_constraints:
    dataset="[a-z0-9_]+",
    table="(" + "|".join(list(config["tables"])) + ")",


rule all:
    default_target: True
    input:
        expand(f"{REPORTS}/tables/{{t}}.md", t=TABLES),
        expand(f"{REPORTS}/figures/{{t}}.md", t=FIGURES),
        f"{REPORTS}/scorecard.md",
        # every published cell against any committed table (workflow/rules/status.smk), where the config asks
        [f"{REPORTS}/reproduction_status.md"] if config.get("reproduction_status") else [],
        expand(f"{REPORTS}/figures/{{e}}.md", e=list(config.get("paper_examples") or {})),
        # 000 Figure 3: the SimCLR pre-training loss of each pre-trained base
        expand(f"{REPORTS}/figures/simclr_loss_{{b}}.md", b=SIMCLR_BASES),
        # 000 Figure 5 / 002 Figure 1: examples per user in Criteo Attribution
        [f"{REPORTS}/figures/criteo_examples_per_user.md"] if USER_FIGURE else [],
        # the label-canary audit, where the config asks for it in `all` (the smoke profile does)
        [f"{config['reports_dir']}/audit/audit.passed"] if (config.get("audit") or {}).get("in_all") else [],
        # every sweep's marker, so that incomplete records are trained also where the tables are
        # committed (workflow/rules/aggregate.smk, sweep_markers)
        lambda wc: sweep_markers(TABLES + FIGURES),


# Jobs that make a sweep's inputs (fetch, prepare, SimCLR, pre-training) and the successive-halving
# checkpoints run before any ready sweep: a sweep's priority is labeldp.plan_cost.job_priority (at most
# PRIORITY_CEILING, in either sweep_order), and Snakemake does not pass priorities upstream, so without
# this a sweep's inputs, or a finished cell's stage 2, could wait behind other ready sweeps.
UPSTREAM_PRIORITY = _plan_cost.UPSTREAM_PRIORITY

include: "workflow/rules/fetch.smk"
include: "workflow/rules/prepare.smk"
include: "workflow/rules/ssl.smk"
include: "workflow/rules/pretrain.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/aggregate.smk"
include: "workflow/rules/status.smk"
include: "workflow/rules/audit.smk"
include: "workflow/rules/examples.smk"
