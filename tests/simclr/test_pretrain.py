"""SimCLR pre-training (labeldp/simclr/pretrain.py): a SIGKILLed run resumes to the same parameters."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from labeldp.simclr.pretrain import SimCLRConfig, load_images, main, pretrain

REPO = Path(__file__).resolve().parents[2]
CFG = {"width": 2, "projection_dim": 8, "epochs": 4, "batch_size": 8, "checkpoint_every": 1, "seed": 3}


def _prepared(path: Path, n=32, seed=0) -> Path:
    rng = np.random.default_rng(seed)
    np.savez(
        path,
        x_train=rng.integers(0, 256, (n, 8, 8, 1), dtype=np.uint8),
        y_train=rng.integers(0, 10, n),
        x_test=rng.integers(0, 256, (16, 8, 8, 1), dtype=np.uint8),
        y_test=rng.integers(0, 10, 16),
        metadata=np.array(
            json.dumps({"dataset": "toy", "source": "synthetic_standin", "subset": None, "num_classes": 10})
        ),
    )
    return path


def _cli(data, out):
    return [
        sys.executable,
        "-m",
        "labeldp.simclr.pretrain",
        "--data",
        str(data),
        "--out-dir",
        str(out),
        "--config",
        json.dumps(CFG),
        "--no-progress",
    ]


def test_a_run_killed_at_any_point_resumes_to_bit_identical_parameters(tmp_path):
    data = _prepared(tmp_path / "toy.npz")
    reference = pretrain(load_images(data), config=SimCLRConfig(**CFG), out_dir=tmp_path / "a", progress=False)
    assert reference.record["resumed_from_epoch"] is None
    out = tmp_path / "b"
    # the two processes share a persistent compilation cache (the resumed run loads the killed run's
    # programs; a cache hit runs the executable a fresh compile builds: tests/workflow/test_jax_cache.py)
    env = dict(
        os.environ,
        PYTHONPATH=str(REPO),
        JAX_COMPILATION_CACHE_DIR=str(tmp_path / "jax-cache"),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
    )
    proc = subprocess.Popen(
        _cli(data, out), cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None and not (out / "checkpoints" / "1").exists():
        time.sleep(0.02)
    assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
    os.killpg(proc.pid, signal.SIGKILL)  # mid-training, possibly mid-way through writing a checkpoint
    proc.wait()
    assert not (out / "encoder.msgpack").exists(), "the run finished before the kill: make it longer"
    done = subprocess.run(_cli(data, out), cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    rec = json.loads((out / "pretrain.json").read_text())
    assert 1 <= rec["resumed_from_epoch"] < CFG["epochs"]
    assert (out / "encoder.msgpack").read_bytes() == reference.encoder_path.read_bytes()  # bit-identical
    assert rec["loss_curve"] == reference.record["loss_curve"] and None not in rec["loss_curve"]
    assert rec["labels_read"] is False and rec["epochs_completed"] == CFG["epochs"]


def test_bad_input_is_refused_with_the_fix(tmp_path, capsys):
    data = _prepared(tmp_path / "toy.npz", n=16)
    assert main(["--data", str(tmp_path / "missing.npz"), "--out-dir", str(tmp_path / "o")]) == 2
    assert "build it first" in capsys.readouterr().err
    assert main(["--data", str(data), "--out-dir", str(tmp_path / "o"), "--config", '{"widht": 4}']) == 2
    assert "unknown keys ['widht']" in capsys.readouterr().err
    assert main(["--data", str(data), "--out-dir", str(tmp_path / "o"), "--config", '{"batch_size": 1}']) == 2
    assert "batch_size" in capsys.readouterr().err
    feats = tmp_path / "feats.npz"
    np.savez(feats, x_train=np.zeros((4, 8), np.float32))
    assert main(["--data", str(feats), "--out-dir", str(tmp_path / "o")]) == 2
    assert "uint8 images" in capsys.readouterr().err
    # a checkpoint directory belongs to one configuration
    small = {"width": 2, "projection_dim": 4, "epochs": 1, "batch_size": 8}
    pretrain(load_images(data), config=SimCLRConfig(**small), out_dir=tmp_path / "c", progress=False)
    with pytest.raises(ValueError, match="another SimCLR configuration"):
        pretrain(
            load_images(data), config=SimCLRConfig(**{**small, "epochs": 2}), out_dir=tmp_path / "c", progress=False
        )
