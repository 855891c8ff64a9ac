"""Attention scoring functions a(q, k): queries ``[..., Tq, dq]``, keys ``[..., Tk, dk]``
-> ``[..., Tq, Tk]``.

Every score is an ``nn.Module`` subclass of :class:`AttentionScore`, registered by name in
:data:`SCORES` and built with :func:`build_score`. Leading dimensions (batch, heads, ...)
broadcast between queries and keys. Learnable parameters act on the feature dimension
only, so one score module serves every head of a multi-head layer.

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

Keys can be pre-processed once per source sequence with :meth:`AttentionScore.precompute_keys`
(e.g. Bahdanau's ``W_k k``) and scored repeatedly with :meth:`AttentionScore.score_precomputed`.

This module imports only torch and siblings (remote-code safe).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from .score_names import SCORE_NAMES

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "tanh": torch.tanh,
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
    "gelu": nn.functional.gelu,
    "identity": lambda x: x,
}


def get_activation(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """Return the activation function ``name`` from :data:`ACTIVATIONS`."""
    try:
        return ACTIVATIONS[name]
    except KeyError:
        raise ValueError(
            f"unknown activation {name!r}; valid names: {', '.join(ACTIVATIONS)}"
        ) from None


def pairwise_difference(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """All query-key differences: ``D[..., i, j, :] = q_i - k_j``, shape ``[..., Tq, Tk, d]``."""
    return query.unsqueeze(-2) - key.unsqueeze(-3)


def pairwise_distance(query: torch.Tensor, key: torch.Tensor, p: float = 2.0) -> torch.Tensor:
    """Minkowski distances ``d_p(q_i, k_j) = (sum_l |q_il - k_jl|^p)^(1/p)``, shape
    ``[..., Tq, Tk]``.

    ``p = 1`` is Manhattan, ``p = 2`` Euclidean and ``p = inf`` Chebyshev (``max_l |.|``).
    The gradient at ``q = k`` is taken as 0.
    """
    return torch.linalg.vector_norm(pairwise_difference(query, key), ord=p, dim=-1)


def pairwise_dot(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """Batched dot products ``E[..., i, j] = q_i . k_j`` (``Q K^T``)."""
    return torch.matmul(query, key.transpose(-1, -2))


class AttentionScore(nn.Module):
    """Base class of the scoring functions ``a(q, k)``.

    Subclasses set :attr:`name`, optionally :attr:`output_kind` / :attr:`same_dim`, and
    implement :meth:`score_precomputed`; they may override :meth:`precompute_keys`.
    ``forward(q, k) = score_precomputed(q, precompute_keys(k))``.
    """

    name: str = ""
    output_kind: str = "energy"  # "energy" (any real) or "weight" (non-negative)
    same_dim: bool = False  # the formula needs query_dim == key_dim

    def __init__(self, query_dim: int, key_dim: int | None = None):
        super().__init__()
        key_dim = query_dim if key_dim is None else key_dim
        if self.same_dim and query_dim != key_dim:
            raise ValueError(
                f"score {self.name!r} needs query_dim == key_dim; got query_dim={query_dim}, "
                f"key_dim={key_dim} (use 'general', 'additive' or 'deep' for different sizes)"
            )
        self.query_dim = query_dim
        self.key_dim = key_dim

    @property
    def default_distribution(self) -> str:
        """``"softmax"`` for energies, ``"normalize"`` (Nadaraya-Watson) for weights."""
        return "softmax" if self.output_kind == "energy" else "normalize"

    def check_inputs(self, query: torch.Tensor, key: torch.Tensor) -> None:
        """Raise ``ValueError`` naming both shapes if the feature sizes do not match the score."""
        if query.shape[-1] != self.query_dim or key.shape[-1] != self.key_dim:
            raise ValueError(
                f"score {self.name!r} expects query [..., Tq, {self.query_dim}] and key "
                f"[..., Tk, {self.key_dim}]; got query shape {tuple(query.shape)} and key "
                f"shape {tuple(key.shape)}"
            )

    def precompute_keys(self, key: torch.Tensor) -> torch.Tensor:
        """Key-only part of the score, computable once per source sequence (identity here)."""
        return key

    def score_precomputed(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        """Scores of ``query`` against keys already passed through :meth:`precompute_keys`."""
        raise NotImplementedError

    def forward(self, query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
        """Return the scores ``a(q_i, k_j)`` as a ``[..., Tq, Tk]`` tensor."""
        self.check_inputs(query, key)
        return self.score_precomputed(query, self.precompute_keys(key))

    def extra_repr(self) -> str:
        return f"query_dim={self.query_dim}, key_dim={self.key_dim}"


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


# --- kernels (non-negative weights) ---------------------------------------------------


class GaussianScore(AttentionScore):
    """Gaussian kernel (Nadaraya-Watson): ``K(q, k) = exp(-||q - k||^2 / (2 h^2))``,
    ``h = bandwidth``.

    With ``h = 1`` this is the ``exp(-1/2 ||q - k||^2)`` of Sánchez Arrabal, *Las matemáticas de
    la atención*.
    """

    name = "gaussian"
    output_kind = "weight"
    same_dim = True

    def __init__(self, query_dim: int, key_dim: int | None = None, bandwidth: float = 1.0):
        super().__init__(query_dim, key_dim)
        self.bandwidth = float(bandwidth)

    def score_precomputed(self, query, keys):
        squared = pairwise_distance(query, keys).square()
        return torch.exp(-0.5 * squared / self.bandwidth**2)


class BoxcarScore(AttentionScore):
    """Boxcar kernel: ``K(q, k) = 1/2 * 1(||q - k|| <= h)``, ``h = width`` (default 1)."""

    name = "boxcar"
    output_kind = "weight"
    same_dim = True

    def __init__(self, query_dim: int, key_dim: int | None = None, width: float = 1.0):
        super().__init__(query_dim, key_dim)
        self.width = float(width)

    def score_precomputed(self, query, keys):
        inside = pairwise_distance(query, keys) <= self.width
        return 0.5 * inside.to(query.dtype)


class KernelScore(AttentionScore):
    """Generalized kernel ``a(q, k) = phi(q)^T phi(k)`` with Performer positive random features.

    ``phi(x) = exp(W x' - ||x'||^2 / 2) / sqrt(m)``, ``x' = s x``, rows of ``W`` (``m =
    num_features`` of them) drawn from ``N(0, I_d)`` once (a persistent buffer), so that
    ``E[phi(q)^T phi(k)] = exp(s^2 q^T k)``; the default ``s = d^(-1/4)`` makes the
    normalised weights approximate ``softmax(q^T k / sqrt(d))`` (Choromanski et al., 2021).

    The weights are non-negative; :meth:`linear_attention` computes
    ``D^-1 phi(Q) (phi(K)^T V)`` with ``D = diag(phi(Q) phi(K)^T 1)`` in ``O(T m d)`` time and
    memory, never forming the ``Tq x Tk`` matrix.
    """

    name = "kernel"
    output_kind = "weight"
    same_dim = True

    def __init__(
        self,
        query_dim: int,
        key_dim: int | None = None,
        num_features: int = 64,
        scale: float | None = None,
        seed: int | None = 0,
    ):
        super().__init__(query_dim, key_dim)
        self.num_features = int(num_features)
        self.scale = self.query_dim**-0.25 if scale is None else float(scale)
        generator = None if seed is None else torch.Generator().manual_seed(seed)
        self.register_buffer(
            "projection", torch.randn(self.num_features, self.query_dim, generator=generator)
        )

    def feature_map(self, x: torch.Tensor) -> torch.Tensor:
        """Positive random features ``phi(x) = exp(W x' - ||x'||^2 / 2) / sqrt(m)``,
        ``[..., T, m]``.

        Computed as ``exp(x (sW)^T - (s^2 ||x||^2 + log m) / 2)`` with in-place ``sub_``/``exp_``
        so that only one ``[..., T, m]`` tensor is allocated.
        """
        projection = self.projection.to(x.dtype) * self.scale
        offset = 0.5 * (
            self.scale**2 * x.square().sum(-1, keepdim=True) + math.log(self.num_features)
        )
        return torch.matmul(x, projection.T).sub_(offset).exp_()

    def precompute_keys(self, key):
        return self.feature_map(key)

    def score_precomputed(self, query, keys):
        return pairwise_dot(self.feature_map(query), keys)

    def linear_attention(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        key_padding_mask: torch.Tensor | None = None,
        causal: bool = False,
        eps: float = 1e-12,
        chunk_size: int = 256,
    ) -> torch.Tensor:
        """Normalised kernel attention in linear time: ``out_i = phi(q_i)^T S / phi(q_i)^T z``.

        Non-causal: ``S = sum_j phi(k_j) v_j^T`` and ``z = sum_j phi(k_j)``, accumulated over
        blocks of ``chunk_size`` keys and applied to blocks of queries, so the feature maps
        never exist for the whole sequence at once (memory ``O(chunk m)`` besides the output,
        and a working set that stays in cache: time grows linearly with T). Causal: the sums
        run over ``j <= i`` (prefix sums, ``O(T m d_v)`` memory). ``key_padding_mask``
        (``[..., Tk]``, True/1 = keep) removes padded keys. Equals :meth:`forward` followed by
        the ``normalize`` distribution and ``weights @ value``.
        """
        self.check_inputs(query, key)
        if causal:
            if query.shape[-2] != key.shape[-2]:
                raise ValueError(
                    f"causal linear attention needs Tq == Tk; got query shape "
                    f"{tuple(query.shape)} and key shape {tuple(key.shape)}"
                )
            phi_q, phi_k = self.feature_map(query), self._masked_key_features(key, key_padding_mask)
            state = torch.cumsum(phi_k.unsqueeze(-1) * value.unsqueeze(-2), dim=-3)
            normaliser = torch.cumsum(phi_k, dim=-2)
            numerator = torch.einsum("...tm,...tmv->...tv", phi_q, state)
            denominator = (phi_q * normaliser).sum(-1, keepdim=True)
            return numerator / denominator.clamp_min(eps)
        # [V, 1]: one product gives the numerator and the normaliser z together
        with_ones = torch.cat([value, value.new_ones(*value.shape[:-1], 1)], dim=-1)
        state = 0
        for start in range(0, key.shape[-2], chunk_size):
            block = slice(start, start + chunk_size)
            mask = None if key_padding_mask is None else key_padding_mask[..., block]
            phi_k = self._masked_key_features(key[..., block, :], mask)
            state = state + torch.matmul(phi_k.transpose(-1, -2), with_ones[..., block, :])
        both = torch.cat(
            [
                torch.matmul(self.feature_map(query[..., start : start + chunk_size, :]), state)
                for start in range(0, query.shape[-2], chunk_size)
            ],
            dim=-2,
        )
        return both[..., :-1] / both[..., -1:].clamp_min(eps)

    def _masked_key_features(self, key: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """``phi(k)`` with the rows of padded keys (``mask`` 0 / False) set to zero."""
        phi_k = self.feature_map(key)
        return phi_k if mask is None else phi_k * mask.to(phi_k.dtype).unsqueeze(-1)


# --- distances (negative energies) ----------------------------------------------------


class DistanceScore(AttentionScore):
    """Negative Minkowski distance ``a(q, k) = -d_p(T q, T k)`` for a feature map ``T``.

    Subclasses choose ``p`` and ``T`` (identity by default); see :func:`pairwise_distance`.
    """

    same_dim = True
    p: float = 2.0

    def transform(self, x: torch.Tensor) -> torch.Tensor:
        """Feature map applied to queries and keys before the distance (identity)."""
        return x

    def precompute_keys(self, key):
        return self.transform(key)

    def score_precomputed(self, query, keys):
        return -pairwise_distance(self.transform(query), keys, p=self.p)


class EuclideanScore(DistanceScore):
    """Negative Euclidean distance: ``a(q, k) = -sqrt(sum_l (q_l - k_l)^2)``."""

    name = "euclidean"


class ManhattanScore(DistanceScore):
    """Negative Manhattan distance: ``a(q, k) = -sum_l |q_l - k_l|``."""

    name = "manhattan"
    p = 1.0


class ChebyshevScore(DistanceScore):
    """Negative Chebyshev distance: ``a(q, k) = -max_l |q_l - k_l|``."""

    name = "chebyshev"
    p = float("inf")


class MinkowskiScore(DistanceScore):
    """Negative Minkowski distance: ``a(q, k) = -(sum_l |q_l - k_l|^p)^(1/p)``, ``p >= 1``."""

    name = "minkowski"

    def __init__(self, query_dim: int, key_dim: int | None = None, p: float = 3.0):
        super().__init__(query_dim, key_dim)
        if not p >= 1:
            raise ValueError(f"score 'minkowski' needs p >= 1 (a metric); got p={p}")
        self.p = float(p)


class StdEuclideanScore(DistanceScore):
    """Negative standardized Euclidean distance: ``a(q, k) = -sqrt(sum_l (q_l - k_l)^2 / s_l^2)``.

    The per-feature scales ``s_l = exp(log_scale_l) > 0`` are learned (initialised to 1).
    """

    name = "std_euclidean"

    def __init__(self, query_dim: int, key_dim: int | None = None):
        super().__init__(query_dim, key_dim)
        self.log_scale = nn.Parameter(torch.zeros(self.query_dim))

    def transform(self, x):
        return x * torch.exp(-self.log_scale)


class MahalanobisScore(DistanceScore):
    """Negative Mahalanobis distance: ``a(q, k) = -sqrt((q - k)^T S^-1 (q - k))``.

    ``S^-1 = L L^T`` with ``L`` lower-triangular with a positive (exp-parametrised)
    diagonal, hence positive definite; initialised to the identity. Computed as
    ``||L^T (q - k)|| = ||L^T q - L^T k||``.
    """

    name = "mahalanobis"

    def __init__(self, query_dim: int, key_dim: int | None = None):
        super().__init__(query_dim, key_dim)
        self.lower = nn.Parameter(torch.zeros(self.query_dim, self.query_dim))

    def cholesky_factor(self) -> torch.Tensor:
        """``L = tril(raw, -1) + diag(exp(diag(raw)))``."""
        return torch.tril(self.lower, diagonal=-1) + torch.diag(torch.exp(self.lower.diagonal()))

    def precision(self) -> torch.Tensor:
        """The learned inverse covariance ``S^-1 = L L^T``."""
        factor = self.cholesky_factor()
        return factor @ factor.T

    def transform(self, x):
        return torch.matmul(x, self.cholesky_factor().to(x.dtype))


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
