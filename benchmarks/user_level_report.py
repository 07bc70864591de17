"""The markdown report of :mod:`bench_user_level` (user-level DP-SGD vs LabelDP-Pro per step and per epoch).

Kept apart from the benchmark so that ``bench_user_level.py --rerender JSON`` and the measurement share one
renderer; it reads only the JSON payload the benchmark writes.
"""

from __future__ import annotations

#: 000 Table 11, Criteo Attribution (Table 7), k = 5, one epoch on one NVIDIA A100 (seconds).
PAPER = {"dpsgd": 205.67, "labeldp_pro": 315.69, "rr": 17.52}
PAPER_RATIO = PAPER["labeldp_pro"] / PAPER["dpsgd"]


def _f(x, fmt="{:.2f}"):
    return "-" if x is None else fmt.format(x)


def render(p: dict) -> str:
    m, s, r = p["machine"], p["settings"], {x["method"]: x for x in p["results"]}
    dp, pro = r.get("dpsgd"), r.get("labeldp_pro")
    reduced = s["users"] != 200_000 or s["k"] != 5 or s["batch"] != 1024
    lines = [
        f"# User-level DP-SGD vs LabelDP-Pro: time per step and per epoch (cpu{', reduced' if reduced else ''})",
        "",
        f"- date: {m['date']}; machine: {m['cpu_model']}, {m['cores']} cores, no GPU, {_f(m['mem_total_gib'], '{:.0f}')} GiB; "
        f"JAX {m['jax']} ({m['jax_backend']}), Flax {m['flax']}, optax {m['optax']}, numpy {m['numpy']}, Python "
        f"{m['python']}; git {m['git']['commit'][:12]}{' (work tree with uncommitted changes)' if m['git'].get('dirty') else ''}.",
        f"- the CPU may have been shared with other jobs (load average, 1/5/15 min: {m['loadavg_start']} at "
        f"the start, {m['loadavg_end']} at the end); wall times include their contention (CPU time / wall time of the "
        "timed steps is in the table: 2.0 would be both cores busy for this process alone).",
        f"- command: `{p['command']}`",
        f"- data: SYNTHETIC stand-in of 000's Criteo Attribution shape: {s['users']:,} users x k = {s['k']} examples, "
        f"10 categorical features (vocabularies {', '.join(str(v) for v in s['vocab_sizes'])}; Zipf-like values) + 1 "
        f"numerical; labels from a random logistic function (see the script's docstring).",
        f"- model: AdsMLP, hidden (128, 64), embedding dimension 8 ({p['results'][0]['params']:,} parameters, "
        f"{sum(8 * v for v in s['vocab_sizes']):,} of them in embeddings). RMSProp lr {s['learning_rate']:g}; Poisson "
        f"sampling of {s['batch']} expected users per step (padded to {p['results'][0]['pad_to']}), clip C = "
        f"{s['clip']:g} per user (the sum of its k per-example gradients), noise multiplier {s['noise_multiplier']:g}.",
    ]
    if pro is not None:
        po = pro["projection_options"]
        lines.append(
            f"- LabelDP-Pro: `UserSum(inner=make_denoiser_for(spec), examples_per_user={s['k']})` as "
            f"`labeldp/tasks/ads.py::user_denoiser` builds it (variant k{s['k']}): AltConv on an alternative batch of "
            f"{pro['alt_batch_users']} users ({pro['alt_batch_rows']} rows, 2 classes), vertices {po['vertices']}, "
            f"coefficient set {po['coefficient_set']}, start {po['start']}, momentum {po['momentum']}, Frank-Wolfe gap "
            f"tolerance {po['tol']:g} with at most {po['proj_steps (cap)']} iterations, step size {po['proj_step_size']}, "
            f"smoothing {po['smoothing']:g}; solver option `{po['solver option']}` resolved to "
            f"**{pro['projection_solver']}** (`denoiser.projection_solver(...)`), host-driven loop: "
            f"{'yes' if pro['host_loop'] else 'no'}."
        )
    lines += [
        f"- timing: each method in a fresh process, one after the other; {s['warmup']} warm-up step(s) (compilation "
        f"included) excluded, then {s['steps']} timed steps, each = the loop body of `train_user_level` (Poisson "
        "batch, alternative batch, gather, step) until the new state is ready. Seconds per epoch are EXTRAPOLATED: "
        f"median seconds per step x {p['results'][0]['steps_per_epoch']} steps (floor(U / n1)), not a measured epoch.",
        "- peak RSS: the worker process's VmHWM (ru_maxrss: data + compilation + steps) and VmHWM reset just "
        "before the first step (the peak during the steps), MiB.",
        "",
        "| method | median s/step | min / max s/step | host batch s/step | extrapolated s/epoch | warm-up incl. compile (s) "
        "| CPU s/step (mean, timed) | CPU / wall (timed) | load avg before -> after | peak RSS process (MiB) "
        "| peak RSS during steps (MiB) | RSS before steps (MiB) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for x in p["results"]:
        lines.append(
            f"| {x['label']} | {x['median_step_s']:.3f} | {x['min_step_s']:.3f} / {x['max_step_s']:.3f} | "
            f"{x['median_host_batch_s']:.3f} | {x['epoch_s_extrapolated']:.1f} | {x['warmup_s_incl_compile']:.1f} | "
            f"{x['timed_cpu_s'] / x['timed_steps']:.3f} | {_f(x['cpu_per_wall'])} | "
            f"{x.get('load_before')} -> {x.get('load_after')} | {x['peak_rss_process_mib']:.0f} | "
            f"{_f(x['peak_rss_during_steps_mib'], '{:.0f}')} | {x['rss_before_steps_mib']:.0f} |"
        )
    if dp is not None and pro is not None:
        ratio = pro["median_step_s"] / dp["median_step_s"]
        lines += [
            "",
            f"**LabelDP-Pro / DP-SGD: {ratio:.2f}x here** (medians per step, this CPU) against **{PAPER_RATIO:.2f}x** "
            f"in 000 Table 11 ({PAPER['labeldp_pro']} s / {PAPER['dpsgd']} s per epoch, one NVIDIA A100, the real "
            f"data, 200 projection steps in `jax.lax.fori_loop`). The comparison is ratio to ratio across different "
            f"hardware, data (synthetic here) and projection (here: converged FISTA, at most {s['proj_steps']} "
            f"iterations, stopped by its gap; the paper: 200 PGD steps); absolute seconds are not comparable "
            f"(extrapolated epochs here: DP-SGD {dp['epoch_s_extrapolated']:.0f} s = "
            f"{dp['epoch_s_extrapolated'] / PAPER['dpsgd']:.2f} x the paper's, LabelDP-Pro "
            f"{pro['epoch_s_extrapolated']:.0f} s = {pro['epoch_s_extrapolated'] / PAPER['labeldp_pro']:.2f} x the paper's).",
            "",
            "The two methods ran one after the other on a shared CPU, so other jobs' load can differ between them "
            "(the load averages above). The same ratio in process CPU time per timed step, which other jobs' load "
            f"changes much less: {(pro['timed_cpu_s'] / pro['timed_steps']) / (dp['timed_cpu_s'] / dp['timed_steps']):.1f}x "
            f"({pro['timed_cpu_s'] / pro['timed_steps']:.2f} / {dp['timed_cpu_s'] / dp['timed_steps']:.3f} CPU s).",
        ]
    if pro is not None:
        lines += [
            "",
            f"Projection iterations per timed LabelDP-Pro step (FISTA, cap {s['proj_steps']}): median "
            f"{_f(pro['projection_iterations_median'], '{:.0f}')} (the solver stops at the first iterate whose gap meets the tolerance), min {_f(pro['projection_iterations_min'], '{:.0f}')}, "
            f"max {_f(pro['projection_iterations_max'], '{:.0f}')}; median relative Frank-Wolfe gap at the stop "
            f"{_f(pro['projection_gap_relative_median'], '{:.2e}')} (tolerance {pro['projection_options']['tol']:g}). "
            "Each iteration is one JVP and one VJP through the network over the alternative batch's rows "
            "(matrix-free) or two products with the materialised G^T (jacobian).",
        ]
        b = pro.get("breakdown")
        if b:
            text = (
                "Where a LabelDP-Pro step's time goes (one call each, on the last timed batch, after compilation): "
                f"noisy clipped per-user gradient {b['noisy_gradient_s']:.2f} s; denoiser {b['denoiser_s']:.2f} s"
            )
            if "column_norms_s" in b:
                text += (
                    f", of which the exact per-(row, class) gradient norms of the {pro['alt_batch_rows']} "
                    f"alternative rows (`hull_converged.column_norms`, which uses the ads model's own "
                    f"`two_class_logits(...).column_norms`: the per-example norm trick, ||a_i||^2 ||d_i||^2 per Dense layer plus the input row's "
                    f"gradient, from one batched forward and backward pass; no per-row gradient over the {pro['params']:,} parameters) {b['column_norms_s']:.2f} s "
                    f"(timed separately, {100 * b['column_norms_s'] / b['denoiser_s']:.0f}% of the denoiser call) and "
                    f"the projection proper (power iterations for 1/L, FISTA, output) the remaining "
                    f"{b['projection_rest_s']:.2f} s."
                )
            else:
                text += (
                    f" (solver {b['solver']}: it builds G^T, {pro['alt_batch_rows'] * 2} x {pro['params']:,}, first)."
                )
            lines += ["", text]
    lines += ["", "Per-step seconds (timed steps, in order):", ""]
    for x in p["results"]:
        cells = ", ".join(
            f"{r['seconds']:.2f}" + (f" [{r['projection_iterations']:.0f} it]" if "projection_iterations" in r else "")
            for r in x["rows"]
            if r["timed"]
        )
        lines.append(f"- {x['method']}: {cells}")
    return "\n".join(lines) + "\n"
