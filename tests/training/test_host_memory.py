"""Freed host memory kept for reuse while training on a CPU (``training.reuse_freed_memory``)."""

import logging
import resource
from unittest import mock

import pytest
import torch

from hfattn.orchestration.run import run_recipe
from hfattn.recipes import load_recipe
from hfattn.training import host_memory
from hfattn.training.host_memory import freed_memory_kept, glibc
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


@pytest.mark.skipif(glibc() is None, reason="the setting acts on glibc's malloc (Linux)")
def test_a_freed_block_is_reused_without_page_faults_and_the_defaults_come_back():
    page_faults_of_a_block()
    fresh = page_faults_of_a_block()  # glibc maps a block this large anew every time
    with freed_memory_kept() as kept:
        assert kept
        # the first blocks grow the heap (a few, where it cannot grow in place at once); a
        # heap that earlier tests of the same worker left fragmented may grow once more later
        reused = sorted([page_faults_of_a_block() for _ in range(12)][-5:])
    after = page_faults_of_a_block()
    typical = reused[len(reused) // 2]  # the median of the last five blocks
    assert fresh >= 10 * (typical + 1)
    assert after >= 10 * (typical + 1)


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
