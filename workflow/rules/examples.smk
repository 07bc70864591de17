# The papers' worked examples, computed exactly (no data, no training): each is one record under
# <results_dir>/examples/ (config `paper_examples`), then its figure, built from that record only.
#   003 Figure 2 (and the RR-on-Bins counterexample of 003 Section 3): target `unbiased_figure2`.


rule paper_example_record:
    output:
        f"{RESULTS}/examples/{{example}}.json",
    wildcard_constraints:
        example="|".join(config.get("paper_examples") or {}) or "NO_EXAMPLES",
    params:
        eps=lambda wc: config["paper_examples"][wc.example]["epsilon"],
        num_outputs=lambda wc: config["paper_examples"][wc.example]["num_outputs"],
    log:
        f"{LOGS}/examples/{{example}}.log",
    conda:
        "../../envs/labeldp.yaml"
    shell:
        "PYTHONPATH={workflow.basedir:q} python -m labeldp.regression.paper_example record --epsilon {params.eps} "
        "--num-outputs {params.num_outputs} --out {output} > {log} 2>&1"


rule paper_example_figure:
    input:
        f"{RESULTS}/examples/{{example}}.json",
    output:
        md=f"{REPORTS}/figures/{{example}}.md",
        csv=f"{REPORTS}/figures/{{example}}.csv",
        png=report(f"{REPORTS}/figures/{{example}}.png", caption="../report/example.rst", category="Figures",
                   subcategory="paper 003", labels=lambda wc: {"figure": wc.example, "format": "png"}),
        pdf=f"{REPORTS}/figures/{{example}}.pdf",
    wildcard_constraints:
        example="|".join(config.get("paper_examples") or {}) or "NO_EXAMPLES",
    log:
        f"{LOGS}/examples/{{example}}-figure.log",
    conda:
        "../../envs/labeldp.yaml"
    shell:
        "PYTHONPATH={workflow.basedir:q} python -m labeldp.regression.paper_example figure --record {input} "
        "--out-dir {REPORTS}/figures --name {wildcards.example} > {log} 2>&1"


rule unbiased_figure2:
    input:
        f"{REPORTS}/figures/unbiased_figure2.md",
