"""The census extract: a user's own IPUMS file, checked, never deleted; what to download when it is missing."""

from __future__ import annotations

import gzip
import hashlib

import pytest

from labeldp.data.fetch import ChecksumError, DataMissingError, fetch_dataset


# ================================================================================ census


def test_missing_census_explains_what_to_download(tmp_path):
    target = tmp_path / "ipums" / "usa_00001.csv.gz"
    with pytest.raises(DataMissingError) as ei:
        fetch_dataset("census1940", data_dir=tmp_path / "data", census_path=target)
    msg = str(ei.value)
    assert str(target) in msg
    assert "IPUMS" in msg and "WKSWORK1" in msg
    assert "1940" in msg and "us1940b" in msg and "csv" in msg.lower()


def test_missing_census_default_path(tmp_path):
    with pytest.raises(DataMissingError) as ei:
        fetch_dataset("census1940", data_dir=tmp_path)
    assert str(tmp_path / "census1940") in str(ei.value)


def test_census_csv_extract_is_accepted_and_checked(tmp_path, capsys):
    good = tmp_path / "usa_00001.csv.gz"
    with gzip.open(good, "wt") as fh:
        fh.write('"YEAR","SERIAL","AGE","SEX","WKSWORK1"\n1940,1,30,1,52\n')
    assert fetch_dataset("census1940", data_dir=tmp_path, census_path=good, quiet=True) == [good]
    assert "lacks the default census features" in capsys.readouterr().err

    sha = hashlib.sha256(good.read_bytes()).hexdigest()
    assert fetch_dataset("census1940", data_dir=tmp_path, census_path=good, pinned_sha256=sha, quiet=True) == [good]
    with pytest.raises(ChecksumError):
        fetch_dataset("census1940", data_dir=tmp_path, census_path=good, pinned_sha256="0" * 64, quiet=True)
    assert good.exists()  # the user's own extract is never deleted

    bad = tmp_path / "usa_00002.csv"
    bad.write_text("YEAR,SERIAL,AGE\n1940,1,30\n")
    with pytest.raises(DataMissingError, match="WKSWORK1"):
        fetch_dataset("census1940", data_dir=tmp_path, census_path=bad, quiet=True)


def test_census_fixed_width_needs_ddi(tmp_path):
    dat = tmp_path / "usa_00003.dat.gz"
    with gzip.open(dat, "wb") as fh:
        fh.write(b"194000000001 30 152\n")
    with pytest.raises(DataMissingError, match="DDI"):
        fetch_dataset("census1940", data_dir=tmp_path, census_path=dat, quiet=True)
    ddi = tmp_path / "usa_00003.xml"
    ddi.write_text('<codeBook><dataDscr><var ID="WKSWORK1" name="WKSWORK1"/></dataDscr></codeBook>')
    assert fetch_dataset("census1940", data_dir=tmp_path, census_path=dat, quiet=True) == [dat, ddi]
