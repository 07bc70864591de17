# The reproduction status (labeldp/report/reproduction_status/): every published cell of 000's tables beside the
# best complete result the committed tables hold for it, across dated reports. Config `reproduction_status`:
# `sources` (glob patterns of tidy table CSVs, relative to the working directory) and `explanations` (a YAML file:
# why each cell outside is). The patterns are matched when the workflow is read: a table whose CSV is not written yet
# is not read (build its target first). This report's own tables among the matches are inputs, rebuilt first as the
# scorecard's are: their missing runs are trained unless `--config aggregate_existing_only=True` (then the tables are
# rebuilt from the records on disk only; tests/workflow/test_reproduction_status_rule.py).
import glob as _glob

_STATUS = config.get("reproduction_status") or {}
_STATUS_OUTPUTS = {f"{REPORTS}/reproduction_status.csv"}


def _status_sources(wildcards):
    """The CSVs the source patterns match on disk (a table not built yet is not read: build its target first),
    never this rule's own output."""
    patterns = _STATUS.get("sources") or ()
    found = {p for pattern in patterns for p in _glob.glob(pattern)} - _STATUS_OUTPUTS
    if not found:
        raise WorkflowError(
            f"reproduction_status.sources {list(patterns)} match no tidy table CSV under {os.getcwd()}: "
            "give glob patterns of committed tables, e.g. 'reports/*/tables/*.csv'"
        )
    return sorted(found) + ([_STATUS["explanations"]] if _STATUS.get("explanations") else [])


rule reproduction_status:
    input:
        _status_sources,
    output:
        md=report(f"{REPORTS}/reproduction_status.md", caption="../report/reproduction_status.rst",
                  category="Scorecard", labels={"file": "reproduction status"}),
        csv=f"{REPORTS}/reproduction_status.csv",
    log:
        f"{LOGS}/aggregate/reproduction_status.log",
    params:
        cfg=lambda wc: _json.dumps(config),
        csvs=lambda wc, input: [p for p in input if p.endswith(".csv")],
    conda:
        "../../envs/labeldp.yaml"
    shell:
        "PYTHONPATH={workflow.basedir:q} python -m labeldp.report.reproduction_status --config-json {params.cfg:q} "
        "--reference-dir {config[reference_dir]:q} --out-dir {REPORTS} {params.csvs:q} > {log} 2>&1"
