r"""The continuous cache of Grave, Joulin and Usunier (2017), "Improving Neural Language Models
with a Continuous Cache": attention over the model's own recent hidden states.

A language model that has just read ``BRUTUS:`` a few hundred characters ago should find it
likely again. The cache keeps the last ``size`` hidden states ``h_j`` of the model together
with the token that followed each one, ``x_{j+1}``; at position ``t`` the hidden state
``h_t`` attends over them, and the tokens that followed the states most like it receive the
attention as probability:

.. math:: p_{\mathrm{cache}}(w \mid h_t) = \sum_{j = t - \mathrm{size}}^{t - 1}
          \operatorname{softmax}_j(\theta\, h_t^\top h_j)\, \mathbb{1}[x_{j+1} = w]

.. math:: p(w \mid h_t) = (1 - \lambda)\, \operatorname{softmax}(W h_t + b)_w
          + \lambda\, p_{\mathrm{cache}}(w \mid h_t)

It has no weights: the trained model is unchanged, and the flatness ``θ`` and the mixture
weight ``λ`` are chosen on held-out text (as Grave et al. do). A position with no earlier
state (the first one read from an empty cache) keeps the model's own distribution.

The memory ``(h_j, x_j, valid_j)`` lives in the model's :class:`~.recurrent_cache.RecurrentCache`
under :data:`MEMORY_STATES` (batch dimension 0), so it follows the recurrent state from call to
call: through ``generate()`` (beam reordering included) and through the windows of a stateful
evaluation.

This module imports only torch (remote-code safe: ``save_pretrained`` copies it next to the
model that imports it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

MEMORY_STATES = ("memory_keys", "memory_ids", "memory_mask")
"""Names of the cache's tensors in a :class:`~.recurrent_cache.RecurrentCache`: the hidden
states ``h_j`` [batch, size, hidden], the tokens ``x_j`` read at them [batch, size] and whether
each position held a real token [batch, size]."""


@dataclass
class CacheMemory:
    """The last positions a model read: hidden states ``keys`` [batch, m, hidden], the token
    ids read at them ``ids`` [batch, m] and ``mask`` [batch, m] (``True`` = a real token). The
    token that followed ``keys[:, j]`` is ``ids[:, j + 1]``, or the next call's first token."""

    keys: torch.Tensor
    ids: torch.Tensor
    mask: torch.Tensor

    @classmethod
    def from_states(cls, states) -> CacheMemory | None:
        """The memory held by a :class:`~.recurrent_cache.RecurrentCache` (``None`` if none)."""
        if states is None or MEMORY_STATES[0] not in states:
            return None
        return cls(*(states[name] for name in MEMORY_STATES))

    def as_states(self) -> dict[str, torch.Tensor]:
        """The tensors by their :data:`MEMORY_STATES` names."""
        return dict(zip(MEMORY_STATES, (self.keys, self.ids, self.mask), strict=True))


def cache_log_probs(
    logits: torch.Tensor,
    hidden: torch.Tensor,
    input_ids: torch.Tensor | None,
    mask: torch.Tensor | None,
    memory: CacheMemory | None,
    *,
    size: int,
    theta: float,
    lam: float,
) -> tuple[torch.Tensor, CacheMemory]:
    r"""The log of the mixture ``p(w | h_t)`` above for every position, and the memory to
    carry on.

    Args:
        logits: the model's logits ``W h_t + b`` [batch, seq, vocab].
        hidden: the hidden states ``h_t`` that produced them [batch, seq, hidden].
        input_ids: the tokens ``x_t`` read at those positions [batch, seq]; ``None`` (the
            model read ``inputs_embeds``): unknown, so these positions hold no entry.
        mask: [batch, seq], 1 for real tokens and 0 for padding (``None``: all real); a padded
            position is neither a key nor the value of one.
        memory: the positions read by earlier calls (``None``: none).
        size: how many earlier positions a position attends over.
        theta: the flatness ``θ`` of the attention.
        lam: the weight ``λ`` of the cache in the mixture.

    Returns:
        ``(log_probs [batch, seq, vocab] in float32, memory)``: the memory keeps the last
        ``size`` positions, detached.
    """
    seq, vocab = logits.shape[1:]
    stored_dtype, hidden = hidden.dtype, hidden.float()
    real = torch.ones(hidden.shape[:2], dtype=torch.bool, device=hidden.device)
    if mask is not None:
        real = real & mask.bool()
    if input_ids is None:
        input_ids = torch.zeros(hidden.shape[:2], dtype=torch.long, device=hidden.device)
        real = torch.zeros_like(real)
    keys, ids = hidden, input_ids
    if memory is not None:
        keys = torch.cat([memory.keys.float(), keys], dim=1)
        ids = torch.cat([memory.ids, ids], dim=1)
        real = torch.cat([memory.mask, real], dim=1)
    past = keys.shape[1] - seq
    # Key j is paired with the token that followed it, x_{j+1}; query t (position past + t)
    # may attend key j when past + t - size <= j < past + t.
    pair_real = real[:, :-1] & real[:, 1:]
    key_pos = torch.arange(keys.shape[1] - 1, device=hidden.device)
    query_pos = torch.arange(past, past + seq, device=hidden.device)[:, None]
    in_window = (key_pos < query_pos) & (key_pos >= query_pos - size)
    allowed = in_window[None] & pair_real[:, None, :]
    scores = theta * torch.bmm(hidden, keys[:, :-1].transpose(1, 2))
    scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    attention = torch.softmax(scores, dim=-1) * allowed
    values = F.one_hot(ids[:, 1:], vocab).to(attention.dtype)
    cache_probs = torch.bmm(attention, values)
    has_cache = allowed.any(dim=-1, keepdim=True)
    model_weight = torch.where(has_cache, math.log1p(-lam), 0.0)
    cache_weight = torch.where(has_cache, math.log(lam) if lam > 0 else -math.inf, -math.inf)
    log_probs = torch.logaddexp(
        F.log_softmax(logits.float(), dim=-1) + model_weight, cache_probs.log() + cache_weight
    )
    kept = CacheMemory(keys[:, -size:].detach().to(stored_dtype), ids[:, -size:], real[:, -size:])
    return log_probs, kept


__all__ = ["MEMORY_STATES", "CacheMemory", "cache_log_probs"]
