"""Criteo Attribution preparation (000 Section 6 / Table 7): label rule, disjoint users, training-only
vocabularies, the per-user cap, the SYNTHETIC stand-in (format and planted signal), bad input."""

from __future__ import annotations

import gzip
import io
import zipfile
from pathlib import Path

import numpy as np
import pytest

from labeldp.data.sources import criteo_attribution as ca
from labeldp.data.rawformats import criteo_attribution as attribution_format
from labeldp.data.prepare import main as prepare_main
from labeldp.data.rawformats import make_standin_raw_files, read_standin_marker
from labeldp.data.registry import DATASETS
from labeldp.data.tabular import TabularDataError, load_prepared_tabular

CAMPAIGN = list(ca.CATEGORICAL_FEATURES).index("campaign")
CAT1 = list(ca.CATEGORICAL_FEATURES).index("cat1")


def _row(
    uid: int,
    *,
    click: int = 1,
    conversion: int = 0,
    pos: int | None = None,
    nb: int | None = None,
    cost: float = 1.0,
    campaign: int = 7,
    **cats,
) -> dict:
    pos = (0 if click else -1) if pos is None else pos
    nb = (1 if click else -1) if nb is None else nb
    row = {
        "timestamp": 0,
        "uid": uid,
        "campaign": campaign,
        "conversion": conversion,
        "conversion_timestamp": 100 if conversion else -1,
        "conversion_id": 5 if conversion else -1,
        "attribution": conversion,
        "click": click,
        "click_pos": pos,
        "click_nb": nb,
        "cost": cost,
        "cpo": -1,
        "time_since_last_click": -1,
    }
    row.update({f"cat{i}": 10 * i for i in range(1, 10)})
    row.update(cats)
    return row


def _write_zip(
    path: Path, rows: list[dict], columns=ca.COLUMNS, *, member: str = ca.MEMBER, header: bool = True
) -> Path:
    lines = (["\t".join(columns)] if header else []) + ["\t".join(str(r.get(c, "")) for c in columns) for r in rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(member, gzip.compress(("\n".join(lines) + "\n").encode()))
    return path


def _raw_cost(data, split: str) -> np.ndarray:
    """The raw cost of each prepared row (the tests use it as a row / user id)."""
    st = data.metadata["numerical_standardisation"]
    x = getattr(data, f"x_num_{split}")[:, 0].astype(np.float64)
    return np.round(x * st["std"][0] + st["mean"][0]).astype(int)


def _read_standin(path: Path):
    import pandas as pd

    with zipfile.ZipFile(path) as zf:
        assert zf.namelist() == [ca.MEMBER]
        text = gzip.decompress(zf.read(ca.MEMBER)).decode()
    return text.split("\n", 1)[0].split("\t"), pd.read_csv(io.StringIO(text), sep="\t")


def test_registry_allows_standin():
    assert DATASETS["criteo_attribution"].standin_allowed
    assert DATASETS["criteo_attribution"].filenames == (ca.ARCHIVE,)


# ------------------------------------------------------------------------------ label rule


def test_label_rule_and_click_filter(tmp_path):
    rows = [  # cost = row id
        _row(1, conversion=1, pos=2, nb=3, cost=1),  # last click of a converting sequence -> 1
        _row(1, conversion=1, pos=0, nb=3, cost=2),  # not the last click -> 0
        _row(1, conversion=1, pos=1, nb=3, cost=3),
        _row(2, conversion=0, pos=0, nb=1, cost=4),  # last click, no conversion -> 0
        _row(2, click=0, conversion=1, cost=5),  # not clicked: dropped
        _row(2, click=0, conversion=0, cost=6),
        _row(3, conversion=1, pos=0, nb=1, cost=7),  # single click that converted -> 1
        _row(3, conversion=0, pos=1, nb=2, cost=8),
        _row(4, click=0, conversion=1, cost=9),  # a user without a click: never drawn
        _row(5, conversion=1, pos=-1, nb=-1, cost=10),  # -1 == -2 is false -> 0
        _row(5, conversion=1, pos=3, nb=4, cost=11),
    ]
    raw = tmp_path / "raw"
    _write_zip(raw / ca.ARCHIVE, rows)
    data = load_prepared_tabular(
        ca.prepare_dataset(raw_dir=raw, out_path=tmp_path / "a.npz", source="official", n_train_users=3, n_test_users=1)
    )
    ids = np.concatenate([_raw_cost(data, "train"), _raw_cost(data, "test")])
    y = np.concatenate([data.y_train, data.y_test])
    assert dict(zip(ids.tolist(), y.tolist())) == {1: 1, 2: 0, 3: 0, 4: 0, 7: 1, 8: 0, 10: 0, 11: 1}
    assert len(ids) == 8
    meta, pre = data.metadata, data.metadata["preprocessing"]
    assert (pre["rows_read"], pre["rows_clicked"], pre["users_with_a_click"], pre["rows_kept"]) == (11, 8, 4, 8)
    assert pre["kept_rows_conversion_click_nb_below_1"] == 1
    assert data.task == "binary_classification" and (data.label_lower, data.label_upper) == (0.0, 1.0)
    assert data.label_integer and meta["label"] == ca.LABEL == "last_touch_attribution_conversion"
    assert data.sensitive_features == ["cat1", "cat2"] and meta["user_level"] is True
    assert meta["categorical_features"] == ["campaign"] + [f"cat{i}" for i in range(1, 10)]
    assert meta["numerical_features"] == ["cost"] and meta["numerical_standardisation"]["log_transform"] is False
    assert data.source == "official" and meta["raw_files"][ca.ARCHIVE]["sha256"]


# ------------------------------------------------------------------------------ users and vocabularies


def _user_rows(n_users: int = 60) -> tuple[list[dict], dict[int, int]]:
    """Users 1..n_users with 1-4 clicked rows (cost = uid, campaign unique to the user) and users
    n_users+1..n_users+5 with unclicked rows only."""
    rng = np.random.default_rng(5)
    rows, clicked = [], {}
    for u in range(1, n_users + 1):
        clicked[u] = int(rng.integers(1, 5))
        for r in range(clicked[u]):
            rows.append(_row(u, cost=u, campaign=1000 + u, cat1=u % 3, conversion=int(r % 2)))
        rows.append(_row(u, click=0, cost=u, campaign=1000 + u))
    rows += [_row(u, click=0, cost=u) for u in range(n_users + 1, n_users + 6)]
    order = rng.permutation(len(rows))  # users interleaved, as in a file sorted by time
    return [rows[i] for i in order], clicked


@pytest.fixture(scope="module")
def users_raw(tmp_path_factory):
    raw = tmp_path_factory.mktemp("users") / "raw"
    rows, clicked = _user_rows()
    _write_zip(raw / ca.ARCHIVE, rows)
    return raw, clicked


def test_disjoint_users_counts_and_training_vocabularies(users_raw, tmp_path):
    raw, clicked = users_raw
    data = load_prepared_tabular(
        ca.prepare_dataset(
            raw_dir=raw, out_path=tmp_path / "a.npz", source="official", n_train_users=30, n_test_users=20
        )
    )
    uid_train, uid_test = _raw_cost(data, "train"), _raw_cost(data, "test")
    assert len(set(uid_train)) == 30 and len(set(uid_test)) == 20
    assert not set(uid_train) & set(uid_test) and set(uid_train) | set(uid_test) <= set(clicked)
    for split, uids, users in (("train", uid_train, data.user_train), ("test", uid_test, data.user_test)):
        assert users.dtype == np.int64 and sorted(set(users.tolist())) == list(range(len(set(uids))))
        np.testing.assert_array_equal(users, np.unique(uids, return_inverse=True)[1])  # ascending raw uid
        for u in set(uids.tolist()):  # every clicked row of a drawn user is kept
            assert (uids == u).sum() == clicked[u]
    split = data.metadata["split"]
    assert (split["kind"], split["seed"], split["n_train_users"], split["n_test_users"]) == ("users", 0, 30, 20)
    assert split["n_train"] == data.y_train.size and split["user_counts_from"] == "arguments"
    # campaigns are unique to a user, so the test users' campaigns are unseen in training: index 0
    assert (data.x_cat_test[:, CAMPAIGN] == 0).all() and (data.x_cat_train[:, CAMPAIGN] > 0).all()
    assert data.cat_vocab_sizes[CAMPAIGN] == 31
    assert (data.x_cat_test[:, CAT1] > 0).all() and data.cat_vocab_sizes[CAT1] == 4  # shared values 0, 1, 2


def test_users_deterministic_and_chunking_invariant(users_raw, tmp_path, monkeypatch):
    raw, _ = users_raw
    a = load_prepared_tabular(
        ca.prepare_dataset(
            raw_dir=raw, out_path=tmp_path / "a.npz", source="official", n_train_users=25, n_test_users=10
        )
    )
    monkeypatch.setattr(attribution_format, "CHUNK_ROWS", 7)  # the raw format's streaming reader
    b = load_prepared_tabular(
        ca.prepare_dataset(
            raw_dir=raw, out_path=tmp_path / "b.npz", source="official", n_train_users=25, n_test_users=10
        )
    )
    for key in (
        "x_num_train",
        "x_cat_train",
        "y_train",
        "user_train",
        "x_num_test",
        "x_cat_test",
        "y_test",
        "user_test",
    ):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key))
    assert a.cat_vocab_sizes == b.cat_vocab_sizes


def test_subset_means_n_users_each(users_raw, tmp_path):
    raw, _ = users_raw
    data = load_prepared_tabular(
        ca.prepare_dataset(raw_dir=raw, out_path=tmp_path / "a.npz", source="official", subset=10)
    )
    assert data.subset == 10 and len(set(data.user_train)) == 10 and len(set(data.user_test)) == 10
    assert data.metadata["split"]["user_counts_from"] == "subset"
    with pytest.raises(TabularDataError, match="either subset"):
        ca.prepare_dataset(raw_dir=raw, out_path=tmp_path / "b.npz", source="official", subset=10, n_train_users=5)
    assert not (tmp_path / "b.npz").exists()


def test_random_80_20_split(users_raw, tmp_path):
    raw, clicked = users_raw
    data = load_prepared_tabular(
        ca.prepare_dataset(raw_dir=raw, out_path=tmp_path / "a.npz", source="official", split="random_80_20")
    )
    n = sum(clicked.values())
    assert data.y_train.size + data.y_test.size == n and data.y_test.size == round(0.2 * n)
    assert data.metadata["split"]["kind"] == "random"
    for split in ("train", "test"):
        uids, users = _raw_cost(data, split), getattr(data, f"user_{split}")
        np.testing.assert_array_equal(users, np.unique(uids, return_inverse=True)[1])
    first = load_prepared_tabular(
        ca.prepare_dataset(raw_dir=raw, out_path=tmp_path / "b.npz", source="official", split="random_80_20", subset=20)
    )
    assert first.y_train.size + first.y_test.size == 20
    with pytest.raises(TabularDataError, match="split='users' only"):
        ca.prepare_dataset(
            raw_dir=raw, out_path=tmp_path / "c.npz", source="official", split="random_80_20", n_train_users=5
        )


def test_missing_values_and_bare_tsv_gz(tmp_path):
    rows = [_row(u, cost=float(u)) for u in range(1, 11)]
    rows[0]["cat5"], rows[1]["cost"] = "", ""
    raw = tmp_path / "raw"
    raw.mkdir()
    with zipfile.ZipFile(_write_zip(tmp_path / "z" / ca.ARCHIVE, rows)) as zf:  # as Hugging Face serves it
        (raw / ca.MEMBER).write_bytes(zf.read(ca.MEMBER))
    data = load_prepared_tabular(
        ca.prepare_dataset(raw_dir=raw, out_path=tmp_path / "a.npz", source="official", n_train_users=8, n_test_users=2)
    )
    pre = data.metadata["preprocessing"]
    assert pre["categorical_missing"]["cat5"] == 1 and pre["cost_missing_filled_with_train_mean"] == 1
    j = list(ca.CATEGORICAL_FEATURES).index("cat5")
    assert (np.concatenate([data.x_cat_train[:, j], data.x_cat_test[:, j]]) == 0).sum() == 1
    assert np.isfinite(data.x_num_train).all() and abs(float(data.x_num_train.mean())) < 1e-5


# ------------------------------------------------------------------------------ per-user cap


def _users(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    ids = np.array([7, 3, 100, 42, 5, 8])
    sizes = np.array([1, 4, 5, 12, 2, 30])
    return rng.permutation(np.repeat(ids, sizes))


def test_cap_every_user_exactly_k_rows():
    user_ids = _users()
    for k in (1, 2, 5, 10):
        idx = ca.cap_examples_per_user(user_ids, k=k, seed=0)
        uniq = np.unique(user_ids)
        assert idx.dtype == np.int64 and idx.size == k * uniq.size
        block = user_ids[idx].reshape(uniq.size, k)  # users ascending, k contiguous rows each
        assert (block == uniq[:, None]).all()
        for u, rows in zip(uniq, idx.reshape(uniq.size, k)):
            n_u = int((user_ids == u).sum())
            if n_u >= k:  # without replacement
                assert len(set(rows.tolist())) == k
            else:  # all of the user's rows, topped up with re-drawn ones
                assert set(rows.tolist()) == set(np.flatnonzero(user_ids == u).tolist())


def test_cap_deterministic_per_seed_and_options():
    user_ids = _users()
    a = ca.cap_examples_per_user(user_ids, k=5, seed=3)
    np.testing.assert_array_equal(a, ca.cap_examples_per_user(user_ids, k=5, seed=3))
    assert not np.array_equal(a, ca.cap_examples_per_user(user_ids, k=5, seed=4))
    w = ca.cap_examples_per_user(user_ids, k=5, seed=3, with_replacement=True)  # 002's reading
    uniq = np.unique(user_ids)
    assert (user_ids[w].reshape(uniq.size, 5) == uniq[:, None]).all()
    assert ca.cap_examples_per_user(np.zeros(0, np.int64), k=3, seed=0).size == 0
    # a large user set stays vectorised (200k users in the paper)
    big = np.random.default_rng(0).integers(0, 50_000, 200_000)
    assert ca.cap_examples_per_user(big, k=10, seed=0).size == 10 * np.unique(big).size


@pytest.mark.parametrize("k", [0, -2, 1.5])
def test_cap_rejects_bad_k(k):
    with pytest.raises(ValueError, match=f"k={k!r}"):
        ca.cap_examples_per_user(_users(), k=k, seed=0)


# ------------------------------------------------------------------------------ stand-in


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    raw = tmp_path_factory.mktemp("attr") / "raw"
    files = make_standin_raw_files("criteo_attribution", raw, n_train=512, n_test=256, seed=0)
    out = ca.prepare_dataset(raw_dir=raw, out_path=raw.parent / "a.npz", source="official")
    return raw, files, load_prepared_tabular(out)


def test_standin_file_layout(standin):
    raw, files, _ = standin
    assert [f.name for f in files] == [ca.ARCHIVE]
    header, df = _read_standin(files[0])
    assert header == list(ca.COLUMNS) and len(df) == 768
    marker = read_standin_marker(raw)
    assert marker["synthetic"] and marker["dataset"] == "criteo_attribution"
    assert (marker["n_train"], marker["n_test"], marker["n_rows"]) == (512, 256, 768)
    assert 0.3 <= df.click.mean() <= 0.5 and df.groupby("uid").size().mean() >= 3
    assert (np.diff(df.timestamp) >= 0).all()
    c, nc = df[df.click == 1], df[df.click == 0]
    assert (c.click_nb >= 1).all() and ((c.click_pos >= 0) & (c.click_pos < c.click_nb)).all()
    assert (nc.click_pos == -1).all() and (nc.click_nb == -1).all()
    for _, g in c.groupby(["uid", "campaign"]):  # a journey's clicks are numbered 0..nb-1 in time order
        assert g.click_pos.tolist() == list(range(len(g))) and (g.click_nb == len(g)).all()
    assert ((df.conversion == 0) == (df.conversion_id == -1)).all()
    assert ((df.conversion == 0) == (df.conversion_timestamp == -1)).all()
    assert (df.attribution <= df.conversion).all() and df.conversion.any() and not df.conversion.all()
    eligible = df[df.click == 1].uid.nunique()
    assert marker["n_train_users"] + marker["n_test_users"] == eligible


def test_standin_round_trip(standin):
    raw, files, data = standin
    marker = read_standin_marker(raw)
    assert data.source == "synthetic_standin" and data.is_synthetic  # marker wins over source="official"
    split = data.metadata["split"]
    assert split["user_counts_from"] == "standin_marker"
    assert len(set(data.user_train)) == marker["n_train_users"] and len(set(data.user_test)) == marker["n_test_users"]
    _, df = _read_standin(files[0])
    assert data.y_train.size + data.y_test.size == int((df.click == 1).sum())
    assert 0 < data.y_train.mean() < 0.5
    # the CLI dispatches to this module
    assert prepare_main(["criteo_attribution", "--raw-dir", str(raw), "--out", str(raw.parent / "cli.npz")]) == 0


def test_standin_deterministic(tmp_path):
    a = ca.write_standin(tmp_path / "a", n_rows=200, seed=4)[0].read_bytes()
    assert a == ca.write_standin(tmp_path / "b", n_rows=200, seed=4)[0].read_bytes()
    assert a != ca.write_standin(tmp_path / "c", n_rows=200, seed=5)[0].read_bytes()
    with pytest.raises(ValueError, match="n_rows"):
        ca.write_standin(tmp_path / "d", n_rows=10, seed=0)


def test_standin_planted_signal_is_learnable(tmp_path):
    from scipy import sparse
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.preprocessing import OneHotEncoder

    ca.write_standin(tmp_path / "raw", n_rows=4000, seed=0)
    data = load_prepared_tabular(
        ca.prepare_dataset(raw_dir=tmp_path / "raw", out_path=tmp_path / "a.npz", source="official")
    )
    assert data.y_test.size > 200 and 0 < data.y_test.sum() < data.y_test.size
    enc = OneHotEncoder(handle_unknown="ignore").fit(data.x_cat_train)
    x = sparse.hstack([enc.transform(data.x_cat_train), data.x_num_train]).tocsr()
    xt = sparse.hstack([enc.transform(data.x_cat_test), data.x_num_test]).tocsr()
    model = LogisticRegression(max_iter=1000).fit(x, data.y_train)
    assert roc_auc_score(data.y_test, model.predict_proba(xt)[:, 1]) > 0.6


# ------------------------------------------------------------------------------ bad input


def test_bad_input(tmp_path):
    out = tmp_path / "a.npz"
    with pytest.raises(TabularDataError, match="not found"):
        ca.prepare_dataset(raw_dir=tmp_path / "nowhere", out_path=out, source="official")
    rows = [_row(u) for u in range(1, 6)]
    raw = tmp_path / "nocol"
    _write_zip(raw / ca.ARCHIVE, rows, columns=[c for c in ca.COLUMNS if c != "click_nb"])
    with pytest.raises(TabularDataError, match=r"lacks the columns \['click_nb'\]"):
        ca.prepare_dataset(raw_dir=raw, out_path=out, source="official", n_train_users=2, n_test_users=1)
    raw = tmp_path / "noheader"
    _write_zip(raw / ca.ARCHIVE, rows, header=False)
    with pytest.raises(TabularDataError, match="header line"):
        ca.prepare_dataset(raw_dir=raw, out_path=out, source="official", n_train_users=2, n_test_users=1)
    raw = tmp_path / "ok"
    _write_zip(raw / ca.ARCHIVE, rows)
    with pytest.raises(TabularDataError, match=r"4 training \+ 3 test users.*only 5 users.*smaller n_train_users"):
        ca.prepare_dataset(raw_dir=raw, out_path=out, source="official", n_train_users=4, n_test_users=3)
    with pytest.raises(TabularDataError, match="200000 training \\+ 50000 test"):  # the paper's defaults
        ca.prepare_dataset(raw_dir=raw, out_path=out, source="official")
    for kwargs, pattern in (
        ({"source": "made_up"}, "source"),
        ({"split": "temporal"}, "split"),
        ({"subset": 0}, "subset"),
        ({"n_train_users": 0, "n_test_users": 1}, ">= 1"),
        ({"n_train_users": 3}, "both n_train_users and n_test_users"),
    ):
        with pytest.raises(TabularDataError, match=pattern):
            ca.prepare_dataset(**{"raw_dir": raw, "out_path": out, "source": "official", **kwargs})
    raw = tmp_path / "noclick"
    _write_zip(raw / ca.ARCHIVE, [_row(u, click=0) for u in range(1, 6)])
    with pytest.raises(TabularDataError, match="click == 1"):
        ca.prepare_dataset(raw_dir=raw, out_path=out, source="official", n_train_users=1, n_test_users=1)
    raw = tmp_path / "text"
    bad = [_row(u) for u in range(1, 6)]
    bad[2]["click"] = "abc"
    _write_zip(raw / ca.ARCHIVE, bad)
    with pytest.raises(TabularDataError, match="cannot parse"):
        ca.prepare_dataset(raw_dir=raw, out_path=out, source="official", n_train_users=1, n_test_users=1)
    raw = tmp_path / "nomember"
    _write_zip(raw / ca.ARCHIVE, rows, member="README.md")
    with pytest.raises(TabularDataError, match=f"no member {ca.MEMBER}"):
        ca.prepare_dataset(raw_dir=raw, out_path=out, source="official")
    (tmp_path / "notzip").mkdir()
    (tmp_path / "notzip" / ca.ARCHIVE).write_bytes(b"not a zip")
    with pytest.raises(TabularDataError, match="not a readable zip"):
        ca.prepare_dataset(raw_dir=tmp_path / "notzip", out_path=out, source="official")
    assert not out.exists() and not list(tmp_path.glob("a.npz*"))
