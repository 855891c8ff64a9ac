"""Subprocess runs: two CPU processes (torchrun + gloo) and interruption by SIGTERM."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.crash_runs import assert_same_weights
from tests.helpers.recipe_helpers import write_recipe

pytestmark = pytest.mark.slow


def hfattn_cmd(*args):
    return [sys.executable, "-m", "hfattn", *args]


@pytest.mark.slow
def test_two_cpu_processes_match_one_process(tmp_path):
    # SGD: Adam's first steps are ±lr·sign(g), which turns float-rounding differences of
    # near-zero gradients (another reduction order) into lr-sized ones.
    common = {"training": {"mode": "stateful", "max_steps": 10, "eval_every": 5, "save_every": 5,
                           "optimizer": "sgd", "learning_rate": 0.5},
              "evaluation": {"splits": ["test"]}}  # fmt: skip
    single = write_recipe(tmp_path / "one", **common)
    double = write_recipe(tmp_path / "two", **common)
    subprocess.run(hfattn_cmd("train", str(single)), check=True, capture_output=True)
    # the command docs/training.md gives for N CPU processes
    env = {**os.environ, "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1"}
    torchrun = [str(Path(sys.executable).parent / "torchrun"), "--standalone",
                "--nproc_per_node", "2", "-m", "hfattn", "train", str(double)]  # fmt: skip
    proc = subprocess.run(torchrun, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((tmp_path / "two" / "run" / "eval_results.json").read_text())
    assert results["training"]["num_processes"] == 2
    # each process trained 4 of the 8 streams; averaged gradients give the same model
    assert_same_weights(tmp_path / "one" / "run", tmp_path / "two" / "run", exact=False)


@pytest.mark.slow
def test_sigterm_leaves_a_resumable_checkpoint(tmp_path):
    recipe = write_recipe(
        tmp_path,
        training={"max_steps": 100000, "save_every": 1000, "eval_every": 1000, "log_every": 1},
    )
    proc = subprocess.Popen(hfattn_cmd("train", str(recipe)), stderr=subprocess.PIPE, text=True)
    metrics = tmp_path / "run" / "metrics.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (
        metrics.exists() and len(metrics.read_text().splitlines()) >= 5
    ):
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "--resume" in err
    checkpoints = sorted((tmp_path / "run" / "checkpoints").glob("step-*"))
    assert len(checkpoints) == 1
    step = json.loads((checkpoints[0] / "progress.json").read_text())["step"]
    assert step >= 5 and not list((tmp_path / "run" / "checkpoints").glob(".tmp-*"))
    resumed = subprocess.run(
        hfattn_cmd("train", str(recipe), "--resume", "--set", f"training.max_steps={step + 3}"),
        capture_output=True, text=True,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    results = json.loads((tmp_path / "run" / "eval_results.json").read_text())
    assert results["training"]["global_step"] == step + 3
