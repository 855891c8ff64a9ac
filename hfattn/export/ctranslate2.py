"""The Vaswani Transformer as a CTranslate2 model: export and serving.

:func:`export_ctranslate2` builds a ``ctranslate2.specs.TransformerSpec`` from a
:class:`~hfattn.VaswaniForConditionalGeneration` (its config and weights, as CTranslate2's own
Marian converter does for ``MarianMTModel``) and writes the CTranslate2 folder::

    model.bin, config.json, shared_vocabulary.json    CTranslate2's model (ctranslate2.Translator)
    tokenizer.json, tokenizer_config.json             the model's tokenizer, unchanged
    generation_config.json                            the model's decoding defaults
    hfattn_export.json                                what the loader needs (limits, tokens)
    README.md                                         how to load it

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
- ``activation``: the names of :data:`ACTIVATIONS`.
- ``lm_head`` → the decoder's ``projection`` (an all-zero bias left out, as CTranslate2's
  Marian converter does); Q/K/V fused as CTranslate2 reads them.

Refused, with one line naming the field and its value (:func:`check_exportable`), before any
weight is read: another ``model_type``, any other attention score or distribution (additive,
kernels, sparsemax, ...), an activation CTranslate2 lacks, ``init_method="t-fixup"`` (no
LayerNorm, which CTranslate2's Transformer always applies) and ``chollet_cross_attention_mask``
(a cross-attention masked by the target's causal mask).

:class:`CTranslate2Translation` loads the folder and translates as
:func:`hfattn.tasks.translation.inference.translate_texts` does: the same tokenizer (sources end
with ``<eos>``, no prefix), the same truncation of long sources, the decoder started from
``decoder_start_token_id``, stopped at ``eos_token_id``, decoded with
``skip_special_tokens=True`` and stripped; its defaults (beam width, length, length penalty,
n-gram blocking) come from ``generation_config.json``.

``ctranslate2`` (``pip install 'hfattn[serve]'``), torch and transformers are imported inside
the functions, so importing this module is cheap.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from ..fileio import atomic_dir
from ..run_folder import CTRANSLATE2_DIR
from ..tasks.translation.encoding import encode_sources, load_pairs

logger = logging.getLogger(__name__)

FORMATS = ("ctranslate2",)
"""Formats of ``hfattn export --format``."""
QUANTIZATIONS = ("float32", "int8", "int8_float32", "float16", "int8_float16")
"""Weight types of an export (CTranslate2's names): ``int8*`` quantize the linear layers per
row, the second part is the type of the other weights."""
COMPUTE_TYPES = ("default", "auto", *QUANTIZATIONS, "int16", "bfloat16", "int8_bfloat16")
"""What :class:`CTranslate2Translation` may compute in (``default``: the export's own type, or
the nearest one the device supports)."""
DEVICES = ("cpu", "cuda", "auto")
ACTIVATIONS = {
    "relu": "RELU",
    "gelu": "GELU",
    "gelu_python": "GELU",
    "gelu_new": "GELUTanh",
    "gelu_fast": "GELUTanh",
    "gelu_accurate": "GELUTanh",
    "gelu_pytorch_tanh": "GELUTanh",
    "gelu_python_tanh": "GELUTanh",
    "quick_gelu": "GELUSigmoid",
    "silu": "SWISH",
    "swish": "SWISH",
    "tanh": "Tanh",
    "sigmoid": "Sigmoid",
}
"""``activation`` (``transformers.activations.ACT2FN`` names) → ``ctranslate2.specs.Activation``
member computing the same function."""
ATTENTION_SCORES = ("scaled_dot", "dot")
ATTENTION_DISTRIBUTIONS = (None, "softmax")
NORM_POSITIONS = ("post", "pre")
POSITION_EMBEDDINGS = ("sinusoidal", "learned")
SINUSOIDAL_POSITIONS = 1024
"""Rows of the sinusoidal table written for a model whose ``max_position_embeddings`` is
smaller: hfattn computes sinusoids for any position, CTranslate2 reads a table, so this bounds
the tokens one translation can generate."""
EXPORT_INFO_FILE = "hfattn_export.json"
"""The export's own facts (limits, decoder start and end tokens, quantization)."""
GENERATION_CONFIG_FILE = "generation_config.json"
DEFAULT_MAX_NEW_TOKENS = 128
"""``max_new_tokens`` when ``generation_config.json`` sets none (``translate_texts``'s default)."""
INSTALL_HINT = "pip install 'hfattn[serve]' (or: pip install 'ctranslate2>=4.5,<5')"


class ExportError(ValueError):
    """The model, the tokenizer or the output folder cannot be exported as asked; the message
    is one line naming the field (or folder) and what is allowed."""


# ---- checks (light: no torch, no ctranslate2) ----------------------------------------------------
def _field(config, name: str, default=None):
    if isinstance(config, Mapping):
        return config.get(name, default)
    return getattr(config, name, default)


def unsupported_fields(config) -> list[str]:
    """What of ``config`` (a ``PreTrainedConfig`` or its ``config.json`` dict) CTranslate2's
    Transformer cannot express: one ``field=value: why (allowed: ...)`` per field, or ``[]``.
    Missing fields count as the :class:`~hfattn.VaswaniConfig` defaults."""
    model_type = _field(config, "model_type")
    if model_type != "vaswani":
        return [
            f"model_type={model_type!r}: only the Vaswani Transformer (model_type 'vaswani', "
            "VaswaniForConditionalGeneration) exports to CTranslate2"
        ]
    problems = []

    def allowed(values) -> str:
        return ", ".join("null" if v is None else str(v) for v in values)

    checks = (
        ("attention_score", "scaled_dot", ATTENTION_SCORES, "CTranslate2 attends by dot product"),
        (
            "attention_distribution",
            None,
            ATTENTION_DISTRIBUTIONS,
            "CTranslate2 normalises attention with a softmax",
        ),
        ("activation", "relu", tuple(ACTIVATIONS), "CTranslate2 has no such FFN activation"),
        ("norm_position", "post", NORM_POSITIONS, "CTranslate2 has pre-LN and post-LN only"),
        ("position_embedding", "sinusoidal", POSITION_EMBEDDINGS, "no CTranslate2 equivalent"),
        (
            "init_method",
            "xavier",
            ("xavier", "normal"),
            "T-Fixup models have no LayerNorm, which CTranslate2's Transformer always applies",
        ),
        (
            "chollet_cross_attention_mask",
            False,
            (False,),
            "CTranslate2 cannot mask the cross-attention with the target's causal mask",
        ),
    )
    for name, default, values, why in checks:
        value = _field(config, name, default)
        if value not in values:
            shown = json.dumps(value) if isinstance(value, bool) else repr(value)
            problems.append(f"{name}={shown}: {why} (allowed: {allowed(values)})")
    return problems


def check_exportable(config) -> None:
    """Refuse a config that CTranslate2's Transformer spec cannot express.

    Raises:
        ExportError: one line, ``cannot export to CTranslate2: attention_score='additive': ...``
            (every unsupported field, ``;``-separated).
    """
    problems = unsupported_fields(config)
    if problems:
        raise ExportError("cannot export to CTranslate2: " + "; ".join(problems))


def check_quantization(quantization: str | None) -> str:
    """``quantization`` (``None`` = ``float32``) if it is one of :data:`QUANTIZATIONS`.

    Raises:
        ExportError: naming the value and the allowed ones.
    """
    quantization = quantization or "float32"
    if quantization not in QUANTIZATIONS:
        raise ExportError(
            f"quantization must be one of {', '.join(QUANTIZATIONS)}; got {quantization!r}"
        )
    return quantization


def check_output_folder(
    output_dir: str | Path, overwrite: bool, model_dir: str | Path | None = None
) -> Path:
    """``output_dir``, checked to be writable as an export: absent or empty, or any folder with
    ``overwrite``; never the model folder itself nor a folder holding it (``overwrite`` would
    delete the model).

    Raises:
        ExportError: ``output_dir`` is a file, a non-empty folder without ``overwrite``, or the
            model folder / one of its parents.
    """
    output_dir = Path(output_dir).expanduser()
    if model_dir is not None and Path(model_dir).expanduser().exists():
        model = Path(model_dir).expanduser().resolve()
        out = output_dir.resolve()
        if out == model or out in model.parents:
            raise ExportError(
                f"output folder {output_dir} is (or holds) the model folder {model_dir}: "
                "give another folder"
            )
    if output_dir.exists() and not output_dir.is_dir():
        raise ExportError(f"output folder {output_dir} is a file")
    if output_dir.is_dir() and any(output_dir.iterdir()) and not overwrite:
        raise ExportError(
            f"output folder {output_dir} already exists and is not empty: pass --overwrite "
            "(overwrite=True) to replace it, or give another folder"
        )
    return output_dir


def needs_mkl_int8_gemm(cpuinfo: str) -> bool:
    """Whether CTranslate2 should be told to use Intel MKL (``CT2_USE_MKL=1``) on the CPU that
    ``cpuinfo`` (the text of ``/proc/cpuinfo``) describes: an x86 CPU that is not Intel's and
    has no AVX-512 VNNI. There CTranslate2 multiplies int8 matrices with oneDNN's AVX2 u8×s8
    kernel, whose 16-bit pair sums (``vpmaddubsw``) saturate: an int8 export then decodes
    much text differently from the model (the measured shares are in ``benchmarks/NOTES.md``).
    MKL's int8 product does not saturate."""
    flags = next((line for line in cpuinfo.splitlines() if line.startswith("flags")), "").split()
    return "GenuineIntel" not in cpuinfo and "avx2" in flags and "avx512_vnni" not in flags


def prefer_mkl_int8_gemm() -> None:
    """Set ``CT2_USE_MKL=1`` where :func:`needs_mkl_int8_gemm` says so, unless the user set
    the variable. CTranslate2 reads it when it is imported, so this module calls it when it is
    imported itself (``import hfattn.export`` before ``import ctranslate2``)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file() and needs_mkl_int8_gemm(cpuinfo.read_text("utf-8", "replace")):
        os.environ.setdefault("CT2_USE_MKL", "1")


prefer_mkl_int8_gemm()


def require_ctranslate2():
    """The ``ctranslate2`` module.

    Raises:
        ImportError: ``ctranslate2 is not installed: pip install 'hfattn[serve]' ...``.
    """
    try:
        import ctranslate2
    except ImportError:
        raise ImportError(f"ctranslate2 is not installed: {INSTALL_HINT}") from None
    return ctranslate2


# ---- the spec --------------------------------------------------------------------------------------
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
    scale = np.float32(attention.score.scale)
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


# ---- writing the folder ----------------------------------------------------------------------------
README = """\
# {name} (CTranslate2)

A CTranslate2 export ({quantization}) of the hfattn Vaswani Transformer `{source}`, made by
`hfattn export {source} --format ctranslate2 --quantization {quantization} OUT`.

With hfattn (the decoding defaults of `generation_config.json`, the model's own tokenization):

```python
from hfattn.export import CTranslate2Translation

translator = CTranslate2Translation("{name}", device="cpu")  # compute_type="int8", ...
print(translator.translate(["{example}"], num_beams=4))
```

With `ctranslate2` and `transformers` only:

```python
import ctranslate2
from transformers import PreTrainedTokenizerFast

translator = ctranslate2.Translator("{name}", device="cpu")
tokenizer = PreTrainedTokenizerFast.from_pretrained("{name}")
source = tokenizer.convert_ids_to_tokens(tokenizer("{example}")["input_ids"])  # ends with {eos}
result = translator.translate_batch(
    [source], beam_size={num_beams}, max_decoding_length={max_new_tokens}, min_decoding_length=0
)
ids = tokenizer.convert_tokens_to_ids(result[0].hypotheses[0])
print(tokenizer.decode(ids, skip_special_tokens=True).strip())
```
"""


def export_ctranslate2(
    model,
    tokenizer,
    output_dir: str | Path,
    *,
    quantization: str | None = "float32",
    overwrite: bool = False,
    source: str | None = None,
    example: str = "I love you.",
) -> Path:
    """Write the CTranslate2 folder of a Vaswani ``model`` and its ``tokenizer`` to
    ``output_dir`` (atomically: built in a temporary folder, then renamed).

    Args:
        model: a :class:`~hfattn.VaswaniForConditionalGeneration` (any dtype; its weights are
            read as float32, then stored as ``quantization``).
        tokenizer: the model's tokenizer (saved into the folder unchanged).
        output_dir: the folder to create.
        quantization: one of :data:`QUANTIZATIONS` (``None``: ``float32``).
        overwrite: replace an existing non-empty ``output_dir``.
        source: how the model was named (the README shows it).
        example: the sentence of the README's snippets.

    Returns:
        ``output_dir``.

    Raises:
        ExportError: a bad ``quantization``, a config CTranslate2 cannot express
            (:func:`check_exportable`), a tokenizer that does not fit, or ``output_dir`` taken
            (:func:`check_output_folder`); all before any weight is converted.
        ImportError: ``ctranslate2`` is not installed.
    """
    from ..evaluation.translation import source_limit  # torch on use, as above

    quantization = check_quantization(quantization)
    check_exportable(model.config)
    output_dir = check_output_folder(output_dir, overwrite)
    require_ctranslate2()
    spec = build_spec(model, tokenizer)
    spec.validate()
    spec.optimize(quantization=quantization)
    special = decoding_tokens(model)
    generation = DecodingSettings.from_generation_config(model.generation_config.to_dict())
    info = {
        "format": "ctranslate2",
        "quantization": quantization,
        "model_type": model.config.model_type,
        "source": source,
        "max_source_tokens": source_limit(model, tokenizer),
        "max_new_tokens": position_rows(model.config),
        **special,
    }

    def build(folder: Path) -> None:
        spec.save(str(folder))
        tokenizer.save_pretrained(folder)
        model.generation_config.save_pretrained(folder)
        (folder / EXPORT_INFO_FILE).write_text(json.dumps(info, indent=2) + "\n", "utf-8")
        readme = README.format(
            name=output_dir.name,
            source=source or "MODEL",
            quantization=quantization,
            example=example.replace('"', '\\"'),
            eos=tokenizer.convert_ids_to_tokens(special["eos_token_ids"][0]),
            num_beams=generation.num_beams,
            max_new_tokens=generation.max_new_tokens,
        )
        (folder / "README.md").write_text(readme, "utf-8")

    with atomic_dir(output_dir) as tmp:
        build(tmp)
    return Path(output_dir)


# ---- serving ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DecodingSettings:
    """How :class:`CTranslate2Translation` decodes (``generate``'s names): beam width
    (1 = greedy), the new-token bounds, the length penalty of beam search (score / length^α,
    the end token counted, as ``generate`` does), ``generate``'s stopping rule, n-gram blocking
    and the repetition penalty.

    Greedy search gives ``generate``'s tokens. Beam search explores the same beams (the best
    ``2 × num_beams`` continuations, an end token ending a hypothesis only among the first
    ``num_beams``) and ranks ended hypotheses alike; CTranslate2 stops once
    ``num_beams × patience`` hypotheses have ended (Kasai et al. 2022, "Beam Decoding with
    Controlled Patience"). ``generate`` stops by ``early_stopping``:

    - ``True``: once ``num_beams`` hypotheses have ended, CTranslate2's rule at
      ``patience=1``, so the export decodes exactly as the model (the Bible validation
      books, beam 4: 100 % of verses the same).
    - ``False`` (transformers' default) or ``"never"``: while the best running beam could
      still beat the worst of the ``num_beams`` kept hypotheses, which CTranslate2 cannot
      express. With ``length_penalty=0`` the answer is the same (both stop once the best beam
      has ended); with a length penalty ``generate`` may search on and find a longer
      hypothesis. ``patience=2`` comes nearest (on the Bible test books 93.7 % of verses the
      same, against 88.8 % at ``patience=1``).

    ``patience`` ``None`` follows ``early_stopping``: 1 for ``True``, else 2.

    Raises:
        ValueError: a field out of range, named with what it allows.
    """

    num_beams: int = 1
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    min_new_tokens: int = 0
    length_penalty: float = 1.0
    early_stopping: bool | str = False
    no_repeat_ngram_size: int = 0
    repetition_penalty: float = 1.0
    patience: float | None = None

    def __post_init__(self):
        for name, low in (
            ("num_beams", 1),
            ("max_new_tokens", 1),
            ("min_new_tokens", 0),
            ("no_repeat_ngram_size", 0),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}; got {value!r}")
        if self.min_new_tokens > self.max_new_tokens:
            raise ValueError(
                f"min_new_tokens ({self.min_new_tokens}) must be <= max_new_tokens "
                f"({self.max_new_tokens})"
            )
        if not (isinstance(self.early_stopping, bool) or self.early_stopping == "never"):
            raise ValueError(
                f"early_stopping must be True, False or 'never'; got {self.early_stopping!r}"
            )
        positive = {"repetition_penalty": self.repetition_penalty}
        if self.patience is not None:  # None: follow early_stopping (beam_patience)
            positive["patience"] = self.patience
        for name, value in positive.items():
            if not value > 0:
                raise ValueError(f"{name} must be > 0; got {value!r}")

    @property
    def beam_patience(self) -> float:
        """CTranslate2's ``patience``: :attr:`patience`, or the one that follows
        :attr:`early_stopping` (1 for ``True``: ``generate``'s rule exactly; else 2)."""
        if self.patience is not None:
            return float(self.patience)
        return 1.0 if self.early_stopping is True else 2.0

    @classmethod
    def from_generation_config(cls, data: Mapping) -> DecodingSettings:
        """The settings of a ``generation_config.json`` dict (unset ones: the defaults)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known and v is not None})

    def updated(self, **overrides) -> DecodingSettings:
        """A copy with the ``overrides`` that are not ``None``."""
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})

    def ctranslate2_options(self) -> dict:
        """The ``translate_batch`` keyword arguments."""
        return {
            "beam_size": self.num_beams,
            "max_decoding_length": self.max_new_tokens,
            "min_decoding_length": self.min_new_tokens,
            "length_penalty": float(self.length_penalty),
            "no_repeat_ngram_size": self.no_repeat_ngram_size,
            "repetition_penalty": float(self.repetition_penalty),
            "patience": self.beam_patience,
        }


class CTranslate2Translation:
    """Translate with a folder written by :func:`export_ctranslate2`, as hfattn's PyTorch path
    (:func:`~hfattn.tasks.translation.inference.translate_texts`) does with the model.

    Args:
        folder: the export.
        device: ``cpu``, ``cuda`` or ``auto``.
        compute_type: one of :data:`COMPUTE_TYPES` (``default``: the export's quantization,
            or the nearest type the device runs).
        intra_threads: threads per translation (0: CTranslate2's default).
        inter_threads: translations run in parallel.

    Attributes:
        defaults: the :class:`DecodingSettings` of the folder's ``generation_config.json``.
        translator / tokenizer: the ``ctranslate2.Translator`` and the model's tokenizer.

    Raises:
        ValueError: a folder that is no export (naming the missing file), a bad ``device`` or
            ``compute_type`` (naming the allowed values), before the model is loaded.
        ImportError: ``ctranslate2`` is not installed.
    """

    def __init__(
        self,
        folder: str | Path,
        device: str = "cpu",
        compute_type: str = "default",
        *,
        intra_threads: int = 0,
        inter_threads: int = 1,
    ):
        folder = Path(folder).expanduser()
        if not folder.is_dir():
            raise ValueError(f"CTranslate2 export not found: {folder} is not a folder")
        for name in EXPORT_FILES:
            if not (folder / name).is_file():
                raise ValueError(
                    f"{folder} is not an hfattn CTranslate2 export: {name} is missing "
                    "(write one with `hfattn export MODEL --format ctranslate2 OUT`)"
                )
        if device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}; got {device!r}")
        if compute_type not in COMPUTE_TYPES:
            raise ValueError(
                f"compute_type must be one of {', '.join(COMPUTE_TYPES)}; got {compute_type!r}"
            )
        ctranslate2 = require_ctranslate2()
        if device != "auto" and compute_type not in ("default", "auto"):
            supported = sorted(ctranslate2.get_supported_compute_types(device))
            if compute_type not in supported:
                raise ValueError(
                    f"compute_type={compute_type!r} is not supported on {device} here (supported: "
                    f"{', '.join(supported)}; or 'default')"
                )
        from transformers import PreTrainedTokenizerFast

        self.folder = folder
        self.info = json.loads((folder / EXPORT_INFO_FILE).read_text("utf-8"))
        generation = folder / GENERATION_CONFIG_FILE
        saved = json.loads(generation.read_text("utf-8")) if generation.is_file() else {}
        self.defaults = DecodingSettings.from_generation_config(saved)
        self.tokenizer = PreTrainedTokenizerFast.from_pretrained(folder)
        self.translator = ctranslate2.Translator(
            str(folder),
            device=device,
            compute_type=compute_type,
            intra_threads=intra_threads,
            inter_threads=inter_threads,
        )
        self._end_tokens = self.tokenizer.convert_ids_to_tokens(self.info["eos_token_ids"])

    def settings(self, **overrides) -> DecodingSettings:
        """:attr:`defaults` with the given ``overrides`` (``None`` keeps the default), and
        ``max_new_tokens`` cut (with a warning) to the positions the export holds."""
        settings = self.defaults.updated(**overrides)
        limit = self.info.get("max_new_tokens")
        if limit and settings.max_new_tokens > limit:
            logger.warning(
                "max_new_tokens %d is more than the decoder's %d positions: cut to %d",
                settings.max_new_tokens,
                limit,
                limit,
            )
            settings = replace(
                settings, max_new_tokens=limit, min_new_tokens=min(settings.min_new_tokens, limit)
            )
        return settings

    def generate_ids(
        self,
        input_ids: Sequence[Sequence[int]],
        *,
        batch_size: int = 32,
        **decoding,
    ) -> list[list[int]]:
        """The token ids each source (ids as the tokenizer gives them, ``<eos>`` included)
        translates to, without the decoder start token and the end token: ``generate``'s
        output rows less their first token, the end token and the padding.

        ``decoding``: fields of :class:`DecodingSettings` (``None``: the default).

        Raises:
            ValueError: ``batch_size`` < 1, or a decoding setting out of range.
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1; got {batch_size!r}")
        settings = self.settings(**decoding)
        if not input_ids:
            return []
        convert = self.tokenizer.convert_ids_to_tokens
        results = self.translator.translate_batch(
            [convert(list(ids)) for ids in input_ids],
            max_batch_size=batch_size,
            end_token=self._end_tokens,
            max_input_length=0,  # sources are cut to the model's limit by the caller
            **settings.ctranslate2_options(),
        )
        to_ids = self.tokenizer.convert_tokens_to_ids
        return [to_ids(result.hypotheses[0]) for result in results]

    def translate(
        self,
        texts: Sequence[str],
        *,
        num_beams: int | None = None,
        max_new_tokens: int | None = None,
        length_penalty: float | None = None,
        no_repeat_ngram_size: int | None = None,
        batch_size: int = 32,
        on_too_long: str = "warn",
        **decoding,
    ) -> list[str]:
        """Translate ``texts`` (any order and lengths); an empty or blank source gives ``""``.
        Sources longer than the model accepts are cut with a warning (``on_too_long="warn"``)
        or refused (``"error"``); ``None`` settings take the :attr:`defaults`.

        Raises:
            ValueError: a source that is not valid text, ``batch_size`` < 1, a decoding
                setting out of range, or (``on_too_long="error"``)
                :class:`~hfattn.tasks.translation.encoding.SourceTooLongError`.
        """
        from ..tokenization import require_text  # transformers: `hfattn --help` imports this module

        for i, text in enumerate(texts):
            require_text(text, f"source {i}")
        decoding.update(
            num_beams=num_beams,
            max_new_tokens=max_new_tokens,
            length_penalty=length_penalty,
            no_repeat_ngram_size=no_repeat_ngram_size,
        )
        self.defaults.updated(**decoding)  # bad settings fail before any work
        outputs = [""] * len(texts)
        todo = [i for i, text in enumerate(texts) if text.strip()]
        if not todo:
            return outputs
        encoded = encode_sources(
            self.tokenizer,
            [texts[i] for i in todo],
            self.info.get("max_source_tokens"),
            on_too_long=on_too_long,
        )
        generated = self.generate_ids(encoded, batch_size=batch_size, **decoding)
        decoded = self.tokenizer.batch_decode(generated, skip_special_tokens=True)
        for i, text in zip(todo, decoded, strict=True):
            outputs[i] = text.strip()
        return outputs

    def __repr__(self) -> str:
        return (
            f"CTranslate2Translation({str(self.folder)!r}, device={self.translator.device!r}, "
            f"compute_type={self.translator.compute_type!r}, defaults={asdict(self.defaults)})"
        )


def evaluate_export(
    folder: str | Path,
    recipe,
    splits: Sequence[str],
    *,
    data: str | None = None,
    num_beams: int | None = None,
    max_new_tokens: int | None = None,
    compute_type: str = "default",
) -> dict[str, dict]:
    """BLEU, chrF and exact match of the export in ``folder`` on ``splits`` of a translation
    ``recipe``'s data (or of ``data``), as the model's own scoring
    (:func:`~hfattn.tasks.translation.job.decoded_scores`) but translated by CTranslate2 with
    the export's saved generation settings (or the ``num_beams`` / ``max_new_tokens`` given).
    No teacher-forced loss: the export translates, it is not trained.

    Raises:
        ValueError: ``folder`` is no export, or a decoding setting out of range.
        ImportError: ``ctranslate2`` is not installed.
    """
    from ..tasks.translation.job import decoded_scores  # torch on use, as above

    translator = CTranslate2Translation(folder, compute_type=compute_type)
    settings = {"num_beams": num_beams, "max_new_tokens": max_new_tokens}
    translator.settings(**settings)  # bad settings fail before the data loads
    pairs = load_pairs(recipe.data, data)
    batch_size = recipe.evaluation.batch_size

    def translate(texts: list[str]) -> list[str]:
        return translator.translate(texts, batch_size=batch_size, **settings)

    return {
        split: decoded_scores(
            translate, translator.tokenizer, *pairs[split], recipe.evaluation.max_examples
        )
        for split in splits
    }


EXPORT_FILES = ("model.bin", EXPORT_INFO_FILE, "tokenizer.json")
"""The files every hfattn CTranslate2 export holds."""


def is_export(folder: str | Path) -> bool:
    """Whether ``folder`` is an hfattn CTranslate2 export (it holds :data:`EXPORT_FILES`)."""
    folder = Path(folder)
    return all((folder / name).is_file() for name in EXPORT_FILES)


def export_of(model: str | Path) -> Path | None:
    """The CTranslate2 export that serves ``model``: the folder itself when it is one, else its
    ``ct2/`` sub-folder (:data:`hfattn.run_folder.CTRANSLATE2_DIR`) when that is one, else
    ``None``."""
    folder = Path(model).expanduser()
    for candidate in (folder, folder / CTRANSLATE2_DIR):
        if is_export(candidate):
            return candidate
    return None


def download_export(repo_id: str, revision: str | None = None) -> Path | None:
    """The ``ct2/`` export of the Hub model repository ``repo_id``, downloaded (only that
    sub-folder) into the Hub cache; ``None`` when the repository has none.

    Raises:
        huggingface_hub errors: the repository cannot be reached or does not exist.
    """
    from huggingface_hub import HfApi, snapshot_download

    endpoint = os.environ.get("HF_ENDPOINT") or None  # read now: huggingface_hub reads it once
    files = HfApi(endpoint=endpoint).list_repo_files(repo_id, revision=revision)
    if not any(name.startswith(f"{CTRANSLATE2_DIR}/") for name in files):
        return None
    root = snapshot_download(
        repo_id,
        revision=revision,
        allow_patterns=[f"{CTRANSLATE2_DIR}/*"],
        endpoint=endpoint,
    )
    return export_of(Path(root) / CTRANSLATE2_DIR)


__all__ = [
    "ACTIVATIONS",
    "COMPUTE_TYPES",
    "EXPORT_FILES",
    "EXPORT_INFO_FILE",
    "FORMATS",
    "QUANTIZATIONS",
    "CTranslate2Translation",
    "DecodingSettings",
    "ExportError",
    "build_spec",
    "check_exportable",
    "check_output_folder",
    "check_quantization",
    "decoding_tokens",
    "download_export",
    "evaluate_export",
    "export_ctranslate2",
    "export_of",
    "is_export",
    "position_rows",
    "require_ctranslate2",
    "unsupported_fields",
    "vocabulary",
]
