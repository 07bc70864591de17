"""ALIBI (baselines/alibi.py; Malek et al. 2021, a baseline of 000 Table 5): the Laplace release, the
posterior with the model's softmax as prior, the per-step training, its variant options (the official
recipe, a registered network, the test-curve diagnostic)."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from baselines import alibi
from labeldp import training
from labeldp.mechanisms import classification as cls
from labeldp.methods.common import build_model_for, train_config
from labeldp.models import ModelSpec, num_params
from labeldp.training import to_float_images
from tests.helpers import P_MIN_LABEL_BASELINES as P_MIN, label_method_spec


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 4.0])
def test_alibi_noise_is_laplace(epsilon):
    k = 10
    y = np.arange(6000) % k
    z, soft = alibi.noisy_soft_labels(y, num_classes=k, epsilon=epsilon, rng=np.random.default_rng(11))
    noise = z - np.eye(k)[y]
    b = 2.0 / epsilon
    p = stats.kstest(noise.ravel(), "laplace", args=(0.0, b)).pvalue
    assert p > P_MIN, f"KS p = {p:.2e} against Laplace(0, {b})"
    # Uniform-prior posterior, checked against brute-force Bayes with the Laplace likelihood.
    loglik = cls.alibi_log_likelihood(z, epsilon=epsilon)
    brute = np.exp(loglik - loglik.max(-1, keepdims=True))
    brute /= brute.sum(-1, keepdims=True)
    np.testing.assert_allclose(soft, brute, rtol=1e-9, atol=1e-12)


def test_alibi_refinement_uses_model_softmax_as_prior():
    k, n, eps = 10, 300, 0.5
    rng = np.random.default_rng(5)
    y = rng.integers(0, k, n)
    z, _ = alibi.noisy_soft_labels(y, num_classes=k, epsilon=eps, rng=rng)
    logits = rng.normal(size=(n, k)) * 3
    refined = alibi.refine_soft_labels(z, logits, epsilon=eps)
    prior = np.exp(logits - logits.max(-1, keepdims=True))
    prior /= prior.sum(-1, keepdims=True)
    log_post = cls.alibi_log_likelihood(z, epsilon=eps) + np.log(prior)
    brute = np.exp(log_post - log_post.max(-1, keepdims=True))
    brute /= brute.sum(-1, keepdims=True)
    np.testing.assert_allclose(refined, brute, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(refined.sum(-1), 1.0, atol=1e-12)
    # The per-step targets (jax, float32) are the same posterior, and carry no gradient.
    step = np.asarray(
        jax.jit(lambda zz, ll: alibi.step_targets(zz, ll, epsilon=eps))(
            jnp.asarray(z, jnp.float32), jnp.asarray(logits, jnp.float32)
        )
    )
    np.testing.assert_allclose(step, refined, atol=2e-5)
    grad = jax.grad(lambda ll: jnp.sum(alibi.step_targets(jnp.asarray(z, jnp.float32), ll, epsilon=eps)[:, 0]))(
        jnp.asarray(logits, jnp.float32)
    )
    assert np.all(np.asarray(grad) == 0)


# ---------------------------------------------------------------------------
# LP-2ST
# ---------------------------------------------------------------------------


def test_alibi_trains_with_its_official_recipe_options_and_refuses_init_and_augmentation(data):
    """The variant ``official_recipe`` (Nesterov momentum, weight decay, ALIBI's epoch schedule) changes
    what is trained and keeps the label mechanism and its eps; of the recipe's options outside the optimiser,
    only ``model`` is honoured (test_alibi_model_option_trains_the_chosen_network_on_the_same_release)."""
    recipe = {"momentum": 0.9, "nesterov": True, "lr_schedule": "epoch_warmup_step_decay", "l2": 5e-5}
    plain = alibi.run(data, label_method_spec("alibi", epochs=2))
    official = alibi.run(data, label_method_spec("alibi", epochs=2, options=recipe))
    assert official.metrics["final_train_loss"] != plain.metrics["final_train_loss"]
    assert official.details["noisy_label_accuracy"] == plain.details["noisy_label_accuracy"]  # the same release
    assert (
        official.privacy.to_dict(target_epsilon=1.0)["epsilon"] == plain.privacy.to_dict(target_epsilon=1.0)["epsilon"]
    )
    for refused in ({"init_from": "cifar100_pretrain"}, {"augment": "crop_flip_cutout"}, {"augment_pad": 2}):
        with pytest.raises(ValueError, match=next(iter(refused))):
            alibi.run(data, label_method_spec("alibi", options=refused))
    with pytest.raises(ValueError, match="unknown model"):
        alibi.run(data, label_method_spec("alibi", options={"model": "no_such_net"}))


def test_alibi_model_option_trains_the_chosen_network_on_the_same_release(data, monkeypatch):
    """``model: mnist_cnn_torch_defaults`` trains that network (9,066 parameters, not the default CNN's
    15,210) on the same label release (same noisy vectors: same noisy-label accuracy) with the same eps."""
    trained = []
    real_train = training.train_weighted

    def spy(model, **kw):
        result = real_train(model, **kw)
        trained.append((model.name, num_params(result.params)))
        return result

    monkeypatch.setattr(training, "train_weighted", spy)
    plain = alibi.run(data, label_method_spec("alibi"))
    torch_net = alibi.run(data, label_method_spec("alibi", options={"model": "mnist_cnn_torch_defaults"}))
    assert trained == [("mnist_cnn", 15_210), ("mnist_cnn_torch_defaults", 9_066)]
    assert torch_net.details["model"] == "mnist_cnn_torch_defaults" and "model" not in plain.details
    assert torch_net.details["noisy_label_accuracy"] == plain.details["noisy_label_accuracy"]
    assert torch_net.details["soft_label_accuracy_uniform_prior"] == plain.details["soft_label_accuracy_uniform_prior"]
    assert torch_net.metrics["final_train_loss"] != plain.metrics["final_train_loss"]
    assert torch_net.privacy == plain.privacy
    assert torch_net.privacy.to_dict(target_epsilon=1.0)["epsilon"] == 1.0


class _TinyBatchNormNet(nn.Module):
    """A BatchNorm network small enough to compile in a second (the registered ones, 001's Inception and
    ResNet, take ~45 s on the 2-core CPU): Conv -> BatchNorm -> ReLU -> Dense."""

    num_classes: int = 10

    @nn.compact
    def __call__(self, x, *, train: bool = False):
        x = nn.Conv(4, (3, 3), use_bias=False)(x)
        x = nn.relu(nn.BatchNorm(use_running_average=not train, momentum=0.9)(x))
        return nn.Dense(self.num_classes)(x.reshape((x.shape[0], -1)))


def test_alibi_per_step_trains_a_batch_norm_network():
    """ALIBI's per-step posterior on a BatchNorm network (the state ``{"params", "batch_stats"}`` of 001's
    networks, :class:`labeldp.models.ModelSpec`): the BatchNorm step takes the targets from its training-mode
    logits; the parameters and the running statistics both move."""
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (24, 8, 8, 1)).astype(np.float32)
    z, _ = alibi.noisy_soft_labels(rng.integers(0, 10, 24), num_classes=10, epsilon=1.0, rng=rng)
    model = ModelSpec(
        name="tiny_bn", module=_TinyBatchNormNet(), input_shape=(8, 8, 1), has_dropout=False, has_batch_norm=True
    )
    config = train_config(label_method_spec("alibi"), progress=False)
    result = alibi.train_alibi_per_step(model, x_train=x, noisy_onehot=z, epsilon=1.0, config=config, seed=0)
    assert set(result.params) == {"params", "batch_stats"} and np.isfinite(result.final_loss)
    start = training.initial_params(model, 0)  # train_weighted's initialisation for seed 0
    for part in ("params", "batch_stats"):
        moved = jax.tree_util.tree_map(
            lambda a, b: bool(np.any(np.asarray(a) != np.asarray(b))), start[part], result.params[part]
        )
        assert all(jax.tree_util.tree_leaves(moved)), part


def test_alibi_test_curve_diagnostic_observes_without_changing_the_run(data):
    """The diagnostic curve has one test accuracy per epoch, ends at the record's metric, and leaves the
    training untouched: the same run without it gives the same final model (same loss and accuracy)."""
    plain = alibi.run(data, label_method_spec("alibi", epochs=3))
    curved = alibi.run(data, label_method_spec("alibi", epochs=3, options={"test_curve_diagnostic": True}))
    curve = curved.details["test_accuracy_by_epoch"]
    assert len(curve) == 3
    assert curve[-1] == curved.metrics["test_accuracy_pct"] == plain.metrics["test_accuracy_pct"]
    assert curved.metrics["final_train_loss"] == plain.metrics["final_train_loss"]
    assert "test_accuracy_by_epoch" not in plain.details
    assert "never chooses anything" in curved.details["test_curve_note"]
    with pytest.raises(ValueError, match="needs prior 'step'"):
        alibi.run(data, label_method_spec("alibi", options={"test_curve_diagnostic": True, "prior": "epoch"}))
    with pytest.raises(ValueError, match="true or false"):
        alibi.run(data, label_method_spec("alibi", options={"test_curve_diagnostic": "yes"}))


def test_alibi_epoch_observer_cannot_set_targets(data):
    x = to_float_images(data.x_train)
    z, _ = alibi.noisy_soft_labels(np.asarray(data.y_train), num_classes=10, epsilon=1.0, rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="must return None"):
        alibi.train_alibi_per_step(
            build_model_for(data),
            x_train=x,
            noisy_onehot=z,
            epsilon=1.0,
            config=train_config(label_method_spec("alibi")),
            seed=0,
            on_epoch_end=lambda epoch, params: z,
        )
