r"""Training speed: target tokens per second and model FLOPs utilisation (MFU).

MFU is the share of a device's peak arithmetic rate that the model's own training FLOPs use
(Chowdhery et al. 2022, "PaLM", appendix B):

.. math:: \mathrm{MFU} = \frac{\text{training FLOPs of the steps}}{\text{seconds} \times
   \text{peak FLOP/s}}

Training FLOPs (:class:`FlopCounter`): a model's own ``floating_point_ops(batch)`` where it
defines one; the Vaswani Transformer's count of :func:`vaswani_training_flops` (its matrix
products, attention included); the RNN encoder-decoders' (Bahdanau, Luong) count of
:func:`recurrent_seq2seq_training_flops` (encoder per source token, decoder and output layer
per target token, attention per pair); else :math:`6 N T` (Kaplan et al. 2020, "Scaling Laws for
Neural Language Models": forward 2 and backward 4 FLOPs per parameter and token) with
:math:`N` the parameters outside ``nn.Embedding`` tables and :math:`T` the batch's padded
input positions, the count ``transformers.Trainer`` has used for its ``total_flos``.

The peak (:func:`device_peak_flops`): NVIDIA's datasheet figure of the device's dense tensor
throughput for the dtype (:data:`DATASHEET_PEAKS`, matched on ``torch.cuda.get_device_name``),
or, for another CUDA device, the rate of one :math:`8192^3` matrix product measured once
(:func:`measured_matmul_peak`). A CPU has no peak here: its MFU is ``None``.
"""

from __future__ import annotations

import functools
import re
import time

import torch
from torch import nn

# (device name pattern, dtype class) -> dense FLOP/s, from NVIDIA's datasheets (the "with
# sparsity" figures halved). "tf32" is fp32 matmul on tensor cores (torch's allow_tf32),
# "fp32" plain fp32 (torch's default for matmul).
DATASHEET_PEAKS: tuple[tuple[str, dict[str, float]], ...] = (
    # NVIDIA H100 Tensor Core GPU datasheet: H100 PCIe column
    (r"H100 PCIe", {"bf16": 756e12, "tf32": 378e12, "fp32": 51e12}),
    # H100 SXM column (torch names it "NVIDIA H100 80GB HBM3")
    (r"H100(?! NVL)", {"bf16": 989e12, "tf32": 494e12, "fp32": 67e12}),
    # NVIDIA H200 Tensor Core GPU datasheet: H200 SXM column
    (r"H200(?! NVL)", {"bf16": 989e12, "tf32": 494e12, "fp32": 67e12}),
    # NVIDIA A100 Tensor Core GPU datasheet (SXM and PCIe alike)
    (r"A100", {"bf16": 312e12, "tf32": 156e12, "fp32": 19.5e12}),
    # NVIDIA L4 Tensor Core GPU datasheet
    (r"\bL4\b", {"bf16": 121e12, "tf32": 60e12, "fp32": 30.3e12}),
    # NVIDIA A10 Tensor Core GPU datasheet (not the A10G, whose figures AWS does not publish)
    (r"\bA10\b(?!G)", {"bf16": 125e12, "tf32": 62.5e12, "fp32": 31.2e12}),
)
"""Dense peak FLOP/s by device-name pattern and dtype class (``bf16`` also stands for fp16)."""

MEASURED_MATMUL_SIZE = 8192
"""``n`` of the ``n × n`` product that measures the peak of a CUDA device not in the table."""


def dtype_class(dtype: torch.dtype | str) -> str:
    """The class of :data:`DATASHEET_PEAKS` that a run of ``dtype`` computes its matrix products
    in: ``bf16`` (``bf16`` / ``fp16`` mixed precision, bfloat16, float16), else ``tf32`` when
    torch's TF32 matmul is on (``torch.backends.cuda.matmul.allow_tf32``) or ``fp32``."""
    name = str(dtype).removeprefix("torch.")
    if name in ("bf16", "fp16", "bfloat16", "float16"):
        return "bf16"
    return "tf32" if torch.backends.cuda.matmul.allow_tf32 else "fp32"


def datasheet_peak(device_name: str, kind: str) -> float | None:
    """The dense peak FLOP/s of :data:`DATASHEET_PEAKS` for ``device_name`` (as
    ``torch.cuda.get_device_name`` spells it) and ``kind`` (``bf16``, ``tf32`` or ``fp32``);
    ``None`` for a device not in it."""
    for pattern, peaks in DATASHEET_PEAKS:
        if re.search(pattern, device_name):
            return peaks[kind]
    return None


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@functools.cache
def measured_matmul_peak(device: str, kind: str, n: int = MEASURED_MATMUL_SIZE) -> float:
    """FLOP/s of the fastest of three ``n × n`` products on ``device`` in bfloat16 (``kind``
    ``bf16``) or float32, ``2 n³ / seconds``, after one warm-up product; measured once per
    process."""
    torch_dtype = torch.bfloat16 if kind == "bf16" else torch.float32
    where = torch.device(device)
    a = torch.randn(n, n, device=where, dtype=torch_dtype)
    b = torch.randn(n, n, device=where, dtype=torch_dtype)
    best = float("inf")
    for attempt in range(4):
        _synchronize(where)
        start = time.perf_counter()
        torch.matmul(a, b)
        _synchronize(where)
        if attempt:  # the first is a warm-up
            best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best


def device_peak_flops(device: torch.device | str, dtype: str) -> tuple[float | None, str]:
    """``(peak FLOP/s, where it comes from)`` of ``device`` for a run of ``dtype`` (``bf16``,
    ``fp16``, ``no`` / ``fp32``, see :func:`dtype_class`): the datasheet figure, or on an
    unlisted CUDA device a measured :data:`MEASURED_MATMUL_SIZE`³ product; ``(None, reason)``
    on a CPU."""
    device = torch.device(device)
    if device.type != "cuda":
        return None, "no peak FLOP/s for a CPU"
    name = torch.cuda.get_device_name(device)
    kind = dtype_class(dtype)
    peak = datasheet_peak(name, kind)
    if peak is not None:
        return peak, f"{name} {kind} dense, datasheet {peak / 1e12:,.0f} TFLOP/s"
    peak = measured_matmul_peak(str(device), kind)
    n = MEASURED_MATMUL_SIZE
    return peak, f"{name} {kind}, measured {n}³ matmul {peak / 1e12:,.0f} TFLOP/s"


def non_embedding_parameters(model: nn.Module) -> int:
    """Parameters outside every ``nn.Embedding`` (counted once when shared)."""
    embedding = {
        id(p) for m in model.modules() if isinstance(m, nn.Embedding) for p in m.parameters()
    }
    return sum(p.numel() for p in model.parameters() if id(p) not in embedding)


def _parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def vaswani_parameter_counts(model: nn.Module) -> tuple[int, int, int, int]:
    """``(P_enc, P_dec, P_kv, P_out)`` of :func:`vaswani_training_flops`: the parameters of the
    encoder layers, the decoder layers, the decoder's cross-attention key and value projections
    and the output layer of a Vaswani Transformer."""
    cross_kv = sum(
        _parameters(layer.encoder_attn.k_proj) + _parameters(layer.encoder_attn.v_proj)
        for layer in model.model.decoder.layers
    )
    encoder, decoder = model.model.encoder.layers, model.model.decoder.layers
    return _parameters(encoder), _parameters(decoder), cross_kv, _parameters(model.lm_head)


def vaswani_training_flops(
    model: nn.Module,
    batch: int,
    source: int,
    target: int,
    counts: tuple[int, int, int, int] | None = None,
) -> float:
    r"""Training FLOPs of one step of a Vaswani Transformer on ``batch`` rows of ``source``
    source and ``target`` target positions (padded positions included, causal attention
    counted in full):

    .. math:: 6\,B\,\bigl(P_{enc} S + (P_{dec} - P_{kv} + P_{out}) T + P_{kv} S\bigr)
       + 12\,B\,h d_k \bigl(L_{enc} S^2 + L_{dec} (T^2 + T S)\bigr)

    with :math:`P_{enc}`, :math:`P_{dec}` the encoder and decoder layers' parameters,
    :math:`P_{kv}` the cross-attention key and value projections (applied to the source),
    :math:`P_{out}` the output layer's, and the second term the attention scores and weighted
    sums (forward 2, backward 4 FLOPs a multiply-add, :math:`QK^\top` and :math:`PV`).
    ``counts``: the model's :func:`vaswani_parameter_counts`, when already taken."""
    config = model.config
    encoder, decoder, cross_kv, output = counts or vaswani_parameter_counts(model)
    dense = (
        6 * batch * (encoder * source + (decoder - cross_kv + output) * target + cross_kv * source)
    )
    width = config.num_heads * config.head_dim
    lengths = config.encoder_layers * source**2 + config.decoder_layers * (
        target**2 + target * source
    )
    return float(dense + 12 * batch * width * lengths)


def recurrent_seq2seq_parameter_counts(model: nn.Module) -> tuple[int, int, int, int, int]:
    """``(P_enc, P_key, P_tgt, W_key, W_value)`` of :func:`recurrent_seq2seq_training_flops`
    for a ``bahdanau`` model: the encoder's parameters outside its embedding table, the
    attention parameters applied to every encoder output (the key side of the score, computed
    once per source sequence), every other parameter of the decoder, its output projection and
    ``lm_head`` (a tied output matrix counted: it multiplies every target position), and the
    widths of a precomputed key and of an encoder output (0, 0 without attention)."""
    encoder, decoder = model.model.encoder, model.model.decoder
    embeddings = {id(p) for m in model.modules() if isinstance(m, nn.Embedding)
                  for p in m.parameters()}  # fmt: skip
    source = sum(p.numel() for p in encoder.parameters() if id(p) not in embeddings)
    attention = decoder.attention
    key_side = 0
    widths = (0, 0)
    if attention is not None:
        device = next(model.parameters()).device  # the meta device too: a shape is enough
        probe = torch.zeros(1, 1, model.config.annotation_size, device=device)
        with torch.no_grad():
            key_width = attention.precompute_keys(probe).shape[-1]
        key_modules = [m for name in ("key_proj", "weight") if isinstance(
            m := getattr(attention.score, name, None), nn.Module)]  # fmt: skip
        key_side = sum(_parameters(m) for m in key_modules)
        widths = (key_width, model.config.annotation_size)
    output = [getattr(model, "output_projection", None), model.lm_head]
    target = sum(p.numel() for p in decoder.parameters() if id(p) not in embeddings) - key_side
    target += sum(_parameters(m) for m in output if m is not None)
    return source, key_side, target, *widths


def recurrent_seq2seq_training_flops(
    model: nn.Module,
    batch: int,
    source: int,
    target: int,
    counts: tuple[int, int, int, int, int] | None = None,
) -> float:
    r"""Training FLOPs of one step of an RNN encoder-decoder (Bahdanau et al. 2015, Luong et al.
    2015) on ``batch`` rows of ``source`` source and ``target`` target positions (padded
    positions included):

    .. math:: 6\,B\,\bigl((P_{enc} + P_{key}) S + P_{tgt} T\bigr)
       + 6\,B\,T\,S\,(W_{key} + W_{value})

    with :math:`P_{enc}` the encoder's parameters (its embedding table left out: a lookup),
    :math:`P_{key}` the attention's key-side parameters (applied to each encoder output),
    :math:`P_{tgt}` the decoder's other parameters with the output projection and the output
    layer (per target token), and the second term the attention of every target step to
    every source position: the score against a precomputed key of width :math:`W_{key}` and
    the weighted sum of encoder outputs of width :math:`W_{value}` (forward 2, backward 4
    FLOPs a multiply-add). Scores with layers of their own per pair (``deep``) count their
    first layer only. ``counts``: the model's :func:`recurrent_seq2seq_parameter_counts`."""
    enc, key, tgt, key_width, value_width = counts or recurrent_seq2seq_parameter_counts(model)
    dense = 6 * batch * ((enc + key) * source + tgt * target)
    return float(dense + 6 * batch * target * source * (key_width + value_width))


class FlopCounter:
    """Training FLOPs of one micro-batch of ``model``, from the batch's shapes only (nothing is
    read from the device; see the module docstring for the counts). The parameter counts are
    taken once, at construction."""

    def __init__(self, model: nn.Module):
        self.model = model
        own = getattr(model, "floating_point_ops", None)
        self.own = own if callable(own) else None
        model_type = getattr(getattr(model, "config", None), "model_type", None)
        self.vaswani_counts = vaswani_parameter_counts(model) if model_type == "vaswani" else None
        self.recurrent_counts = (
            recurrent_seq2seq_parameter_counts(model) if model_type == "bahdanau" else None
        )
        self.parameters = non_embedding_parameters(model)

    def __call__(self, batch) -> float:
        """FLOPs of forward and backward on ``batch``: a dict of ``[B, T]`` tensors, or a bare
        ``[B, T + 1]`` window of a language model."""
        if self.own is not None and isinstance(batch, dict):
            return float(self.own(batch))
        if self.vaswani_counts is not None and isinstance(batch, dict):
            rows, source = batch["input_ids"].shape
            target = batch["labels"].shape[1]
            return vaswani_training_flops(self.model, rows, source, target, self.vaswani_counts)
        if self.recurrent_counts is not None and isinstance(batch, dict):
            rows, source = batch["input_ids"].shape
            target = batch["labels"].shape[1]
            return recurrent_seq2seq_training_flops(
                self.model, rows, source, target, self.recurrent_counts
            )
        ids = batch["input_ids"] if isinstance(batch, dict) else batch[:, 1:]
        return float(6 * self.parameters * ids.numel())


def mfu(flops: float, seconds: float, peak_flops: float | None) -> float | None:
    """``flops / seconds / peak_flops``; ``None`` without a peak or a duration."""
    if peak_flops is None or seconds <= 0:
        return None
    return flops / seconds / peak_flops


__all__ = [
    "DATASHEET_PEAKS",
    "FlopCounter",
    "MEASURED_MATMUL_SIZE",
    "datasheet_peak",
    "device_peak_flops",
    "dtype_class",
    "measured_matmul_peak",
    "mfu",
    "recurrent_seq2seq_parameter_counts",
    "recurrent_seq2seq_training_flops",
    "non_embedding_parameters",
    "vaswani_parameter_counts",
    "vaswani_training_flops",
]
