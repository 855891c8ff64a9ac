"""What can be exported to CTranslate2, checked before any weight is read (light: no torch, no
``ctranslate2``).

Refused, with one line naming the field and its value (:func:`check_exportable`): another
``model_type``, any other attention score or distribution (additive, kernels, sparsemax, ...),
an activation CTranslate2 lacks, ``init_method="t-fixup"`` (no LayerNorm, which CTranslate2's
Transformer always applies) and ``chollet_cross_attention_mask`` (a cross-attention masked by
the target's causal mask). :func:`check_quantization` and :func:`check_output_folder` check the
rest of ``hfattn export``'s arguments.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from ..storage.file_io import unwritable_folder

FORMATS = ("ctranslate2",)
"""Formats of ``hfattn export --format``."""
QUANTIZATIONS = ("float32", "int8", "int8_float32", "float16", "int8_float16")
"""Weight types of an export (CTranslate2's names): ``int8*`` quantize the linear layers per
row, the second part is the type of the other weights."""
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


class ExportError(ValueError):
    """The model, the tokenizer or the output folder cannot be exported as asked; the message
    is one line naming the field (or folder) and what is allowed."""


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
        ExportError: ``output_dir`` is a file, a non-empty folder without ``overwrite``, the
            model folder / one of its parents, or in a folder this process cannot write to
            (:func:`~hfattn.storage.file_io.unwritable_folder`).
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
    refusing = unwritable_folder(output_dir)
    if refusing is not None:
        raise ExportError(
            f"output folder {output_dir} cannot be written: {refusing} is read-only for this "
            "user; give a folder you can write to"
        )
    return output_dir
