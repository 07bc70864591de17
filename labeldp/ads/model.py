"""The binary-label ads model of 000 Appendix D.3 / 002 Appendix A, in Flax.

Every categorical feature goes through an embedding, the embeddings are concatenated with the
numerical features, then an MLP with hidden layers 128 and 64 (ReLU) and ONE logit, trained with
binary cross-entropy (000 D.3: "embeddings of dimension 8 ... MLP 128-64"; 002 Appendix A: the
same MLP, embedding size int[2 V^0.25] for pCTR's categorical features of vocabulary size V).

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

__all__ = ["AdsModelConfig", "AdsMLP", "MODEL_FOR_DATASET", "model_for", "embedding_dims", "two_class_logits"]


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
    "criteo_pctr": AdsModelConfig((128, 64), "2V^0.25", "002 Appendix A (pCTR)"),
}


def model_for(dataset: str) -> AdsModelConfig:
    """The architecture for ``dataset``; a clear error naming the known ones otherwise."""
    try:
        return MODEL_FOR_DATASET[dataset]
    except KeyError:
        raise ValueError(f"no ads model for dataset {dataset!r}; add one to labeldp/ads/model.py "
                         f"MODEL_FOR_DATASET (known: {sorted(MODEL_FOR_DATASET)})") from None


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
    def __call__(self, x, truncated: bool = False) -> jax.Array:
        x_num, x_cat = x
        x_num = x_num.astype(jnp.float32)
        if truncated and any(self.sensitive_num):
            keep = jnp.asarray([0.0 if s else 1.0 for s in self.sensitive_num], jnp.float32)
            x_num = x_num * keep
        parts = [x_num]
        for j, (size, dim) in enumerate(zip(self.vocab_sizes, self.embed_dims)):
            emb = nn.Embed(int(size), int(dim), name=f"embed_{j}")(x_cat[..., j])
            if truncated and j < len(self.sensitive_cat) and self.sensitive_cat[j]:
                emb = jnp.zeros_like(emb)
            parts.append(emb)
        h = jnp.concatenate(parts, axis=-1)
        for width in self.hidden:
            h = nn.relu(nn.Dense(int(width))(h))
        out = nn.Dense(1, bias_init=nn.initializers.constant(self.output_bias))(h)
        return out[..., 0]


def two_class_logits(model: AdsMLP, *, truncated: bool = False):
    """``f(params, x, rng=None) -> (n, 2)`` logits (0, z) for the K-class engine (module docstring);
    ``truncated``: 002's truncated model (sensitive features zeroed)."""

    def logits(params, x, rng=None):
        z = model.apply(params, x, truncated)
        return jnp.stack([jnp.zeros_like(z), z], axis=-1)

    return logits
