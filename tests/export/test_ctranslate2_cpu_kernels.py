"""The int8 product CTranslate2 runs on this CPU (issue 23): on a non-Intel x86 CPU without
AVX-512 VNNI hfattn sets ``CT2_USE_MKL=1`` when it loads ``ctranslate2`` (its AVX2 kernel
saturates), never on ``import hfattn.export`` and never over the user's own setting."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

pytest.importorskip(
    "ctranslate2", reason="ctranslate2 is not installed: pip install 'hfattn[serve]'"
)


def test_int8_products_avoid_the_saturating_avx2_kernel():
    """``CT2_USE_MKL=1`` on a non-Intel x86 CPU without AVX-512 VNNI, nowhere else."""
    from hfattn.export.ctranslate2_runtime import needs_mkl_int8_gemm

    def cpu(vendor, *flags):
        return f"vendor_id\t: {vendor}\nflags\t\t: fpu sse2 avx {' '.join(flags)}\n"

    assert needs_mkl_int8_gemm(cpu("AuthenticAMD", "avx2"))
    assert not needs_mkl_int8_gemm(cpu("AuthenticAMD", "avx2", "avx512f", "avx512_vnni"))
    assert not needs_mkl_int8_gemm(cpu("GenuineIntel", "avx2"))
    assert not needs_mkl_int8_gemm(cpu("AuthenticAMD"))


# `import hfattn.export`, then hfattn loading ctranslate2, on a CPU whose /proc/cpuinfo reads
# as sys.argv[1]'s text; prints what changed and when.
LOAD_ON_CPU = """
import json, os, pathlib, sys
real_read_text = pathlib.Path.read_text
def read_text(self, *args, **kwargs):
    if str(self) == "/proc/cpuinfo":
        return sys.argv[1]
    return real_read_text(self, *args, **kwargs)
pathlib.Path.read_text = read_text
before = dict(os.environ)
import hfattn.export
changed = sorted(k for k in {*before, *os.environ} if before.get(k) != os.environ.get(k))
imported_early = "ctranslate2" in sys.modules
ctranslate2 = hfattn.export.require_ctranslate2()
print(json.dumps({
    "changed_by_import": changed,
    "imported_early": imported_early,
    "CT2_USE_MKL": os.environ.get("CT2_USE_MKL"),
    "int16": "int16" in ctranslate2.get_supported_compute_types("cpu"),
}))
"""


@pytest.mark.skipif(
    not os.path.isfile("/proc/cpuinfo") or platform.machine() != "x86_64",
    reason="needs an x86-64 Linux CPU",
)
@pytest.mark.parametrize("user_value", [None, "0"])
def test_loading_ctranslate2_chooses_the_int8_product_not_importing_hfattn_export(user_value):
    """On an AMD AVX2 CPU, ``import hfattn.export`` changes no environment variable; hfattn
    loading ``ctranslate2`` sets ``CT2_USE_MKL=1`` before CTranslate2 reads it (MKL's int16
    product is then on offer), unless the user set the variable."""
    env = {k: v for k, v in os.environ.items() if k != "CT2_USE_MKL"}
    if user_value is not None:
        env["CT2_USE_MKL"] = user_value
    amd_avx2 = "vendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx avx2\n"
    done = subprocess.run(
        [sys.executable, "-c", LOAD_ON_CPU, amd_avx2],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["changed_by_import"] == [] and report["imported_early"] is False
    if user_value is None:
        assert report["CT2_USE_MKL"] == "1" and report["int16"] is True
    else:
        assert report["CT2_USE_MKL"] == "0" and report["int16"] is False
