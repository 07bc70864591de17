# Train: one job per planned run (dataset x method x variant x eps x grid point x seed), each
# writing one JSON result record (labeldp/records.py). Finished records are never redone.
import json as _json


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


rule train:
    input:
        # ancient() for a FINISHED record: a record is keyed by its RunSpec and the prepared file by
        # its dataset, source and subset, so re-preparing the same data (a fresh clone, a new mirror)
        # never redoes a finished record, committed ones included. Snakemake cannot tell a CHANGED
        # preparation of the same source: after changing a prepare step, delete the records it
        # affects. A MISSING record takes the data as a plain input (_train_data).
        data=_train_data,
    output:
        f"{RESULTS}/{{run}}.json",
    wildcard_constraints:
        run="[^/]+/[^/]+/[^/]+/eps[^/]+/[^/]+/seed[0-9]+",
    log:
        f"{LOGS}/train/{{run}}.log",
    params:
        spec=lambda wc: _json.dumps(_run(wc).spec.to_dict()),
        wf=lambda wc: _json.dumps({"profile": config["profile"], "grid": config["grid"],
                                    "sampling": config["sampling"], "delta": config["delta"]}),
    threads: config.get("threads_per_job", 1)
    resources:
        gpu_slots=1,  # bounded by --resources gpu_slots=N (jobs per GPU); unbounded when not given
    conda:
        "../../envs/labeldp.yaml"
    shell:
        "{JOB_ENV}PYTHONPATH={workflow.basedir:q} python -m labeldp.runner --spec {params.spec:q} "
        "--data {input.data} --out {output} --workflow-config {params.wf:q} > {log} 2>&1"
