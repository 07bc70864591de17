# Prepare: parse the raw formats into .npz arrays (official train/test split, optional subset).


def _prepare_input(wc):
    return f"{_plan.raw_dir(DATA, wc.dataset, wc.source)}/MANIFEST.json"


rule prepare:
    input:
        _prepare_input,
    output:
        f"{DATA}/prepared/{{dataset}}-{{source}}-{{size}}.npz",
    wildcard_constraints:
        source="official|standin",
        size="full|n[0-9]+",
    log:
        f"{LOGS}/prepare/{{dataset}}-{{source}}-{{size}}.log",
    params:
        subset=lambda wc: "" if wc.size == "full" else f"--subset {wc.size[1:]}",
        raw_dir=lambda wc: _plan.raw_dir(DATA, wc.dataset, wc.source),
    priority: UPSTREAM_PRIORITY
    conda:
        "../../envs/labeldp.yaml"
    shell:
        "PYTHONPATH={workflow.basedir:q} python -m labeldp.data.prepare {wildcards.dataset} "
        "--raw-dir {params.raw_dir} --out {output} {params.subset} > {log} 2>&1"
