#!/usr/bin/env bash
# Runs the dated CPU report (workflow/config/cpu_report.yaml) in priority order, one Snakemake
# call per slice so the most important cells finish first; finished records are kept, so
# rerunning this script resumes where it stopped. Then rebuilds the tables from the records.
set -u
cd "$(dirname "$0")/../.."
CFG=workflow/config/cpu_report.yaml
# targets first: --configfile takes several values and would swallow them
smk() { .venv/bin/snakemake "$@" --nolock --cores 2 --rerun-incomplete --keep-going --configfile "$CFG"; }
runs() { .venv/bin/python workflow/scripts/list_runs.py --configfile "$CFG" "$@"; }
slice() { local t; t=$(runs "$@"); [ -n "$t" ] && smk $t; }
slice --table table5_mnist --methods dpsgd --eps 0.1,1.0
for s in 0 1 2; do
  for e in 0.1 1.0; do
    smk $(runs --table table5_mnist --methods labeldp_pro --eps $e | grep "seed$s.json")
  done
done
slice --table table5_mnist --methods nonprivate,rr,rr_debiased,alibi,lp_2st --eps 0.1,1.0,inf
slice --table table14 --methods nonprivate,dpsgd,rr,rr_debiased,alibi,lp_2st --eps 0.1,1.0,inf
slice --table table5_mnist --methods dpsgd,rr,rr_debiased,alibi,lp_2st
slice --table table14 --methods dpsgd,rr,rr_debiased,alibi,lp_2st
smk table5_mnist table2 table3 table14 --forcerun table
