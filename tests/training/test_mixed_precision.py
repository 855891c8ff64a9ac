"""The Accelerate training engine's mixed precision on tiny recipes: bf16 trains (with fp32
master weights), ``auto`` is bf16 only where the CPU has bf16 kernels, an explicit precision is
kept and warned about where it is slow or void."""

import json
import logging
from pathlib import Path
from unittest import mock

import pytest
import torch

from hfattn.orchestration.run import run_recipe
from hfattn.recipes import load_recipe
from tests.helpers.crash_runs import weights
from tests.helpers.recipe_helpers import write_recipe


def test_bf16_mixed_precision_trains(tmp_path):
    recipe = load_recipe(
        write_recipe(
            tmp_path, training={"max_steps": 10, "mixed_precision": "bf16", "eval_every": 10}
        )
    )
    result = run_recipe(recipe)
    saved = json.loads((tmp_path / "run" / "eval_results.json").read_text())
    assert saved["training"]["mixed_precision"] == "bf16"
    assert result.metrics["test"]["loss"] < 4.4  # below the uniform-guess loss ln(vocab ≈ 65)
    assert weights(tmp_path / "run")["lm_head.weight"].dtype == torch.float32  # master weights


@pytest.mark.parametrize("native", [True, False])
def test_auto_mixed_precision_is_bf16_only_where_the_cpu_has_bf16_kernels(
    tmp_path, monkeypatch, caplog, native
):
    from hfattn.training import precision

    monkeypatch.setattr(precision, "has_bf16_kernels", lambda device: native)
    training = {"max_steps": 4, "mixed_precision": "auto", "eval_every": None, "save_every": None}
    with caplog.at_level(logging.INFO, logger=precision.__name__):
        run_recipe(load_recipe(write_recipe(tmp_path, training=training)))
    saved = json.loads((tmp_path / "run" / "eval_results.json").read_text())
    assert saved["training"]["mixed_precision"] == ("bf16" if native else "no")
    assert f"mixed_precision=auto: {'bf16' if native else 'no'} on this cpu" in caplog.text


def test_an_explicit_precision_is_kept_and_warned_about_where_it_is_slow_or_void(caplog):
    from hfattn.training.precision import resolve_mixed_precision

    cpu, native = torch.device("cpu"), "hfattn.training.precision.has_bf16_kernels"
    with caplog.at_level(logging.WARNING):
        with mock.patch(native, return_value=False):
            assert resolve_mixed_precision("bf16", cpu) == "bf16"
            assert resolve_mixed_precision("auto", cpu) == "no"
            assert resolve_mixed_precision("no", cpu) == "no"
        assert caplog.text.count("WARNING") == 1
        assert "bf16: this cpu has no bf16 kernels, so bf16 is emulated" in caplog.text
        caplog.clear()
        with mock.patch(native, return_value=True):
            assert resolve_mixed_precision("bf16", cpu) == "bf16"
            assert resolve_mixed_precision("fp16", cpu) == "fp16"
        assert caplog.text.count("WARNING") == 1 and "fp16 has no effect on CPU" in caplog.text


def test_bf16_kernels_are_found_only_on_x86_cpus_with_bf16_instructions():
    """AVX-512 BF16 or AMX: bf16 kernels. AVX2 alone, or AVX-512 without BF16 (Ice Lake, where
    oneDNN reports bf16 support but converts around fp32 products, several times slower than
    fp32 on a Luong step): none."""
    from hfattn.training.precision import has_bf16_kernels

    cpuinfo = Path("/proc/cpuinfo")
    flags = set(cpuinfo.read_text().split()) if cpuinfo.exists() else set()
    if "avx2" not in flags:
        pytest.skip("not an x86 CPU with AVX2")
    native = "avx512_bf16" in flags or "amx_bf16" in flags
    assert has_bf16_kernels(torch.device("cpu")) is native
