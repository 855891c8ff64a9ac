"""Attention scoring functions a(q, k): queries ``[..., Tq, dq]``, keys ``[..., Tk, dk]``
-> ``[..., Tq, Tk]``.

Every score is an ``nn.Module`` subclass of :class:`~hfattn.models.score_base.AttentionScore`,
registered by name in :data:`SCORES` and built with :func:`build_score`: the dot-product and
feed-forward scores here, the kernels in :mod:`hfattn.models.kernel_scores` and the distances in
:mod:`hfattn.models.distance_scores`. Leading dimensions (batch, heads, ...) broadcast between
queries and keys. Learnable parameters act on the feature dimension only, so one score module
serves every head of a multi-head layer.

Two kinds of output:

- **energies** (``output_kind = "energy"``): any real number, turned into weights by a
  distribution function (softmax by default). Distances are used as *negative* energies,
  ``e = -d(q, k)``: the closest key gets the largest energy, and with the softmax
  ``alpha_i = exp(-d_i) / sum_j exp(-d_j)`` (Sánchez Arrabal, *Las matemáticas de la
  atención*, lists distances as scores without saying how they enter the softmax; this sign
  is hfattn's documented choice).
- **weights** (``output_kind = "weight"``): the Gaussian, boxcar and random-feature kernels
  are already non-negative similarity weights; their default distribution is
  ``normalize`` (Nadaraya-Watson: divide by the row sum).

Keys can be pre-processed once per source sequence with
:meth:`~hfattn.models.score_base.AttentionScore.precompute_keys` (e.g. Bahdanau's ``W_k k``)
and scored repeatedly with :meth:`~hfattn.models.score_base.AttentionScore.score_precomputed`.

This module imports only torch and siblings (remote-code safe).
"""

from __future__ import annotations

import torch
from torch import nn

from .distance_scores import (
    ChebyshevScore,
    EuclideanScore,
    MahalanobisScore,
    ManhattanScore,
    MinkowskiScore,
    StdEuclideanScore,
)
from .kernel_scores import BoxcarScore, GaussianScore, KernelScore
from .score_base import AttentionScore, get_activation, pairwise_dot
from .score_names import SCORE_NAMES

# --- dot-product family ---------------------------------------------------------------


class DotScore(AttentionScore):
    """Dot product (Luong): ``a(q, k) = q^T k``."""

    name = "dot"
    same_dim = True
    scale: float = 1.0

    def score_precomputed(self, query, keys):
        return pairwise_dot(query, keys) * self.scale


class ScaledDotScore(DotScore):
    """Scaled dot product (Vaswani et al.): ``a(q, k) = q^T k / sqrt(d_k)``.

    ``scale`` overrides the factor ``1 / sqrt(d_k)``.
    """

    name = "scaled_dot"

    def __init__(self, query_dim: int, key_dim: int | None = None, scale: float | None = None):
        super().__init__(query_dim, key_dim)
        self.scale = self.key_dim**-0.5 if scale is None else float(scale)


class CosineScore(AttentionScore):
    """Content-based cosine similarity (Graves et al.): ``a(q, k) = s * q^T k / (||q|| ||k||)``.

    ``scale`` (``s``, default 1) sharpens the softmax, since cosines lie in ``[-1, 1]``.
    """

    name = "cosine"
    same_dim = True

    def __init__(
        self, query_dim: int, key_dim: int | None = None, scale: float = 1.0, eps: float = 1e-8
    ):
        super().__init__(query_dim, key_dim)
        self.scale = float(scale)
        self.eps = float(eps)

    def precompute_keys(self, key):
        return nn.functional.normalize(key, dim=-1, eps=self.eps)

    def score_precomputed(self, query, keys):
        query = nn.functional.normalize(query, dim=-1, eps=self.eps)
        return pairwise_dot(query, keys) * self.scale


class GeneralScore(AttentionScore):
    """General / bilinear (Luong): ``a(q, k) = q^T W k`` with ``W`` of shape ``[dq, dk]``.

    ``W k`` is precomputed once per source sequence.
    """

    name = "general"

    def __init__(self, query_dim: int, key_dim: int | None = None):
        super().__init__(query_dim, key_dim)
        self.weight = nn.Linear(self.key_dim, self.query_dim, bias=False)

    def precompute_keys(self, key):
        return self.weight(key)

    def score_precomputed(self, query, keys):
        return pairwise_dot(query, keys)


class BiasedGeneralScore(AttentionScore):
    """Biased general (Sordoni et al.): ``a(q, k) = k^T (W q + b)``, ``W`` of shape ``[dk, dq]``."""

    name = "biased_general"

    def __init__(self, query_dim: int, key_dim: int | None = None):
        super().__init__(query_dim, key_dim)
        self.weight = nn.Linear(self.query_dim, self.key_dim, bias=True)

    def score_precomputed(self, query, keys):
        return pairwise_dot(self.weight(query), keys)


class ActivatedGeneralScore(GeneralScore):
    """Activated general (Ma et al.): ``a(q, k) = act(q^T W k + b)`` with a scalar bias ``b``."""

    name = "activated_general"

    def __init__(self, query_dim: int, key_dim: int | None = None, activation: str = "tanh"):
        super().__init__(query_dim, key_dim)
        self.activation_name = activation
        self.activation = get_activation(activation)
        self.bias = nn.Parameter(torch.zeros(()))

    def score_precomputed(self, query, keys):
        return self.activation(super().score_precomputed(query, keys) + self.bias)


# --- feed-forward scores --------------------------------------------------------------


class AdditiveScore(AttentionScore):
    """Additive / concat (Bahdanau): ``a(q, k) = v^T act(W_q q + W_k k + b)``, act = tanh.

    Equivalent to ``v^T act(W [q; k] + b)`` with ``W = [W_q, W_k]``. :meth:`precompute_keys`
    returns ``W_k k + b`` so a decoder projects the encoder outputs once per sequence.
    ``hidden_size`` (the size of ``v``) defaults to ``query_dim``.
    """

    name = "additive"
    _output_bias = False

    def __init__(
        self,
        query_dim: int,
        key_dim: int | None = None,
        hidden_size: int | None = None,
        activation: str = "tanh",
    ):
        super().__init__(query_dim, key_dim)
        self.hidden_size = hidden_size or self.query_dim
        self.activation_name = activation
        self.activation = get_activation(activation)
        self.query_proj = nn.Linear(self.query_dim, self.hidden_size, bias=False)
        self.key_proj = nn.Linear(self.key_dim, self.hidden_size, bias=True)
        self.v = nn.Linear(self.hidden_size, 1, bias=self._output_bias)

    def precompute_keys(self, key):
        return self.key_proj(key)

    def hidden(self, features: torch.Tensor) -> torch.Tensor:
        """Layers between the first activation and ``v`` (none for the one-layer form)."""
        return features

    def score_precomputed(self, query, keys):
        features = self.query_proj(query).unsqueeze(-2) + keys.unsqueeze(-3)
        return self.v(self.hidden(self.activation(features))).squeeze(-1)


class DeepScore(AdditiveScore):
    """Deep (stacked additive, Pavlopoulos et al.), ``L = num_layers`` hidden layers:

    ``E1 = act(W_0 k + W_1 q + b_1)``, ``El = act(W_l E(l-1) + b_l)`` for ``l = 2..L``,
    ``a(q, k) = v^T E_L + b_v``.
    """

    name = "deep"
    _output_bias = True

    def __init__(
        self,
        query_dim: int,
        key_dim: int | None = None,
        hidden_size: int | None = None,
        num_layers: int = 2,
        activation: str = "tanh",
    ):
        super().__init__(query_dim, key_dim, hidden_size, activation)
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1 for score 'deep'; got {num_layers}")
        self.layers = nn.ModuleList(
            nn.Linear(self.hidden_size, self.hidden_size) for _ in range(num_layers - 1)
        )

    def hidden(self, features):
        for layer in self.layers:
            features = self.activation(layer(features))
        return features


class LocationScore(AttentionScore):
    """Location-based (Luong): ``a(q) = act(W q)``, from the query alone.

    ``W`` has ``max_length`` rows, one per source position; the scores of the first ``Tk``
    positions are returned (``Tk <= max_length``). act defaults to the identity (Luong's
    ``a_t = softmax(W_a h_t)``).
    """

    name = "location"

    def __init__(
        self,
        query_dim: int,
        key_dim: int | None = None,
        max_length: int = 512,
        activation: str = "identity",
    ):
        super().__init__(query_dim, key_dim)
        self.max_length = int(max_length)
        self.activation_name = activation
        self.activation = get_activation(activation)
        self.weight = nn.Linear(self.query_dim, self.max_length, bias=True)

    def score_precomputed(self, query, keys):
        length = keys.shape[-2]
        if length > self.max_length:
            raise ValueError(
                f"score 'location' was built with max_length={self.max_length} but got "
                f"{length} keys (key shape {tuple(keys.shape)})"
            )
        scores = self.activation(self.weight(query))[..., :length]
        lead = torch.broadcast_shapes(query.shape[:-2], keys.shape[:-2])
        return scores.expand(*lead, query.shape[-2], length)


SCORES: dict[str, type[AttentionScore]] = {
    cls.name: cls
    for cls in (
        DotScore,
        ScaledDotScore,
        GeneralScore,
        BiasedGeneralScore,
        ActivatedGeneralScore,
        AdditiveScore,
        DeepScore,
        LocationScore,
        CosineScore,
        KernelScore,
        GaussianScore,
        BoxcarScore,
        EuclideanScore,
        StdEuclideanScore,
        MinkowskiScore,
        ManhattanScore,
        ChebyshevScore,
        MahalanobisScore,
    )
}
"""Every score class by its ``name`` (the names, torch-free:
:data:`~hfattn.models.score_names.SCORE_NAMES`)."""


def get_score_class(name: str) -> type[AttentionScore]:
    """Return the score class registered as ``name`` in :data:`SCORES`."""
    try:
        return SCORES[name]
    except KeyError:
        raise ValueError(
            f"unknown attention score {name!r}; valid names: {', '.join(SCORE_NAMES)}"
        ) from None


def build_score(name: str, query_dim: int, key_dim: int | None = None, **params) -> AttentionScore:
    """Instantiate the score ``name`` for queries of size ``query_dim`` and keys of size
    ``key_dim``.

    ``params`` are the score's own options (``hidden_size``, ``num_layers``, ``activation``,
    ``max_length``, ``num_features``, ``p``, ``bandwidth``, ``width``, ``scale``, ...).
    """
    cls = get_score_class(name)
    try:
        return cls(query_dim, key_dim, **params)
    except TypeError as error:
        raise ValueError(f"bad parameters {sorted(params)} for score {name!r}: {error}") from None


__all__ = [
    "SCORES",
    "ActivatedGeneralScore",
    "AdditiveScore",
    "BiasedGeneralScore",
    "CosineScore",
    "DeepScore",
    "DotScore",
    "GeneralScore",
    "LocationScore",
    "ScaledDotScore",
    "build_score",
    "get_score_class",
]
