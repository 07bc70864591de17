# Fetch: raw dataset files, verified against their checksums (mirror first, then the
# official URLs). One target per dataset: fetch_<dataset>.

DATASET_IDS = ["mnist", "fashion_mnist", "kmnist", "cifar10", "criteo_attribution", "criteo_search", "census1940"]


rule fetch:
    output:
        f"{DATA}/raw/{{dataset}}/MANIFEST.json",
    log:
        f"{LOGS}/fetch/{{dataset}}.log",
    params:
        mirror=lambda wc: _plan.data_mirror(config) or "",
        census=config.get("census_path", ""),
        sha=lambda wc: (config["datasets"].get(wc.dataset) or {}).get("pinned_sha256") or "",
    conda:
        "../../envs/labeldp.yaml"
    shell:
        "PYTHONPATH={workflow.basedir:q} python {workflow.basedir}/workflow/scripts/fetch.py "
        "--dataset {wildcards.dataset} --data-dir {DATA}/raw --mirror={params.mirror:q} "
        "--census-path={params.census:q} --pinned-sha256={params.sha:q} --manifest {output} > {log} 2>&1"


rule make_standin:
    output:
        f"{DATA}/standin/{{dataset}}/MANIFEST.json",
    log:
        f"{LOGS}/fetch/{{dataset}}-standin.log",
    conda:
        "../../envs/labeldp.yaml"
    shell:
        "PYTHONPATH={workflow.basedir:q} python {workflow.basedir}/workflow/scripts/fetch.py "
        "--dataset {wildcards.dataset} --data-dir {DATA}/standin --standin --manifest {output} > {log} 2>&1"


for _ds in DATASET_IDS:

    rule:
        name:
            f"fetch_{_ds}"
        input:
            f"{DATA}/raw/{_ds}/MANIFEST.json",
