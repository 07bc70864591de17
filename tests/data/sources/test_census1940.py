"""1940 Census (IPUMS CSV extract) preparation: stand-in round trip, file location, vocabularies, bad input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from labeldp.data.sources import census1940 as cen
from labeldp.data.rawformats import STANDIN_MARKER, make_standin_raw_files, read_standin_marker
from labeldp.data.rawformats.ipums_extract import (
    CENSUS1940_CATEGORICAL_FEATURES,
    CENSUS1940_DEFAULT_FILENAME,
    CENSUS1940_NUMERICAL_FEATURES,
    CENSUS1940_VARIABLES,
)
from labeldp.data.registry import DATASETS
from labeldp.data.tabular import TabularDataError, load_prepared_tabular, random_split


def _read_csv(path: Path) -> tuple[list[str], np.ndarray]:
    with gzip.open(path, "rt") as fh:
        header = fh.readline().strip().split(",")
        table = np.loadtxt(fh, delimiter=",", dtype=np.int64, ndmin=2)
    return header, table


def _write_csv(path: Path, columns: dict[str, list], *, gz: bool = True, quote: bool = False) -> Path:
    names = [f'"{c}"' if quote else c for c in columns]
    lines = [",".join(names)] + [",".join(str(v) for v in row) for row in zip(*columns.values())]
    text = "\n".join(lines) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    return path


def _columns(weeks: list[int], **overrides) -> dict[str, list]:
    n = len(weeks)
    cols = {"YEAR": [1940] * n, "SAMPLE": [194002] * n, "SERIAL": list(range(1, n + 1)), "PERNUM": [1] * n}
    for v in CENSUS1940_CATEGORICAL_FEATURES + CENSUS1940_NUMERICAL_FEATURES:
        cols[v] = [1 + i % 3 for i in range(n)]
    cols["WKSWORK1"] = list(weeks)
    cols.update(overrides)
    return cols


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    raw = tmp_path_factory.mktemp("census") / "raw"
    files = make_standin_raw_files("census1940", raw, n_train=512, n_test=256, seed=0)
    out = cen.prepare_dataset(raw_dir=raw, out_path=raw.parent / "c.npz", source="official")
    return raw, files, load_prepared_tabular(out)


def test_registry_allows_standin():
    assert DATASETS["census1940"].standin_allowed


def test_standin_file_layout(standin):
    raw, files, _ = standin
    assert [f.name for f in files] == [CENSUS1940_DEFAULT_FILENAME]
    header, table = _read_csv(files[0])
    assert header[:4] == ["YEAR", "SAMPLE", "SERIAL", "PERNUM"] and set(CENSUS1940_VARIABLES) <= set(header)
    assert table.shape == (768, len(header))
    weeks = table[:, header.index("WKSWORK1")]
    assert weeks.min() == 0 and weeks.max() <= 52 and (weeks == 0).any()
    assert (table[:, header.index("YEAR")] == 1940).all()
    marker = read_standin_marker(raw)
    assert {"synthetic", "dataset", "seed", "n_train", "n_test", "note"} <= set(marker)
    assert marker["dataset"] == "census1940" and (marker["n_train"], marker["n_test"]) == (512, 256)


def test_standin_round_trip(standin):
    _, files, data = standin
    header, table = _read_csv(files[0])
    weeks = table[:, header.index("WKSWORK1")]
    meta, pre = data.metadata, data.metadata["preprocessing"]
    assert data.source == "synthetic_standin"  # the marker wins over source="official"
    assert (data.label_lower, data.label_upper, data.label_integer) == (1.0, 52.0, True)
    assert pre["rows_read"] == 768 and pre["rows_dropped_label_0"] == int((weeks == 0).sum())
    n = int(((weeks >= 1) & (weeks <= 52)).sum())
    assert n >= 400 and data.y_train.size + data.y_test.size == n and data.y_test.size == round(0.2 * n)
    y = np.concatenate([data.y_train, data.y_test])
    assert y.min() >= 1 and y.max() <= 52 and np.all(y == np.round(y))
    np.testing.assert_array_equal(np.sort(y), np.sort(weeks[weeks > 0]))
    assert meta["categorical_features"] == list(CENSUS1940_CATEGORICAL_FEATURES)
    assert meta["numerical_features"] == list(CENSUS1940_NUMERICAL_FEATURES) + ["INCWAGE_missing"]
    assert "WKSWORK2" not in meta["categorical_features"] + meta["numerical_features"]
    assert pre["INCWAGE_na_codes"] == int((table[:, header.index("INCWAGE")][weeks > 0] >= 999998).sum()) > 0
    assert np.abs(data.x_num_train).max() < 50  # the N/A code did not leak into the standardised column
    assert meta["raw_files"][CENSUS1940_DEFAULT_FILENAME]["sha256"]
    assert np.array_equal(data.label_support, np.arange(1, 53))


def test_standin_is_learnable(standin):
    _, _, data = standin
    j = data.metadata["categorical_features"].index("EMPSTAT")
    k = data.cat_vocab_sizes[j]
    x = np.c_[data.x_num_train, np.eye(k)[data.x_cat_train[:, j]], np.ones(data.y_train.size)]
    xt = np.c_[data.x_num_test, np.eye(k)[data.x_cat_test[:, j]], np.ones(data.y_test.size)]
    w, *_ = np.linalg.lstsq(x, data.y_train, rcond=None)
    assert np.mean((xt @ w - data.y_test) ** 2) < 0.5 * np.var(data.y_test)


def test_manifest_location_and_plain_csv(tmp_path):
    weeks = [0, 52, 10, 99, 5] * 8
    csv_path = _write_csv(tmp_path / "ipums" / "usa_00001.csv", _columns(weeks), gz=False, quote=True)
    raw = tmp_path / "raw" / "census1940"
    raw.mkdir(parents=True)
    (raw / "MANIFEST.json").write_text(json.dumps({"dataset": "census1940", "files": [{"path": str(csv_path)}]}))
    data = load_prepared_tabular(cen.prepare_dataset(raw_dir=raw, out_path=tmp_path / "c.npz", source="official"))
    pre = data.metadata["preprocessing"]
    assert data.source == "official"
    assert (pre["rows_read"], pre["rows_dropped_label_0"], pre["rows_dropped_label_other"]) == (40, 8, 8)
    assert data.y_train.size + data.y_test.size == 24


def test_vocabulary_from_train_only(tmp_path):
    n = 50
    _, test_idx = random_split(n, test_fraction=0.2, seed=0)
    only = int(test_idx[0])
    weeks = [1 + i % 52 for i in range(n)]
    states = [99 if i == only else 1 + i % 4 for i in range(n)]
    raw = tmp_path / "raw"
    _write_csv(raw / "extract.csv.gz", _columns(weeks, STATEFIP=states, AGE=list(range(n))))
    data = load_prepared_tabular(cen.prepare_dataset(raw_dir=raw, out_path=tmp_path / "c.npz", source="official"))
    j = data.metadata["categorical_features"].index("STATEFIP")
    age_col = data.metadata["numerical_features"].index("AGE")
    ages = np.round(
        data.x_num_test[:, age_col] * data.metadata["numerical_standardisation"]["std"][age_col]
        + data.metadata["numerical_standardisation"]["mean"][age_col]
    )
    pos = int(np.flatnonzero(ages == only)[0])
    assert data.x_cat_test[pos, j] == 0 and data.cat_vocab_sizes[j] == 5
    assert (data.x_cat_train[:, j] > 0).all() and (np.delete(data.x_cat_test[:, j], pos) > 0).all()


def test_subset_and_chunking(tmp_path, monkeypatch):
    raw = tmp_path / "raw"
    make_standin_raw_files("census1940", raw, n_train=200, n_test=100, seed=4)
    header, table = _read_csv(raw / CENSUS1940_DEFAULT_FILENAME)
    weeks = table[:, header.index("WKSWORK1")]
    whole = load_prepared_tabular(
        cen.prepare_dataset(raw_dir=raw, out_path=tmp_path / "a.npz", source="official", subset=90)
    )
    monkeypatch.setattr(cen, "CHUNK_ROWS", 11)
    chunked = load_prepared_tabular(
        cen.prepare_dataset(raw_dir=raw, out_path=tmp_path / "b.npz", source="official", subset=90)
    )
    for data in (whole, chunked):
        assert data.subset == 90 and data.y_train.size + data.y_test.size == 90 and data.y_test.size == 18
        np.testing.assert_array_equal(
            np.sort(np.concatenate([data.y_train, data.y_test])), np.sort(weeks[weeks > 0][:90])
        )
        assert data.metadata["preprocessing"]["rows_read"] == int(np.flatnonzero(weeks > 0)[89]) + 1
    for key in ("x_num_train", "x_cat_train", "y_train", "x_num_test", "x_cat_test", "y_test"):
        np.testing.assert_array_equal(getattr(whole, key), getattr(chunked, key))


def test_missing_columns_named(tmp_path):
    out = tmp_path / "c.npz"
    cols = _columns([5] * 10)
    del cols["EDUC"], cols["INCWAGE"]
    _write_csv(tmp_path / "a" / "x.csv.gz", cols)
    with pytest.raises(TabularDataError, match=r"lacks the columns \['EDUC', 'INCWAGE'\].*CENSUS1940_INSTRUCTIONS"):
        cen.prepare_dataset(raw_dir=tmp_path / "a", out_path=out, source="official")
    cols = _columns([5] * 10)
    del cols["WKSWORK1"]
    _write_csv(tmp_path / "b" / "x.csv.gz", cols)
    with pytest.raises(TabularDataError, match=r"\['WKSWORK1'\]"):
        cen.prepare_dataset(raw_dir=tmp_path / "b", out_path=out, source="official")
    assert not out.exists()


@pytest.mark.parametrize("via_manifest", [False, True])
def test_dat_extract_refused(tmp_path, via_manifest):
    dat = tmp_path / "raw" / "usa_00001.dat.gz"
    dat.parent.mkdir()
    dat.write_bytes(gzip.compress(b"1940194002000000010100052\n"))
    if via_manifest:
        (dat.parent / "MANIFEST.json").write_text(json.dumps({"files": [{"path": str(dat)}]}))
    with pytest.raises(TabularDataError) as err:
        cen.prepare_dataset(raw_dir=dat.parent, out_path=tmp_path / "c.npz", source="official")
    assert str(err.value) == cen.DAT_MESSAGE.format(path=dat)
    assert "Re-export the extract as CSV" in str(err.value)
    assert not (tmp_path / "c.npz").exists()


def test_bad_input(tmp_path):
    out = tmp_path / "c.npz"
    (tmp_path / "empty").mkdir()
    with pytest.raises(TabularDataError, match="no IPUMS CSV extract"):
        cen.prepare_dataset(raw_dir=tmp_path / "empty", out_path=out, source="official")
    _write_csv(tmp_path / "zeros" / "x.csv.gz", _columns([0] * 20))
    with pytest.raises(TabularDataError, match="no row .* 1 <= WKSWORK1 <= 52"):
        cen.prepare_dataset(raw_dir=tmp_path / "zeros", out_path=out, source="official")
    _write_csv(tmp_path / "text" / "x.csv.gz", _columns([5, 6, 7], AGE=[30, "old", 40]))
    with pytest.raises(TabularDataError, match="cannot parse"):
        cen.prepare_dataset(raw_dir=tmp_path / "text", out_path=out, source="official")
    (tmp_path / "stale").mkdir()
    (tmp_path / "stale" / "MANIFEST.json").write_text(json.dumps({"files": [{"path": str(tmp_path / "gone.csv")}]}))
    with pytest.raises(TabularDataError, match="does not exist"):
        cen.prepare_dataset(raw_dir=tmp_path / "stale", out_path=out, source="official")
    _write_csv(tmp_path / "ok" / "x.csv.gz", _columns([5, 6, 7]))
    with pytest.raises(TabularDataError, match="source"):
        cen.prepare_dataset(raw_dir=tmp_path / "ok", out_path=out, source="package_standin")
    with pytest.raises(TabularDataError, match="subset"):
        cen.prepare_dataset(raw_dir=tmp_path / "ok", out_path=out, source="official", subset=0)
    assert not out.exists() and not list(tmp_path.glob("c.npz*"))


def test_standin_writer_marker_first(tmp_path, monkeypatch):
    import labeldp.data.sources.census1940 as mod

    def boom(*a, **k):
        raise RuntimeError("interrupted")

    monkeypatch.setattr(mod.np, "savetxt", boom)
    with pytest.raises(RuntimeError):
        cen.write_standin(tmp_path / "s", n_rows=20, seed=0)
    assert (tmp_path / "s" / STANDIN_MARKER).is_file()
    assert not (tmp_path / "s" / CENSUS1940_DEFAULT_FILENAME).exists()
