# Self-supervised features (000 Section 5.3 / Table 6; labeldp/feature_datasets.py): for an image
import json as _json
# dataset <base>, SimCLR pre-training on its unlabeled training images, then the frozen encoder's
# representations of its train and test sets, built once and shared by every run on <base>_simclr.
# Dataset-generic: a table on fashion_mnist_simclr uses the same two rules as one on cifar10_simclr.
from labeldp import feature_datasets as _fd

SSL_ID = _fd.ssl_id(config)
SSL_CONFIG = _json.dumps(_fd.ssl_config(config))


rule pretrain_simclr:
    input:
        images=f"{DATA}/prepared/{{base}}-{{tag}}.npz",
    output:
        encoder=f"{RESULTS}/ssl/{{base}}-{{tag}}/{{ssl_id}}/encoder.msgpack",
        record=f"{RESULTS}/ssl/{{base}}-{{tag}}/{{ssl_id}}/pretrain.json",
    wildcard_constraints:
        base="[a-z0-9_]+",
        tag="(official|standin)-(full|n[0-9]+)",
        ssl_id=SSL_ID,  # only the configured pre-training (its id hashes every ssl field)
    log:
        f"{LOGS}/ssl/{{base}}-{{tag}}-{{ssl_id}}.log",
    params:
        out_dir=lambda wc: f"{RESULTS}/ssl/{wc.base}-{wc.tag}/{wc.ssl_id}",
        ssl=SSL_CONFIG,
    threads: config.get("threads_per_job", 1)
    resources:
        gpu_slots=1,
    # Checkpoints (orbax, every ssl.checkpoint_every epochs) live in <out_dir>/checkpoints, which is
    # not an output: a killed job keeps them and the next run resumes from the last one.
    priority: UPSTREAM_PRIORITY
    conda:
        "../../envs/labeldp.yaml"
    shell:
        "{JOB_ENV}PYTHONPATH={workflow.basedir:q} python -m labeldp.simclr.pretrain --data {input.images} "
        "--out-dir {params.out_dir} --config {params.ssl:q} > {log} 2>&1"


rule features:
    input:
        images=f"{DATA}/prepared/{{base}}-{{tag}}.npz",
        encoder=f"{RESULTS}/ssl/{{base}}-{{tag}}/{{ssl_id}}/encoder.msgpack",
        record=f"{RESULTS}/ssl/{{base}}-{{tag}}/{{ssl_id}}/pretrain.json",
    output:
        f"{DATA}/prepared/{{base}}{_fd.FEATURES_SUFFIX}-{{tag}}-{{ssl_id}}.npz",
    wildcard_constraints:
        base="[a-z0-9_]+",
        tag="(official|standin)-(full|n[0-9]+)",
        ssl_id=SSL_ID,
    log:
        f"{LOGS}/ssl/{{base}}-{{tag}}-{{ssl_id}}-features.log",
    params:
        enc_dir=lambda wc: f"{RESULTS}/ssl/{wc.base}-{wc.tag}/{wc.ssl_id}",
        name=lambda wc: f"{wc.base}{_fd.FEATURES_SUFFIX}",
    threads: config.get("threads_per_job", 1)
    resources:
        gpu_slots=1,
    priority: UPSTREAM_PRIORITY
    conda:
        "../../envs/labeldp.yaml"
    shell:
        "{JOB_ENV}PYTHONPATH={workflow.basedir:q} python -m labeldp.simclr.features --data {input.images} "
        "--encoder-dir {params.enc_dir} --out {output} --dataset-name {params.name} > {log} 2>&1"


rule simclr_loss_figure:
    """000 Figure 3: the SimCLR pre-training loss per epoch of <base>, from its pre-training record."""
    input:
        record=lambda wc: os.path.join(_fd.encoder_dir(config, wc.base, _plan.data_tag(config, wc.base)),
                                       "pretrain.json"),
    output:
        md=f"{REPORTS}/figures/simclr_loss_{{base}}.md",
        csv=f"{REPORTS}/figures/simclr_loss_{{base}}.csv",
        png=report(f"{REPORTS}/figures/simclr_loss_{{base}}.png", caption="../report/simclr_loss.rst", category="Figures",
                   subcategory="000", labels=lambda wc: {"figure": f"simclr_loss_{wc.base}", "format": "png"}),
        pdf=f"{REPORTS}/figures/simclr_loss_{{base}}.pdf",
    wildcard_constraints:
        base="|".join(SIMCLR_BASES) or "NO_SIMCLR_BASE",
    log:
        f"{LOGS}/aggregate/simclr_loss_{{base}}.log",
    params:
        standin=lambda wc: "--standin" if _plan.data_tag(config, wc.base).startswith("standin") else "",
        stem=lambda wc: f"{REPORTS}/figures/simclr_loss_{wc.base}",
    conda:
        "../../envs/labeldp.yaml"
    shell:
        "PYTHONPATH={workflow.basedir:q} python -m labeldp.report.simclr_loss --record {input.record} "
        "--dataset {wildcards.base} --out-stem {params.stem} {params.standin} > {log} 2>&1"
