"""A training command stopped by SIGTERM leaves a checkpoint that ``--resume`` finishes."""

import json
import signal
import subprocess
import sys
import time

import pytest

from hfattn.cli import main
from tests.helpers.recipe_helpers import write_recipe

pytestmark = pytest.mark.slow


def hfattn_cmd(*args):
    return [sys.executable, "-m", "hfattn", *args]


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
    # the resume in this process: only the stopped command needs one of its own
    assert main(["train", str(recipe), "--resume", "--set", f"training.max_steps={step + 3}"]) == 0
    results = json.loads((tmp_path / "run" / "eval_results.json").read_text())
    assert results["training"]["global_step"] == step + 3
