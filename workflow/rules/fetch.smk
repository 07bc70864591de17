# Fetch: raw dataset files, verified against their checksums (mirror first, then the
# official URLs). One target per dataset: fetch_<dataset>.

from labeldp.data.registry import dataset_names as _dataset_names

DATASET_IDS = list(_dataset_names())  # every dataset of labeldp/data/registry.py


rule fetch:
    output:
        _plan.raw_dir(DATA, "{dataset}", "official") + "/MANIFEST.json",
    log:
        f"{LOGS}/fetch/{{dataset}}.log",
    params:
        mirror=lambda wc: _plan.data_mirror(config) or "",
        census=config.get("census_path", ""),
        sha=lambda wc: (config["datasets"].get(wc.dataset) or {}).get("pinned_sha256") or "",
        raw_root=_plan.raw_root(DATA, "official"),
    conda:
        "../../envs/labeldp.yaml"
    shell:
        "PYTHONPATH={workflow.basedir:q} python {workflow.basedir}/workflow/scripts/fetch.py "
        "--dataset {wildcards.dataset} --data-dir {params.raw_root} --mirror={params.mirror:q} "
        "--census-path={params.census:q} --pinned-sha256={params.sha:q} --manifest {output} > {log} 2>&1"


rule make_standin:
    output:
        _plan.raw_dir(DATA, "{dataset}", "standin") + "/MANIFEST.json",
    log:
        f"{LOGS}/fetch/{{dataset}}-standin.log",
    params:
        standin_root=_plan.raw_root(DATA, "standin"),
    conda:
        "../../envs/labeldp.yaml"
    shell:
        "PYTHONPATH={workflow.basedir:q} python {workflow.basedir}/workflow/scripts/fetch.py "
        "--dataset {wildcards.dataset} --data-dir {params.standin_root} --standin --manifest {output} > {log} 2>&1"


for _ds in DATASET_IDS:

    rule:
        name:
            f"fetch_{_ds}"
        input:
            _plan.raw_dir(DATA, _ds, "official") + "/MANIFEST.json",
