# Label-canary privacy audit (labeldp/audit): one training run per audited (column, eps, seed)
# with label canaries, then the table of claimed eps next to audited lower bounds, then the check
# that fails loudly when a lower bound exceeds the label-DP eps. `audit_sweep`: one job per prepared
# data file trains its audited runs in one process (labeldp/audit/sweep.py) and writes a marker when
# every run has its record (as train.smk's sweeps; a record deleted after its job's marker exists is
# trained again by `snakemake <record>`, the `audit_run` rule); `audit_run`: one record on its own.
#   snakemake --cores 2 --configfile workflow/config/audit.yaml audit
import json as _json

from labeldp import pretraining as _pt
from labeldp.audit import plan as _audit_plan

AUDIT_RUNS = {r.record_path: r for r in _audit_plan.audit_runs(config)} if config.get("audit") else {}
AUDIT_SWEEPS = _audit_plan.audit_sweeps(config) if config.get("audit") else {}
AUDIT_RESULTS = str(_audit_plan.audit_dir(config, "results"))
AUDIT_REPORTS = str(_audit_plan.audit_dir(config, "reports"))


def _audit_run(wc):
    path = f"{AUDIT_RESULTS}/{wc.run}.json"
    if path not in AUDIT_RUNS:
        raise WorkflowError(f"{path} is not a planned audit run of this config (see labeldp/audit/plan.py)")
    return AUDIT_RUNS[path]


def _audit_sweep(wc):
    path = f"{AUDIT_RESULTS}/.sweeps/{wc.sweep}.json"
    if path not in AUDIT_SWEEPS:
        raise WorkflowError(f"{path} is not a planned audit job of this config (see labeldp/audit/plan.py)")
    return AUDIT_SWEEPS[path]


rule audit_sweep:
    input:
        data=lambda wc: _job_data(_audit_sweep(wc)),  # train.smk: ancient() once done
        pretrained=lambda wc: _job_pretrained(_audit_sweep(wc)),
    output:
        f"{AUDIT_RESULTS}/.sweeps/{{sweep}}.json",
    wildcard_constraints:
        sweep="[^/]+/audit-[0-9a-f]+",
    log:
        f"{LOGS}/audit/sweeps/{{sweep}}.log",
    params:
        sweep=lambda wc: _json.dumps(_audit_sweep(wc).to_dict()),
        acfg=lambda wc: config["audit"],
        wf=lambda wc: _json.dumps({"profile": config["profile"], "grid": config["grid"], "audit": config["audit"]}),
        pretrained=lambda wc: _pt.pretrained_args(_job_pretrained_paths(_audit_sweep(wc))),
    threads: config.get("threads_per_job", 1)
    priority: lambda wc: _job_priority(_audit_sweep(wc))
    resources:
        gpu_slots=1,  # bounded by --resources gpu_slots=N (jobs per GPU); unbounded when not given
        runtime=lambda wc: _runtime_minutes(_audit_sweep(wc).runs),  # a cluster's limit, as the sweep rule's
    conda:
        "../../envs/labeldp.yaml"
    shell:
        "{JOB_ENV}PYTHONPATH={workflow.basedir:q} python -m labeldp.audit.sweep --sweep {params.sweep:q} "
        "--data {input.data} --marker {output} --train-subset {params.acfg[train_subset]} "
        "--num-canaries {params.acfg[num_canaries]} --confidence {params.acfg[confidence]} "
        "--workflow-config {params.wf:q} {params.pretrained} > {log} 2>&1"


rule audit_run:
    input:
        data=lambda wc: ancient(_audit_run(wc).prepared_path),  # as in train.smk
        # the pre-trained state a variant's init_from names (labeldp/pretraining.py), while the record is missing
        pretrained=lambda wc: _pretrained_inputs(
            _pt.inputs_of_options(config, [_audit_run(wc).spec.options]).values(),
            done=os.path.exists(f"{AUDIT_RESULTS}/{wc.run}.json")),
    output:
        f"{AUDIT_RESULTS}/{{run}}.json",
    wildcard_constraints:
        run="[^/]+/[^/]+/[^/]+/eps[^/]+/[^/]+/seed[0-9]+",
    log:
        f"{LOGS}/audit/{{run}}.log",
    params:
        spec=lambda wc: _json.dumps(_audit_run(wc).spec.to_dict()),
        acfg=lambda wc: config["audit"],
        wf=lambda wc: _json.dumps({"profile": config["profile"], "grid": config["grid"], "audit": config["audit"]}),
        pretrained=lambda wc: _pt.pretrained_args(_pt.inputs_of_options(config, [_audit_run(wc).spec.options])),
    threads: config.get("threads_per_job", 1)
    resources:
        gpu_slots=1,  # bounded by --resources gpu_slots=N (jobs per GPU); unbounded when not given
    conda:
        "../../envs/labeldp.yaml"
    shell:
        "{JOB_ENV}PYTHONPATH={workflow.basedir:q} python -m labeldp.audit.runner --spec {params.spec:q} "
        "--data {input.data} --out {output} --train-subset {params.acfg[train_subset]} "
        "--num-canaries {params.acfg[num_canaries]} --confidence {params.acfg[confidence]} "
        "--workflow-config {params.wf:q} {params.pretrained} > {log} 2>&1"


rule audit_table:
    input:
        [] if config.get("aggregate_existing_only") else list(AUDIT_SWEEPS),
    output:
        md=report(f"{AUDIT_REPORTS}/audit.md", caption="../report/audit.rst", category="Audit",
                  labels={"table": "audit", "format": "markdown"}),
        csv=f"{AUDIT_REPORTS}/audit.csv",
    log:
        f"{LOGS}/aggregate/audit.log",
    params:
        cfg=lambda wc: _json.dumps(config),
    conda:
        "../../envs/labeldp.yaml"
    shell:
        "PYTHONPATH={workflow.basedir:q} python -m labeldp.audit.table --config-json {params.cfg:q} "
        "--out-dir {AUDIT_REPORTS} > {log} 2>&1"


if config.get("audit"):

    rule audit:
        input:
            f"{AUDIT_REPORTS}/audit.csv",
        output:
            f"{AUDIT_REPORTS}/audit.passed",
        log:
            f"{LOGS}/aggregate/audit_check.log",
        conda:
            "../../envs/labeldp.yaml"
        shell:
            # fails loudly (exit 1, the failures named in the log and on stderr) when an audited
            # lower bound exceeds a run's label-DP eps; the table stays for inspection
            "PYTHONPATH={workflow.basedir:q} python -m labeldp.audit.table --check {input} > {log} 2>&1 "
            "|| {{ cat {log} >&2; exit 1; }}; cat {log}; cp {log} {output}"

else:

    rule audit:
        output:
            f"{AUDIT_REPORTS}/audit.passed",
        shell:
            "echo 'error: this config has no audit block; run the audit with "
            "--configfile workflow/config/audit.yaml (or add an `audit:` block like its one)' >&2; exit 2"
