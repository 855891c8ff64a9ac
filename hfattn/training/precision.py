"""The precision a run trains in: ``training.mixed_precision`` resolved for the device.

``auto`` asks for bf16 autocast only where the device computes bf16 natively: a CUDA GPU that
supports bf16; on an x86 CPU, the AVX-512 BF16 or AMX-BF16 instructions (oneDNN also reports
bf16 kernels on plain AVX-512, where it converts to fp32 around every product: a Luong step
there is several times slower than in fp32); on another CPU (Arm), oneDNN's own check,
``torch.ops.mkldnn._is_mkldnn_bf16_supported``. Elsewhere bf16 is emulated and slower than
fp32, so ``auto`` trains in fp32 there (how it is measured: ``benchmarks/NOTES.md``).
"""

from __future__ import annotations

import logging
import platform

import torch

from ..common.machine import cpu_isa, read_cpuinfo

logger = logging.getLogger(__name__)

AUTO = "auto"
"""``training.mixed_precision: auto``: bf16 where the device has bf16 kernels, else ``no``."""
NATIVE_BF16_ISAS = ("AMX", "AVX-512 BF16")
"""The x86 instruction sets of :data:`~hfattn.common.machine.ISA_FLAGS` that compute bf16
natively; below them (AVX-512, AVX2) bf16 is emulated around fp32 products."""


def has_bf16_kernels(device: torch.device) -> bool:
    """Whether ``device`` computes bf16 natively: ``torch.cuda.is_bf16_supported()`` on CUDA;
    on an x86 CPU the AVX-512 BF16 or AMX instructions (:data:`NATIVE_BF16_ISAS`, the
    instruction set :func:`~hfattn.common.machine.cpu_isa` reads from ``/proc/cpuinfo``, as
    the results' provenance records it; fp32 where there is no such file), on another CPU
    oneDNN's bf16 check; other devices (MPS, XPU) are trusted to."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        if platform.machine().lower() in ("x86_64", "amd64"):
            return cpu_isa(read_cpuinfo()) in NATIVE_BF16_ISAS
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    return True


def resolve_mixed_precision(requested: str, device: torch.device) -> str:
    """The Accelerate ``mixed_precision`` to train with for ``requested`` on ``device``.

    ``auto`` becomes ``bf16`` where :func:`has_bf16_kernels`, else ``no``; any other value is
    kept as written, with a warning when it is ``bf16`` on a device without bf16 kernels
    (emulated: many times slower than fp32) or ``fp16`` on the CPU (no effect there).
    """
    native = has_bf16_kernels(device)
    if requested == AUTO:
        resolved = "bf16" if native else "no"
        logger.info(
            "training.mixed_precision=auto: %s on this %s (%s bf16 kernels)",
            resolved,
            device.type,
            "with" if native else "without",
        )
        return resolved
    if requested == "bf16" and not native:
        logger.warning(
            "training.mixed_precision=bf16: this %s has no bf16 kernels, so bf16 is emulated "
            "and many times slower than fp32; use auto (bf16 only where it is native) or no",
            device.type,
        )
    if requested == "fp16" and device.type == "cpu":
        logger.warning("training.mixed_precision=fp16 has no effect on CPU; use bf16 there")
    return requested


__all__ = ["AUTO", "has_bf16_kernels", "resolve_mixed_precision"]
