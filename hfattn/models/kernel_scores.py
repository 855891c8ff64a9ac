"""The kernel scores (:mod:`hfattn.models.scores`): non-negative similarity weights
(``output_kind = "weight"``), normalised by default with ``normalize`` (Nadaraya-Watson: divide
by the row sum) rather than a softmax. :class:`KernelScore`'s random features also give
attention in linear time (:meth:`KernelScore.linear_attention`).

This module imports only torch and siblings (remote-code safe).
"""

from __future__ import annotations

import math

import torch

from .score_base import AttentionScore, pairwise_distance, pairwise_dot


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


__all__ = ["BoxcarScore", "GaussianScore", "KernelScore"]
