"""The contract of every attention score a(q, k) (:class:`AttentionScore`: queries
``[..., Tq, dq]``, keys ``[..., Tk, dk]`` -> ``[..., Tq, Tk]``) and what the scores share: the
pairwise differences, distances and dot products of queries and keys, and the activations a
score may apply (:data:`ACTIVATIONS`). The scores themselves, by name:
:mod:`hfattn.models.scores`.

This module imports only torch (remote-code safe).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

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


__all__ = [
    "ACTIVATIONS",
    "AttentionScore",
    "get_activation",
    "pairwise_difference",
    "pairwise_distance",
    "pairwise_dot",
]
