"""Criteo Attribution Modeling for Bidding (000 Section 6 / Appendix D.3, Table 7; 002 Section 5):
raw zip -> tabular ``.npz`` with users, plus the per-user example cap applied at training time.

Raw format (official README, https://ailab.criteo.com/criteo-attribution-modeling-bidding-dataset/,
also on Hugging Face as ``criteo/criteo-attribution-dataset``): ``criteo-research-attribution-dataset.zip``
holds ``criteo_attribution_dataset.tsv.gz`` (any member with that base name is read; the bare
``.tsv.gz`` placed in the raw directory, as Hugging Face serves it, is read too). About 16.5 million
lines, one impression (a displayed banner) each, sorted by timestamp, tab separated, WITH a header
line naming the 22 columns::

    timestamp, uid, campaign, conversion, conversion_timestamp, conversion_id, attribution, click,
    click_pos, click_nb, cost, cpo, time_since_last_click, cat1 .. cat9

``uid`` identifies the user, ``campaign`` the campaign; ``conversion`` is 1 if a conversion followed
within 30 days (whether or not this impression was the last click); ``click`` is 1 if the impression
was clicked; ``click_pos`` is the position of the click before a conversion (0 = first click) and
``click_nb`` the number of clicks before it (-1 where undefined); ``cost`` is the (transformed) price
paid for the display; ``cat1..cat9`` are undisclosed contextual categorical features. Identifiers and
categories are integers. The papers add no column to this list and contradict none of it.

Preparation (000 Section 6 and Appendix D.3; fixed constants, not computed from the labels):

* keep clicked impressions only (``click == 1``; 000 D.3 "we firstly collect a subset of data where
  the impression has been clicked");
* label ``last_touch_attribution_conversion`` = ``conversion == 1 AND click_pos == click_nb - 1``
  (000 D.3: "the Boolean AND of the original conversion label and (click_pos == click_nb-1)"), 0/1,
  task ``binary_classification`` (label range [0, 1], integer);
* features (000 D.3: "ten categorical features and one numerical feature"): ``campaign`` and
  ``cat1..cat9`` categorical, vocabularies from the training split only (sorted integer values;
  index 0 = missing (empty cell) or not seen in training); ``cost`` numerical, standardised with the
  training split's mean and standard deviation, NOT log-transformed: 000 describes no transform, and
  002's log transform (its Appendix A) is for the integer count features of Criteo pCTR, not for
  Attribution's float ``cost`` (an empty cost becomes the training mean, counted). Left out: the
  label's ingredients and other outcomes (``conversion*``, ``attribution``, ``click*``, ``cpo``),
  ``timestamp`` / ``time_since_last_click`` (000 does not use them) and ``uid`` (the protected person);
* users (``split="users"``, 000 Section 6): among the users with at least one clicked impression,
  ``n_train_users`` (200,000) training users and a DISJOINT ``n_test_users`` (50,000) test users are
  drawn at random with seed 0 (000 does not say whether it drew users before or after the click
  filter; drawing among users with a clicked impression makes every drawn user contribute); every
  clicked impression of a drawn user is kept, in file order. ``user_train`` / ``user_test`` number
  the users of each split 0..U-1 (ascending raw uid). Fewer eligible users than asked is an error.
* the per-user cap k (000: k in {2, 5, 10}) is NOT applied here: :func:`cap_examples_per_user` draws
  it at training time (so k is a hyper-parameter, not a preparation).
* ``split="random_80_20"`` (002 Section 5: "randomly partition the dataset into 80%/20% train/test"):
  every clicked impression of every user, a random 80/20 row split with seed 0 (a user may then have
  rows in both splits); users are numbered per split as above. 002 does not restate the click filter
  or the label; this preparation uses 000's definition for both.
* ``subset=n``: ``split="users"``: n training users and n test users ("n of each split"; explicit
  ``n_train_users`` / ``n_test_users`` cannot be combined with it); ``split="random_80_20"``: the first
  n clicked impressions of the file (time order), before splitting.
* metadata: ``sensitive_features = ["cat1", "cat2"]`` (002 Section 5's arbitrary choice for
  Attribution), ``user_level = true``.

With neither ``subset`` nor explicit user counts, a SYNTHETIC stand-in directory uses the user
counts its marker records (the stand-in has a few hundred users, not 250,000).

Streaming: the zip member is read through ``zipfile`` + ``gzip`` + pandas chunks of the needed columns
only. ``split="users"`` reads the file twice: first ``uid`` and ``click`` (to find the eligible users),
then the features of the drawn users' clicked rows, so memory grows with the ~250,000 users' rows, not
with the 16.5 million lines. ``split="random_80_20"`` keeps every clicked impression (int64 categories).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from labeldp.data.dataset_spec import DatasetSpec, RemoteFile

from labeldp.data.fetch import file_digests
from labeldp.data.rawformats import is_standin_dir, read_standin_marker
from labeldp.data.tabular import (
    TabularDataError,
    build_vocab,
    encode_numeric_categories,
    random_split,
    save_prepared_tabular,
)
from labeldp.data.rawformats.criteo_attribution import (  # the raw format, its columns and its reader
    ARCHIVE,
    CATEGORICAL_FEATURES,
    COLUMNS,
    LABEL,
    MEMBER,
    MISSING,
    NUMERICAL_FEATURES,
    SENSITIVE_FEATURES,
    USER,
    eligible_users,
    raw_path,
    read_header,
    read_rows,
)
from labeldp.data.rawformats.criteo_attribution_standin import write_standin  # the stand-in writer (its own module)

__all__ = [
    "SPEC",
    "ARCHIVE",
    "MEMBER",
    "COLUMNS",
    "LABEL",
    "CATEGORICAL_FEATURES",
    "NUMERICAL_FEATURES",
    "SENSITIVE_FEATURES",
    "N_TRAIN_USERS",
    "N_TEST_USERS",
    "SPLITS",
    "prepare_dataset",
    "cap_examples_per_user",
    "write_standin",
]

SPEC = DatasetSpec(
    name="criteo_attribution",
    title="Criteo Attribution Modeling for Bidding",
    files=(
        RemoteFile(
            filename="criteo-research-attribution-dataset.zip",
            url="http://go.criteo.net/criteo-research-attribution-dataset.zip",
        ),
    ),
    kind="tabular",
    raw_format="criteo_attribution_zip",
    num_classes=2,
    input_shape=None,
    homepage="https://ailab.criteo.com/criteo-attribution-modeling-bidding-dataset/",
    license="CC BY-NC-SA 4.0",
    citation=(
        "Diemert, Meynet, Galland, Lefortier (2017). Attribution Modeling Increases Efficiency "
        "of Bidding in Display Advertising. AdKDD & TargetAd workshop, KDD."
    ),
    label="last_touch_attribution_conversion",
    standin_allowed=True,
    notes=(
        "No published checksum: the sha256 is recorded on first download (sidecar <file>.sha256) "
        "and can be pinned in config. The zip holds criteo_attribution_dataset.tsv.gz. "
        "Some users report the go.criteo.net link answering 404; the same data is on Hugging Face "
        "(https://huggingface.co/datasets/criteo/criteo-attribution-dataset, login and terms "
        "acceptance required): download it by hand and place the zip in the mirror directory "
        "as <mirror>/criteo_attribution/criteo-research-attribution-dataset.zip."
    ),
)


N_TRAIN_USERS = 200_000
N_TEST_USERS = 50_000
SPLITS = ("users", "random_80_20")
SOURCES = ("official", "synthetic_standin")
SEED = 0
# ------------------------------------------------------------------------------ preparation


def _user_counts(raw_dir: Path, path: Path, subset, n_train_users, n_test_users) -> tuple[int, int, str]:
    if subset is not None:
        if n_train_users is not None or n_test_users is not None:
            raise TabularDataError(
                "criteo_attribution: give either subset (n users in each split) or "
                "n_train_users / n_test_users, not both"
            )
        return int(subset), int(subset), "subset"
    if (n_train_users is None) != (n_test_users is None):
        raise TabularDataError(
            f"criteo_attribution: give both n_train_users and n_test_users (got "
            f"{n_train_users} and {n_test_users}), or neither for the paper's "
            f"{N_TRAIN_USERS} / {N_TEST_USERS}"
        )
    if n_train_users is not None:
        return int(n_train_users), int(n_test_users), "arguments"
    for d in (raw_dir, path.parent):
        if is_standin_dir(d):
            marker = read_standin_marker(d)
            if "n_train_users" in marker and "n_test_users" in marker:
                return int(marker["n_train_users"]), int(marker["n_test_users"]), "standin_marker"
    return N_TRAIN_USERS, N_TEST_USERS, "paper (000 Section 6)"


def prepare_dataset(
    *,
    raw_dir: str | os.PathLike,
    out_path: str | os.PathLike,
    subset: int | None = None,
    source: str,
    n_train_users: int | None = None,
    n_test_users: int | None = None,
    split: str = "users",
    view: str | None = None,
) -> Path:
    """Raw Criteo Attribution zip -> prepared tabular ``.npz`` with users (layout: :mod:`labeldp.data.tabular`).

    Args:
      raw_dir: directory holding ``criteo-research-attribution-dataset.zip`` (directly or listed in its
        ``MANIFEST.json``), or the bare ``criteo_attribution_dataset.tsv.gz``.
      out_path: the ``.npz`` to write (atomically; absent after any failure).
      subset: ``split="users"``: n training and n test users; ``split="random_80_20"``: the first n
        clicked impressions (None: the full preparation).
      source: ``"official"`` or ``"synthetic_standin"``; a raw directory with the ``STANDIN_SYNTHETIC``
        marker is always ``"synthetic_standin"``.
      n_train_users, n_test_users: users drawn for each split (``split="users"`` only; both or neither).
        None: 200,000 / 50,000 (000 Section 6), or, for a stand-in directory, the counts its marker records.
      split: ``"users"`` (000: disjoint random users, the default) or ``"random_80_20"`` (002: random
        80/20 split of the clicked impressions).
      view: the :mod:`labeldp.data.views` id this preparation is made for (stored as ``metadata["view"]``;
        None: the dataset itself).

    Returns:
      ``out_path`` as a :class:`~pathlib.Path`.

    Raises:
      TabularDataError: archive missing or malformed, a needed column missing from the header, values
        that do not parse, no clicked impression, fewer eligible users than asked, bad arguments.
    """
    if source not in SOURCES:
        raise TabularDataError(f"criteo_attribution: source must be one of {SOURCES}, got {source!r}")
    if split not in SPLITS:
        raise TabularDataError(f"criteo_attribution: split must be one of {SPLITS}, got {split!r}")
    if subset is not None and int(subset) < (1 if split == "users" else 2):
        raise TabularDataError(
            f"criteo_attribution: subset must be >= {1 if split == 'users' else 2} "
            f"({'users per split' if split == 'users' else 'rows (train and test)'}), got {subset}"
        )
    if split != "users" and (n_train_users is not None or n_test_users is not None):
        raise TabularDataError(
            "criteo_attribution: n_train_users / n_test_users apply to split='users' only; "
            f"split={split!r} splits the rows 80/20"
        )
    raw_dir = Path(raw_dir)
    path = raw_path(raw_dir)
    if is_standin_dir(raw_dir) or is_standin_dir(path.parent):
        source = "synthetic_standin"
    header, member = read_header(path)
    counts = {"rows_read": 0, "rows_clicked": 0, "kept_rows_conversion": 0, "kept_rows_conversion_click_nb_below_1": 0}
    if split == "users":
        n_tr, n_te, counts_from = _user_counts(raw_dir, path, subset, n_train_users, n_test_users)
        if n_tr < 1 or n_te < 1:
            raise TabularDataError(
                f"criteo_attribution: n_train_users and n_test_users must be >= 1, got {n_tr} and {n_te}"
            )
        eligible = eligible_users(path, header, counts)
        counts["users_with_a_click"] = int(eligible.size)
        if eligible.size == 0:
            raise TabularDataError(
                f"criteo_attribution: no row of {member} in {path} has click == 1 ({counts}); nothing to learn from"
            )
        if n_tr + n_te > eligible.size:
            raise TabularDataError(
                f"criteo_attribution: {n_tr} training + {n_te} test users requested "
                f"({n_tr + n_te}), but only {eligible.size} users of {path.name} have a clicked "
                "impression; pass smaller n_train_users / n_test_users (or subset)"
            )
        drawn = np.random.default_rng(SEED).permutation(eligible.size)
        train_users, test_users = np.sort(eligible[drawn[:n_tr]]), np.sort(eligible[drawn[n_tr : n_tr + n_te]])
        uid, y, cat, num = read_rows(path, header, np.concatenate([train_users, test_users]), None, counts)
        train = np.flatnonzero(np.isin(uid, train_users))
        test = np.flatnonzero(np.isin(uid, test_users))
        split_meta = {
            "kind": "users",
            "seed": SEED,
            "n_train_users": n_tr,
            "n_test_users": n_te,
            "user_counts_from": counts_from,
            "drawn_from": "users with at least one clicked impression",
        }
    else:
        uid, y, cat, num = read_rows(path, header, None, None if subset is None else int(subset), counts)
        if len(y) == 0:
            raise TabularDataError(
                f"criteo_attribution: no row of {member} in {path} has click == 1 ({counts}); nothing to learn from"
            )
        train, test = random_split(len(y), test_fraction=0.2, seed=SEED)
        split_meta = {"kind": "random", "test_fraction": 0.2, "seed": SEED}
    _, user_train = np.unique(uid[train], return_inverse=True)
    _, user_test = np.unique(uid[test], return_inverse=True)
    split_meta.update(
        n_train=int(train.size),
        n_test=int(test.size),
        n_train_users_kept=int(user_train.max(initial=-1)) + 1,
        n_test_users_kept=int(user_test.max(initial=-1)) + 1,
    )
    missing_cost = ~np.isfinite(num)
    counts["cost_missing_filled_with_train_mean"] = int(missing_cost.sum())
    train_num = num[train]
    mean = np.array(
        [np.nanmean(train_num[:, j]) if np.isfinite(train_num[:, j]).any() else 0.0 for j in range(num.shape[1])]
    )
    num = np.where(missing_cost, mean[None, :], num)
    std = num[train].std(axis=0)
    std = np.where(std > 0, std, 1.0)
    stats = {"mean": mean.tolist(), "std": std.tolist(), "log_transform": False}
    vocabs = [build_vocab(cat[train, j], missing=MISSING) for j in range(cat.shape[1])]
    c_train = np.empty((train.size, cat.shape[1]), np.int32)
    c_test = np.empty((test.size, cat.shape[1]), np.int32)
    for j, vocab in enumerate(vocabs):  # column by column: no second copy of the whole table
        c_train[:, j] = encode_numeric_categories(cat[train, j], vocab)
        c_test[:, j] = encode_numeric_categories(cat[test, j], vocab)
    counts.update(
        rows_kept=int(y.size),
        label_positive_train=int(y[train].sum()),
        label_positive_test=int(y[test].sum()),
        categorical_missing={c: int((cat[:, j] == MISSING).sum()) for j, c in enumerate(CATEGORICAL_FEATURES)},
    )
    metadata = {
        "dataset": "criteo_attribution",
        "source": source,
        "subset": subset,
        "task": "binary_classification",
        "label": LABEL,
        "label_lower": 0,
        "label_upper": 1,
        "label_integer": True,
        "numerical_features": list(NUMERICAL_FEATURES),
        "categorical_features": list(CATEGORICAL_FEATURES),
        "sensitive_features": list(SENSITIVE_FEATURES),
        "user_level": True,
        "user_column": USER,
        "cat_vocab_sizes": [len(v) + 1 for v in vocabs],
        "numerical_standardisation": stats,
        "split": split_meta,
        **({"view": view} if view else {}),
        "preprocessing": {
            **counts,
            "keep": "click == 1",
            "label_rule": "conversion == 1 and click_pos == click_nb - 1 (000 Appendix D.3)",
            "examples_per_user_cap": "not applied; cap_examples_per_user at training time "
            "(000 Section 6: k in {2, 5, 10})",
            "member": member,
        },
        "raw_files": {path.name: file_digests(path)},
    }
    arrays = {
        "x_num_train": (num[train] - mean) / std,
        "x_num_test": (num[test] - mean) / std,
        "x_cat_train": c_train,
        "x_cat_test": c_test,
        "y_train": y[train].astype(np.float64),
        "y_test": y[test].astype(np.float64),
        "user_train": user_train.astype(np.int64),
        "user_test": user_test.astype(np.int64),
    }
    return save_prepared_tabular(out_path, arrays, metadata)


# ------------------------------------------------------------------------------ per-user cap


def cap_examples_per_user(user_ids: np.ndarray, *, k: int, seed: int, with_replacement: bool = False) -> np.ndarray:
    """Row indices giving every user exactly ``k`` examples (000 Section 6, Table 7).

    000: "we cap the maximum number of examples any one user can contribute to be k ... In cases where
    a user contributes fewer than k examples, we use random re-sampling to augment their contributions
    to k examples". A user with at least k rows contributes k of them drawn without replacement; a user
    with fewer keeps all of them plus ``k - n`` re-drawn with replacement from its rows.
    ``with_replacement=True`` is 002's reading (Appendix A: "we sample examples independently with
    replacement up to the example cap for each user"): all k drawn with replacement, for every user.

    Args:
      user_ids: ``(n,)`` integer user of each row (e.g. ``PreparedTabular.user_train``).
      k: examples per user (>= 1).
      seed: random seed; the result is a deterministic function of ``(user_ids, k, seed)``.
      with_replacement: draw every user's k rows with replacement (002) instead of 000's rule.

    Returns:
      int64 indices into ``user_ids``, ``k * n_users`` of them: users in ascending order of their id,
      each user's k rows contiguous, so ``idx.reshape(-1, k)`` is the ``(U, k)`` layout that
      :func:`labeldp.ads.train.train_user_level` takes.

    Raises:
      ValueError: ``k < 1`` or ``user_ids`` not one-dimensional.
    """
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(f"cap_examples_per_user: k must be an integer >= 1 (examples per user), got k={k!r}")
    k = int(k)
    user_ids = np.asarray(user_ids)
    if user_ids.ndim != 1:
        raise ValueError(f"cap_examples_per_user: user_ids must be one-dimensional, got shape {user_ids.shape}")
    if user_ids.size == 0:
        return np.zeros(0, np.int64)
    _, inverse, sizes = np.unique(user_ids, return_inverse=True, return_counts=True)
    rng = np.random.default_rng(seed)
    order = np.lexsort((rng.random(user_ids.size), inverse))  # by user, random within a user
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    user = np.repeat(np.arange(sizes.size), k)
    slot = np.tile(np.arange(k), sizes.size)
    redraw = np.floor(rng.random(user.size) * sizes[user]).astype(np.int64)
    offset = redraw if with_replacement else np.where(slot < sizes[user], slot, redraw)
    return order[starts[user] + offset].astype(np.int64)
