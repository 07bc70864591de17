# Fetch: raw dataset files, verified against their checksums (mirror first, then the
# official URLs). One target per dataset: fetch_<dataset>.

import os as _os

from labeldp.data.registry import dataset_names as _dataset_names

DATASET_IDS = list(_dataset_names())  # every dataset of labeldp/data/registry.py

# WHERE the bytes come from (the mirror, the user's census file) reaches the fetch job through
# the environment, not through params: the files are verified against pinned checksums whatever
# their source, so switching the mirror on or off must not make Snakemake redo the fetch. As a
# param it did ("Params have changed"), and with the train rule's ancient() data input Snakemake
# then ran only fetch + prepare and exited 0 without training (snakemake/snakemake#4166).
# Jobs inherit this process's environment, locally and under the cluster executors.
_mirror = _plan.data_mirror(config)
if _mirror:
    _os.environ["LABELDP_DATA_MIRROR"] = _mirror
if config.get("census_path"):
    _os.environ["LABELDP_CENSUS_PATH"] = str(config["census_path"])


rule fetch:
    output:
        _plan.raw_dir(DATA, "{dataset}", "official") + "/MANIFEST.json",
    log:
        f"{LOGS}/fetch/{{dataset}}.log",
    params:
        sha=lambda wc: (config["datasets"].get(wc.dataset) or {}).get("pinned_sha256") or "",
        raw_root=_plan.raw_root(DATA, "official"),
    priority: UPSTREAM_PRIORITY
    conda:
        "../../envs/labeldp.yaml"
    shell:
        "PYTHONPATH={workflow.basedir:q} python {workflow.basedir}/workflow/scripts/fetch.py "
        "--dataset {wildcards.dataset} --data-dir {params.raw_root} "
        "--pinned-sha256={params.sha:q} --manifest {output} > {log} 2>&1"


rule make_standin:
    output:
        _plan.raw_dir(DATA, "{dataset}", "standin") + "/MANIFEST.json",
    log:
        f"{LOGS}/fetch/{{dataset}}-standin.log",
    params:
        standin_root=_plan.raw_root(DATA, "standin"),
    priority: UPSTREAM_PRIORITY
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
