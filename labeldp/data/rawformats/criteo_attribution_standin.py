"""A SYNTHETIC stand-in for Criteo Attribution's raw zip (tests and the CPU smoke profile only).

The real file (about 16.5 million lines) is not obtainable on the machines CI runs on; this writes a
small file in exactly its raw format (:mod:`labeldp.data.sources.criteo_attribution` documents the format and
reads both), with a planted signal and the ``STANDIN_SYNTHETIC`` marker, so every output built on it
says it is a stand-in.
"""

from __future__ import annotations

import gzip
import io
import os
import zipfile
from pathlib import Path

import numpy as np

from labeldp.data.rawformats.standin import standin_rows, write_standin_marker

from labeldp.data.rawformats.criteo_attribution import ARCHIVE, COLUMNS, MEMBER

__all__ = ["write_standin"]

_STANDIN_CARDINALITIES = {
    "cat1": 6,
    "cat2": 12,
    "cat3": 8,
    "cat4": 30,
    "cat5": 15,
    "cat6": 40,
    "cat7": 5,
    "cat8": 20,
    "cat9": 50,
}


def write_standin(
    directory: str | os.PathLike,
    *,
    n_rows: int | None = None,
    seed: int,
    n_train: int | None = None,
    n_test: int | None = None,
) -> list[Path]:
    """Writes a SYNTHETIC ``criteo-research-attribution-dataset.zip`` (tests / CPU smoke only).

    Same member (``criteo_attribution_dataset.tsv.gz``), header and 22 columns as the official file,
    sorted by timestamp. About 5 impressions per user (skewed), mostly on the user's own campaign; 40%
    of impressions are clicked. A "journey" is a user's impressions of one campaign: a clicked impression
    has ``click_nb`` = the journey's clicks and ``click_pos`` its rank (-1 / -1 when not clicked); the
    journey converts with a probability set by a fixed random table of the last click's campaign, cat1
    and cat3 (the PLANTED signal: a non-private model reaches a clearly non-trivial AUC), and then every
    impression of it has ``conversion = 1`` and the same ``conversion_timestamp`` / ``conversion_id``
    (-1 otherwise); ``attribution`` is 1 for most converting journeys with a click. The
    ``STANDIN_SYNTHETIC`` marker is written first; it records the user counts a preparation uses by
    default (80/20 of the users with a click).

    Args:
      directory: output directory (created).
      n_rows: (default ``n_train + n_test``) number of impression lines (>= 40, so that there are users in both splits).
      seed: random seed (output is deterministic).
      n_train, n_test: recorded in the marker (default: an 80/20 split of ``n_rows``).

    Returns:
      ``[path of the zip]``.
    """
    n_rows = standin_rows(n_rows, n_train, n_test)
    import pandas as pd

    if n_rows < 40:
        raise ValueError(f"n_rows must be >= 40 (a few users in each split), got {n_rows}")
    directory = Path(directory)
    rng = np.random.default_rng(seed)
    n_users = max(5, n_rows // 5)
    weights = rng.gamma(1.5, 1.0, n_users)
    user = rng.choice(n_users, n_rows, p=weights / weights.sum())
    timestamp = np.sort(rng.integers(0, 30 * 86400, n_rows))
    n_campaigns = int(np.clip(n_users // 6, 5, 60))
    home = rng.integers(0, n_campaigns, n_users)
    campaign = np.where(rng.random(n_rows) < 0.8, home[user], rng.integers(0, n_campaigns, n_rows))
    cats = {c: rng.integers(0, k, n_rows) for c, k in _STANDIN_CARDINALITIES.items()}
    click = (rng.random(n_rows) < 0.4).astype(np.int64)
    effect_campaign = rng.normal(0.0, 1.0, n_campaigns)
    k1, k3 = _STANDIN_CARDINALITIES["cat1"], _STANDIN_CARDINALITIES["cat3"]
    effect_cat1 = np.linspace(-3.0, 3.0, k1)[rng.permutation(k1)]
    effect_cat3 = np.linspace(-2.0, 2.0, k3)[rng.permutation(k3)]

    journey = user * n_campaigns + campaign
    keys, journey = np.unique(journey, return_inverse=True)
    click_pos = np.full(n_rows, -1, np.int64)
    click_nb = np.full(n_rows, -1, np.int64)
    converts = np.zeros(keys.size, bool)
    last_time = np.zeros(keys.size, np.int64)
    clicked_any = np.zeros(keys.size, bool)
    by_journey = np.argsort(journey, kind="stable")  # rows are in time order, so each journey's rows are too
    for j, rows in enumerate(np.split(by_journey, np.cumsum(np.bincount(journey, minlength=keys.size))[:-1])):
        last_time[j] = timestamp[rows[-1]]
        clicks = rows[click[rows] == 1]
        if clicks.size:
            clicked_any[j] = True
            click_pos[clicks] = np.arange(clicks.size)
            click_nb[clicks] = clicks.size
            last = clicks[-1]
            score = (
                -1.0
                + effect_campaign[campaign[last]]
                + effect_cat1[cats["cat1"][last]]
                + effect_cat3[cats["cat3"][last]]
            )
            converts[j] = rng.random() < 1.0 / (1.0 + np.exp(-score))
        else:
            converts[j] = rng.random() < 0.03  # a post-view conversion, no click
    attributed = converts & clicked_any & (rng.random(keys.size) < 0.85)
    conversion_id = np.where(converts, rng.choice(10**9, keys.size, replace=False), -1)
    conversion_ts = np.where(converts, last_time + rng.integers(60, 7 * 86400, keys.size), -1)
    since = np.full(n_rows, -1, np.int64)
    last_click_of_user: dict[int, int] = {}
    for i in range(n_rows):
        u = int(user[i])
        if u in last_click_of_user:
            since[i] = timestamp[i] - last_click_of_user[u]
        if click[i]:
            last_click_of_user[u] = int(timestamp[i])
    cost = np.exp(rng.normal(-9.0, 0.8, n_rows)) * (1 + click)
    cpo = np.where(attributed, np.round(rng.uniform(0.5, 50.0, keys.size), 4), -1.0)
    uid_values = rng.choice(10**8, n_users, replace=False)
    campaign_values = rng.choice(10**8, n_campaigns, replace=False)
    table = {
        "timestamp": timestamp,
        "uid": uid_values[user],
        "campaign": campaign_values[campaign],
        "conversion": converts[journey].astype(np.int64),
        "conversion_timestamp": conversion_ts[journey],
        "conversion_id": conversion_id[journey],
        "attribution": attributed[journey].astype(np.int64),
        "click": click,
        "click_pos": click_pos,
        "click_nb": click_nb,
        "cost": cost,
        "cpo": cpo[journey],
        "time_since_last_click": since,
    }
    for c, k in _STANDIN_CARDINALITIES.items():
        table[c] = rng.choice(3 * 10**7, k, replace=False)[cats[c]]
    frame = pd.DataFrame(table, columns=list(COLUMNS))

    clicked_users = int(np.unique(user[click == 1]).size)
    if clicked_users < 2:  # pragma: no cover - needs a degenerate seed with n_rows >= 40
        raise ValueError(f"stand-in: only {clicked_users} users have a click; use more rows")
    n_train_users = max(1, int(0.8 * clicked_users))
    n_test_rows = n_test if n_test is not None else max(1, round(0.2 * n_rows))
    write_standin_marker(
        directory,
        dataset="criteo_attribution",
        seed=seed,
        n_train=n_train if n_train is not None else n_rows - n_test_rows,
        n_test=n_test_rows,
        n_rows=n_rows,
        n_train_users=n_train_users,
        n_test_users=clicked_users - n_train_users,
    )
    text = frame.to_csv(sep="\t", index=False, float_format="%.8g", lineterminator="\n")
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0) as gz:
        gz.write(text.encode())
    path = directory / ARCHIVE
    tmp = path.with_name(path.name + ".part")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as zf:
        info = zipfile.ZipInfo(MEMBER, date_time=(2017, 7, 1, 0, 0, 0))
        info.external_attr = 0o644 << 16
        zf.writestr(info, buf.getvalue())
    os.replace(tmp, path)
    return [path]
