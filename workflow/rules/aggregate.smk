# Aggregate: tables and figures built only from the result records (and the published values
# in workflow/resources/reference). One target per table / figure, named as in the paper.
import json as _json


def _table_inputs(wc):
    # aggregate_existing_only: build from whatever records exist (missing cells say "not run:
    # N planned runs missing"); used for partial CPU reports. Rebuild with --forcerun table figure.
    if config.get("aggregate_existing_only"):
        return []
    return [r.record_path for r in _plan.table_runs(config, wc.table)]


rule table:
    input:
        _table_inputs,
    output:
        md=f"{REPORTS}/tables/{{table}}.md",
        csv=f"{REPORTS}/tables/{{table}}.csv",
        tex=f"{REPORTS}/tables/{{table}}.tex",
    log:
        f"{LOGS}/aggregate/{{table}}.log",
    params:
        cfg=lambda wc: _json.dumps(config),
    conda:
        "../../envs/labeldp.yaml"
    shell:
        "PYTHONPATH={workflow.basedir:q} python -m labeldp.report.tables --table {wildcards.table} "
        "--config-json {params.cfg:q} --out-dir {REPORTS}/tables > {log} 2>&1"


rule figure:
    input:
        _table_inputs,
    output:
        md=f"{REPORTS}/figures/{{table}}.md",
        csv=f"{REPORTS}/figures/{{table}}.csv",
        png=f"{REPORTS}/figures/{{table}}.png",
    log:
        f"{LOGS}/aggregate/{{table}}.log",
    params:
        cfg=lambda wc: _json.dumps(config),
    conda:
        "../../envs/labeldp.yaml"
    shell:
        "PYTHONPATH={workflow.basedir:q} python -m labeldp.report.tables --table {wildcards.table} "
        "--config-json {params.cfg:q} --out-dir {REPORTS}/figures --figure > {log} 2>&1"


for _t in TABLES:

    rule:
        name:
            _t
        input:
            f"{REPORTS}/tables/{_t}.md",


for _t in FIGURES:

    rule:
        name:
            _t
        input:
            f"{REPORTS}/figures/{_t}.md",
