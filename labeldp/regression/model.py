"""The MLPs of 003 Appendix G for tabular regression, in Flax.

003 Appendix G: Criteo Sponsored Search -- categorical features through embeddings of
dimension 4, then an MLP with hidden layers 64 and 32; 1940 Census -- embeddings of dimension
8, hidden layers 128 and 64. Numerical features enter as they are (standardised by the
preparation). One linear output (the predicted label).

The output bias starts at the mean of the (randomized) training labels: a post-processing of
already-private labels, so it costs no privacy, and it spares RMSProp the long drift towards
labels of scale 100 (Criteo's sales amounts). The paper does not say how it initialised.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp

__all__ = ["TabularMLP", "RegressionModelConfig", "MODEL_FOR_DATASET", "model_for"]


@dataclasses.dataclass(frozen=True)
class RegressionModelConfig:
    """Architecture of a :class:`TabularMLP`.

    Attributes:
      hidden: widths of the hidden ReLU layers.
      embedding_dim: dimension of every categorical embedding.
      source: where the architecture is stated (paper section, or "project choice").
    """

    hidden: tuple[int, ...]
    embedding_dim: int
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"hidden": list(self.hidden), "embedding_dim": self.embedding_dim, "source": self.source}


MODEL_FOR_DATASET: Mapping[str, RegressionModelConfig] = {
    "criteo_search": RegressionModelConfig((64, 32), 4, "003 Appendix G (Criteo Sponsored Search)"),
    "census1940": RegressionModelConfig((128, 64), 8, "003 Appendix G (US Census 1940)"),
    # A stand-in with only numerical features: the Census architecture (project choice).
    "rand_hie": RegressionModelConfig((128, 64), 8, "project choice: the 003 Census MLP (no paper model)"),
}


def model_for(dataset: str) -> RegressionModelConfig:
    """The architecture for ``dataset``; a clear error naming the known ones otherwise."""
    try:
        return MODEL_FOR_DATASET[dataset]
    except KeyError:
        raise ValueError(
            f"no regression model for dataset {dataset!r}; add one to "
            f"labeldp/regression/model.py MODEL_FOR_DATASET (known: {sorted(MODEL_FOR_DATASET)})"
        ) from None


class TabularMLP(nn.Module):
    """Embeddings for every categorical column, concatenated with the numerical columns, then
    ReLU layers of widths ``hidden`` and one linear output.

    Attributes:
      hidden: hidden layer widths.
      vocab_sizes: vocabulary size of each categorical column (index 0 = missing / unseen).
      embedding_dim: embedding dimension.
      output_bias: initial output bias (the mean training label).
    """

    hidden: tuple[int, ...]
    vocab_sizes: tuple[int, ...]
    embedding_dim: int
    output_bias: float = 0.0

    @nn.compact
    def __call__(self, x_num: jax.Array, x_cat: jax.Array) -> jax.Array:
        parts = [x_num.astype(jnp.float32)]
        for j, size in enumerate(self.vocab_sizes):
            parts.append(nn.Embed(int(size), self.embedding_dim, name=f"embed_{j}")(x_cat[:, j]))
        h = jnp.concatenate(parts, axis=-1)
        for width in self.hidden:
            h = nn.relu(nn.Dense(width)(h))
        out = nn.Dense(1, bias_init=nn.initializers.constant(self.output_bias))(h)
        return out[:, 0]
