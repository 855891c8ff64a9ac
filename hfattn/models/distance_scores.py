"""The distance scores (:mod:`hfattn.models.scores`): negative Minkowski distances
``a(q, k) = -d_p(T q, T k)``, used as energies, so that the closest key gets the largest one,
with a fixed or learned feature map ``T`` (standardized Euclidean, Mahalanobis).

This module imports only torch and siblings (remote-code safe).
"""

from __future__ import annotations

import torch
from torch import nn

from .score_base import AttentionScore, pairwise_distance


class DistanceScore(AttentionScore):
    """Negative Minkowski distance ``a(q, k) = -d_p(T q, T k)`` for a feature map ``T``.

    Subclasses choose ``p`` and ``T`` (identity by default); see
    :func:`~hfattn.models.score_base.pairwise_distance`.
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


__all__ = [
    "ChebyshevScore",
    "DistanceScore",
    "EuclideanScore",
    "MahalanobisScore",
    "ManhattanScore",
    "MinkowskiScore",
    "StdEuclideanScore",
]
