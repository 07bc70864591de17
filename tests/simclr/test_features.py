"""Frozen features (labeldp/simclr/features.py): deterministic, per-row, with the encoder stated."""

import json

import numpy as np
import pytest

from labeldp.data.prepare import load_prepared
from labeldp.simclr import features as F
from labeldp.simclr.pretrain import SimCLRConfig, load_images, pretrain
from tests.simclr.test_pretrain import _prepared


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    d = tmp_path_factory.mktemp("enc")
    data = _prepared(d / "toy.npz", n=32)
    pretrain(
        load_images(data),
        config=SimCLRConfig(width=2, projection_dim=4, epochs=1, batch_size=16),
        out_dir=d / "e",
        progress=False,
    )
    return data, d / "e"


def test_features_file_is_deterministic_per_row_and_states_the_encoder(encoder, tmp_path):
    data, enc = encoder
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    meta = F.write_features(data=data, encoder_dir=enc, out=a, dataset_name="toy_simclr")
    F.write_features(data=data, encoder_dir=enc, out=b, dataset_name="toy_simclr")
    with np.load(a) as za, np.load(b) as zb:
        for k in ("x_train", "x_test", "y_train", "y_test"):
            np.testing.assert_array_equal(za[k], zb[k])
        assert za["x_train"].dtype == np.float32 and za["x_train"].shape == (32, 16)
    variables, rec = F.load_encoder(enc)
    imgs = load_images(data)
    full = F.extract_features(variables, imgs, width=2, batch_size=8)
    np.testing.assert_array_equal(F.extract_features(variables, imgs[:5], width=2, batch_size=8), full[:5])
    loaded = load_prepared(a)
    assert loaded.kind == "features" and loaded.name == "toy_simclr" and loaded.num_classes == 10
    assert loaded.source == "synthetic_standin"  # the base dataset's source carries over
    assert meta["encoder"]["pretrain"]["config"]["width"] == 2 and len(meta["encoder"]["sha256"]) == 64
    assert 0.0 <= meta["encoder"]["linear_probe_test_accuracy_pct"] <= 100.0
    assert json.loads(str(np.load(a)["metadata"][()]))["base_dataset"] == "toy"


def test_linear_probe_is_above_chance_on_separable_features():
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(3, 5)) * 4
    y = rng.integers(0, 3, 300)
    f = centres[y] + rng.normal(size=(300, 5))
    assert F.linear_probe_accuracy(f[:200], y[:200], f[200:], y[200:]) > 90.0


def test_missing_encoder_is_refused_with_the_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="pretrain_simclr"):
        F.load_encoder(tmp_path)
