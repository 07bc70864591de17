# Train. `sweep`: one job per sweep (the planned runs that share all but grid point and seed, at
# most `sweep_max_runs` of them; labeldp/sweeps.py), one process that loads the data once and writes
# one JSON record per run (labeldp/records.py) as each finishes; its output is a marker written when
# every run has its record, so a failed job keeps its finished records and a rerun trains the rest.
# `train`: one record on its own (`snakemake <record path>`), the same code. Finished records are
# never redone.
import json as _json

from labeldp import pretraining as _pt


def _sweep(wc):
    path = f"{RESULTS}/.sweeps/{wc.sweep}.json"
    if path not in SWEEPS:
        raise WorkflowError(f"{path} is not a planned sweep of this config (see labeldp/sweeps.py)")
    return SWEEPS[path]


def _job_done(sw):
    """Whether a sweep job (this file's or audit.smk's) has its marker or a record for every run."""
    return os.path.exists(sw.marker_path) or all(os.path.exists(r.record_path) for r in sw.runs)


def _job_data(sw):
    """The prepared data: ancient() once the job is done (see _train_data: finished records are never
    redone because the data was prepared again), a plain input while a record is missing. Always the same
    file, so the job's input set never changes between runs (Snakemake's `input` rerun trigger); a job
    whose records all exist trains nothing and only writes its marker."""
    return ancient(sw.prepared_path) if _job_done(sw) else sw.prepared_path


def _job_pretrained_paths(sw):
    """{name: state path} of the pre-trainings the job's runs start from (variant option init_from)."""
    return _pt.inputs_of_options(config, [r.spec.options for r in sw.runs])


def _job_pretrained(sw):
    return _pretrained_inputs(_job_pretrained_paths(sw).values(), done=_job_done(sw))


def _job_priority(sw):
    """From the cost model's CPU seconds for the job's runs without a record, in the config's
    ``sweep_order`` (longest ready jobs first by default: :func:`labeldp.plan_cost.job_priority`)."""
    return _plan_cost.job_priority([r for r in sw.runs if not os.path.exists(r.record_path)], config=config)


def _sweep_data(wc):
    return _job_data(_sweep(wc))


def _sweep_pretrained_paths(wc):
    return _job_pretrained_paths(_sweep(wc))


def _sweep_pretrained(wc):
    return _job_pretrained(_sweep(wc))


def _runtime_minutes(runs):
    """Minutes a cluster job that trains ``runs`` may run: the cost model's GPU estimate, doubled, plus 10
    (the sweep rule here, audit.smk's audit_sweep)."""
    secs = _plan_cost.runs_seconds(runs, config=config, device="gpu")
    return int(2 * (secs + float(_plan_cost.load_costs()["seconds_per_job"]["gpu"])) / 60) + 10


def _sweep_runtime_minutes(wc):
    return _runtime_minutes(_sweep(wc).runs)


def _sweep_priority(wc):
    return _job_priority(_sweep(wc))


rule sweep:
    input:
        data=_sweep_data,
        pretrained=_sweep_pretrained,
    output:
        f"{RESULTS}/.sweeps/{{sweep}}.json",
    wildcard_constraints:
        sweep="[^/]+/[^/]+/[^/]+/eps[^/]+/sweep-[0-9a-f]+",
    log:
        f"{LOGS}/sweeps/{{sweep}}.log",
    params:
        sweep=lambda wc: _json.dumps(_sweep(wc).to_dict()),
        wf=lambda wc: _json.dumps({"profile": config["profile"], "grid": config["grid"],
                                    "sampling": config["sampling"], "delta": config["delta"]}),
        vmap_runs=config.get("sweep_vmap_runs", "auto"),
        pretrained=lambda wc: _pt.pretrained_args(_sweep_pretrained_paths(wc)),  # read only for a pending run
    threads: config.get("threads_per_job", 1)
    priority: _sweep_priority
    resources:
        gpu_slots=1,  # bounded by --resources gpu_slots=N (jobs per GPU); unbounded when not given
        # minutes a cluster job may run: the cost model's GPU estimate for the sweep's runs
        # (labeldp/plan_cost.py, workflow/resources/run_costs.yaml), doubled, plus 10 minutes
        runtime=lambda wc: _sweep_runtime_minutes(wc),
    conda:
        "../../envs/labeldp.yaml"
    shell:
        "{JOB_ENV}PYTHONPATH={workflow.basedir:q} python -m labeldp.sweep_runner --sweep {params.sweep:q} "
        "--data {input.data} --marker {output} --workflow-config {params.wf:q} "
        "--vmap-runs {params.vmap_runs} {params.pretrained} > {log} 2>&1"


def _run(wc):
    path = f"{RESULTS}/{wc.run}.json"
    if path not in RUNS:
        raise WorkflowError(f"{path} is not a planned run of this config (see labeldp/plan.py)")
    return RUNS[path]


def _train_data(wc):
    """The prepared data: ancient() only when the record already exists.

    Snakemake 9.27 drops a job whose every input is ancient() from the run when an upstream job
    (fetch, prepare) has to run, even if the job's own output is missing: the DAG masks it behind
    the upstream job and its BFS then skips it as ancient. `snakemake <record>` ran prepare and
    exited 0 without training (seen after switching the data mirror; cf. snakemake/snakemake#4166).
    A missing record therefore depends on the data normally; a finished one keeps ancient().
    """
    path = _run(wc).prepared_path
    return ancient(path) if os.path.exists(f"{RESULTS}/{wc.run}.json") else path


def _run_pretrained_paths(wc):
    return _pt.inputs_of_options(config, [_run(wc).spec.options])


def _run_pretrained(wc):
    return _pretrained_inputs(_run_pretrained_paths(wc).values(), done=os.path.exists(f"{RESULTS}/{wc.run}.json"))


rule train:
    input:
        # ancient() for a FINISHED record: a record is keyed by its RunSpec and the prepared file by
        # its dataset, source and subset, so re-preparing the same data (a fresh clone, a new mirror)
        # never redoes a finished record, committed ones included. Snakemake cannot tell a CHANGED
        # preparation of the same source: after changing a prepare step, delete the records it
        # affects. A MISSING record takes the data as a plain input (_train_data).
        data=_train_data,
        pretrained=_run_pretrained,
    output:
        f"{RESULTS}/{{run}}.json",
    wildcard_constraints:
        run="[^/]+/[^/]+/[^/]+/eps[^/]+/[^/]+/seed[0-9]+",
    log:
        f"{LOGS}/train/{{run}}.log",
    params:
        spec=lambda wc: _json.dumps(_run(wc).spec.to_dict()),
        pretrained=lambda wc: _pt.pretrained_args(_run_pretrained_paths(wc)),
        wf=lambda wc: _json.dumps({"profile": config["profile"], "grid": config["grid"],
                                    "sampling": config["sampling"], "delta": config["delta"]}),
    threads: config.get("threads_per_job", 1)
    resources:
        gpu_slots=1,  # bounded by --resources gpu_slots=N (jobs per GPU); unbounded when not given
    conda:
        "../../envs/labeldp.yaml"
    shell:
        "{JOB_ENV}PYTHONPATH={workflow.basedir:q} python -m labeldp.runner --spec {params.spec:q} "
        "--data {input.data} --out {output} --workflow-config {params.wf:q} {params.pretrained} > {log} 2>&1"
