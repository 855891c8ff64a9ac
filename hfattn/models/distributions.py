"""Distribution functions p: energies ``[..., Tq, Tk]`` -> attention weights ``[..., Tq, Tk]``.

Each function has the signature ``fn(scores, mask=None) -> weights`` and works over the
last dimension (the keys). ``mask`` is a keep mask (see :mod:`.masking`) broadcastable to
``scores``. Masked keys get weight exactly 0, and a query row whose keys are all masked
gets all-zero weights (never NaN), in every distribution and in their gradients.

- ``softmax``: ``p_i = exp(e_i) / sum_j exp(e_j)`` (the default).
- ``sparsemax`` (Martins & Astudillo, 2016): ``p = argmin_{p in simplex} ||p - e||^2``,
  ``p_i = [e_i - tau]_+`` with ``tau`` such that ``sum_i p_i = 1``.
- ``entmax15`` (1.5-entmax, Peters et al., 2019): ``p_i = [e_i / 2 - tau]_+^2`` with
  ``tau`` such that ``sum_i p_i = 1``.
- ``sigmoid``: ``p_i = 1 / (1 + exp(-e_i))`` per key, **not normalised** (rows need not
  sum to 1): each key is gated independently.
- ``normalize`` (Nadaraya-Watson): for scores that are already non-negative weights
  (the ``gaussian``, ``boxcar`` and ``kernel`` scores), ``p_i = w_i / sum_j w_j``; a row
  whose weights sum to 0 (e.g. a boxcar with no key within reach) falls back to uniform
  weights over its unmasked keys.

This module imports only torch and siblings (remote-code safe).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .masking import to_keep_mask

# Energies below max(e) - _OUTSIDE_SUPPORT_MARGIN get weight 0 in sparsemax (which zeroes
# everything below max - 1) and 1.5-entmax (below max - 2); clamping them there changes
# nothing and removes -inf from the sort-based algorithms.
_OUTSIDE_SUPPORT_MARGIN = 3.0


def _apply_mask(
    scores: torch.Tensor, mask: torch.Tensor | None, fill: float
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """Fill masked scores with ``fill``; return (scores, keep, row_has_key).

    Rows with no unmasked key are left unfilled (so every function stays finite on them)
    and are zeroed afterwards by :func:`_zero_empty_rows`.
    """
    if mask is None:
        return scores, None, None
    keep = to_keep_mask(mask)
    shape = torch.broadcast_shapes(scores.shape, keep.shape)
    scores, keep = scores.expand(shape), keep.expand(shape)
    row_has_key = keep.any(dim=-1, keepdim=True)
    return scores.masked_fill(~keep & row_has_key, fill), keep, row_has_key


def _zero_empty_rows(weights: torch.Tensor, row_has_key: torch.Tensor | None) -> torch.Tensor:
    """Set the weights of rows without any unmasked key to 0."""
    if row_has_key is None:
        return weights
    return weights.masked_fill(~row_has_key, 0.0)


def softmax(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax over the keys: ``p_i = exp(e_i) / sum_j exp(e_j)`` (masked keys: ``e = -inf``)."""
    scores, _, row_has_key = _apply_mask(scores, mask, float("-inf"))
    return _zero_empty_rows(torch.softmax(scores, dim=-1), row_has_key)


def sigmoid(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Independent gates ``p_i = sigma(e_i) = 1 / (1 + exp(-e_i))``; rows are NOT normalised."""
    scores, _, row_has_key = _apply_mask(scores, mask, float("-inf"))
    return _zero_empty_rows(torch.sigmoid(scores), row_has_key)


def _clamp_outside_support(scores: torch.Tensor) -> torch.Tensor:
    """Clamp energies at ``max - margin`` (they have zero weight anyway; removes -inf)."""
    top = scores.max(dim=-1, keepdim=True).values
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top)).detach()
    return torch.maximum(scores, top - _OUTSIDE_SUPPORT_MARGIN)


def _sorted_with_ranks(scores: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores sorted in decreasing order along the keys, and the ranks 1..Tk broadcastable."""
    z_sorted = torch.sort(scores, dim=-1, descending=True).values
    ranks = torch.arange(1, scores.shape[-1] + 1, device=scores.device, dtype=scores.dtype)
    return z_sorted, ranks


def _sparsemax_unmasked(scores: torch.Tensor) -> torch.Tensor:
    """Exact sort-based sparsemax (Held et al. / Martins & Astudillo, Algorithm 1).

    With ``z`` sorted decreasingly, the support size is ``k* = max{k : 1 + k z_(k) >
    sum_{j<=k} z_(j)}``, ``tau = (sum_{j<=k*} z_(j) - 1) / k*`` and ``p = [z - tau]_+``.
    Autograd through the gathered cumulative sum gives the exact (piecewise-linear) Jacobian.
    """
    z = _clamp_outside_support(scores)
    z_sorted, ranks = _sorted_with_ranks(z)
    cumulative = z_sorted.cumsum(dim=-1)
    support = 1 + ranks * z_sorted > cumulative
    support_size = support.sum(dim=-1, keepdim=True)
    tau = (cumulative.gather(-1, support_size - 1) - 1) / support_size.to(z.dtype)
    return torch.clamp(z - tau, min=0)


def sparsemax(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Sparsemax: the Euclidean projection of the energies onto the probability simplex.

    ``p_i = [e_i - tau]_+`` with ``sum_i p_i = 1``; keys with ``e_i <= tau`` get exactly 0.
    """
    scores, _, row_has_key = _apply_mask(scores, mask, float("-inf"))
    return _zero_empty_rows(_sparsemax_unmasked(scores), row_has_key)


class _Entmax15Function(torch.autograd.Function):
    """1.5-entmax with the closed-form backward of Peters et al. (2019).

    Forward: exact sort-based threshold. With ``z = e / 2`` sorted decreasingly and, for
    each candidate support size ``k``, ``mean_k`` and ``ss_k = sum_{j<=k} (z_(j) - mean_k)^2``,
    ``tau_k = mean_k - sqrt((1 - ss_k) / k)``; the support is ``{k : tau_k <= z_(k)}`` and
    ``p = [z - tau_{k*}]_+^2``. Backward: with ``s = sqrt(p)``,
    ``dL/de = s * g - s * (s . g) / sum(s)`` where ``g = dL/dp``.
    """

    @staticmethod
    def forward(ctx, scores: torch.Tensor) -> torch.Tensor:
        z = _clamp_outside_support(scores) / 2
        z = z - z.max(dim=-1, keepdim=True).values
        z_sorted, ranks = _sorted_with_ranks(z)
        mean = z_sorted.cumsum(dim=-1) / ranks
        mean_sq = (z_sorted**2).cumsum(dim=-1) / ranks
        ss = ranks * (mean_sq - mean**2)
        delta = torch.clamp((1 - ss) / ranks, min=0)
        tau_candidates = mean - torch.sqrt(delta)
        support_size = (tau_candidates <= z_sorted).sum(dim=-1, keepdim=True)
        tau = tau_candidates.gather(-1, support_size - 1)
        weights = torch.clamp(z - tau, min=0) ** 2
        ctx.save_for_backward(weights)
        return weights

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor) -> torch.Tensor:
        (weights,) = ctx.saved_tensors
        s = weights.sqrt()
        grad = grad_output * s
        correction = grad.sum(dim=-1, keepdim=True) / s.sum(dim=-1, keepdim=True)
        return grad - correction * s


def entmax15(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """1.5-entmax: ``p_i = [e_i / 2 - tau]_+^2`` with ``sum_i p_i = 1``.

    Between softmax (alpha = 1, dense) and sparsemax (alpha = 2): keys whose energy is more
    than 2 below the maximum always get exactly 0.
    """
    scores, _, row_has_key = _apply_mask(scores, mask, float("-inf"))
    return _zero_empty_rows(_Entmax15Function.apply(scores), row_has_key)


def normalize(scores: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Nadaraya-Watson normalisation of non-negative weights: ``p_i = w_i / sum_j w_j``.

    A row whose (unmasked) weights sum to 0 falls back to uniform weights over its
    unmasked keys; a row whose keys are all masked stays all-zero.
    """
    weights, keep, row_has_key = _apply_mask(scores, mask, 0.0)
    if keep is None:
        keep = torch.ones_like(weights, dtype=torch.bool)
    total = weights.sum(dim=-1, keepdim=True)
    positive = total > 0
    normalised = weights / torch.where(positive, total, torch.ones_like(total))
    uniform = keep.to(weights.dtype)
    uniform = uniform / uniform.sum(dim=-1, keepdim=True).clamp_min(1)
    return _zero_empty_rows(torch.where(positive, normalised, uniform), row_has_key)


DISTRIBUTIONS: dict[str, Callable[..., torch.Tensor]] = {
    "softmax": softmax,
    "sparsemax": sparsemax,
    "entmax15": entmax15,
    "sigmoid": sigmoid,
    "normalize": normalize,
}


def get_distribution(name: str) -> Callable[..., torch.Tensor]:
    """Return the distribution function registered as ``name`` in :data:`DISTRIBUTIONS`."""
    try:
        return DISTRIBUTIONS[name]
    except KeyError:
        raise ValueError(
            f"unknown attention distribution {name!r}; valid names: {', '.join(DISTRIBUTIONS)}"
        ) from None
