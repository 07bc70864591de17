"""Flax models of 000 (LabelDP-Pro) Table 10, and a registry to build them by name.

Table 10(a), MNIST / FashionMNIST / KMNIST::

    Conv(16, 3x3, ReLU) -> AvgPool(2, stride 2) -> Conv(16, 3x3, ReLU) -> AvgPool(2, stride 2)
    -> Dense(16, ReLU) -> Dense(10)

Table 10(b), CIFAR-10::

    [Conv(c, 3x3, ReLU) -> MaxPool(2, stride 2) -> Dropout(0.2)] for c in (32, 64, 128)
    -> Dense(80, ReLU) -> Dropout(0.2) -> Dense(10)

The paper does not state the convolution padding. Its models were written in JAX/Flax, whose
default is ``SAME``; with ``SAME`` the MNIST model has 15,210 parameters (the figure the
project's machine notes measure), with ``VALID`` 9,066. Every model uses its own default padding
(``SAME`` for all but ``mnist_cnn_torch_defaults``); :func:`build_model`'s ``padding`` overrides it, and no
run passes one, so a run's network is named by its dataset's model or its variant's ``model`` option.

``mnist_cnn_torch_defaults`` (:mod:`labeldp.models_torch_defaults`) is Table 10(a)'s CNN as a PyTorch port
would build it (padding 0, PyTorch's default initialisation, standardised inputs), for ALIBI, which 000 ran
with the official PyTorch code.

001's networks with BatchNorm (:mod:`labeldp.models_001`) are registered here too: ``inception_001``
(MNIST family) and ``resnet18_v2_cifar`` (CIFAR). A BatchNorm model's state, the object
:meth:`ModelSpec.init` returns and :meth:`ModelSpec.logits` takes, is the variables dict
``{"params": ..., "batch_stats": ...}``; for the other models it is the parameters alone.

All models take NHWC float inputs scaled to [0, 1] and return logits of shape (n, K).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from labeldp import feature_datasets
from labeldp.collaborative_filtering import NeuralCollaborativeFiltering
from labeldp.dpsgd.tape import Tape, avg_pool_2x2, max_pool_2x2, row_keys
from labeldp.models_001 import Inception001, ResNet18V2Cifar
from labeldp.models_torch_defaults import MnistCNNTorchDefaults, mnist_cnn_torch_defaults_tapped

__all__ = [
    "MnistCNN",
    "CifarCNN",
    "LinearClassifier",
    "FEATURES_MODEL",
    "BATCH_NORM_MODELS",
    "ModelSpec",
    "build_model",
    "require_no_batch_norm",
    "num_params",
]


class MnistCNN(nn.Module):
    """000 Table 10(a): the CNN for MNIST, FashionMNIST and KMNIST."""

    num_classes: int = 10
    padding: str = "SAME"

    @nn.compact
    def __call__(self, x: jax.Array, *, train: bool = False) -> jax.Array:
        del train  # no dropout in this model
        x = nn.relu(nn.Conv(16, (3, 3), padding=self.padding)(x))
        x = nn.avg_pool(x, (2, 2), strides=(2, 2))
        x = nn.relu(nn.Conv(16, (3, 3), padding=self.padding)(x))
        x = nn.avg_pool(x, (2, 2), strides=(2, 2))
        x = x.reshape((x.shape[0], -1))
        x = nn.relu(nn.Dense(16)(x))
        return nn.Dense(self.num_classes)(x)


def mnist_cnn_tapped(module: MnistCNN, params, x: jax.Array, tape: Tape) -> jax.Array:
    """:class:`MnistCNN`'s forward pass through a :class:`~labeldp.dpsgd.tape.Tape` (convolutions
    as im2col matmuls): the same logits as ``module.apply`` up to float32 rounding."""
    h = avg_pool_2x2(jax.nn.relu(tape.conv(("Conv_0",), x, params["Conv_0"], padding=module.padding)))
    h = avg_pool_2x2(jax.nn.relu(tape.conv(("Conv_1",), h, params["Conv_1"], padding=module.padding)))
    h = jax.nn.relu(tape.dense(("Dense_0",), h.reshape((h.shape[0], -1)), params["Dense_0"]))
    return tape.dense(("Dense_1",), h, params["Dense_1"])


class CifarCNN(nn.Module):
    """000 Table 10(b): the CNN for CIFAR-10 (dropout ratio 0.2 after every block)."""

    num_classes: int = 10
    padding: str = "SAME"
    dropout: float = 0.2

    @nn.compact
    def __call__(self, x: jax.Array, *, train: bool = False) -> jax.Array:
        for channels in (32, 64, 128):
            x = nn.relu(nn.Conv(channels, (3, 3), padding=self.padding)(x))
            x = nn.max_pool(x, (2, 2), strides=(2, 2))
            x = nn.Dropout(self.dropout, deterministic=not train)(x)
        x = x.reshape((x.shape[0], -1))
        x = nn.relu(nn.Dense(80)(x))
        x = nn.Dropout(self.dropout, deterministic=not train)(x)
        return nn.Dense(self.num_classes)(x)


class LinearClassifier(nn.Module):
    """A linear (softmax-regression) classifier on frozen representations: the classifier of the
    Table 6 pipeline on SimCLR features (000 Section 5.3; the paper does not name the classifier's
    architecture, and a linear head on a frozen encoder is the linear-probe protocol its 90.9%
    non-private accuracy refers to). ``padding`` is accepted for a uniform builder and unused."""

    num_classes: int = 10
    padding: str = "SAME"

    @nn.compact
    def __call__(self, x: jax.Array, *, train: bool = False) -> jax.Array:
        del train
        return nn.Dense(self.num_classes)(x.reshape((x.shape[0], -1)))


def cifar_cnn_tapped(module: CifarCNN, params, x: jax.Array, tape: Tape) -> jax.Array:
    """:class:`CifarCNN`'s forward pass through a :class:`~labeldp.dpsgd.tape.Tape`: the same
    logits as ``module.apply`` in evaluation mode; in training mode (``tape.dropout_keys`` set)
    each row's dropout masks come from its own key (:meth:`~labeldp.dpsgd.tape.Tape.dropout`), and
    this is the model's training-mode forward for every formulation (:meth:`ModelSpec.train_logits`)."""
    h = x
    for i, _ in enumerate((32, 64, 128)):
        h = max_pool_2x2(jax.nn.relu(tape.conv((f"Conv_{i}",), h, params[f"Conv_{i}"], padding=module.padding)))
        h = tape.dropout(h, rate=module.dropout, index=i)
    h = jax.nn.relu(tape.dense(("Dense_0",), h.reshape((h.shape[0], -1)), params["Dense_0"]))
    h = tape.dropout(h, rate=module.dropout, index=3)
    return tape.dense(("Dense_1",), h, params["Dense_1"])


def linear_classifier_tapped(module: LinearClassifier, params, x: jax.Array, tape: Tape) -> jax.Array:
    """:class:`LinearClassifier`'s forward pass through a :class:`~labeldp.dpsgd.tape.Tape`."""
    del module
    return tape.dense(("Dense_0",), x.reshape((x.shape[0], -1)), params["Dense_0"])


#: The model of every features dataset (``<image dataset>_simclr``): :data:`labeldp.feature_datasets.FEATURES_MODEL`.
FEATURES_MODEL = feature_datasets.FEATURES_MODEL

_MODELS: dict[str, Callable[..., nn.Module]] = {
    "mnist_cnn": MnistCNN,
    "mnist_cnn_torch_defaults": MnistCNNTorchDefaults,  # 000 Table 10(a) as a PyTorch port (ALIBI, 000 D.4)
    "cifar_cnn": CifarCNN,
    "linear": LinearClassifier,
    "ncf": NeuralCollaborativeFiltering,  # 001 Table 3 (MovieLens-1M)
    "inception_001": Inception001,
    "resnet18_v2_cifar": ResNet18V2Cifar,
}

#: The registered models with BatchNorm (001 Appendix B's networks): trained by the non-private path
#: only (:mod:`labeldp.training`); DP-SGD refuses them (per-example gradients and batch statistics do not mix).
BATCH_NORM_MODELS = ("inception_001", "resnet18_v2_cifar")

#: Each model's forward pass through the tape of the fast DP-SGD step (:mod:`labeldp.dpsgd.clipping`,
#: formulation ``bookkeeping``); a model without one trains with the reference ``vmap_grad`` formulation.
_TAPPED: dict[str, Callable[..., jax.Array]] = {
    "mnist_cnn": mnist_cnn_tapped,
    "mnist_cnn_torch_defaults": mnist_cnn_torch_defaults_tapped,
    "cifar_cnn": cifar_cnn_tapped,
    "linear": linear_classifier_tapped,
}


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """A built model: the Flax module, its input shape and a pure logits function.

    Attributes:
      name: registry name (e.g. ``mnist_cnn``, ``mnist_cnn_torch_defaults``, ``cifar_cnn``).
      module: the Flax module.
      input_shape: shape of one example (H, W, C).
      has_dropout: whether ``apply`` needs a ``dropout`` rng when ``train=True``.
      has_batch_norm: whether the model keeps BatchNorm statistics; its state is then the variables
        dict ``{"params", "batch_stats"}`` (module docstring).
    """

    name: str
    module: nn.Module
    input_shape: tuple[int, ...]
    has_dropout: bool
    has_batch_norm: bool = False

    def init(self, rng: jax.Array):
        """Returns the initial state for one example batch of zeros: the parameters, or for a
        BatchNorm model the variables ``{"params", "batch_stats"}``."""
        variables = self.module.init(rng, jnp.zeros((1, *self.input_shape), jnp.float32))
        if self.has_batch_norm:
            return {"params": variables["params"], "batch_stats": variables["batch_stats"]}
        return variables["params"]

    def logits(self, params, x: jax.Array) -> jax.Array:
        """Deterministic logits ``f(params, x) -> (n, K)`` (dropout off; BatchNorm with the running
        statistics of the state ``params``)."""
        variables = params if self.has_batch_norm else {"params": params}
        return self.module.apply(variables, x, train=False)

    def batch_norm_train_logits(self, params, batch_stats, x: jax.Array) -> tuple[jax.Array, Any]:
        """A BatchNorm model's training-mode logits (batch statistics) and its updated running
        statistics: ``(logits, new_batch_stats)``."""
        if not self.has_batch_norm:
            raise ValueError(f"model {self.name!r} has no BatchNorm")
        logits, updates = self.module.apply(
            {"params": params, "batch_stats": batch_stats}, x, train=True, mutable=["batch_stats"]
        )
        return logits, updates["batch_stats"]

    @property
    def tapped(self) -> Callable[[Any, jax.Array, Tape], jax.Array] | None:
        """The forward pass through a :class:`~labeldp.dpsgd.tape.Tape` ``(params, x, tape) ->
        logits`` (same logits as :meth:`logits`), or ``None`` if the model has none."""
        fn = _TAPPED.get(self.name)
        return None if fn is None else functools.partial(fn, self.module)

    def train_logits(self, params, x: jax.Array, rng: jax.Array | None) -> jax.Array:
        """Logits in training mode. With dropout: the tapped forward, row ``b``'s masks drawn from
        ``split(rng, n)[b]`` (:func:`labeldp.dpsgd.tape.row_keys`), so the reference and the
        book-keeping DP-SGD formulations and the non-private steps drop the same units."""
        if self.has_dropout:
            return self.tapped(params, x, Tape(None, dropout_keys=row_keys(rng, x.shape[0])))
        return self.module.apply({"params": params}, x, train=True)


def build_model(
    name: str, *, input_shape: tuple[int, ...], num_classes: int = 10, padding: str | None = None, **sizes: int
) -> ModelSpec:
    """Builds a registered model.

    Args:
      name: ``mnist_cnn`` (000 Table 10a), ``mnist_cnn_torch_defaults`` (the same with PyTorch's defaults;
        VALID padding only), ``cifar_cnn`` (000 Table 10b), ``linear`` (on features), ``inception_001`` or
        ``resnet18_v2_cifar`` (001 Appendix B, with BatchNorm; SAME padding only), or ``ncf`` (001 Table 3's
        collaborative filtering network).
      input_shape: shape (H, W, C) of one example, (D,) for features, (2,) for (user, item) pairs.
      num_classes: number of output logits K.
      padding: ``SAME`` or ``VALID``; ``None`` (default): the model's own default, ``SAME`` (Flax's default)
        for every model but ``mnist_cnn_torch_defaults`` (``VALID``, PyTorch's padding 0).
      **sizes: the model's data-dependent sizes (``ncf``: ``num_users``, ``num_items``).

    Returns:
      A :class:`ModelSpec`.
    """
    if name not in _MODELS:
        raise ValueError(f"unknown model {name!r}; known models: {sorted(_MODELS)}")
    if padding not in (None, "SAME", "VALID"):
        raise ValueError(f"padding must be 'SAME' or 'VALID', got {padding!r}")
    chosen = {} if padding is None else {"padding": padding}
    module = _MODELS[name](num_classes=num_classes, **chosen, **sizes)
    return ModelSpec(
        name=name,
        module=module,
        input_shape=tuple(input_shape),
        has_dropout=name == "cifar_cnn",
        has_batch_norm=name in BATCH_NORM_MODELS,
    )


def require_no_batch_norm(model: ModelSpec, *, method: str) -> None:
    """Refuses a BatchNorm model for a DP-SGD method.

    Raises:
      ValueError: ``model`` has BatchNorm (its batch statistics mix examples, so per-example
        clipping would not bound one label's influence, and the DP-SGD step keeps no such state).
    """
    if model.has_batch_norm:
        raise ValueError(
            f"{method} trains with DP-SGD, which does not support BatchNorm model {model.name!r} (batch "
            "statistics mix examples, so per-example clipping no longer bounds one label's influence); "
            "drop the variant's 'model' option to use the dataset's 000 Table 10 model, or run the "
            "BatchNorm model with a non-private-training method (lp_mst, lp_2st, nonprivate)"
        )


def num_params(params) -> int:
    """Total number of scalar parameters in a pytree."""
    return int(sum(p.size for p in jax.tree_util.tree_leaves(params)))
