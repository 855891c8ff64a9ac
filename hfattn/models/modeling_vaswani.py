"""The Transformer of Vaswani et al. (2017), "Attention is all you need", laid out as BART.

``VaswaniForConditionalGeneration`` = ``model.encoder`` (token embeddings × √d + positions →
N encoder layers) + ``model.decoder`` (the same with causal self-attention and
cross-attention ``MHA(Q = decoder, K = V = encoder output)``) + ``lm_head``.

- Sub-layers: ``x ← Norm(x + Drop(Sublayer(x)))`` (post-LN, the paper) or
  ``x ← x + Drop(Sublayer(Norm(x)))`` (pre-LN, with a final norm per stack); with T-Fixup
  initialisation there is no norm at all.
- Attention is :class:`VaswaniAttention`: scaled dot + softmax through the transformers
  attention interface (``eager`` / ``sdpa`` / flash). A config that names another score or
  distribution gets the general :class:`~.attention.MultiHeadAttention` instead (same
  projections, same parameter names), imported only then (:func:`build_attention`).
- Masks are the ``[B, S]`` / ``[B, T]`` padding masks (1 = token); each attention call turns
  them into what its kernel takes best (:func:`~.masking.kernel_mask`): for ``sdpa`` a boolean
  keep mask, or none at all when nothing is hidden; the decoder self-attention without a
  target mask (right-padded targets, as in training) runs the kernel's fused causal path
  (``is_causal=True``).
- Generation cache: an ``EncoderDecoderCache``. Decoder self-attention keys/values grow by
  one row per token; cross-attention keys/values are projected once from the encoder output.
- The transformers contracts: ``output_attentions`` / ``output_hidden_states`` / ``use_cache``
  from the argument, else the config; ``return_dict=False`` (argument or config) gives tuples
  (``can_return_tuple``) at every level, the stacks included; gradient checkpointing per
  layer (``GradientCheckpointingLayer``, as Bart's); any dtype ``from_pretrained`` loads in
  (the sinusoidal table is built in it); ``torch.export`` / ``torch.compile(fullgraph=True)``
  trace the forward (positions come from shapes, never from data).

A layer reads in this file alone, as Marian's does: attention, residuals and norms are
written out here ("Copied from" where a piece also serves elsewhere). Only torch,
transformers, :mod:`.configuration_vaswani`, :mod:`.positional` and :mod:`.masking` are
imported (and :mod:`.attention` for a non-default score or distribution): ``save_pretrained``
copies this file and those siblings next to the weights for ``trust_remote_code`` loading.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.cache_utils import Cache, DynamicCache, EncoderDecoderCache
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutput,
    BaseModelOutputWithPastAndCrossAttentions,
    Seq2SeqLMOutput,
    Seq2SeqModelOutput,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.utils import can_return_tuple, logging
from transformers.utils.deprecation import deprecate_kwarg

from .configuration_vaswani import VaswaniConfig
from .masking import kernel_mask, to_keep_mask
from .positional import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEmbedding,
    build_positional_encoding,
)

logger = logging.get_logger(__name__)


def _norm(config: VaswaniConfig) -> nn.Module:
    """A LayerNorm over the features, or the identity under T-Fixup (which removes them)."""
    if config.use_layer_norm:
        return nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
    return nn.Identity()


def tfixup_scales(config: VaswaniConfig) -> tuple[float, float]:
    r"""T-Fixup's ``(encoder, decoder)`` scalings (Huang et al. 2020, §3.2):
    ``0.67 N_e^{-1/4}`` and ``(9 N_d)^{-1/4}``."""
    return 0.67 * config.encoder_layers**-0.25, (9 * config.decoder_layers) ** -0.25


TFIXUP_GAIN = "tfixup_gain"
"""Attribute through which a module tells ``_init_weights`` its T-Fixup scaling."""


def mark_tfixup(config: VaswaniConfig, scale: float, *modules: nn.Module) -> None:
    """Give ``modules`` the T-Fixup gain ``scale`` (only when ``init_method="t-fixup"``)."""
    if config.init_method == "t-fixup":
        for module in modules:
            setattr(module, TFIXUP_GAIN, scale)


def dropout(hidden_states: torch.Tensor, p: float, module: nn.Module) -> torch.Tensor:
    """Dropout with rate ``p`` while ``module`` trains; otherwise ``hidden_states`` itself.

    Functional, as in Bart and Marian: the decoding loop of ``generate`` pays for no module
    call (every layer runs this four times a step)."""
    if module.training and p > 0:
        return nn.functional.dropout(hidden_states, p=p, training=True)
    return hidden_states


# Copied from hfattn.models.seq2seq_utils.shift_tokens_right
def shift_tokens_right(
    labels: torch.Tensor, pad_token_id: int | None, decoder_start_token_id: int | None
) -> torch.Tensor:
    """Teacher forcing inputs: ``y_in = [start, y_1, …, y_{T-1}]`` (``-100`` → ``pad``), as BART."""
    if decoder_start_token_id is None:
        raise ValueError("config.decoder_start_token_id must be set to shift labels")
    if pad_token_id is None:
        raise ValueError("config.pad_token_id must be set to shift labels")
    shifted = labels.new_zeros(labels.shape)
    shifted[:, 1:] = labels[:, :-1]
    shifted[:, 0] = decoder_start_token_id
    return shifted.masked_fill(shifted == -100, pad_token_id)


# Copied from hfattn.models.attention.eager_attention_forward
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


class VaswaniAttention(nn.Module):
    r"""Multi-head attention of the paper (§3.2.2), through the transformers attention interface:

    .. math:: \mathrm{MultiHead}(Q, K, V) = \mathrm{Concat}(head_1, …, head_h)\, W^O, \quad
        head_i = \mathrm{softmax}\big(Q W_i^Q (K W_i^K)^\top / \sqrt{d_k}\big)\, V W_i^V

    ``h = config.num_heads`` heads of ``d_k = d_v = config.head_dim`` (Chollet and Géron give
    each head ``d_model``); ``config._attn_implementation`` picks the kernel (``eager`` /
    ``sdpa`` / flash ...), read at every call so that ``set_attn_implementation`` works;
    ``output_attentions=True`` runs ``eager`` for that call (the one kernel that returns the
    weights). ``is_causal`` adds the causal mask to a self-attention; ``layer_idx`` is the
    layer's slot in the KV cache. The parameters are those of the scaled-dot + softmax
    :class:`~.attention.MultiHeadAttention` (``q_proj``, ``k_proj``, ``v_proj``, ``o_proj``).
    """

    def __init__(
        self, config: VaswaniConfig, is_causal: bool = False, layer_idx: int | None = None
    ):
        super().__init__()
        self.config = config
        self.num_heads = config.num_heads
        self.head_dim = self.key_dim = self.value_dim = config.head_dim
        self.scaling = self.head_dim**-0.5
        self.dropout = config.attention_dropout or 0.0
        self.is_causal = is_causal
        self.layer_idx = layer_idx
        width, bias = config.num_heads * config.head_dim, config.attention_bias
        self.q_proj = nn.Linear(config.d_model, width, bias=bias)
        self.k_proj = nn.Linear(config.d_model, width, bias=bias)
        self.v_proj = nn.Linear(config.d_model, width, bias=bias)
        self.o_proj = nn.Linear(width, config.d_model, bias=bias)

    def forward(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        cache: Cache | None = None,
        output_attentions: bool = False,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Attend from ``hidden_states [B, Tq, d]`` to themselves, or to ``key_value_states
        [B, Tk, d]`` (cross-attention); returns ``(output [B, Tq, d], weights [B, h, Tq, Tk]
        or None)``.

        ``attention_mask``: a keep mask (bool, True = attend) or an additive float mask,
        ``[B, Tk]`` (padding), ``[B, Tq, Tk]`` or ``[B, 1|h, Tq, Tk]``; ``cache``: a ``Cache``
        / ``EncoderDecoderCache``. A query whose keys are all masked gets a zero context, so
        its output is ``o_proj``'s bias."""
        is_cross_attention = key_value_states is not None
        input_shape = hidden_states.shape[:-1]
        head_shape = (self.num_heads, self.head_dim)
        query = self.q_proj(hidden_states).view(*input_shape, *head_shape).transpose(1, 2)

        # Keys and values, read from / written to the KV cache (Bart's pattern): the
        # cross-attention projects the encoder output once, at the first decoding step.
        layer_cache, is_updated = cache, False
        if isinstance(cache, EncoderDecoderCache):
            is_updated = bool(cache.is_updated.get(self.layer_idx))
            layer_cache = (
                cache.cross_attention_cache if is_cross_attention else cache.self_attention_cache
            )
        if is_cross_attention and layer_cache is not None and is_updated:
            key = layer_cache.layers[self.layer_idx].keys
            value = layer_cache.layers[self.layer_idx].values
        else:
            states = key_value_states if is_cross_attention else hidden_states
            key = self.k_proj(states).view(*states.shape[:-1], *head_shape).transpose(1, 2)
            value = self.v_proj(states).view(*states.shape[:-1], *head_shape).transpose(1, 2)
            if layer_cache is not None:
                key, value = layer_cache.update(key, value, self.layer_idx)
                if is_cross_attention and isinstance(cache, EncoderDecoderCache):
                    cache.is_updated[self.layer_idx] = True

        implementation = "eager" if output_attentions else self.config._attn_implementation
        attention_interface: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(
            implementation, eager_attention_forward
        )
        mask, is_causal, row_has_key = kernel_mask(
            attention_mask,
            query.shape[-2],
            key.shape[-2],
            self.is_causal and not is_cross_attention,
            implementation,
            query.dtype,
            query.device,
        )
        output, weights = attention_interface(
            self,
            query,
            key,
            value,
            mask,
            dropout=self.dropout if self.training else 0.0,
            scaling=self.scaling,
            is_causal=is_causal,
            **kwargs,
        )
        # The weights stay as the kernel made them: they multiplied V, so they carry gradients.
        if row_has_key is not None and row_has_key.shape[1] > 1:
            # A per-head mask: zero each head's context of a query that sees no key before
            # o_proj mixes the heads.
            output = output * row_has_key.transpose(1, 2).to(output.dtype)
            row_has_key = None
        output = output.reshape(*input_shape, self.num_heads * self.head_dim).contiguous()
        output = self.o_proj(output)
        if row_has_key is not None:
            # A query with no visible key has a zero context, hence the output o_proj(0) = bias.
            # Set here rather than by zeroing the context before o_proj, so that o_proj reads
            # the kernel's own output (which autograd already keeps) instead of a masked copy.
            # On CPU, reading the flag costs nothing, so the usual case (no empty row) skips
            # the select; on an accelerator (or under torch.compile) reading it would stall the
            # queue (or break the graph), so there the select always runs.
            empty_rows = ~row_has_key[:, 0]  # [B|1, Tq, 1]
            if empty_rows.device.type != "cpu" or torch.compiler.is_compiling() or empty_rows.any():
                bias = self.o_proj.bias
                fill = output.new_zeros(()) if bias is None else bias.to(output.dtype)
                output = torch.where(empty_rows, fill, output)
        return output, weights


def uses_vaswani_attention(config: VaswaniConfig) -> bool:
    """True for the paper's attention, scaled dot + softmax with no score options, which
    :class:`VaswaniAttention` computes; any other ``attention_score``,
    ``attention_distribution`` or ``attention_score_params`` needs the general machinery."""
    return (
        config.attention_score == "scaled_dot"
        and config.attention_distribution in (None, "softmax")
        and not config.attention_score_params
    )


def build_attention(
    config: VaswaniConfig, is_causal: bool = False, layer_idx: int | None = None
) -> nn.Module:
    """:class:`VaswaniAttention` for the default attention (:func:`uses_vaswani_attention`),
    else :class:`~.attention.MultiHeadAttention` with the config's score and distribution.

    Both take the same ``forward`` arguments, return ``(output, weights)`` and name their
    projections alike, so a layer and its checkpoints are the same either way."""
    if uses_vaswani_attention(config):
        return VaswaniAttention(config, is_causal=is_causal, layer_idx=layer_idx)
    # The general score / distribution machinery, loaded only for a config that asks for it.
    from .attention import MultiHeadAttention

    return MultiHeadAttention.from_config(config, is_causal=is_causal, layer_idx=layer_idx)


class VaswaniFeedForward(nn.Module):
    """Position-wise ``FFN(x) = act(x W₁ + b₁) W₂ + b₂`` (ReLU in the paper)."""

    def __init__(self, config: VaswaniConfig):
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, config.ffn_dim)
        self.fc2 = nn.Linear(config.ffn_dim, config.d_model)
        self.activation = ACT2FN[config.activation]
        self.activation_dropout = config.activation_dropout

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        hidden = dropout(self.activation(self.fc1(hidden_states)), self.activation_dropout, self)
        return self.fc2(hidden)


def _value_output_ffn(layer: nn.Module) -> list[nn.Linear]:
    """The matrices T-Fixup scales in a layer: every attention's ``W_V`` and ``W_O``, and the
    FFN's."""
    attentions = [m for m in (layer.self_attn, getattr(layer, "encoder_attn", None)) if m]
    projections = [p for a in attentions for p in (a.v_proj, a.o_proj)]
    return projections + [layer.feed_forward.fc1, layer.feed_forward.fc2]


class VaswaniEncoderLayer(GradientCheckpointingLayer):
    """Self-attention then feed-forward, each sub-layer ``f`` wrapped in a residual connection
    and a norm: ``x ← Norm(x + Drop(f(x)))`` (post-LN) or ``x ← x + Drop(f(Norm(x)))`` (pre-LN).

    A ``GradientCheckpointingLayer`` (as Bart's): with gradient checkpointing on, training
    recomputes it in the backward pass; tensors that need gradients are passed positionally
    (required by ``use_reentrant=True``)."""

    def __init__(self, config: VaswaniConfig, layer_idx: int):
        super().__init__()
        self.config = config
        self.self_attn = build_attention(config, layer_idx=layer_idx)
        self.self_attn_layer_norm = _norm(config)
        self.feed_forward = VaswaniFeedForward(config)
        self.final_layer_norm = _norm(config)
        self.dropout = config.dropout
        self.pre_norm = config.norm_position == "pre"
        mark_tfixup(config, tfixup_scales(config)[0], *_value_output_ffn(self))

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        residual = hidden_states
        if self.pre_norm:
            hidden_states = self.self_attn_layer_norm(hidden_states)
        hidden_states, attn_weights = self.self_attn(
            hidden_states, attention_mask=attention_mask, output_attentions=output_attentions
        )
        hidden_states = residual + dropout(hidden_states, self.dropout, self)
        if not self.pre_norm:
            hidden_states = self.self_attn_layer_norm(hidden_states)

        residual = hidden_states
        if self.pre_norm:
            hidden_states = self.final_layer_norm(hidden_states)
        hidden_states = self.feed_forward(hidden_states)
        hidden_states = residual + dropout(hidden_states, self.dropout, self)
        if not self.pre_norm:
            hidden_states = self.final_layer_norm(hidden_states)
        return hidden_states, attn_weights


class VaswaniDecoderLayer(GradientCheckpointingLayer):
    """Causal self-attention, cross-attention to the encoder output, then feed-forward, each
    wrapped in a residual connection and a norm as in :class:`VaswaniEncoderLayer`.

    A ``GradientCheckpointingLayer``: ``hidden_states`` and ``encoder_hidden_states`` (both
    need gradients) are positional; under checkpointing in training the wrapper drops
    ``cache`` (the decoder also turns ``use_cache`` off then)."""

    def __init__(self, config: VaswaniConfig, layer_idx: int):
        super().__init__()
        self.config = config
        self.self_attn = build_attention(config, is_causal=True, layer_idx=layer_idx)
        self.self_attn_layer_norm = _norm(config)
        self.encoder_attn = build_attention(config, layer_idx=layer_idx)
        self.encoder_attn_layer_norm = _norm(config)
        self.feed_forward = VaswaniFeedForward(config)
        self.final_layer_norm = _norm(config)
        self.dropout = config.dropout
        self.pre_norm = config.norm_position == "pre"
        mark_tfixup(config, tfixup_scales(config)[1], *_value_output_ffn(self))

    def forward(
        self,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor,
        self_attention_mask: torch.Tensor | None,
        cross_attention_mask: torch.Tensor | None,
        cache: Cache | None = None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        # Self-attention
        residual = hidden_states
        if self.pre_norm:
            hidden_states = self.self_attn_layer_norm(hidden_states)
        hidden_states, self_attn_weights = self.self_attn(
            hidden_states,
            attention_mask=self_attention_mask,
            cache=cache,
            output_attentions=output_attentions,
        )
        hidden_states = residual + dropout(hidden_states, self.dropout, self)
        if not self.pre_norm:
            hidden_states = self.self_attn_layer_norm(hidden_states)

        # Cross-attention
        residual = hidden_states
        if self.pre_norm:
            hidden_states = self.encoder_attn_layer_norm(hidden_states)
        hidden_states, cross_attn_weights = self.encoder_attn(
            hidden_states,
            key_value_states=encoder_hidden_states,
            attention_mask=cross_attention_mask,
            cache=cache,
            output_attentions=output_attentions,
        )
        hidden_states = residual + dropout(hidden_states, self.dropout, self)
        if not self.pre_norm:
            hidden_states = self.encoder_attn_layer_norm(hidden_states)

        # Feed-forward
        residual = hidden_states
        if self.pre_norm:
            hidden_states = self.final_layer_norm(hidden_states)
        hidden_states = self.feed_forward(hidden_states)
        hidden_states = residual + dropout(hidden_states, self.dropout, self)
        if not self.pre_norm:
            hidden_states = self.final_layer_norm(hidden_states)
        return hidden_states, self_attn_weights, cross_attn_weights


class VaswaniPreTrainedModel(PreTrainedModel):
    """Weight initialisation (Xavier, normal or T-Fixup), tied weights and HF plumbing."""

    config_class = VaswaniConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    _can_compile_fullgraph = True
    _supports_sdpa = True
    _supports_flash_attn = True
    _no_split_modules = ["VaswaniEncoderLayer", "VaswaniDecoderLayer"]

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """``init_method``: ``"xavier"`` — Glorot-uniform linears with zero biases, embeddings
        ``N(0, d^-½)`` (unit variance after the √d scaling); ``"normal"`` — ``N(0,
        initializer_range)``; ``"t-fixup"`` — Xavier, then the value / output / FFN matrices of
        every layer and the token embeddings scaled by :func:`tfixup_scales` (the modules carry
        their gain, set by :func:`mark_tfixup`). LayerNorms start at
        ``(γ, β) = (1, 0)``; sinusoidal tables are recomputed in their buffer's dtype (the
        default dtype while the model was built: the dtype ``from_pretrained`` loads in)."""
        config = self.config
        normal = config.init_method == "normal"
        if isinstance(module, SinusoidalPositionalEmbedding):
            init.copy_(module.weight, module.compute_table(module.weight.dtype))
        elif isinstance(module, nn.Linear):
            if normal:
                init.normal_(module.weight, 0.0, config.initializer_range)
            else:
                init.xavier_uniform_(module.weight, gain=getattr(module, TFIXUP_GAIN, 1.0))
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            std = config.initializer_range if normal else config.d_model**-0.5
            init.normal_(module.weight, 0.0, std * getattr(module, TFIXUP_GAIN, 1.0))
        elif isinstance(module, nn.LayerNorm):
            init.ones_(module.weight)
            init.zeros_(module.bias)

    def _own_tied_weights(self) -> dict[str, str]:
        """``{target: source}`` parameter names shared in this module (none in a stack)."""
        return {}

    @property
    def _tied_weights_keys(self) -> dict[str, str]:
        return self._own_tied_weights()

    # Copied from hfattn.models.seq2seq_utils.ConfigTiedWeightsMixin.get_expanded_tied_weights_keys
    def get_expanded_tied_weights_keys(self, all_submodels: bool = False) -> dict:
        """``{target: source}`` of the shared parameters. Unlike the base class (which ties only
        when ``tie_word_embeddings``), shared encoder/decoder embeddings are tied whenever
        ``share_encoder_decoder_embeddings`` is set."""
        if all_submodels:
            return super().get_expanded_tied_weights_keys(all_submodels=True)
        return self._own_tied_weights()


class _VaswaniStack(VaswaniPreTrainedModel):
    """Embeddings (× √d when ``scale_embedding``) + positions + dropout, shared by both stacks.

    ``inputs_embeds`` follow Bart's convention: they are what ``embed_tokens`` returns (the
    raw embeddings, before the √d scaling), so ``inputs_embeds=embed_tokens(ids)`` gives
    exactly the outputs of ``input_ids=ids``; the scaling and the positions are added here.
    """

    is_decoder = False

    def __init__(self, config: VaswaniConfig, embed_tokens: nn.Embedding | None = None):
        super().__init__(config)
        self.embed_tokens = embed_tokens or nn.Embedding(config.vocab_size, config.d_model)
        # T-Fixup scales the token embeddings as their stack (shared ones: as the decoder's).
        encoder_scale, decoder_scale = tfixup_scales(config)
        shared = config.share_encoder_decoder_embeddings
        mark_tfixup(
            config, decoder_scale if self.is_decoder or shared else encoder_scale, self.embed_tokens
        )
        self.embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        self.embed_positions = build_positional_encoding(
            config.position_embedding, config.max_position_embeddings, config.d_model
        )
        self.embedding_dropout = config.input_dropout
        # Pre-LN ends each stack with a norm (the residual stream is never normalised otherwise).
        self.layer_norm = _norm(config) if config.norm_position == "pre" else nn.Identity()
        self.gradient_checkpointing = False

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embed_tokens

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embed_tokens = value

    def embed(
        self,
        input_ids: torch.LongTensor | None,
        inputs_embeds: torch.Tensor | None,
        past_length: int | torch.Tensor = 0,
        capacity: int | None = None,
    ) -> torch.Tensor:
        """``Drop(E[x]·√d + PE[past .. past + T - 1])``; a clear error beyond learned positions.

        ``inputs_embeds`` are raw embeddings (``embed_tokens(ids)``): they are scaled here too.
        The positions are a contiguous range known from the shapes: the positional module
        slices its table, so no branch reads tensor data (``torch.export`` traces it). A static
        cache counts its tokens in a 0-d tensor (``past_length``); then the positions are
        looked up by index, bounded by the cache's ``capacity``, so that a compiled decoding
        step does not read the tensor either."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of input_ids and inputs_embeds")
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids)
        length = inputs_embeds.shape[1]
        end = capacity if isinstance(past_length, torch.Tensor) else past_length + length
        if isinstance(self.embed_positions, LearnedPositionalEmbedding):
            limit = self.config.max_position_embeddings
            if end > limit:
                raise ValueError(
                    f"sequence of {end} tokens is longer than the "
                    f"{limit} learned positions (config.max_position_embeddings={limit}); "
                    "truncate the input or use position_embedding='sinusoidal'"
                )
        if isinstance(past_length, torch.Tensor):
            position_ids = torch.arange(length, device=inputs_embeds.device) + past_length
            positions = self.embed_positions(position_ids, bound=end)
        else:
            positions = self.embed_positions(past_length=past_length, length=length)
        hidden = inputs_embeds * self.embed_scale + positions
        return dropout(hidden, self.embedding_dropout, self)


class VaswaniEncoder(_VaswaniStack):
    """``N`` encoder layers over the embedded source; returns a ``BaseModelOutput``."""

    def __init__(self, config: VaswaniConfig, embed_tokens: nn.Embedding | None = None):
        super().__init__(config, embed_tokens)
        self.layers = nn.ModuleList(
            VaswaniEncoderLayer(config, i) for i in range(config.encoder_layers)
        )
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> BaseModelOutput:
        """Encode ``input_ids [B, S]`` (``attention_mask``: 1 = token, 0 = padding), or
        ``inputs_embeds [B, S, d]`` (raw embeddings, see :meth:`embed`).

        ``output_attentions`` / ``output_hidden_states`` default to the config's;
        ``hidden_states`` holds the embeddings and every layer's output (``encoder_layers + 1``
        tensors; with pre-LN the last one after the final norm, as mBART). ``return_dict=False``
        (or ``config.return_dict=False``) returns the tuple of the non-``None`` fields."""
        if output_attentions is None:
            output_attentions = self.config.output_attentions
        if output_hidden_states is None:
            output_hidden_states = self.config.output_hidden_states
        hidden_states = self.embed(input_ids, inputs_embeds)
        all_hidden = [hidden_states] if output_hidden_states else None
        all_weights = [] if output_attentions else None
        for layer in self.layers:
            hidden_states, weights = layer(hidden_states, attention_mask, output_attentions)
            if output_hidden_states:
                all_hidden.append(hidden_states)
            if output_attentions:
                all_weights.append(weights)
        hidden_states = self.layer_norm(hidden_states)
        if output_hidden_states:
            all_hidden[-1] = hidden_states
        return BaseModelOutput(
            last_hidden_state=hidden_states,
            hidden_states=tuple(all_hidden) if output_hidden_states else None,
            attentions=tuple(all_weights) if output_attentions else None,
        )


class VaswaniDecoder(_VaswaniStack):
    """``N`` decoder layers over the embedded target prefix, attending to the encoder output."""

    is_decoder = True

    def __init__(self, config: VaswaniConfig, embed_tokens: nn.Embedding | None = None):
        super().__init__(config, embed_tokens)
        self.layers = nn.ModuleList(
            VaswaniDecoderLayer(config, i) for i in range(config.decoder_layers)
        )
        self.post_init()

    def _masks(
        self,
        decoder_attention_mask: torch.Tensor | None,
        encoder_attention_mask: torch.Tensor | None,
        query_length: int,
        past_length: int,
        source_length: int,
        device: torch.device,
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """Self- and cross-attention masks. The self-attention's causal part is added by the
        attention module itself. With ``chollet_cross_attention_mask`` Chollet's (ch. 11) decoder is
        reproduced: no target padding in self-attention, and cross-attention masked by the
        target's causal-and-padding mask laid over the source positions
        (``keep[i, j] = j ≤ i ∧ target_mask[j]``)."""
        if not self.config.chollet_cross_attention_mask:
            return decoder_attention_mask, encoder_attention_mask
        rows = torch.arange(past_length, past_length + query_length, device=device)[:, None]
        keep = torch.arange(source_length, device=device)[None, :] <= rows  # [Tq, S]
        keep = keep[None]
        if decoder_attention_mask is not None:
            target = decoder_attention_mask.bool()
            width = min(target.shape[1], source_length)
            padded = torch.zeros(target.shape[0], source_length, dtype=torch.bool, device=device)
            padded[:, :width] = target[:, :width]
            keep = keep & padded[:, None, :]
        return None, keep

    @can_return_tuple
    @deprecate_kwarg("past_key_values", version="6.0.0", new_name="cache")
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> BaseModelOutputWithPastAndCrossAttentions:
        """Decode ``input_ids [B, T]`` (or raw ``inputs_embeds [B, T, d]``) after
        ``cache`` (positions continue from the cache's length). ``attention_mask`` is
        the target padding mask (optional: with right padding the causal mask alone keeps every
        real position exact, and without a mask the ``sdpa`` kernel runs its fused causal
        path).

        ``use_cache`` / ``output_attentions`` / ``output_hidden_states`` default to the
        config's; the cache is off while training with gradient checkpointing.
        ``hidden_states`` holds ``decoder_layers + 1`` tensors; ``return_dict=False`` (or
        ``config.return_dict=False``) returns the tuple of the non-``None`` fields."""
        if encoder_hidden_states is None:
            raise ValueError("the decoder needs encoder_hidden_states")
        if output_attentions is None:
            output_attentions = self.config.output_attentions
        if output_hidden_states is None:
            output_hidden_states = self.config.output_hidden_states
        if use_cache is None:
            use_cache = self.config.use_cache
        if use_cache and self.training and self.gradient_checkpointing:
            logger.warning_once(
                "`use_cache=True` is incompatible with gradient checkpointing. "
                "Setting `use_cache=False`."
            )
            use_cache = False
        if use_cache and cache is None:
            cache = EncoderDecoderCache(
                DynamicCache(config=self.config), DynamicCache(config=self.config)
            )
        past_length = cache.get_seq_length() if cache is not None else 0
        capacity = cache.get_max_length() if isinstance(past_length, torch.Tensor) else None
        hidden_states = self.embed(input_ids, inputs_embeds, past_length, capacity)
        self_mask, cross_mask = self._masks(
            attention_mask,
            encoder_attention_mask,
            hidden_states.shape[1],
            past_length,
            encoder_hidden_states.shape[1],
            hidden_states.device,
        )
        all_hidden = [hidden_states] if output_hidden_states else None
        self_weights, cross_weights = ([], []) if output_attentions else (None, None)
        for layer in self.layers:
            hidden_states, self_w, cross_w = layer(
                hidden_states,
                encoder_hidden_states,
                self_mask,
                cross_mask,
                cache=cache if use_cache else None,
                output_attentions=output_attentions,
            )
            if output_hidden_states:
                all_hidden.append(hidden_states)
            if output_attentions:
                self_weights.append(self_w)
                cross_weights.append(cross_w)
        hidden_states = self.layer_norm(hidden_states)
        if output_hidden_states:
            all_hidden[-1] = hidden_states
        return BaseModelOutputWithPastAndCrossAttentions(
            last_hidden_state=hidden_states,
            cache=cache if use_cache else None,
            hidden_states=tuple(all_hidden) if output_hidden_states else None,
            attentions=tuple(self_weights) if output_attentions else None,
            cross_attentions=tuple(cross_weights) if output_attentions else None,
        )


class VaswaniModel(VaswaniPreTrainedModel):
    """Encoder + decoder without the output layer (BART's ``BartModel``); with
    ``share_encoder_decoder_embeddings`` the decoder's token embedding is the encoder's."""

    def __init__(self, config: VaswaniConfig):
        super().__init__(config)
        self.encoder = VaswaniEncoder(config)
        self.decoder = VaswaniDecoder(config)
        self.post_init()

    def _own_tied_weights(self) -> dict[str, str]:
        if self.config.share_encoder_decoder_embeddings:
            return {"decoder.embed_tokens.weight": "encoder.embed_tokens.weight"}
        return {}

    def get_input_embeddings(self) -> nn.Embedding:
        return self.encoder.embed_tokens

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.encoder.embed_tokens = value
        if self.config.share_encoder_decoder_embeddings:
            self.decoder.embed_tokens = value

    def get_encoder(self, modality: str | None = None):
        return self.encoder

    def get_decoder(self):
        return self.decoder

    @can_return_tuple
    @deprecate_kwarg("past_key_values", version="6.0.0", new_name="cache")
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: BaseModelOutput | tuple | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> Seq2SeqModelOutput:
        """Encode (unless ``encoder_outputs`` are given), then decode ``decoder_input_ids``.
        See :meth:`VaswaniForConditionalGeneration.forward`. ``return_dict=False`` (or
        ``config.return_dict=False``) returns ``Seq2SeqModelOutput.to_tuple()``."""
        if output_attentions is None:
            output_attentions = self.config.output_attentions
        if output_hidden_states is None:
            output_hidden_states = self.config.output_hidden_states
        if encoder_outputs is None:
            encoder_outputs = self.encoder(
                input_ids=input_ids,
                attention_mask=attention_mask,
                inputs_embeds=inputs_embeds,
                output_attentions=output_attentions,
                output_hidden_states=output_hidden_states,
                return_dict=True,
            )
        elif not isinstance(encoder_outputs, BaseModelOutput):
            encoder_outputs = BaseModelOutput(
                *(tuple(encoder_outputs) + (None, None, None))[:3]  # last, hidden, attentions
            )
        if decoder_input_ids is None and decoder_inputs_embeds is None:
            raise ValueError("decoder_input_ids (or labels) are required")
        decoded = self.decoder(
            input_ids=decoder_input_ids,
            attention_mask=decoder_attention_mask,
            encoder_hidden_states=encoder_outputs.last_hidden_state,
            encoder_attention_mask=attention_mask,
            cache=cache,
            inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            return_dict=True,
        )
        return Seq2SeqModelOutput(
            last_hidden_state=decoded.last_hidden_state,
            cache=decoded.cache,
            decoder_hidden_states=decoded.hidden_states,
            decoder_attentions=decoded.attentions,
            cross_attentions=decoded.cross_attentions,
            encoder_last_hidden_state=encoder_outputs.last_hidden_state,
            encoder_hidden_states=encoder_outputs.hidden_states,
            encoder_attentions=encoder_outputs.attentions,
        )


# Copied from hfattn.models.seq2seq_utils.token_cross_entropy
def token_cross_entropy(
    logits: torch.Tensor,
    labels: torch.Tensor,
    num_items_in_batch: int | torch.Tensor | None = None,
    label_smoothing: float = 0.0,
) -> torch.Tensor:
    r"""Token cross-entropy of ``logits [B, T, V]`` against ``labels [B, T]`` (``-100`` ignored).

    With label smoothing ``ε`` the target distribution is ``(1 - ε)·onehot(y) + ε/V``:

    .. math:: \ell_t = -(1-\varepsilon)\log p(y_t) - \tfrac{\varepsilon}{V}\sum_v \log p(v)

    The per-token losses are summed and divided by ``num_items_in_batch`` when the Trainer
    passes it (exact gradient accumulation), else by the number of labelled tokens.
    """
    labels = labels.to(logits.device)
    total = nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(),
        labels.reshape(-1),
        ignore_index=-100,
        reduction="sum",
        label_smoothing=label_smoothing,
    )
    if num_items_in_batch is None:
        count = (labels != -100).sum().clamp_min(1)
    else:
        count = torch.as_tensor(num_items_in_batch, device=logits.device)
    return total / count


class VaswaniForConditionalGeneration(VaswaniPreTrainedModel, GenerationMixin):
    r"""The Transformer with its output layer:

    .. math:: p(y_t \mid y_{<t}, x) = \mathrm{softmax}(W_o\, \mathrm{Drop}(h_t) + b_o)

    ``W_o`` is the decoder embedding matrix when ``tie_word_embeddings``. Training loss: token
    cross-entropy with label smoothing ``ε_ls`` and ``-100`` ignored, summed and divided by
    ``num_items_in_batch`` when the Trainer passes it (exact gradient accumulation), else
    averaged over the labelled tokens.
    """

    def __init__(self, config: VaswaniConfig):
        super().__init__(config)
        self.model = VaswaniModel(config)
        self.head_dropout = config.head_dropout
        self.lm_head = nn.Linear(config.d_model, config.vocab_size)
        self.post_init()

    # Copied from hfattn.models.seq2seq_utils.Seq2SeqLMAccessorsMixin._own_tied_weights
    def _own_tied_weights(self) -> dict[str, str]:
        if not self.config.tie_word_embeddings:
            return {}
        if self.config.share_encoder_decoder_embeddings:
            return {"lm_head.weight": "model.encoder.embed_tokens.weight"}
        return {"lm_head.weight": "model.decoder.embed_tokens.weight"}

    # Copied from hfattn.models.seq2seq_utils.Seq2SeqLMAccessorsMixin.get_encoder
    def get_encoder(self, modality: str | None = None):
        return self.model.encoder

    # Copied from hfattn.models.seq2seq_utils.Seq2SeqLMAccessorsMixin.get_decoder
    def get_decoder(self):
        return self.model.decoder

    # Copied from hfattn.models.seq2seq_utils.Seq2SeqLMAccessorsMixin.get_input_embeddings
    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.get_input_embeddings()

    # Copied from hfattn.models.seq2seq_utils.Seq2SeqLMAccessorsMixin.set_input_embeddings
    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.model.set_input_embeddings(value)

    # Copied from hfattn.models.seq2seq_utils.Seq2SeqLMAccessorsMixin.get_output_embeddings
    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    # Copied from hfattn.models.seq2seq_utils.Seq2SeqLMAccessorsMixin.set_output_embeddings
    def set_output_embeddings(self, value: nn.Linear) -> None:
        self.lm_head = value

    # Copied from hfattn.models.seq2seq_utils.Seq2SeqLMAccessorsMixin.prepare_decoder_input_ids_from_labels  # noqa: E501
    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor) -> torch.Tensor:
        """``shift_tokens_right(labels)`` (used by data collators)."""
        return shift_tokens_right(
            labels, self.config.pad_token_id, self.config.decoder_start_token_id
        )

    @can_return_tuple
    @deprecate_kwarg("past_key_values", version="6.0.0", new_name="cache")
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: BaseModelOutput | tuple | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        num_items_in_batch: int | torch.Tensor | None = None,
        **kwargs,
    ) -> Seq2SeqLMOutput | tuple:
        r"""Next-token logits for every target position, and the loss when ``labels`` are given.

        Args:
            input_ids: source ids ``[batch, src_len]``.
            attention_mask: ``[batch, src_len]``, 1 = token, 0 = padding.
            decoder_input_ids: ``[batch, tgt_len]``; default ``shift_tokens_right(labels)``.
            decoder_attention_mask: target padding (optional with right padding).
            encoder_outputs: reuse an encoder pass (``generate`` does).
            cache: the ``EncoderDecoderCache`` returned by the previous call.
            inputs_embeds / decoder_inputs_embeds: instead of the ids, the raw embeddings
                ``embed_tokens(ids)`` (Bart's convention): the √d scaling and the positions are
                added by the stack, so they give exactly the outputs of the ids.
            labels: ``[batch, tgt_len]`` targets, ``-100`` ignored.
            use_cache: return the cache (default ``config.use_cache``; off with ``labels`` and
                while training with gradient checkpointing).
            num_items_in_batch: labelled tokens in the whole accumulated batch (Trainer).
            output_attentions: return ``encoder_attentions``, ``decoder_attentions`` and
                ``cross_attentions``, one ``[batch, heads, tgt, src]`` map per layer (computed
                with the ``eager`` kernel for that call); default ``config.output_attentions``.
            output_hidden_states: return ``encoder_hidden_states`` and
                ``decoder_hidden_states``: the embeddings and every layer's output
                (``encoder_layers + 1`` and ``decoder_layers + 1`` tensors, as Bart's);
                default ``config.output_hidden_states``.
            return_dict: ``False`` (default ``config.return_dict``) returns
                ``Seq2SeqLMOutput.to_tuple()`` (the non-``None`` fields, loss first).
        """
        if labels is not None and decoder_input_ids is None and decoder_inputs_embeds is None:
            decoder_input_ids = self.prepare_decoder_input_ids_from_labels(labels)
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
            encoder_outputs=encoder_outputs,
            cache=cache,
            inputs_embeds=inputs_embeds,
            decoder_inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache if labels is None else False,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            return_dict=True,
        )
        logits = self.lm_head(dropout(outputs.last_hidden_state, self.head_dropout, self))
        loss = None
        if labels is not None:
            loss = token_cross_entropy(
                logits, labels, num_items_in_batch, self.config.label_smoothing
            )
        return Seq2SeqLMOutput(
            loss=loss,
            logits=logits,
            cache=outputs.cache,
            decoder_hidden_states=outputs.decoder_hidden_states,
            decoder_attentions=outputs.decoder_attentions,
            cross_attentions=outputs.cross_attentions,
            encoder_last_hidden_state=outputs.encoder_last_hidden_state,
            encoder_hidden_states=outputs.encoder_hidden_states,
            encoder_attentions=outputs.encoder_attentions,
        )


__all__ = [
    "VaswaniDecoder",
    "VaswaniEncoder",
    "VaswaniForConditionalGeneration",
    "VaswaniModel",
    "VaswaniPreTrainedModel",
    "tfixup_scales",
]
