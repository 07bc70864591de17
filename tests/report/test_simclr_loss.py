"""000 Figure 3 from a SimCLR pre-training record (labeldp.report.simclr_loss)."""

from __future__ import annotations

import csv
import json

import pytest

from labeldp.report.simclr_loss import main, write_simclr_loss_figure


def _record(tmp_path, curve):
    path = tmp_path / "pretrain.json"
    path.write_text(
        json.dumps(
            {
                "config": {"width": 8, "batch_size": 64, "epochs": 4},
                "epochs_completed": len(curve),
                "loss_curve": curve,
                "device": "cpu:cpu",
                "n_images": 100,
                "images_per_second_this_process": 50.0,
            }
        )
    )
    return path


def test_the_figure_holds_the_records_curve_and_says_stand_in(tmp_path):
    curve = [6.1, 5.7, 5.5]
    md = write_simclr_loss_figure(
        record_path=_record(tmp_path, curve),
        dataset="cifar10",
        out_stem=tmp_path / "fig" / "simclr_loss_cifar10",
        standin=True,
    )
    for suffix in (".png", ".pdf", ".csv"):
        assert md.with_suffix(suffix).stat().st_size > 0
    rows = list(csv.DictReader(md.with_suffix(".csv").open()))
    assert [float(r["loss"]) for r in rows] == curve and [int(r["epoch"]) for r in rows] == [1, 2, 3]
    text = md.read_text()
    assert "stand-in" in text and "3 of 4 planned" in text and "| 3 | 5.5000 |" in text


@pytest.mark.parametrize("curve", [[], [5.0, float("nan")]])
def test_an_unfinished_or_broken_record_is_refused_with_the_fix(tmp_path, curve):
    path = _record(tmp_path, curve)
    with pytest.raises(SystemExit, match="loss_curve|non-finite"):
        main(["--record", str(path), "--dataset", "x", "--out-stem", str(tmp_path / "out")])
    assert not list(tmp_path.glob("out*"))
