"""The Opacus validation twin of DP-SGD: same sigma, q, steps and batches; the accountants agree."""

from __future__ import annotations

import math

import numpy as np
import pytest

from baselines import dpsgd_opacus
from baselines.torch_models import build_torch_model, nchw_tensor
from labeldp import accounting
from labeldp.methods.base import RunSpec


def _spec(**kw):
    base = dict(
        dataset="mnist",
        method="dpsgd_opacus",
        variant="default",
        epsilon=1.0,
        delta=1e-5,
        seed=3,
        hparams={"learning_rate": 0.1, "epochs": 2, "batch_size": 64, "clip_norm": 1.0},
    )
    base.update(kw)
    return RunSpec(**base)


def test_same_accounting_as_the_jax_engine_and_opacus_agrees(data):
    spec = _spec()
    res = dpsgd_opacus.run(data, spec)
    n, n1 = data.x_train.shape[0], 64
    steps = math.floor(2 * n / n1)
    ref = accounting.account_dpsgd(target_epsilon=1.0, target_delta=1e-5, sampling_rate=n1 / n, steps=steps)
    d = res.details
    assert d["steps"] == steps and d["sampling_rate"] == n1 / n
    assert d["noise_multiplier"] == pytest.approx(float(ref.noise_multiplier), rel=1e-12)
    assert res.privacy.epsilon == pytest.approx(float(ref.epsilon), rel=1e-12) and res.privacy.epsilon <= 1.0 + 1e-9
    assert res.privacy.valid and res.privacy.delta == 1e-5
    # Opacus' own PRV accountant, asked about the same (sigma, q, steps), is close to ours
    assert d["opacus_epsilon"]["prv"] == pytest.approx(res.privacy.epsilon, rel=0.05)
    assert d["opacus_epsilon"]["rdp"] >= 0.9 * res.privacy.epsilon  # RDP is the looser bound
    acc = res.metrics["test_accuracy_pct"]
    assert np.isfinite(acc) and 0.0 <= acc <= 100.0


def test_deterministic_and_noise_is_applied(data):
    a = dpsgd_opacus.run(data, _spec())
    b = dpsgd_opacus.run(data, _spec())
    assert a.metrics == b.metrics
    # at a tiny epsilon the noise (sigma in the hundreds) must change the trained model
    c = dpsgd_opacus.run(data, _spec(epsilon=0.05))
    assert c.details["noise_multiplier"] > 10 * a.details["noise_multiplier"]
    assert c.metrics["final_train_loss"] != a.metrics["final_train_loss"]


def test_rejects_what_it_does_not_implement(data):
    with pytest.raises(ValueError, match="finite epsilon"):
        dpsgd_opacus.run(data, _spec(epsilon=math.inf))
    with pytest.raises(ValueError, match="examples_per_user"):
        dpsgd_opacus.run(data, _spec(options={"examples_per_user": 2}))
    with pytest.raises(ValueError, match="Poisson"):
        dpsgd_opacus.run(data, _spec(sampling="shuffle"))


def test_init_flax_starts_from_the_jax_engines_parameters(data):
    import jax.numpy as jnp
    import torch

    from labeldp.methods.common import build_model_for
    from labeldp.methods.private_training import initial_params
    from labeldp.training import to_float_images

    x = to_float_images(data.x_test[:16])
    model = build_model_for(data)
    want = np.asarray(model.logits(initial_params(model, seed=3)[1], jnp.asarray(x)))
    xt = nchw_tensor(x)
    with torch.no_grad():
        same = dpsgd_opacus.build_twin(data, init="flax", seed=3)(xt).numpy()
        other_seed = dpsgd_opacus.build_twin(data, init="flax", seed=4)(xt).numpy()
        torch_init = dpsgd_opacus.build_twin(data, init="torch", seed=3)(xt).numpy()
    np.testing.assert_allclose(same, want, rtol=1e-4, atol=1e-5)
    assert not np.allclose(other_seed, want, atol=1e-3)
    assert not np.allclose(torch_init, want, atol=1e-3)


def test_init_option_is_recorded_and_checked(data):
    res = dpsgd_opacus.run(data, _spec(options={"init": "flax"}))
    assert res.details["init"] == "flax"
    assert dpsgd_opacus.run(data, _spec()).details["init"] == "torch"
    with pytest.raises(ValueError, match="init must be one of"):
        dpsgd_opacus.run(data, _spec(options={"init": "xavier"}))


def _opacus_backward(x_nchw, y, seed=0):
    import torch
    from opacus import GradSampleModule

    torch.manual_seed(seed)
    gsm = GradSampleModule(build_torch_model("mnist_cnn", input_shape=(28, 28, 1)), loss_reduction="mean")
    torch.nn.functional.cross_entropy(gsm(x_nchw), torch.from_numpy(y)).backward()
    return gsm


def test_per_sample_gradients_sum_to_the_batch_gradient_for_every_layer(data):
    """Regression: with the permuted one-channel view (channels-last strides) Opacus 1.6 returned
    all-zero per-sample gradients for conv2; the twin's inputs come from nchw_tensor."""
    import torch

    from labeldp.training import to_float_images

    x = to_float_images(data.x_train[:64])
    y = np.asarray(data.y_train[:64], np.int64)
    gsm = _opacus_backward(nchw_tensor(x), y)
    assert dpsgd_opacus.check_per_sample_gradients(gsm, 64) < 1e-4
    for name, p in gsm.named_parameters():
        assert float(p.grad_sample.abs().sum()) > 0, name
    # the guard catches the broken layout (if this Opacus/PyTorch pair still has the bug) and
    # never passes wrong per-sample gradients
    bad = _opacus_backward(torch.from_numpy(x).permute(0, 3, 1, 2), y)
    per_layer = {
        n: float((p.grad_sample.sum(0) / 64 - p.grad).norm() / p.grad.norm()) for n, p in bad.named_parameters()
    }
    if max(per_layer.values()) > 1e-3:
        with pytest.raises(RuntimeError, match="do not sum to the batch gradient"):
            dpsgd_opacus.check_per_sample_gradients(bad, 64)
    else:
        assert dpsgd_opacus.check_per_sample_gradients(bad, 64) < 1e-3


def test_guard_stops_a_run_whose_per_sample_gradients_are_wrong(data, monkeypatch):
    import torch

    # a layout bug anywhere upstream (here: zeroed per-sample gradients) must stop the run
    real_check = dpsgd_opacus.check_per_sample_gradients

    def corrupt_then_check(module, batch_size, **kw):
        p = next(iter(module.parameters()))
        p.grad_sample = torch.zeros_like(p.grad_sample)
        return real_check(module, batch_size, **kw)

    monkeypatch.setattr(dpsgd_opacus, "check_per_sample_gradients", corrupt_then_check)
    with pytest.raises(RuntimeError, match="do not sum to the batch gradient"):
        dpsgd_opacus.run(data, _spec())
    monkeypatch.setattr(dpsgd_opacus, "check_per_sample_gradients", real_check)
    res = dpsgd_opacus.run(data, _spec())
    assert res.details["per_sample_gradient_max_rel_error"] < 1e-3
