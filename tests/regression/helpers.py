"""A small synthetic tabular regression data set in the prepared format (tests only)."""

from __future__ import annotations

import numpy as np

from labeldp.data.tabular import load_prepared_tabular, save_prepared_tabular


def synthetic_tabular(tmp_path, *, n_train=2000, n_test=400, lower=0, upper=20, integer=True, name="rand_hie", seed=0):
    """Labels y = clip(round(10 + 4 x0 + noise)) in [lower, upper], one categorical column."""
    rng = np.random.default_rng(seed)
    n = n_train + n_test
    x = rng.normal(size=(n, 3))
    cat = rng.integers(1, 5, size=(n, 1))
    y = 10 + 4 * x[:, 0] + (cat[:, 0] - 2.5) + rng.normal(size=n)
    y = np.clip(np.round(y) if integer else y, lower, upper)
    arrays = {
        "x_num_train": x[:n_train],
        "x_num_test": x[n_train:],
        "x_cat_train": cat[:n_train],
        "x_cat_test": cat[n_train:],
        "y_train": y[:n_train],
        "y_test": y[n_train:],
    }
    meta = {
        "dataset": name,
        "source": "synthetic_standin",
        "label": "y",
        "label_lower": lower,
        "label_upper": upper,
        "label_integer": integer,
        "cat_vocab_sizes": [5],
        "numerical_features": ["a", "b", "c"],
        "categorical_features": ["k"],
    }
    path = save_prepared_tabular(tmp_path / f"{name}.npz", arrays, meta)
    return load_prepared_tabular(path)
