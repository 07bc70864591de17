"""Prints the transition matrices shown in docs/mechanisms_regression.md and draws the figure.

Usage (from the repository root)::

    .venv/bin/python docs/regression_example.py            # print the tables (Markdown)
    .venv/bin/python docs/regression_example.py --png docs/mechanisms_regression.png
"""

from __future__ import annotations

import argparse

import numpy as np

from labeldp.mechanisms import regression as R

SUPPORT = np.arange(5.0)
PRIOR = np.array([0.40, 0.25, 0.15, 0.12, 0.08])
EPSILON = 1.0


def randomizers():
    """The example randomizers: label set {0..4}, eps = 1, the prior above."""
    kw = dict(epsilon=EPSILON, lower=0, upper=4, clip=True)
    return {
        "RR-on-Bins (optimal, Ghazi et al. 2023)": R.rr_on_bins(SUPPORT, PRIOR, epsilon=EPSILON),
        "debiased RR (003 Def. 23)": R.debiased_rr(SUPPORT, epsilon=EPSILON, probs=PRIOR),
        "optimal unbiased, grid n = 5 (003 Alg. 1-2)": R.optimal_unbiased_randomizer(
            SUPPORT, PRIOR, epsilon=EPSILON, num_outputs=5
        ).compact(),
        "optimal unbiased, grid n = 161 (003 Alg. 1-2)": R.optimal_unbiased_randomizer(
            SUPPORT, PRIOR, epsilon=EPSILON, num_outputs=161
        ).compact(),
        "discrete Laplace, clipped (003 Def. 17)": R.laplace_transition_matrix(SUPPORT, **kw),
        "discrete staircase, clipped (003 Def. 19)": R.staircase_transition_matrix(SUPPORT, **kw),
    }


def markdown_table(r) -> str:
    head = "| y \\ output | " + " | ".join(f"{o:.3f}" for o in r.outputs) + " |"
    sep = "|---" * (r.outputs.size + 1) + "|"
    rows = [f"| {y:g} | " + " | ".join(f"{p:.4f}" for p in row) + " |" for y, row in zip(r.support, r.matrix)]
    return "\n".join([head, sep, *rows])


def summary(r) -> str:
    bias = np.max(np.abs(r.bias()))
    return (
        f"noisy label loss E(out - y)^2 = {r.noisy_label_loss(PRIOR):.4f}; "
        f"max |E[out | y] - y| = {bias:.2e}; DP ratio (log) = {r.epsilon_dp_ratio():.6f}"
    )


def print_tables():
    for name, r in randomizers().items():
        print(f"### {name}\n\n{summary(r)}\n\n{markdown_table(r)}\n")
    window = R.laplace_transition_matrix(SUPPORT, epsilon=EPSILON, lower=0, upper=4, clip=False, window=3)
    print("### discrete Laplace, unclipped (window -3..7)\n")
    print(
        f"tail mass outside the window per label: {np.array2string(window.tail_mass, precision=4)}; "
        f"DP ratio on the window (log) = {window.epsilon_dp_ratio():.6f}\n"
    )
    print(markdown_table(window))


def draw(path: str):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    items = list(randomizers().items())
    fig, axes = plt.subplots(2, 3, figsize=(13, 6.5), constrained_layout=True)
    for ax, (name, r) in zip(axes.ravel(), items):
        yy, oo = np.meshgrid(r.support, r.outputs, indexing="ij")
        ax.scatter(oo.ravel(), yy.ravel(), s=400 * r.matrix.ravel(), alpha=0.6)
        ax.plot(r.support, r.support, "k:", lw=0.8, label="out = y")
        ax.plot(r.expected_outputs(), r.support, "r+", ms=10, label="E[out | y]")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("output")
        ax.set_ylabel("label y")
    axes[0, 0].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Pr[out | y] (marker area) on labels {{0..4}}, eps = {EPSILON:g}, prior {PRIOR.tolist()}")
    fig.savefig(path, dpi=90)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--png", default=None, help="also write the figure to this path")
    args = parser.parse_args()
    print_tables()
    if args.png:
        draw(args.png)
