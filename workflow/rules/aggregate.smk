# Aggregate: tables, plots, figures and the scorecard, built only from the result records (and
# the published values in workflow/resources/reference). One target per table / figure, named
# as in the paper; `snakemake --report report.html` collects every artefact with its caption.
import json as _json
import os

from labeldp import halving as _halving
from labeldp.report import scorecard as _scorecard
from labeldp.report import table_scope as _table_scope

report: "../report/workflow.rst"


def sweep_markers(names):
    """The markers of the sweeps that hold the runs of the tables / figures ``names`` (a sweep writes
    its marker when every one of its runs has a record); none under ``aggregate_existing_only``,
    which builds from whatever records exist (missing cells say "not run: N of M planned runs
    missing"; used for partial CPU/GPU reports; rebuild with --forcerun table figure).
    A successive-halving table (labeldp.halving) asks for each cell's stage-1 sweeps and its
    ``.done`` file (rule halving_cell_done: the sweeps of the points the checkpoint kept); where a
    cell has finished (its ``.done`` and selection on disk), also for those sweeps directly (a fresh
    clone with the report committed trains what is missing); otherwise the checkpoint decides."""
    if config.get("aggregate_existing_only"):
        return []
    out = set()
    for name in names:
        cells = _halving.halving_cells(config, name)
        if not cells:
            out.update(SWEEP_OF_RECORD[r.record_path] for r in TABLE_RUNS[name])
            continue
        for col, eps, runs in cells:
            first, rest = _halving.split_stages(config, name, runs)  # the cell's runs, planned once
            out.update(SWEEP_OF_RECORD[r.record_path] for r in first)
            chosen = _halving.selection_path(config, name, col.id, eps)
            done = chosen.removesuffix(".json") + ".done"
            out.add(done)
            if os.path.exists(done) and os.path.exists(chosen):  # a finished cell: its kept points' sweeps
                out.update(_kept_markers(chosen, rest))
    return sorted(out)


def _kept_markers(chosen, rest):
    with open(chosen) as fh:
        kept = _json.load(fh)["kept"]
    return {SWEEP_OF_RECORD[r.record_path] for hp in kept for r in rest.get(hp, [])}


def _halving_stage_one(wc):
    _, first, _ = _halving.stage_runs(config, wc.table, wc.column, float(wc.eps))
    return sorted({SWEEP_OF_RECORD[r.record_path] for r in first})


checkpoint halving_select:
    """A successive-halving cell's kept grid points, from its stage-1 records (labeldp.halving). Cheap, and
    it unblocks the cell's stage 2: it runs before any ready sweep (UPSTREAM_PRIORITY)."""
    priority: UPSTREAM_PRIORITY
    input:
        _halving_stage_one,
    output:
        f"{RESULTS}/.halving/{{table}}/{{column}}/eps{{eps}}.json",
    log:
        f"{LOGS}/halving/{{table}}/{{column}}/eps{{eps}}.log",
    params:
        cfg=lambda wc: _json.dumps(config),
    conda:
        "../../envs/labeldp.yaml"
    shell:
        "PYTHONPATH={workflow.basedir:q} python -m labeldp.halving --config-json {params.cfg:q} --table {wildcards.table} "
        "--column {wildcards.column} --eps {wildcards.eps} --out {output} > {log} 2>&1"


def _halving_stage_two(wc):
    # one checkpoint per job: every cell is evaluated (and its stage 1 planned) independently
    chosen = checkpoints.halving_select.get(table=wc.table, column=wc.column, eps=wc.eps).output[0]
    _, _, rest = _halving.stage_runs(config, wc.table, wc.column, float(wc.eps))
    return [chosen] + sorted(_kept_markers(chosen, rest))


localrules:
    halving_cell_done,


rule halving_cell_done:
    """A successive-halving cell's stage 2 is trained: every kept point has all its seeds."""
    input:
        _halving_stage_two,
    output:
        f"{RESULTS}/.halving/{{table}}/{{column}}/eps{{eps}}.done",
    shell:
        "touch {output}"


def _table_inputs(wc):
    return sweep_markers([wc.table])


def _paper(wc):
    return f"paper {config['tables'][wc.table]['paper_table']}"


# `table` and `figure` differ only in their outputs (a table also writes .tex; a figure of 003
# keeps its md/csv next to its plot) and the report category, which Snakemake needs statically;
# the command is one.
_AGGREGATE_CMD = ("PYTHONPATH={workflow.basedir:q} python -m labeldp.report.build --table {wildcards.table} "
                  "--config-json {params.cfg:q} ")


rule table:
    input:
        _table_inputs,
    output:
        md=report(f"{REPORTS}/tables/{{table}}.md", caption="../report/table.rst", category="Tables",
                  subcategory=_paper, labels=lambda wc: {"table": wc.table, "format": "markdown"}),
        csv=f"{REPORTS}/tables/{{table}}.csv",
        tex=f"{REPORTS}/tables/{{table}}.tex",
        png=report(f"{REPORTS}/figures/{{table}}.png", caption="../report/plot.rst", category="Plots",
                   subcategory=_paper, labels=lambda wc: {"table": wc.table, "format": "png"}),
        pdf=f"{REPORTS}/figures/{{table}}.pdf",
    wildcard_constraints:
        table="|".join(TABLES) or "NO_TABLES",
    log:
        f"{LOGS}/aggregate/{{table}}.log",
    params:
        cfg=lambda wc: _json.dumps(config),
    conda:
        "../../envs/labeldp.yaml"
    shell:
        _AGGREGATE_CMD + "--out-dir {REPORTS}/tables --plot-dir {REPORTS}/figures > {log} 2>&1"


rule figure:
    input:
        _table_inputs,
    output:
        md=f"{REPORTS}/figures/{{table}}.md",
        csv=f"{REPORTS}/figures/{{table}}.csv",
        png=report(f"{REPORTS}/figures/{{table}}.png", caption="../report/plot.rst", category="Figures",
                   subcategory=_paper, labels=lambda wc: {"figure": wc.table, "format": "png"}),
        pdf=f"{REPORTS}/figures/{{table}}.pdf",
    wildcard_constraints:
        table="|".join(FIGURES) or "NO_FIGURES",
    log:
        f"{LOGS}/aggregate/{{table}}.log",
    params:
        cfg=lambda wc: _json.dumps(config),
    conda:
        "../../envs/labeldp.yaml"
    shell:
        _AGGREGATE_CMD + "--out-dir {REPORTS}/figures --figure > {log} 2>&1"


def _scored(names):
    """The tables / figures the scorecard reads: config ``scorecard_tables`` (a dated report's own
    tables), default all of them, and ``claim_tables`` (their claims only: labeldp.report.scorecard.claims_only)."""
    return [t for t in names if _table_scope.scored_table(config, t) or t in _scorecard.claims_only(config)]


rule scorecard:
    input:
        expand(f"{REPORTS}/tables/{{t}}.csv", t=_scored(TABLES)),
        expand(f"{REPORTS}/figures/{{t}}.csv", t=_scored(FIGURES)),
    output:
        md=report(f"{REPORTS}/scorecard.md", caption="../report/scorecard.rst", category="Scorecard",
                  labels={"file": "scorecard"}),
        csv=f"{REPORTS}/scorecard.csv",
        claims=f"{REPORTS}/scorecard_claims.csv",
    log:
        f"{LOGS}/aggregate/scorecard.log",
    params:
        cfg=lambda wc: _json.dumps(config),
    conda:
        "../../envs/labeldp.yaml"
    shell:
        "PYTHONPATH={workflow.basedir:q} python -m labeldp.report.scorecard --config-json {params.cfg:q} "
        "--out-dir {REPORTS} {input} > {log} 2>&1"


# A target also asks for its sweeps' markers: a committed table is newer than everything Snakemake
# can compare it with on a fresh clone (no .snakemake metadata), so without them a target whose
# records are incomplete would print "Nothing to be done"; a missing marker makes its sweep train
# the missing runs (or, where every record is there, just write the marker), then the table is rebuilt.
for _t in TABLES:

    rule:
        name:
            _t
        input:
            f"{REPORTS}/tables/{_t}.md",
            lambda wc, names=(_t,): sweep_markers(names),


# a group target builds every table of its group (config `target_group`, e.g. lpmst_table4: 001 Table 4's halves)
_GROUPS = {}
for _t in TABLES:
    if config["tables"][_t].get("target_group"):
        _GROUPS.setdefault(config["tables"][_t]["target_group"], []).append(_t)
for _g, _members in _GROUPS.items():

    rule:
        name:
            _g
        input:
            [f"{REPORTS}/tables/{_m}.md" for _m in _members],
            lambda wc, names=tuple(_members): sweep_markers(names),


for _t in FIGURES:

    rule:
        name:
            _t
        input:
            f"{REPORTS}/figures/{_t}.md",
            lambda wc, names=(_t,): sweep_markers(names),


rule criteo_examples_per_user:
    """000 Figure 5 and 002 Figure 1: examples per user in Criteo Attribution, from the prepared file."""
    input:
        data=lambda wc: _plan.prepared_path(config, "criteo_attribution"),
    output:
        md=f"{REPORTS}/figures/criteo_examples_per_user.md",
        csv=f"{REPORTS}/figures/criteo_examples_per_user.csv",
        png=report(f"{REPORTS}/figures/criteo_examples_per_user.png", caption="../report/examples_per_user.rst",
                   category="Figures", subcategory="000",
                   labels={"figure": "criteo_examples_per_user", "format": "png"}),
        pdf=f"{REPORTS}/figures/criteo_examples_per_user.pdf",
    log:
        f"{LOGS}/aggregate/criteo_examples_per_user.log",
    conda:
        "../../envs/labeldp.yaml"
    shell:
        "PYTHONPATH={workflow.basedir:q} python -m labeldp.report.examples_per_user --data {input.data} "
        "--out-stem {REPORTS}/figures/criteo_examples_per_user > {log} 2>&1"
