"""003 Algorithm 1 (the optimal unbiased randomizer LP): wall time and memory against the mesh size.

What is timed is what :func:`labeldp.mechanisms.regression_unbiased.optimal_unbiased_randomizer`
runs, split in its two stages: the LP solve (``solve_unbiased_lp``, HiGHS through
``scipy.optimize.linprog``) and the ``polish_randomizer`` step that makes the solution exactly unbiased
and exactly ``eps``-DP. Two solvers side by side, in the same run:

* ``new``: ``solve_unbiased_lp``, the library's solver: column generation over the output grid
  (003 Theorem 6: an optimal randomizer uses at most ``2k`` outputs), each restricted LP in the
  ``M = m + d, 0 <= d <= (e^eps - 1) m`` form, every grid output priced exactly;
* ``old``: ``_solve_unbiased_lp_full``, the solver before it: one LP on the whole grid, two-sided
  form ``m_i <= M[y, i] <= e^eps m_i``.

Cases (the label sets of 003's experiments, synthetic priors since the data are not public here):

* Census (003 Table G.3, WKSWORK1): labels 1..52, eps = 1, mesh 52, 104, ..., 1664. Prior:
  0.60 at 52 (a full year), 0.10 spread evenly over 12, 26, 40, 48, 50 (round answers), 0.30
  over 1..51 proportional to y.
* Criteo Sponsored Search (SalesAmountInEuro clipped at 400): labels 0..400, eps = 1 and 4, mesh
  401, 802, 1604. Prior: p_y proportional to (1 + y / 20)^-2 for y = 0..399 (a power-law tail,
  heavier than geometric), renormalised to 0.98, plus 0.02 at 400 (the clipped tail).

Each (case, solver) runs in a fresh Python process (``--worker``), so memory is measured in
isolation: "peak RSS delta" is the process's high-water mark (``VmHWM``, reset through
``/proc/self/clear_refs`` just before the stage) minus its resident size before the stage, in
MiB: it includes HiGHS' C++ allocations, which ``tracemalloc`` would not see. Every solution is
checked: ``is_unbiased()`` (tolerance 1e-9 relative to max |label|) and the DP ratio,
``exp(epsilon_dp_ratio()) <= e^eps (1 + 1e-9)``. For ``new`` the public function is also called
and its matrix compared to the one built here (identical: the timed path is the public one).

The ``old`` solver gets ``--old-timeout`` seconds per LP (default 600); a larger mesh of the
same case is not run with it once a smaller one took more than a third of that (every doubling
of the mesh has cost it at least 4x). Wall-clock on a possibly shared 2-core machine: the load
average before and after each run is recorded. No timing is asserted anywhere.

Run: ``.venv/bin/python benchmarks/bench_unbiased_lp.py`` (full; writes
``benchmarks/results/unbiased_lp_cpu.md``) or ``--quick`` (Census mesh 52-208 with both
solvers and one 401-label LP with the new one, under a minute; prints the table and writes
only with ``--out``).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from labeldp import records  # noqa: E402
from labeldp.machine import cpu_model, loadavg  # noqa: E402
from labeldp.mechanisms.regression_core import DiscreteRandomizer  # noqa: E402

PAPER_G3 = {52: 2.38, 416: 17.1, 1664: 161.0}  # 003 Table G.3, Census, eps = 1 (seconds)
GOAL_S = 161.0
MIB = 1024.0


# --------------------------------------------------------------------------------------
# The cases.
# --------------------------------------------------------------------------------------


def census_prior():
    """Labels 1..52; 0.60 at 52, 0.10 over {12, 26, 40, 48, 50}, 0.30 over 1..51 proportional to y."""
    sup = np.arange(1, 53, dtype=float)
    p = np.zeros(52)
    p[:51] = 0.30 * sup[:51] / sup[:51].sum()
    p[np.array([12, 26, 40, 48, 50]) - 1] += 0.10 / 5
    p[51] += 0.60
    return sup, p / p.sum()


def criteo_prior():
    """Labels 0..400; p_y proportional to (1 + y/20)^-2 below 400 (mass 0.98), 0.02 at 400."""
    sup = np.arange(0, 401, dtype=float)
    p = (1.0 + sup[:400] / 20.0) ** -2.0
    p = np.concatenate([0.98 * p / p.sum(), [0.02]])
    return sup, p / p.sum()


PRIORS = {"census": census_prior, "criteo": criteo_prior}


def plan(quick: bool):
    """(dataset, eps, meshes, solvers) groups, in run order."""
    if quick:
        return [("census", 1.0, [52, 104, 208], ("new", "old")), ("criteo", 1.0, [401], ("new",))]
    return [
        ("census", 1.0, [52, 104, 208, 416, 832, 1664], ("new", "old")),
        ("criteo", 1.0, [401, 802, 1604], ("new", "old")),
        ("criteo", 4.0, [401, 802, 1604], ("new", "old")),
    ]


# --------------------------------------------------------------------------------------
# The worker (one LP in a fresh process).
# --------------------------------------------------------------------------------------


_status_kib = records.proc_status_kib
_reset_peak = records.reset_peak_rss


def _stage(fn):
    """Runs fn(); returns (result, seconds, peak RSS above the RSS before it in MiB or None)."""
    rss0 = _status_kib("VmRSS")
    reset = _reset_peak()
    t0 = time.perf_counter()
    out = fn()
    sec = time.perf_counter() - t0
    peak = _status_kib("VmHWM") if reset else -1
    return out, sec, ((peak - rss0) / MIB if peak >= 0 and rss0 >= 0 else None)


def worker(spec: dict) -> dict:
    import scipy

    from labeldp.mechanisms import regression_unbiased as R
    from labeldp.mechanisms import regression_unbiased_lp as LP

    sup, p = PRIORS[spec["dataset"]]()
    eps, mesh, solver = float(spec["eps"]), int(spec["mesh"]), spec["solver"]
    # Exactly the steps of optimal_unbiased_randomizer.
    outs = np.unique(R.feasible_output_set(sup, epsilon=eps, num_outputs=mesh))
    lo, span = sup[0], sup[-1] - sup[0]
    z, o = (sup - lo) / span, (outs - lo) / span
    sizes = []
    inner = LP._solve_lp_on_columns

    def counted(cost, *a, **kw):
        sizes.append(int(cost.shape[1]))
        return inner(cost, *a, **kw)

    LP._solve_lp_on_columns = counted
    solve = LP.solve_unbiased_lp if solver == "new" else LP._solve_unbiased_lp_full
    raw, t_solve, mem_solve = _stage(lambda: solve(p, z, o, eps))
    LP._solve_lp_on_columns = inner
    matrix, t_polish, mem_polish = _stage(lambda: LP.polish_randomizer(raw, z, o, eps))
    r = DiscreteRandomizer(support=sup, outputs=outs, matrix=matrix, probs=p, epsilon=eps, name="optimal unbiased")
    ratio = r.epsilon_dp_ratio()
    out = dict(
        spec,
        status="ok",
        k=int(sup.size),
        solve_s=t_solve,
        polish_s=t_polish,
        total_s=t_solve + t_polish,
        mem_solve_mib=mem_solve,
        mem_polish_mib=mem_polish,
        lp_sizes=sizes if solver == "new" else [mesh],
        loss=r.noisy_label_loss(),
        unbiased=r.is_unbiased(),
        max_abs_bias=float(np.max(np.abs(r.bias()))),
        eps_ratio=ratio,
        dp_ok=bool(math.exp(ratio) <= math.exp(eps) * (1 + 1e-9)),
        row_sum_err=float(np.max(np.abs(r.matrix.sum(axis=1) - 1.0))),
        used_outputs=int(np.sum(r.matrix.max(axis=0) > 0)),
        scipy=scipy.__version__,
        numpy=np.__version__,
    )
    if solver == "new":
        t0 = time.perf_counter()
        pub = R.optimal_unbiased_randomizer(sup, p, epsilon=eps, num_outputs=mesh)
        out["public_s"] = time.perf_counter() - t0
        out["public_same_matrix"] = bool(np.array_equal(pub.matrix, r.matrix))
    try:
        from scipy.optimize._highspy import _core as highs

        out["highs"] = f"{highs.HIGHS_VERSION_MAJOR}.{highs.HIGHS_VERSION_MINOR}.{highs.HIGHS_VERSION_PATCH}"
    except Exception:  # noqa: BLE001 - a private module: the version is informative only
        out["highs"] = "unknown"
    return out


def run_one(spec: dict, timeout: float) -> dict:
    load0 = loadavg()
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, __file__, "--worker", json.dumps(spec)],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=str(ROOT),
        )
    except subprocess.TimeoutExpired:
        return dict(spec, status="timeout", wall_s=time.perf_counter() - t0, load_before=load0, load_after=loadavg())
    if proc.returncode != 0:
        return dict(
            spec,
            status="error",
            error=proc.stderr.strip().splitlines()[-1:] or ["?"],
            load_before=load0,
            load_after=loadavg(),
        )
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    res.update(wall_s=time.perf_counter() - t0, load_before=load0, load_after=loadavg())
    return res


# --------------------------------------------------------------------------------------
# The report.
# --------------------------------------------------------------------------------------


def _f(x, fmt="{:.2f}"):
    return "-" if x is None else fmt.format(x)


def _time_cell(r):
    if r["status"] == "ok":
        return _f(r["total_s"])
    if r["status"] == "timeout":
        return f"> {r['timeout']:.0f} (stopped)"
    if r["status"] == "skipped":
        return "not run"
    return "error"


def render(rows, *, quick: bool, command: str, meta: dict) -> str:
    lines = [
        f"# 003 Algorithm 1: optimal unbiased randomizer LP, time and memory against the mesh (cpu{', quick' if quick else ''})",
        "",
        f"- date: {meta['date']}; machine: {meta['cpu']}, {meta['cores']} cores, no GPU; Python {meta['python']}, "
        f"numpy {meta['numpy']}, scipy {meta['scipy']}, HiGHS {meta['highs']} (scipy's); load average (1/5/15 min) "
        f"{meta['load_start']} at the start, {meta['load_end']} at the end (the machine is shared: wall times "
        "include other jobs' contention).",
        f"- command: `{command}`",
        "- `new` = `solve_unbiased_lp` (column generation over the grid, restricted LPs in the m + d form, "
        "exact pricing of every output); `old` = `_solve_unbiased_lp_full` (the solver before: one two-sided LP "
        'on the whole grid). Both: HiGHS via `scipy.optimize.linprog(method="highs")`, feasibility '
        "tolerances 1e-10; then the same `polish_randomizer`.",
        "- priors (synthetic, see the script's docstring): Census, labels 1..52: 0.60 at 52, 0.10 over "
        "{12, 26, 40, 48, 50}, 0.30 over 1..51 proportional to y. Criteo, labels 0..400: (1 + y/20)^-2 "
        "below 400 (mass 0.98), 0.02 at 400.",
        "- memory: peak RSS above the RSS before the stage (VmHWM reset via /proc/self/clear_refs; includes "
        "HiGHS' C++ memory), MiB, each LP in a fresh process.",
        "- checks: `is_unbiased()` (|E[M(y)] - y| <= 1e-9 max(1, max|y|)) and exp(`epsilon_dp_ratio()`) <= "
        "e^eps (1 + 1e-9); `DP ratio - eps` is `epsilon_dp_ratio() - eps` (<= 0 up to rounding).",
        "",
        "| labels | eps | mesh | solver | LP solve (s) | polish (s) | total (s) | peak RSS delta solve / polish (MiB) "
        "| restricted LP sizes | outputs used | noisy label loss | unbiased | DP ratio - eps | checks |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["status"] != "ok":
            why = r.get("why", r["status"])
            lines.append(
                f"| {r['k_label']} | {r['eps']:g} | {r['mesh']} | {r['solver']} | - | - | {_time_cell(r)} | - | - "
                f"| - | - | - | - | {why} |"
            )
            continue
        sizes = r["lp_sizes"]
        size_txt = " > ".join(str(s) for s in sizes) if r["solver"] == "new" else f"{sizes[0]} (whole grid)"
        ok = r["unbiased"] and r["dp_ok"] and r.get("public_same_matrix", True)
        lines.append(
            f"| {r['k_label']} | {r['eps']:g} | {r['mesh']} | {r['solver']} | {_f(r['solve_s'])} | {_f(r['polish_s'], '{:.3f}')} "
            f"| {_f(r['total_s'])} | {_f(r['mem_solve_mib'], '{:.0f}')} / {_f(r['mem_polish_mib'], '{:.1f}')} | {size_txt} "
            f"| {r['used_outputs']} | {r['loss']:.6g} | {'yes' if r['unbiased'] else 'NO'} | {r['eps_ratio'] - r['eps']:.1e} "
            f"| {'ok' if ok else 'FAILED'} |"
        )
    # side by side
    lines += [
        "",
        "Old against new (same run, same process setup): total = LP solve + polish.",
        "",
        "| labels | eps | mesh | old total (s) | new total (s) | old / new | loss old | loss new | relative difference |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    by = {(r["dataset"], r["eps"], r["mesh"], r["solver"]): r for r in rows}
    for (ds, eps, mesh, solver), new in by.items():
        if solver != "new":
            continue
        old = by.get((ds, eps, mesh, "old"))
        if old is None:
            continue
        ratio = loss_old = diff = "-"
        if new["status"] == "ok" and old["status"] == "ok":
            ratio = f"{old['total_s'] / new['total_s']:.1f}x"
            loss_old = f"{old['loss']:.10g}"
            diff = f"{abs(old['loss'] - new['loss']) / old['loss']:.1e}"
        elif new["status"] == "ok" and old["status"] == "timeout":
            ratio = f"> {old['timeout'] / new['total_s']:.0f}x"
        lines.append(
            f"| {new['k_label']} | {eps:g} | {mesh} | {_time_cell(old)} | {_time_cell(new)} | {ratio} | {loss_old} "
            f"| {new['loss']:.10g} | {diff} |"
            if new["status"] == "ok"
            else f"| {new['k_label']} | {eps:g} | {mesh} | {_time_cell(old)} | {_time_cell(new)} | - | - | - | - |"
        )
    # the goal and the paper
    lines += [""]
    census = by.get(("census", 1.0, 1664, "new"))
    crit = [by.get(("criteo", e, 401, "new")) for e in (1.0, 4.0)]
    if not quick and (census is not None or any(crit)):
        parts = []
        if census is not None and census["status"] == "ok":
            parts.append(f"Census mesh 1664: {census['total_s']:.2f} s")
        for c in crit:
            if c is not None and c["status"] == "ok":
                parts.append(f"Criteo 401 labels mesh 401 eps {c['eps']:g}: {c['total_s']:.2f} s")
        met = all(x["status"] == "ok" and x["total_s"] < GOAL_S for x in [census, *crit] if x is not None)
        lines.append(
            f"Goal (each under {GOAL_S:.0f} s, new solver, LP solve + polish): {'; '.join(parts)}: "
            f"{'met' if met else 'NOT met'}."
        )
    lines.append("")
    lines.append(
        "003 Table G.3 (Census, eps 1, the authors' machine and the real labels): "
        + ", ".join(f"mesh {m}: {s:g} s" for m, s in PAPER_G3.items())
        + "; its noisy label losses (1288.21 / 1275.22 / 1274.71) are on the real label distribution, "
        "not comparable to the synthetic prior here."
    )
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small meshes only (under a minute)")
    ap.add_argument("--old-timeout", type=float, default=600.0, help="seconds per LP for the old solver")
    ap.add_argument("--new-timeout", type=float, default=600.0, help="seconds per LP for the new solver")
    ap.add_argument(
        "--out",
        default=None,
        help="markdown path (default: benchmarks/results/unbiased_lp_cpu.md; --quick writes only when given)",
    )
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker is not None:
        print(json.dumps(worker(json.loads(a.worker))))
        return 0
    command = " ".join(
        [".venv/bin/python", "benchmarks/bench_unbiased_lp.py", *(argv if argv is not None else sys.argv[1:])]
    )
    load_start = loadavg()
    rows = []
    for ds, eps, meshes, solvers in plan(a.quick):
        label = "1..52" if ds == "census" else "0..400"
        slow_old = None  # the smaller mesh at which the old solver passed timeout / 3
        for mesh in meshes:
            for solver in solvers:
                timeout = a.old_timeout if solver == "old" else a.new_timeout
                spec = dict(dataset=ds, eps=eps, mesh=mesh, solver=solver)
                if solver == "old" and slow_old is not None:
                    r = dict(spec, status="skipped", why=f"not run: mesh {slow_old[0]} took {slow_old[1]}")
                else:
                    r = run_one(spec, timeout)
                r.update(k_label=label, timeout=timeout)
                if solver == "old" and slow_old is None:
                    if r["status"] == "timeout":
                        slow_old = (mesh, f"> {timeout:.0f} s")
                    elif r["status"] == "ok" and r["total_s"] > timeout / 3:
                        slow_old = (mesh, f"{r['total_s']:.0f} s > {timeout / 3:.0f} s")
                rows.append(r)
                print(
                    f"{ds} eps {eps:g} mesh {mesh} {solver}: {r['status']} "
                    f"{_time_cell(r)} s, load {r.get('load_before')} -> {r.get('load_after')}",
                    flush=True,
                )
    ok = [r for r in rows if r["status"] == "ok"]
    meta = dict(
        date=_dt.date.today().isoformat(),
        cpu=cpu_model(),
        cores=os.cpu_count(),
        python=platform.python_version(),
        numpy=np.__version__,
        scipy=ok[0]["scipy"] if ok else "?",
        highs=ok[0]["highs"] if ok else "?",
        load_start=load_start,
        load_end=loadavg(),
    )
    text = render(rows, quick=a.quick, command=command, meta=meta)
    print(text)
    out = a.out or (None if a.quick else str(ROOT / "benchmarks" / "results" / "unbiased_lp_cpu.md"))
    if out:
        Path(out).write_text(text)
        print(f"wrote {out}")
    failed = [r for r in ok if not (r["unbiased"] and r["dp_ok"] and r.get("public_same_matrix", True))]
    errors = [r for r in rows if r["status"] == "error"]
    return 1 if failed or errors else 0


if __name__ == "__main__":
    sys.exit(main())
