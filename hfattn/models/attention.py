"""Attention in its general form: a score a(q, k), a distribution p, masks, heads.

``context_i = sum_j alpha_ij v_j`` with ``alpha_i = p(a(q_i, k_1), ..., a(q_i, k_Tk))``,
in batch-matrix form ``C = p(A(Q, K)) V`` for any number of leading dimensions.

- Scores (:data:`SCORES`, :func:`build_score`) live in :mod:`.scores` (their base class in
  :mod:`.score_base`); distribution functions (:data:`DISTRIBUTIONS`) in :mod:`.distributions`;
  masks in :mod:`.masking` (boolean *keep* convention: ``True`` = attend). Everything is
  re-exported here.
- :func:`attend` / :class:`Attention`: single-head attention with any score/distribution.
- :class:`MultiHeadAttention`: ``MHA(Q, K, V) = Concat(head_1..head_h) W_O`` with
  ``head_i = Attention(Q W_Qi, K W_Ki, V W_Vi)``. The scaled-dot (and dot) + softmax case
  goes through the ``transformers`` attention interface (``eager`` / ``sdpa`` / flash ...,
  chosen by ``config._attn_implementation``); every other score uses the generic path.

Files in ``hfattn/models`` import only torch, transformers, the standard library and their
siblings: ``save_pretrained`` copies them next to the weights for ``trust_remote_code``.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from transformers.cache_utils import Cache, EncoderDecoderCache
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from .distributions import DISTRIBUTIONS, get_distribution
from .masking import (
    causal_mask,
    combine_masks,
    keep_mask,
    kernel_mask,
    make_attention_mask,
    padding_mask,
    to_additive_mask,
    to_keep_mask,
)
from .score_base import AttentionScore
from .scores import SCORES, build_score, get_score_class

__all__ = [
    "DISTRIBUTIONS",
    "SCORES",
    "Attention",
    "AttentionScore",
    "MultiHeadAttention",
    "attend",
    "build_score",
    "causal_mask",
    "combine_masks",
    "eager_attention_forward",
    "get_distribution",
    "get_score_class",
    "make_attention_mask",
    "padding_mask",
    "to_additive_mask",
    "to_keep_mask",
]

# Scores that the transformers attention kernels compute exactly (with softmax).
INTERFACE_SCORES = ("dot", "scaled_dot")


def attend(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    score: AttentionScore | str,
    distribution: str | None = None,
    mask: torch.Tensor | None = None,
    dropout: float = 0.0,
    training: bool = False,
    keys_precomputed: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Batch-matrix attention ``C = p(A(Q, K)) V``; returns ``(context, weights)``.

    Shapes: ``query [..., Tq, dq]``, ``key [..., Tk, dk]``, ``value [..., Tk, dv]`` ->
    ``context [..., Tq, dv]``, ``weights [..., Tq, Tk]``; leading dims broadcast.
    ``score`` is a score module, or the name of a parameter-free one (``dot``,
    ``scaled_dot``, ``cosine``, distances, kernels). ``distribution`` defaults to the
    score's (softmax for energies, Nadaraya-Watson ``normalize`` for kernel weights).
    ``mask`` is a keep mask broadcastable to ``[..., Tq, Tk]``. With ``keys_precomputed``
    the keys were already passed through ``score.precompute_keys``.
    """
    if isinstance(score, str):
        score = build_score(score, query.shape[-1])  # checked against the key in forward
        if any(True for _ in score.parameters()):
            raise ValueError(
                f"score {score.name!r} has learnable parameters: build it once with "
                "build_score(...) or use the Attention module"
            )
    if keys_precomputed:
        energies = score.score_precomputed(query, key)
    else:
        energies = score(query, key)
    weights = get_distribution(distribution or score.default_distribution)(energies, mask)
    if dropout > 0.0 and training:
        weights = nn.functional.dropout(weights, p=dropout, training=True)
    return torch.matmul(weights, value), weights


class Attention(nn.Module):
    """Single-head attention ``(q, K, V) -> (sum_j alpha_j v_j, alpha)`` with a named score.

    Args:
        query_dim: size of the queries ``dq``.
        key_dim: size of the keys ``dk`` (default ``dq``).
        score: a name in :data:`SCORES` (default ``"dot"``).
        distribution: a name in :data:`DISTRIBUTIONS` (default: the score's own).
        dropout: dropout on the attention weights during training.
        **score_params: options of the score (see :func:`build_score`).
    """

    def __init__(
        self,
        query_dim: int,
        key_dim: int | None = None,
        score: str = "dot",
        distribution: str | None = None,
        dropout: float = 0.0,
        **score_params,
    ):
        super().__init__()
        self.score = build_score(score, query_dim, key_dim, **score_params)
        self.distribution = distribution or self.score.default_distribution
        get_distribution(self.distribution)  # validate early
        self.dropout = dropout

    def precompute_keys(self, key: torch.Tensor) -> torch.Tensor:
        """Key-only part of the score (e.g. ``W_k k`` of Bahdanau), once per source sequence."""
        return self.score.precompute_keys(key)

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor | None = None,
        value: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        precomputed_keys: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Return ``(context [..., Tq, dv], weights [..., Tq, Tk])``.

        ``value`` defaults to ``key`` (Bahdanau's annotations are both). Pass
        ``precomputed_keys = precompute_keys(key)`` to reuse the key projection across steps.
        """
        if value is None:
            value = key
        if value is None:
            raise ValueError("Attention needs `value` (or `key`, used as the values)")
        if precomputed_keys is not None:
            keys, done = precomputed_keys, True
        elif key is not None:
            keys, done = key, False
        else:
            raise ValueError("Attention needs `key` or `precomputed_keys`")
        return attend(
            query,
            keys,
            value,
            self.score,
            self.distribution,
            mask,
            self.dropout,
            self.training,
            keys_precomputed=done,
        )


def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reference ``eager`` kernel: ``softmax(Q K^T * scaling + M) V``.

    ``query [B, H, Tq, dk]``, ``key [B, H, Tk, dk]``, ``value [B, H, Tk, dv]``, additive
    mask ``M`` broadcastable to ``[B, H, Tq, Tk]``; returns ``([B, Tq, H, dv], weights)``
    as every ``transformers`` attention function does. The weights are the ones that
    multiply ``V`` (after dropout, as in Bart and Marian), so they carry gradients; a query
    whose keys are all masked gets zero weights (hence a zero context).
    """
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    energies = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        energies = energies + attention_mask
    weights = torch.softmax(energies, dim=-1)
    if attention_mask is not None:
        row_has_key = to_keep_mask(attention_mask).any(dim=-1, keepdim=True)
        weights = weights.masked_fill(~row_has_key, 0.0)
    weights = nn.functional.dropout(weights, p=dropout, training=module.training)
    output = torch.matmul(weights, value).transpose(1, 2).contiguous()
    return output, weights


class MultiHeadAttention(nn.Module):
    """Multi-head attention ``Concat(head_1, ..., head_h) W_O`` with
    ``head_i = Attention(Q W_Qi, K W_Ki, V W_Vi)``.

    Args:
        hidden_size: size of the query input states (``d_model``) and, by default, of the output.
        num_heads: number of heads ``h``.
        key_dim: per-head size of queries and keys (default ``hidden_size // num_heads``;
            Chollet's Keras layer uses ``key_dim = d_model`` per head).
        value_dim: per-head size of the values (default ``key_dim``).
        kv_input_size: size of the key/value input states (default ``hidden_size``).
        output_size: size of the output (default ``hidden_size``).
        score: a name in :data:`SCORES`; ``"scaled_dot"`` (default) and ``"dot"`` with the
            softmax use the ``transformers`` attention interface.
        distribution: a name in :data:`DISTRIBUTIONS` (default: the score's own).
        score_params: options of the score, built per head size (shared by all heads).
        dropout: dropout on the attention weights during training.
        bias: biases in the four projections.
        is_causal: apply a causal mask (aligned to the end of the keys, so it is correct
            with a KV cache) on top of any given mask; ignored for cross-attention.
        layer_idx: index of the layer in the KV cache.
        config: a ``PreTrainedConfig`` whose ``_attn_implementation`` picks the kernel
            (read at every call, so ``model.set_attn_implementation`` works).
        attn_implementation: the kernel when no config is given (``"sdpa"``).

    ``forward`` returns ``(output [B, Tq, output_size], weights [B, h, Tq, Tk] or None)``;
    ``sdpa`` computes no weights: pass ``output_attentions=True`` to get them (that call
    then runs the ``eager`` kernel).
    """

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        *,
        key_dim: int | None = None,
        value_dim: int | None = None,
        kv_input_size: int | None = None,
        output_size: int | None = None,
        score: str = "scaled_dot",
        distribution: str | None = None,
        score_params: dict | None = None,
        dropout: float = 0.0,
        bias: bool = True,
        is_causal: bool = False,
        layer_idx: int | None = None,
        config=None,
        attn_implementation: str = "sdpa",
    ):
        super().__init__()
        if key_dim is None:
            if hidden_size % num_heads:
                raise ValueError(
                    f"hidden_size must be divisible by num_heads when key_dim is not given; got "
                    f"hidden_size={hidden_size}, num_heads={num_heads}"
                )
            key_dim = hidden_size // num_heads
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim or key_dim
        self.head_dim = key_dim  # transformers naming
        self.is_causal = is_causal
        self.layer_idx = layer_idx
        self.config = config
        self.dropout = dropout
        self._attn_implementation = attn_implementation
        kv_input_size = kv_input_size or hidden_size
        self.q_proj = nn.Linear(hidden_size, num_heads * key_dim, bias=bias)
        self.k_proj = nn.Linear(kv_input_size, num_heads * key_dim, bias=bias)
        self.v_proj = nn.Linear(kv_input_size, num_heads * self.value_dim, bias=bias)
        self.o_proj = nn.Linear(num_heads * self.value_dim, output_size or hidden_size, bias=bias)
        self.score = build_score(score, key_dim, key_dim, **(score_params or {}))
        self.distribution = distribution or self.score.default_distribution
        get_distribution(self.distribution)  # validate early
        self.scaling = getattr(self.score, "scale", None)

    @classmethod
    def from_config(
        cls,
        config,
        *,
        is_causal: bool = False,
        layer_idx: int | None = None,
        kv_input_size: int | None = None,
    ) -> MultiHeadAttention:
        """Build from a model config. Fields read (all but the first two optional):

        ``d_model`` (or ``hidden_size``), ``num_attention_heads``, ``attention_key_dim``,
        ``attention_value_dim``, ``attention_score`` (``"scaled_dot"``),
        ``attention_distribution`` (``None``), ``attention_score_params`` (``{}``),
        ``attention_dropout`` (0.0), ``attention_bias`` (True).
        """
        hidden = getattr(config, "d_model", None) or config.hidden_size
        return cls(
            hidden,
            config.num_attention_heads,
            key_dim=getattr(config, "attention_key_dim", None),
            value_dim=getattr(config, "attention_value_dim", None),
            kv_input_size=kv_input_size,
            score=getattr(config, "attention_score", None) or "scaled_dot",
            distribution=getattr(config, "attention_distribution", None),
            score_params=getattr(config, "attention_score_params", None),
            dropout=getattr(config, "attention_dropout", 0.0) or 0.0,
            bias=getattr(config, "attention_bias", True),
            is_causal=is_causal,
            layer_idx=layer_idx,
            config=config,
        )

    @property
    def attn_implementation(self) -> str:
        """The kernel in use: ``config._attn_implementation`` if set, else the constructor's."""
        return getattr(self.config, "_attn_implementation", None) or self._attn_implementation

    @property
    def uses_attention_interface(self) -> bool:
        """True when the transformers kernels compute this layer (dot / scaled dot + softmax)."""
        return self.score.name in INTERFACE_SCORES and self.distribution == "softmax"

    def _split_heads(self, states: torch.Tensor, head_size: int) -> torch.Tensor:
        """``[B, T, h * d] -> [B, h, T, d]``."""
        return states.view(*states.shape[:-1], self.num_heads, head_size).transpose(1, 2)

    def _project_key_value(
        self,
        states: torch.Tensor,
        is_cross_attention: bool,
        cache: Cache | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-head keys and values, read from / written to the KV cache (BART's pattern)."""
        layer_cache, is_updated = cache, False
        if isinstance(cache, EncoderDecoderCache):
            is_updated = bool(cache.is_updated.get(self.layer_idx))
            layer_cache = (
                cache.cross_attention_cache if is_cross_attention else cache.self_attention_cache
            )
        if is_cross_attention and layer_cache is not None and is_updated:
            layer = layer_cache.layers[self.layer_idx]
            return layer.keys, layer.values
        key = self._split_heads(self.k_proj(states), self.key_dim)
        value = self._split_heads(self.v_proj(states), self.value_dim)
        if layer_cache is not None:
            key, value = layer_cache.update(key, value, self.layer_idx)
            if is_cross_attention and isinstance(cache, EncoderDecoderCache):
                cache.is_updated[self.layer_idx] = True
        return key, value

    def forward(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        cache: Cache | None = None,
        output_attentions: bool = False,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend from ``hidden_states [B, Tq, hidden_size]`` to itself or to ``key_value_states``.

        Args:
            hidden_states: the queries' input states.
            key_value_states: encoder states ``[B, Tk, kv_input_size]`` for cross-attention.
            attention_mask: a keep mask (bool, True = attend) or an additive float mask (0 =
                attend, negative = masked, e.g. from ``transformers.masking_utils``), shaped
                ``[B, Tk]`` (padding), ``[B, Tq, Tk]`` or ``[B, 1|h, Tq, Tk]``.
            cache: a ``Cache`` / ``EncoderDecoderCache`` (needs ``layer_idx``).
            output_attentions: return the weights even when the kernel is ``sdpa``.

        A query whose keys are all masked gets a zero context vector (before ``o_proj``), so
        its output is ``o_proj``'s bias.
        """
        is_cross_attention = key_value_states is not None
        batch_shape = hidden_states.shape[:-1]
        query = self._split_heads(self.q_proj(hidden_states), self.key_dim)
        kv_states = key_value_states if is_cross_attention else hidden_states
        key, value = self._project_key_value(kv_states, is_cross_attention, cache)
        causal = self.is_causal and not is_cross_attention
        dropout = self.dropout if self.training else 0.0

        empty_rows = None
        if self.uses_attention_interface:
            output, weights, empty_rows = self._interface_attention(
                query,
                key,
                value,
                attention_mask,
                causal,
                dropout,
                output_attentions,
                **kwargs,
            )
        else:
            keep = keep_mask(attention_mask, query.shape[-2], key.shape[-2], causal, query.device)
            output, weights = attend(
                query, key, value, self.score, self.distribution, keep, dropout, self.training
            )
            output = output.transpose(1, 2)
        output = output.reshape(*batch_shape, self.num_heads * self.value_dim).contiguous()
        output = self.o_proj(output)
        # On CPU, reading the flag costs nothing, so the usual case (no empty row) skips the
        # select; on an accelerator (or under torch.compile) reading it would stall the queue
        # (or break the graph), so there the select always runs.
        if empty_rows is not None and (
            empty_rows.device.type != "cpu" or torch.compiler.is_compiling() or empty_rows.any()
        ):
            # A query with no visible key has a zero context, hence the output o_proj(0) = bias.
            # Set here rather than by zeroing the context before o_proj, so that o_proj reads
            # the kernel's own output (which autograd already keeps for the kernel's backward)
            # instead of a masked copy that autograd would keep as well.
            bias = self.o_proj.bias
            fill = output.new_zeros(()) if bias is None else bias.to(output.dtype)
            output = torch.where(empty_rows, fill, output)
        return output, weights

    def _interface_attention(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        given_mask: torch.Tensor | None,
        causal: bool,
        dropout: float,
        output_attentions: bool,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """Run the ``transformers`` kernel on the mask it takes best; returns ``([B, Tq, h, dv],
        weights or None, empty_rows)``: ``empty_rows [B|1, Tq, 1]`` (True = the query sees no
        key, its output must be ``o_proj``'s bias) or ``None`` when no row can be empty or the
        rows were already zeroed here (per-head masks).

        The mask is :func:`~.masking.kernel_mask`'s (the cheapest one that gives the outputs of
        the given mask AND the causal one).
        """
        implementation = self.attn_implementation
        if output_attentions and implementation != "eager":
            implementation = "eager"
        interface: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(
            implementation, eager_attention_forward
        )
        mask, is_causal, row_has_key = kernel_mask(
            given_mask,
            query.shape[-2],
            key.shape[-2],
            causal,
            implementation,
            query.dtype,
            query.device,
        )
        output, weights = interface(
            self,
            query,
            key,
            value,
            mask,
            dropout=dropout,
            scaling=self.scaling,
            is_causal=is_causal,
            **kwargs,
        )
        empty_rows = None
        # The weights are returned as the kernel made them (the eager kernel, the only one
        # that returns any, gives such a query zero weights): they are the tensors that
        # multiplied V, so they carry gradients (transformers' retain_grad contract).
        if row_has_key is not None:
            if row_has_key.shape[1] == 1:
                empty_rows = ~row_has_key[:, 0]  # zeroed after o_proj by forward
            else:  # a per-head mask: zero each head's context before o_proj mixes the heads
                output = output * row_has_key.transpose(1, 2).to(output.dtype)
        return output, weights, empty_rows
