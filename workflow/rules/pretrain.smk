# Supervised pre-training on public labels (001 Table 1's CIFAR-100 pre-training; labeldp/pretraining.py): each
# entry of the config's `pretraining` trains once into <results_dir>/pretrained/<name>/<id>/, the id hashing the
# entry and its data's source and size; the sweeps whose variants name it (option init_from) take its state as
# an input (workflow/rules/train.smk).
import json as _json

from labeldp import pretraining as _pt

PRETRAININGS = _pt.pretraining_specs(config)


def _pretraining_spec(wc):
    spec = PRETRAININGS.get(wc.name)
    if spec is None or _pt.pretraining_id(config, spec) != wc.pt_id:
        raise WorkflowError(
            f"{RESULTS}/pretrained/{wc.name}/{wc.pt_id} is not a pre-training of this config; "
            f"configured: {sorted(_pt.state_dir(config, n) for n in PRETRAININGS)}"
        )
    return spec


def _pretrained_inputs(paths, *, done):
    """The pre-trained states as inputs of a training or audit job (train.smk, audit.smk): plain while a run
    is pending; once done, ancient() where the state exists (the same input set, so no rerun trigger) and
    left out where it does not (a finished record never waits on, or triggers, a pre-training: committed
    records on a fresh clone, say)."""
    if not done:
        return sorted(paths)
    return [ancient(p) for p in sorted(paths) if os.path.exists(p)]


def _pretraining_data(wc):
    """The public dataset's prepared file; ancient() once the state exists, so preparing the data again
    never retrains over a state that finished records name by its sha256."""
    path = _pt.data_path(config, _pretraining_spec(wc).name)
    done = os.path.exists(f"{RESULTS}/pretrained/{wc.name}/{wc.pt_id}/{_pt.STATE_FILE}")
    return ancient(path) if done else path


rule pretrain_supervised:
    input:
        data=lambda wc: _pretraining_data(wc),
    output:
        state=f"{RESULTS}/pretrained/{{name}}/{{pt_id}}/{_pt.STATE_FILE}",
        record=f"{RESULTS}/pretrained/{{name}}/{{pt_id}}/{_pt.RECORD_FILE}",
    wildcard_constraints:
        name="[A-Za-z0-9_.-]+",
        pt_id="[0-9a-f]{12}",
    log:
        f"{LOGS}/pretrained/{{name}}-{{pt_id}}.log",
    params:
        out_dir=lambda wc: f"{RESULTS}/pretrained/{wc.name}/{wc.pt_id}",
        spec=lambda wc: _json.dumps(_pretraining_spec(wc).to_dict()),
    threads: config.get("threads_per_job", 1)
    resources:
        gpu_slots=1,
    priority: UPSTREAM_PRIORITY
    conda:
        "../../envs/labeldp.yaml"
    shell:
        "{JOB_ENV}PYTHONPATH={workflow.basedir:q} python -m labeldp.pretrain_supervised --data {input.data} "
        "--out-dir {params.out_dir} --spec {params.spec:q} > {log} 2>&1"
