# Train: one job per planned run (dataset x method x variant x eps x grid point x seed), each
# writing one JSON result record (labeldp/records.py). Finished records are never redone.
import json as _json


def _run(wc):
    path = f"{RESULTS}/{wc.run}.json"
    if path not in RUNS:
        raise WorkflowError(f"{path} is not a planned run of this config (see labeldp/plan.py)")
    return RUNS[path]


rule train:
    input:
        # ancient(): a record is keyed by its RunSpec and the prepared file by its dataset, source
        # and subset, so re-preparing the same data (a fresh clone, a new mirror) never redoes a
        # finished record, committed ones included. Snakemake cannot tell a CHANGED preparation of
        # the same source: after changing a prepare step, delete the records it affects.
        data=lambda wc: ancient(_run(wc).prepared_path),
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
