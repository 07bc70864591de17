"""The two-branch neural collaborative filtering network of 001 Table 3 (MovieLens-1M).

001 Appendix B: "For the MovieLens experiment, we adopt a two branch neural networks from the neural
collaborative filtering algorithm [He et al. 2017]. We simply treat the ratings as categorical labels ...
During evaluation, we output the average rating according to the softmax probabilities." He et al.'s
NeuMF has two branches over a user and an item embedding each: generalized matrix factorization (the
element-wise product of the two embeddings) and an MLP over their concatenation, joined by one output
layer. 001 gives no sizes; ours are He et al.'s defaults: 8 predictive factors in the GMF branch, MLP
embeddings of 32 and a tower 64 -> 32 -> 16 -> 8 with ReLU; the output layer has one logit per rating.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

__all__ = ["NeuralCollaborativeFiltering"]


class NeuralCollaborativeFiltering(nn.Module):
    """NeuMF (He et al. 2017) with a softmax over the K ratings (001 Table 3).

    Inputs are ``(n, 2)`` (user index, item index), integers or floats holding integers (a prepared
    ratings dataset's ``x`` after :func:`labeldp.training.to_float_images`); outputs ``(n, K)`` logits.

    Attributes:
      num_classes: K, the number of ratings.
      num_users, num_items: embedding table sizes (the prepared dataset's ``num_users`` / ``num_movies``).
      gmf_factors: the GMF branch's embedding size.
      mlp_embedding: each MLP-branch embedding's size.
      mlp_layers: the MLP tower's widths.
      padding: unused (the model registry's common signature; there is no convolution).
    """

    num_classes: int = 5
    num_users: int = 1
    num_items: int = 1
    gmf_factors: int = 8
    mlp_embedding: int = 32
    mlp_layers: tuple[int, ...] = (64, 32, 16, 8)
    padding: str = "SAME"

    #: mixup (001 Appendix B) mixes inputs; an id pair cannot be mixed (training refuses mixup > 0)
    MIXES_INPUTS = False

    @nn.compact
    def __call__(self, x: jax.Array, *, train: bool = False) -> jax.Array:
        del train  # no dropout
        ids = jnp.round(x).astype(jnp.int32)
        user, item = ids[:, 0], ids[:, 1]
        gmf = nn.Embed(self.num_users, self.gmf_factors, name="gmf_user")(user) * nn.Embed(
            self.num_items, self.gmf_factors, name="gmf_item"
        )(item)
        h = jnp.concatenate(
            [
                nn.Embed(self.num_users, self.mlp_embedding, name="mlp_user")(user),
                nn.Embed(self.num_items, self.mlp_embedding, name="mlp_item")(item),
            ],
            axis=-1,
        )
        for width in self.mlp_layers:
            h = nn.relu(nn.Dense(width)(h))
        return nn.Dense(self.num_classes, name="output")(jnp.concatenate([gmf, h], axis=-1))
