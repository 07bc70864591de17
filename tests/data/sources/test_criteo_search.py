"""Criteo Sponsored Search preparation: stand-in round trip, streaming, vocabularies, bad input."""

from __future__ import annotations

import csv
import gzip
import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest

from labeldp.data.sources import criteo_search as cs
from labeldp.data.rawformats import STANDIN_MARKER, make_standin_raw_files, read_standin_marker
from labeldp.data.registry import DATASETS
from labeldp.data.tabular import TabularDataError, load_prepared_tabular, random_split


def _raw_rows(archive: Path) -> list[list[str]]:
    with tarfile.open(archive) as tar:
        member = next(m for m in tar.getmembers() if Path(m.name).name == cs.MEMBER)
        text = tar.extractfile(member).read().decode()
    return [row for row in csv.reader(io.StringIO(text), delimiter="\t")]


def _write_archive(path: Path, rows: list[list[str]], member: str = cs.MEMBER) -> Path:
    data = "".join("\t".join(r) + "\n" for r in rows).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo(member)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return path


def _row(label: float, *, brand: str = "B0", price: float = 10.0, clicks: int = 3) -> list[str]:
    values = {c: f"{c}_v" for c in cs.COLUMNS}
    values.update(
        Sale="0" if label == -1 else "1",
        SalesAmountInEuro=str(label),
        time_delay_for_conversion="-1" if label == -1 else "100",
        click_timestamp="1596439471",
        nb_clicks_1week=str(clicks),
        product_price=str(price),
        product_brand=brand,
    )
    return [values[c] for c in cs.COLUMNS]


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    raw = tmp_path_factory.mktemp("criteo") / "raw"
    files = make_standin_raw_files("criteo_search", raw, n_train=512, n_test=256, seed=0)
    out = cs.prepare_dataset(raw_dir=raw, out_path=raw.parent / "c.npz", source="official")
    return raw, files, load_prepared_tabular(out)


def test_registry_allows_standin():
    assert DATASETS["criteo_search"].standin_allowed


def test_standin_file_layout(standin):
    raw, files, _ = standin
    assert [f.name for f in files] == [cs.ARCHIVE]
    with tarfile.open(files[0]) as tar:
        assert [Path(m.name).name for m in tar.getmembers()] == [cs.MEMBER]
    rows = _raw_rows(files[0])
    assert len(rows) == 768 and {len(r) for r in rows} == {23}
    marker = read_standin_marker(raw)
    assert {"synthetic", "dataset", "seed", "n_train", "n_test", "note"} <= set(marker)
    assert marker["synthetic"] and marker["dataset"] == "criteo_search"
    assert (marker["n_train"], marker["n_test"], marker["n_rows"]) == (512, 256, 768)
    labels = np.array([float(r[1]) for r in rows])
    assert (labels == -1).any() and (labels > 400).any()
    assert any(r[4] == "-1" for r in rows) and any(r[5] == "-1" for r in rows)
    assert all((r[0] == "0") == (r[1] == "-1") for r in rows)


def test_standin_round_trip(standin):
    raw, files, data = standin
    rows = _raw_rows(files[0])
    labels = np.array([float(r[1]) for r in rows])
    meta, pre = data.metadata, data.metadata["preprocessing"]
    assert data.source == "synthetic_standin" and data.is_synthetic  # marker wins over source="official"
    assert (data.label_lower, data.label_upper, data.label_integer) == (0.0, 400.0, False)
    assert pre["rows_read"] == 768 and pre["rows_dropped_label_minus1"] == int((labels == -1).sum())
    n = int((labels != -1).sum())
    assert n >= 400  # the smoke profile has something to train on
    assert data.y_train.size + data.y_test.size == n
    assert data.y_test.size == round(0.2 * n) and meta["split"]["seed"] == 0
    y = np.concatenate([data.y_train, data.y_test])
    assert y.min() >= 0 and y.max() == 400
    assert pre["rows_clipped_at_upper"] == int((labels > 400).sum()) == int((y == 400).sum())
    np.testing.assert_allclose(np.sort(y), np.sort(np.minimum(labels[labels != -1], 400)))
    assert meta["categorical_features"] == list(cs.CATEGORICAL_FEATURES)
    assert not {"Sale", "SalesAmountInEuro", "time_delay_for_conversion", "user_id", "click_timestamp"} & set(
        meta["categorical_features"] + meta["numerical_features"]
    )
    assert meta["numerical_features"] == [
        "nb_clicks_1week",
        "product_price",
        "nb_clicks_1week_missing",
        "product_price_missing",
    ]
    assert data.x_cat_train.shape[1] == len(data.cat_vocab_sizes) == 16 and data.x_num_train.shape[1] == 4
    assert np.allclose(data.x_num_train.mean(axis=0), 0, atol=1e-5)
    assert meta["raw_files"][cs.ARCHIVE]["sha256"] and meta["dataset"] == "criteo_search"


def test_standin_is_learnable(standin):
    _, _, data = standin
    x = np.concatenate([data.x_num_train, np.eye(data.cat_vocab_sizes[5])[data.x_cat_train[:, 5]]], axis=1)
    xt = np.concatenate([data.x_num_test, np.eye(data.cat_vocab_sizes[5])[data.x_cat_test[:, 5]]], axis=1)
    w, *_ = np.linalg.lstsq(np.c_[x, np.ones(len(x))], data.y_train, rcond=None)
    mse = np.mean((np.c_[xt, np.ones(len(xt))] @ w - data.y_test) ** 2)
    assert mse < 0.8 * np.var(data.y_test)


def test_vocabulary_from_train_only(tmp_path):
    n = 60
    _, test_idx = random_split(n, test_fraction=0.2, seed=0)
    only_test = int(test_idx[0])
    rows = [_row(i + 0.5, brand="ONLY_IN_TEST" if i == only_test else f"B{i % 3}") for i in range(n)]
    raw = tmp_path / "raw"
    _write_archive(raw / cs.ARCHIVE, rows, member="Criteo_Conversion_Search/CriteoSearchData")
    data = load_prepared_tabular(cs.prepare_dataset(raw_dir=raw, out_path=tmp_path / "c.npz", source="official"))
    assert data.source == "official"
    j = list(cs.CATEGORICAL_FEATURES).index("product_brand")
    pos = int(np.flatnonzero(data.y_test == only_test + 0.5)[0])
    assert data.x_cat_test[pos, j] == 0
    assert data.cat_vocab_sizes[j] == 4  # B0, B1, B2 + index 0
    assert (data.x_cat_train[:, j] > 0).all() and (np.delete(data.x_cat_test[:, j], pos) > 0).all()


def test_missing_values(tmp_path):
    rows = [_row(5.0 + i, clicks=-1 if i % 2 else 4, price=-1 if i % 3 == 0 else 20.0) for i in range(20)]
    rows[0][list(cs.COLUMNS).index("product_brand")] = "-1"
    raw = tmp_path / "raw"
    _write_archive(raw / cs.ARCHIVE, rows)
    data = load_prepared_tabular(cs.prepare_dataset(raw_dir=raw, out_path=tmp_path / "c.npz", source="official"))
    pre = data.metadata["preprocessing"]
    assert pre["numerical_missing"] == {"nb_clicks_1week": 10, "product_price": 7}
    j = list(cs.CATEGORICAL_FEATURES).index("product_brand")
    allc = np.concatenate([data.x_cat_train[:, j], data.x_cat_test[:, j]])
    assert (allc == 0).sum() == 1 and data.cat_vocab_sizes[j] == 2


def test_subset_and_chunking(tmp_path, monkeypatch):
    raw = tmp_path / "raw"
    make_standin_raw_files("criteo_search", raw, n_train=200, n_test=100, seed=3)
    labels = np.array([float(r[1]) for r in _raw_rows(raw / cs.ARCHIVE)])
    first = np.minimum(labels[labels != -1][:101], 400)
    whole = load_prepared_tabular(
        cs.prepare_dataset(raw_dir=raw, out_path=tmp_path / "a.npz", source="official", subset=101)
    )
    monkeypatch.setattr(cs, "CHUNK_ROWS", 7)
    chunked = load_prepared_tabular(
        cs.prepare_dataset(raw_dir=raw, out_path=tmp_path / "b.npz", source="official", subset=101)
    )
    for data in (whole, chunked):
        assert data.subset == 101 and data.y_train.size + data.y_test.size == 101 and data.y_test.size == 20
        np.testing.assert_allclose(np.sort(np.concatenate([data.y_train, data.y_test])), np.sort(first))
        pre = data.metadata["preprocessing"]
        assert pre["rows_read"] == int(np.flatnonzero(labels != -1)[100]) + 1
        assert pre["rows_dropped_label_minus1"] == int((labels[: pre["rows_read"]] == -1).sum())
    for key in ("x_num_train", "x_cat_train", "y_train", "x_num_test", "x_cat_test", "y_test"):
        np.testing.assert_array_equal(getattr(whole, key), getattr(chunked, key))
    assert whole.cat_vocab_sizes == chunked.cat_vocab_sizes


def test_bad_input(tmp_path):
    out = tmp_path / "c.npz"
    with pytest.raises(TabularDataError, match="not found"):
        cs.prepare_dataset(raw_dir=tmp_path / "nowhere", out_path=out, source="official")
    raw = tmp_path / "nolabel"
    _write_archive(raw / cs.ARCHIVE, [r[:1] + r[2:] for r in (_row(3.0), _row(4.0))])
    with pytest.raises(TabularDataError, match="22 tab-separated columns.*SalesAmountInEuro"):
        cs.prepare_dataset(raw_dir=raw, out_path=out, source="official")
    raw = tmp_path / "allminus1"
    _write_archive(raw / cs.ARCHIVE, [_row(-1) for _ in range(10)])
    with pytest.raises(TabularDataError, match="no row .* other than -1"):
        cs.prepare_dataset(raw_dir=raw, out_path=out, source="official")
    raw = tmp_path / "text"
    rows = [_row(3.0), _row(4.0)]
    rows[1][1] = "abc"
    _write_archive(raw / cs.ARCHIVE, rows)
    with pytest.raises(TabularDataError, match="cannot parse"):
        cs.prepare_dataset(raw_dir=raw, out_path=out, source="official")
    raw = tmp_path / "nomember"
    _write_archive(raw / cs.ARCHIVE, [_row(3.0)], member="README.md")
    with pytest.raises(TabularDataError, match="no member CriteoSearchData"):
        cs.prepare_dataset(raw_dir=raw, out_path=out, source="official")
    (tmp_path / "notar").mkdir()
    (tmp_path / "notar" / cs.ARCHIVE).write_bytes(gzip.compress(b"not a tar"))
    with pytest.raises(TabularDataError):
        cs.prepare_dataset(raw_dir=tmp_path / "notar", out_path=out, source="official")
    raw = tmp_path / "ok"
    _write_archive(raw / cs.ARCHIVE, [_row(3.0), _row(4.0)])
    with pytest.raises(TabularDataError, match="source"):
        cs.prepare_dataset(raw_dir=raw, out_path=out, source="made_up")
    with pytest.raises(TabularDataError, match="subset"):
        cs.prepare_dataset(raw_dir=raw, out_path=out, source="official", subset=1)
    assert not out.exists() and not list(tmp_path.glob("c.npz*"))


def test_negative_and_empty_labels_dropped(tmp_path):
    rows = [_row(3.0), _row(-1), _row(-5.0), _row(4.0), _row(7.0)]
    rows[4][1] = ""
    rows += [_row(10.0 + i) for i in range(5)]
    raw = tmp_path / "raw"
    _write_archive(raw / cs.ARCHIVE, rows)
    data = load_prepared_tabular(cs.prepare_dataset(raw_dir=raw, out_path=tmp_path / "c.npz", source="official"))
    pre = data.metadata["preprocessing"]
    assert (
        pre["rows_dropped_label_minus1"],
        pre["rows_dropped_label_negative"],
        pre["rows_dropped_label_missing"],
    ) == (1, 1, 1)
    assert data.y_train.size + data.y_test.size == 7


def test_manifest_location_and_marker_next_to_file(tmp_path):
    files = cs.write_standin(tmp_path / "elsewhere", n_rows=50, seed=1)
    assert (tmp_path / "elsewhere" / STANDIN_MARKER).is_file()
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "MANIFEST.json").write_text(json.dumps({"files": [{"path": str(files[0])}]}))
    data = load_prepared_tabular(cs.prepare_dataset(raw_dir=raw, out_path=tmp_path / "c.npz", source="official"))
    assert data.source == "synthetic_standin"
