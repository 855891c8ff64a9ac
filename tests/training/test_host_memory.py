"""Freed host memory kept for reuse while training on a CPU (``training.reuse_freed_memory``)."""

import json
import logging
import os
import resource
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
import torch

from hfattn.orchestration.run import run_recipe
from hfattn.recipes import load_recipe
from hfattn.training import host_memory
from hfattn.training.host_memory import (
    PRIMITIVE_CACHE_VARIABLE,
    cap_primitive_cache,
    freed_memory_kept,
    glibc,
)
from tests.helpers.crash_runs import assert_same_weights
from tests.helpers.recipe_helpers import write_recipe

BLOCK_FLOATS = 16 * 2**20  # 64 MiB of float32: above glibc's largest mmap threshold (32 MiB)


def page_faults_of_a_block() -> int:
    """Minor page faults of allocating and filling one 64 MiB tensor (then freeing it)."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = torch.ones(BLOCK_FLOATS)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    del block
    return faults


def block_faults_around_the_setting() -> dict[str, int]:
    """Page faults of one 64 MiB block before, while and after :func:`freed_memory_kept`."""
    page_faults_of_a_block()
    fresh = page_faults_of_a_block()  # glibc maps a block this large anew every time
    with freed_memory_kept() as kept:
        assert kept
        # the first blocks grow the heap (a few, where it cannot grow in place at once)
        reused = sorted([page_faults_of_a_block() for _ in range(12)][-5:])
    after = page_faults_of_a_block()
    return {"fresh": fresh, "typical": reused[len(reused) // 2], "after": after}


@pytest.mark.skipif(glibc() is None, reason="the setting acts on glibc's malloc (Linux)")
def test_a_freed_block_is_reused_without_page_faults_and_the_defaults_come_back():
    # A fresh interpreter: a worker whose earlier tests trained with the setting keeps a
    # faulted-in free hole in its heap that serves the "fresh" block without a page fault.
    code = (
        "import json; from tests.training.test_host_memory import block_faults_around_the_setting"
        " as measure; print(json.dumps(measure()))"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True
    )
    faults = json.loads(done.stdout.splitlines()[-1])
    assert faults["fresh"] >= 10 * (faults["typical"] + 1), faults
    assert faults["after"] >= 10 * (faults["typical"] + 1), faults


def test_off_or_without_glibc_it_changes_nothing(caplog):
    with freed_memory_kept(False) as kept:
        assert kept is False
    with mock.patch.object(host_memory.platform, "libc_ver", return_value=("musl", "1.2")):
        assert glibc() is None
        with caplog.at_level(logging.WARNING, "hfattn.training.host_memory"):
            with freed_memory_kept() as kept:
                assert kept is False
    assert "training.reuse_freed_memory needs glibc (Linux)" in caplog.text


def test_training_with_freed_memory_kept_gives_the_same_model(tmp_path):
    """The engine keeps freed memory on a CPU when the recipe asks: where buffers come from
    changes, not one number the run computes."""
    common = {"training": {"mode": "stateless", "max_steps": 6, "eval_every": 100,
                           "save_every": 3, "batch_size": 8}}  # fmt: skip
    for reuse in (False, True):
        recipe = load_recipe(
            write_recipe(tmp_path / str(reuse), **common),
            [f"training.reuse_freed_memory={str(reuse).lower()}"],
        )
        assert recipe.training.reuse_freed_memory is reuse
        with mock.patch(
            "hfattn.training.engine.freed_memory_kept", wraps=freed_memory_kept
        ) as kept:
            run_recipe(recipe)
        kept.assert_called_once_with(reuse)
    assert_same_weights(tmp_path / "False" / "run", tmp_path / "True" / "run")


def test_the_primitive_cache_cap_leaves_a_users_setting(monkeypatch):
    monkeypatch.setenv(PRIMITIVE_CACHE_VARIABLE, "500")
    assert cap_primitive_cache(32) is False
    assert os.environ[PRIMITIVE_CACHE_VARIABLE] == "500"
    monkeypatch.delenv(PRIMITIVE_CACHE_VARIABLE)
    assert cap_primitive_cache(32) is True
    assert os.environ[PRIMITIVE_CACHE_VARIABLE] == "32"


def test_only_a_cpu_run_in_bf16_caps_the_primitive_cache(tmp_path):
    """oneDNN's cache is bounded before the first step of a bf16 run on the CPU, not in fp32."""
    common = {"training": {"mode": "stateless", "max_steps": 2, "eval_every": 100,
                           "save_every": 2, "batch_size": 8}}  # fmt: skip
    calls = {}
    for precision in ("no", "bf16"):
        recipe = load_recipe(
            write_recipe(tmp_path / precision, **common),
            [f"training.mixed_precision={precision}"],
        )
        with mock.patch("hfattn.training.engine.cap_primitive_cache") as cap:
            run_recipe(recipe)
        calls[precision] = cap.call_count
    assert calls == {"no": 0, "bf16": 1}
