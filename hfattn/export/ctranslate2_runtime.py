"""The CTranslate2 engine: ``ctranslate2`` (``pip install 'hfattn[serve]'``) imported on use,
so that importing :mod:`hfattn.export` stays cheap, and with the CPU matrix product it should
use (:func:`require_ctranslate2`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

INSTALL_HINT = "pip install 'hfattn[serve]' (or: pip install 'ctranslate2>=4.5,<5')"
CPUINFO = Path("/proc/cpuinfo")


def needs_mkl_int8_gemm(cpuinfo: str) -> bool:
    """Whether CTranslate2 should multiply int8 matrices with Intel MKL on the CPU that
    ``cpuinfo`` (the text of ``/proc/cpuinfo``) describes: an x86 CPU that is not Intel's and
    has no AVX-512 VNNI (why: :func:`require_ctranslate2`)."""
    flags = next((line for line in cpuinfo.splitlines() if line.startswith("flags")), "").split()
    return "GenuineIntel" not in cpuinfo and "avx2" in flags and "avx512_vnni" not in flags


def require_ctranslate2():
    """The ``ctranslate2`` module, imported by hfattn only here.

    Before its first import, on a CPU where :func:`needs_mkl_int8_gemm` holds, it sets
    ``CT2_USE_MKL=1`` unless the user set the variable. There CTranslate2 would multiply int8
    matrices with oneDNN's AVX2 u8×s8 kernel, whose 16-bit pair sums (``vpmaddubsw``)
    saturate: an int8 export then decodes much text differently from the model (how the shares
    are measured: ``benchmarks/NOTES.md``). MKL's int8 product does not saturate. CTranslate2
    reads the variable once, when it is imported, so it is set here and nowhere else: not when
    :mod:`hfattn.export` is imported, and not once ``ctranslate2`` has been imported already
    (then it would change nothing).

    Raises:
        ImportError: ``ctranslate2 is not installed: pip install 'hfattn[serve]' ...``.
    """
    if "ctranslate2" not in sys.modules and CPUINFO.is_file():
        if needs_mkl_int8_gemm(CPUINFO.read_text("utf-8", "replace")):
            os.environ.setdefault("CT2_USE_MKL", "1")
    try:
        import ctranslate2
    except ImportError:
        raise ImportError(f"ctranslate2 is not installed: {INSTALL_HINT}") from None
    return ctranslate2
