"""The binary-label ads model of 000 Appendix D.3 / 002 Appendix A, in Flax.

Every categorical feature goes through an embedding, the embeddings are concatenated with the
numerical features, then an MLP of ReLU layers and ONE logit, trained with binary cross-entropy:
on Criteo Attribution hidden layers 128 and 64 with embeddings of dimension 8 (000 D.3, 002
Appendix A: "two layers of 128 and 64 hidden units"); on pCTR four hidden layers of 598 units with
embedding size int[2 V^0.25] for a categorical feature of vocabulary size V (002 Appendix A: "four
fully connected layers, each containing 598 hidden units").

The DP-SGD engine (:mod:`labeldp.dpsgd`) and LabelDP-Pro work with K-class logits, so
:func:`two_class_logits` presents the one logit z as the logits (0, z): softmax cross-entropy on
(0, z) is exactly binary cross-entropy on z (log(1 + e^z) - y z), and the per-class gradients
LabelDP-Pro projects onto are the gradients for y = 0 and y = 1.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from labeldp.dpsgd.tape import Tape

__all__ = [
    "AdsModelConfig",
    "AdsMLP",
    "ads_mlp_tapped",
    "MODEL_FOR_DATASET",
    "model_for",
    "embedding_dims",
    "two_class_logits",
    "logit_gradient_norms",
]


@dataclasses.dataclass(frozen=True)
class AdsModelConfig:
    """Architecture of an :class:`AdsMLP`.

    Attributes:
      hidden: widths of the hidden ReLU layers.
      embedding: ``"fixed8"`` (dimension 8 for every feature) or ``"2V^0.25"`` (002's rule,
        int(2 V^0.25) for a vocabulary of size V).
      source: where the architecture is stated.
    """

    hidden: tuple[int, ...]
    embedding: str
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"hidden": list(self.hidden), "embedding": self.embedding, "source": self.source}


MODEL_FOR_DATASET: Mapping[str, AdsModelConfig] = {
    "criteo_attribution": AdsModelConfig((128, 64), "fixed8", "000 Appendix D.3 / 002 Appendix A (Attribution)"),
    "criteo_pctr": AdsModelConfig((598, 598, 598, 598), "2V^0.25", "002 Appendix A (pCTR: four layers of 598 units)"),
}


def model_for(dataset: str) -> AdsModelConfig:
    """The architecture for ``dataset``; a clear error naming the known ones otherwise."""
    try:
        return MODEL_FOR_DATASET[dataset]
    except KeyError:
        raise ValueError(
            f"no ads model for dataset {dataset!r}; add one to labeldp/ads/model.py "
            f"MODEL_FOR_DATASET (known: {sorted(MODEL_FOR_DATASET)})"
        ) from None


def embedding_dims(vocab_sizes: Sequence[int], *, rule: str) -> tuple[int, ...]:
    """Embedding dimension of each categorical feature.

    Args:
      vocab_sizes: vocabulary sizes (index 0 = missing / unseen included).
      rule: ``"fixed8"`` or ``"2V^0.25"`` (002 Appendix A: int[2 V^0.25], at least 1).

    Returns:
      One dimension per feature.
    """
    if rule == "fixed8":
        return tuple(8 for _ in vocab_sizes)
    if rule == "2V^0.25":
        return tuple(max(1, int(2 * int(v) ** 0.25)) for v in vocab_sizes)
    raise ValueError(f"unknown embedding rule {rule!r}; use 'fixed8' or '2V^0.25'")


class AdsMLP(nn.Module):
    """Embeddings + numerical features -> ReLU MLP -> one logit (shape ``(n,)``).

    Attributes:
      hidden: hidden layer widths.
      vocab_sizes: vocabulary size of each categorical column.
      embed_dims: embedding dimension of each categorical column.
      output_bias: initial bias of the logit (e.g. the log-odds of the training labels).
      sensitive_cat: per categorical column, whether it is a SENSITIVE feature (002); the
        truncated model (``truncated=True``) feeds zeros in place of their embeddings, so it
        does not depend on them or on their embedding parameters (002 Section 3: f(g(x°) ∘ 0)).
      sensitive_num: the same for the numerical columns.
    """

    hidden: tuple[int, ...]
    vocab_sizes: tuple[int, ...]
    embed_dims: tuple[int, ...]
    output_bias: float = 0.0
    sensitive_cat: tuple[bool, ...] = ()
    sensitive_num: tuple[bool, ...] = ()

    @nn.compact
    def __call__(
        self, x, truncated: bool = False, *, inputs: jax.Array | None = None, return_inputs: bool = False
    ) -> jax.Array:
        """The logit z, ``(n,)``.

        Args:
          x: ``(x_num, x_cat)``; unused when ``inputs`` is given.
          truncated: 002's truncated model (sensitive embeddings and columns zeroed).
          inputs: the MLP's input rows ``(n, D)`` (numerical columns, then each embedding) in
            place of computing them from ``x`` (the embedding tables are then not read).
          return_inputs: return those input rows instead of the logit.
        """
        if inputs is None:
            x_num, x_cat = x
            x_num = x_num.astype(jnp.float32)
            if truncated and any(self.sensitive_num):
                keep = jnp.asarray([0.0 if s else 1.0 for s in self.sensitive_num], jnp.float32)
                x_num = x_num * keep
            parts = [x_num]
            for j, (size, dim) in enumerate(zip(self.vocab_sizes, self.embed_dims)):
                emb = nn.Embed(int(size), int(dim), name=f"embed_{j}")(x_cat[..., j])
                if truncated and self.zeroed_embedding(j):
                    emb = jnp.zeros_like(emb)
                parts.append(emb)
            h = jnp.concatenate(parts, axis=-1)
            if return_inputs:
                return h
        else:
            h = inputs
        for width in self.hidden:
            h = nn.relu(nn.Dense(int(width))(h))
        out = nn.Dense(1, bias_init=nn.initializers.constant(self.output_bias))(h)
        return out[..., 0]

    def zeroed_embedding(self, j: int) -> bool:
        """Whether the truncated model zeroes categorical feature ``j``'s embedding."""
        return j < len(self.sensitive_cat) and bool(self.sensitive_cat[j])


def _embedding_input_mask(model: AdsMLP, num_width: int, truncated: bool) -> jax.Array:
    """``(D,)`` over the MLP's input: 1 on the slots of embeddings that reach the logit, 0 on the
    numerical columns and on embeddings the truncated model zeroes."""
    parts = [jnp.zeros((num_width,), jnp.float32)]
    for j, dim in enumerate(model.embed_dims):
        parts.append(jnp.full((int(dim),), 0.0 if truncated and model.zeroed_embedding(j) else 1.0, jnp.float32))
    return jnp.concatenate(parts)


def logit_gradient_norms(model: AdsMLP, params, x, *, truncated: bool = False) -> jax.Array:
    """``||grad_theta z(x_i)||`` for every row, ``(n,)``, from one batched forward and backward pass
    (no per-row gradient is materialised).

    Row i reads one row of each categorical feature's own table, so the gradient of z(x_i) with
    respect to table j is zero except in that row, where it equals ``dz / de_j`` (the gradient
    with respect to the looked-up embedding ``e_j``, zero when the truncated model zeroes it).
    For a Dense layer ``s = a W + b`` the row's gradient is ``a_i^T d_i`` for ``W`` and ``d_i`` for
    ``b`` (``d_i = dz_i / ds_i``), so ``||grad_W||^2 = ||a_i||^2 ||d_i||^2`` (Goodfellow 2015's
    per-example norm trick). Hence ``||grad_theta z||^2 = sum_l (||a_{l,i}||^2 + 1) ||d_{l,i}||^2 +
    sum_j ||dz / de_j||^2``, with ``d`` back-propagated through the MLP in one batched pass.
    Exact: checked against dense per-row gradients in ``tests/ads/test_model_norms.py``.

    Args:
      model: the network. params: its variables (``{"params": ...}``). x: ``(x_num, x_cat)``.
      truncated: the truncated model of 002.

    Returns:
      ``(n,)`` float32 norms.
    """
    h0 = model.apply(params, x, truncated, return_inputs=True)
    mask = _embedding_input_mask(model, int(x[0].shape[-1]), truncated)
    layers = [params["params"][f"Dense_{i}"] for i in range(len(model.hidden) + 1)]
    acts, pre = [h0], []
    for i, layer in enumerate(layers):  # AdsMLP.__call__'s MLP: ReLU after every hidden Dense
        s = jnp.dot(acts[-1], layer["kernel"], precision=jax.lax.Precision.HIGHEST) + layer["bias"]
        pre.append(s)
        if i < len(layers) - 1:
            acts.append(jax.nn.relu(s))
    d = jnp.ones_like(pre[-1])  # dz / ds_L, (n, 1)
    sq = jnp.zeros(h0.shape[0], h0.dtype)
    for i in range(len(layers) - 1, -1, -1):
        sq = sq + (jnp.sum(acts[i] ** 2, axis=1) + 1.0) * jnp.sum(d**2, axis=1)
        d = jnp.dot(d, layers[i]["kernel"].T, precision=jax.lax.Precision.HIGHEST)  # dz / d a_i
        if i > 0:
            d = d * (pre[i - 1] > 0)  # ReLU'
    return jnp.sqrt(sq + jnp.sum((d * mask) ** 2, axis=1))


def ads_mlp_tapped(model: AdsMLP, params, x, tape: Tape, *, truncated: bool = False) -> jax.Array:
    """:class:`AdsMLP`'s logit ``(n,)`` through a :class:`~labeldp.dpsgd.tape.Tape` (the fast
    DP-SGD step's forward pass): the same numbers as ``model.apply(params, x, truncated)``.
    ``params`` is the variables dict ``{"params": ...}`` that ``model.apply`` takes."""
    p = params["params"]
    x_num, x_cat = x
    x_num = x_num.astype(jnp.float32)
    if truncated and any(model.sensitive_num):
        x_num = x_num * jnp.asarray([0.0 if s else 1.0 for s in model.sensitive_num], jnp.float32)
    parts = [x_num]
    for j in range(len(model.vocab_sizes)):
        emb = tape.embed(("params", f"embed_{j}"), x_cat[..., j], p[f"embed_{j}"])
        parts.append(emb * 0.0 if (truncated and model.zeroed_embedding(j)) else emb)
    h = jnp.concatenate(parts, axis=-1)
    for i in range(len(model.hidden)):
        h = jax.nn.relu(tape.dense(("params", f"Dense_{i}"), h, p[f"Dense_{i}"]))
    last = len(model.hidden)
    return tape.dense(("params", f"Dense_{last}"), h, p[f"Dense_{last}"])[..., 0]


def two_class_logits(model: AdsMLP, *, truncated: bool = False):
    """``f(params, x, rng=None) -> (n, 2)`` logits (0, z) for the K-class engine (module docstring);
    ``truncated``: 002's truncated model (sensitive features zeroed).

    The function carries ``tapped(params, x, tape)``, the same logits through the fast DP-SGD
    step's tape (:func:`ads_mlp_tapped`), and ``column_norms(params, x, mask=None) -> (n, 2)``, the norms of the
    per-class cross-entropy gradients LabelDP-Pro's projection clips and scales by
    (:func:`labeldp.denoisers.hull_converged.column_norms` uses it): on (0, z) the gradient for
    class 0 is ``sigmoid(z) grad z`` and for class 1 ``(sigmoid(z) - 1) grad z``, so both follow
    from one :func:`logit_gradient_norms` per row.
    """

    def logits(params, x, rng=None):
        z = model.apply(params, x, truncated)
        return jnp.stack([jnp.zeros_like(z), z], axis=-1)

    def column_norms(params, x, mask=None):
        z = model.apply(params, x, truncated)
        norm = logit_gradient_norms(model, params, x, truncated=truncated)
        p1 = jax.nn.sigmoid(z)
        out = jnp.stack([p1 * norm, (1.0 - p1) * norm], axis=-1)
        return out if mask is None else out * jnp.asarray(mask, out.dtype)[:, None]

    def tapped(params, x, tape):
        z = ads_mlp_tapped(model, params, x, tape, truncated=truncated)
        return jnp.stack([jnp.zeros_like(z), z], axis=-1)

    logits.column_norms = jax.jit(column_norms)
    logits.tapped = tapped
    return logits
