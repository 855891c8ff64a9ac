"""The Vaswani Transformer as a ``ctranslate2.specs.TransformerSpec``: :func:`build_spec` reads
a :class:`~hfattn.VaswaniForConditionalGeneration`'s config and weights, as CTranslate2's own
Marian converter does for ``MarianMTModel``.

How the hfattn config maps onto the spec:

- ``norm_position`` ``"post"`` / ``"pre"`` → ``pre_norm`` (pre-LN keeps its final norm per
  stack); ``layer_norm_eps`` → ``layer_norm_epsilon``.
- ``position_embedding``: both are written as a position table (``encodings``): the learned
  table, or hfattn's interleaved sinusoids (``PE[t, 2i] = sin``, ``PE[t, 2i+1] = cos``, not
  CTranslate2's own concatenated layout) for ``max(max_position_embeddings, 1024)`` positions.
- ``scale_embedding`` → ``scale_embeddings`` = √d_model (or none); shared / tied embeddings are
  written once (CTranslate2 aliases equal tensors).
- ``head_dim`` → the spec's ``head_dim`` when ``num_heads × head_dim ≠ d_model``.
- ``attention_score`` ``"scaled_dot"`` / ``"dot"`` (with their ``scale``) → ``queries_scale``
  (left to CTranslate2's own ``1/√d_head`` where it is that).
- ``activation``: the names of :data:`~hfattn.export.checks.ACTIVATIONS`.
- ``lm_head`` → the decoder's ``projection`` (an all-zero bias left out, as CTranslate2's
  Marian converter does); Q/K/V fused as CTranslate2 reads them.

The configs the spec cannot express are refused first (:mod:`hfattn.export.checks`). numpy,
torch and ``ctranslate2`` are imported inside the functions.
"""

from __future__ import annotations

from .checks import ACTIVATIONS, ExportError, check_exportable
from .ctranslate2_runtime import require_ctranslate2

SINUSOIDAL_POSITIONS = 1024
"""Rows of the sinusoidal table written for a model whose ``max_position_embeddings`` is
smaller: hfattn computes sinusoids for any position, CTranslate2 reads a table, so this bounds
the tokens one translation can generate."""


def _array(tensor):
    """A float32 numpy copy of ``tensor`` (any dtype ``from_pretrained`` loaded). A copy, never
    a view: quantizing the spec scales its arrays in place, which must not touch the model."""
    import torch

    return tensor.detach().to(device="cpu", dtype=torch.float32, copy=True).numpy()


def _set_linear(spec, *linears) -> None:
    """``spec`` = the given ``nn.Linear`` layers stacked along their outputs (fused Q/K/V)."""
    import numpy as np

    spec.weight = np.concatenate([_array(linear.weight) for linear in linears])
    if linears[0].bias is not None:
        spec.bias = np.concatenate([_array(linear.bias) for linear in linears])


def _set_layer_norm(spec, norm) -> None:
    spec.gamma = _array(norm.weight)
    spec.beta = _array(norm.bias)


def _set_attention(spec, attention, norm, self_attention: bool) -> None:
    """Projections (Q/K/V fused for self-attention, Q and K/V for cross-attention), the output
    projection, the score's scale and the sub-layer's norm."""
    import numpy as np

    q, k, v = attention.q_proj, attention.k_proj, attention.v_proj
    groups = [(q, k, v)] if self_attention else [(q,), (k, v)]
    for linear_spec, linears in zip(spec.linear, [*groups, (attention.o_proj,)], strict=True):
        _set_linear(linear_spec, *linears)
    scale = np.float32(attention.scaling)
    if scale != np.float32(attention.key_dim**-0.5):  # CTranslate2's default: 1 / sqrt(d_head)
        spec.queries_scale = scale
    _set_layer_norm(spec.layer_norm, norm)


def _position_table(module, rows: int):
    """The first ``rows`` positions of a learned table, or hfattn's sinusoids for ``rows``."""
    # torch on use: `hfattn --help` imports this module (through hfattn.commands.export)
    from ..models.positional import SinusoidalPositionalEmbedding, sinusoidal_position_encoding

    if isinstance(module, SinusoidalPositionalEmbedding):
        return sinusoidal_position_encoding(rows, module.dim, module.base).numpy()
    return _array(module.weight[:rows])


def position_rows(config) -> int:
    """Rows of the position tables of the export: the learned table's, or
    ``max(max_position_embeddings, SINUSOIDAL_POSITIONS)`` sinusoids."""
    if config.position_embedding == "learned":
        return config.max_position_embeddings
    return max(config.max_position_embeddings, SINUSOIDAL_POSITIONS)


def _set_stack(spec, stack, embeddings_spec, rows: int) -> None:
    """Token embeddings, their √d scaling, the position table and pre-LN's final norm."""
    import numpy as np

    embeddings_spec.weight = _array(stack.embed_tokens.weight)
    spec.scale_embeddings = np.float32(stack.embed_scale) if stack.embed_scale != 1 else False
    spec.position_encodings.encodings = _position_table(stack.embed_positions, rows)
    if hasattr(spec, "layer_norm"):  # pre-LN only
        _set_layer_norm(spec.layer_norm, stack.layer_norm)


def vocabulary(tokenizer, vocab_size: int) -> list[str]:
    """The ``vocab_size`` tokens of the model's id space in id order (ids the tokenizer never
    produces get unique ``<unused_N>`` names).

    Raises:
        ExportError: the tokenizer has ids beyond ``vocab_size``.
    """
    vocab = tokenizer.get_vocab()
    beyond = [token for token, i in vocab.items() if i >= vocab_size]
    if beyond:
        raise ExportError(
            f"the tokenizer has {len(vocab)} tokens (e.g. {beyond[0]!r}) but the model's "
            f"vocab_size is {vocab_size}: export the tokenizer the model was trained with"
        )
    tokens: list[str | None] = [None] * vocab_size
    for token, i in vocab.items():
        tokens[i] = token
    for i, token in enumerate(tokens):
        if token is None:
            name = f"<unused_{i}>"
            while name in vocab:
                name += "_"
            tokens[i] = name
    return tokens


def decoding_tokens(model) -> dict:
    """``{"decoder_start_token_id", "eos_token_ids"}`` as ``generate`` uses them: the
    generation config's, else the model config's."""
    generation, config = model.generation_config, model.config
    start = generation.decoder_start_token_id
    if start is None:
        start = config.decoder_start_token_id
    if start is None:
        start = config.bos_token_id
    eos = generation.eos_token_id if generation.eos_token_id is not None else config.eos_token_id
    eos = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
    if start is None or not eos:
        missing = "decoder_start_token_id" if start is None else "eos_token_id"
        raise ExportError(f"{missing} is not set in the model's config or generation config")
    return {"decoder_start_token_id": int(start), "eos_token_ids": [int(i) for i in eos]}


def build_spec(model, tokenizer):
    """The ``ctranslate2.specs.TransformerSpec`` of ``model`` (weights copied as float32) with
    its vocabulary and special tokens registered; not yet validated nor quantized.

    Raises:
        ExportError: the config cannot be expressed (:func:`check_exportable`), or the tokenizer
            does not fit the model (:func:`vocabulary`, :func:`decoding_tokens`).
        ImportError: ``ctranslate2`` is missing.
    """
    config = model.config
    check_exportable(config)
    require_ctranslate2()
    from ctranslate2.specs import common_spec, transformer_spec
    from ctranslate2.specs.model_spec import OPTIONAL

    tokens = vocabulary(tokenizer, config.vocab_size)
    special = decoding_tokens(model)
    options = {
        "pre_norm": config.norm_position == "pre",
        "activation": getattr(common_spec.Activation, ACTIVATIONS[config.activation]),
    }
    if config.num_heads * config.head_dim != config.d_model:
        options["head_dim"] = config.head_dim
    spec = transformer_spec.TransformerSpec(
        transformer_spec.TransformerEncoderSpec(config.encoder_layers, config.num_heads, **options),
        transformer_spec.TransformerDecoderSpec(config.decoder_layers, config.num_heads, **options),
    )
    rows = position_rows(config)
    encoder, decoder = model.model.encoder, model.model.decoder
    _set_stack(spec.encoder, encoder, spec.encoder.embeddings[0], rows)
    for layer_spec, layer in zip(spec.encoder.layer, encoder.layers, strict=True):
        _set_attention(layer_spec.self_attention, layer.self_attn, layer.self_attn_layer_norm, True)
        _set_ffn(layer_spec.ffn, layer)
    _set_stack(spec.decoder, decoder, spec.decoder.embeddings, rows)
    for layer_spec, layer in zip(spec.decoder.layer, decoder.layers, strict=True):
        _set_attention(layer_spec.self_attention, layer.self_attn, layer.self_attn_layer_norm, True)
        _set_attention(
            layer_spec.attention, layer.encoder_attn, layer.encoder_attn_layer_norm, False
        )
        _set_ffn(layer_spec.ffn, layer)
    _set_linear(spec.decoder.projection, model.lm_head)
    projection = spec.decoder.projection
    if projection.has_bias() and not projection.bias.any():  # as the Marian converter does:
        projection.bias = OPTIONAL  # an all-zero output bias is one pass per step for nothing

    unk = config.unk_token_id if config.unk_token_id is not None else tokenizer.unk_token_id
    spec.config.unk_token = tokens[unk] if unk is not None else "<unk>"
    spec.config.bos_token = tokens[config.bos_token_id if config.bos_token_id is not None else 0]
    spec.config.eos_token = tokens[special["eos_token_ids"][0]]
    spec.config.decoder_start_token = tokens[special["decoder_start_token_id"]]
    spec.config.add_source_bos = False  # the tokenizer's template adds what the model reads
    spec.config.add_source_eos = False
    spec.config.layer_norm_epsilon = float(config.layer_norm_eps)
    spec.register_source_vocabulary(tokens)
    spec.register_target_vocabulary(tokens)
    return spec


def _set_ffn(spec, layer) -> None:
    _set_linear(spec.linear_0, layer.feed_forward.fc1)
    _set_linear(spec.linear_1, layer.feed_forward.fc2)
    _set_layer_norm(spec.layer_norm, layer.final_layer_norm)
