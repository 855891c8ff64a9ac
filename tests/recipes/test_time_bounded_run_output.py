"""What ``hfattn train`` prints (issue 21): a time-bounded run's progress bar follows the clock
to 100 %; other libraries' noise is quiet unless ``hfattn -v``. The run trains in a fresh
interpreter, with the default logging."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.early_errors import clean_env
from tests.helpers.recipe_helpers import small_recipe


# ---- 1. the progress bar of a time-bounded run, 2. other libraries' noise -------------------
def cli(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``hfattn ARGV`` in a fresh interpreter (it must succeed)."""
    result = subprocess.run(
        [sys.executable, "-m", "hfattn", *argv],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return result


TIED = {"type": "char-rnn", "cell": "gru", "embedding_dim": 32, "hidden_size": 32,
        "tie_word_embeddings": True}  # fmt: skip
"""Tied embeddings: accelerate removes the shared tensor from every checkpoint, and says so."""
NOISE = ("Removed shared tensor", "Writing model shards", "Loading weights")


@pytest.fixture(scope="module")
def clocked_run(tmp_path_factory) -> tuple[Path, str]:
    """A tiny tied char-RNN run that the clock stops long before its 100,000 steps, trained
    by the CLI with the default logging: ``(run folder, stderr)``."""
    folder = tmp_path_factory.mktemp("clocked")
    recipe = small_recipe(  # a small corpus: short final evaluations
        folder,
        model=TIED,
        training={
            "max_steps": 100_000,
            "epochs": 10_000,
            "max_minutes": 0.025,
            "log_every": 5,
            "eval_every": None,
            "save_every": 50,
        },  # fmt: skip
    )
    return folder / "run", cli(["train", str(recipe)], folder).stderr


def test_the_bar_of_a_time_bounded_run_follows_the_clock_to_100_percent(clocked_run):
    run, err = clocked_run
    training = json.loads((run / "eval_results.json").read_text())["training"]
    assert training["stop_reason"] == "time budget"
    assert 0 < training["global_step"] < training["schedule_steps"] // 10
    last = [part for part in err.replace("\r", "\n").splitlines() if part.startswith("train:")][-1]
    assert last.startswith("train: 100%|██████████|"), last
    assert f"step={training['global_step']}" in last  # the real step, next to the percentage
    # once the bar is closed, each final evaluation says what it scores before it starts
    after_bar = err.replace("\r", "\n").split(last, 1)[1].splitlines()
    said = [line for line in after_bar if "evaluating" in line]
    assert said == [
        f"INFO hfattn.training.finishing: evaluating the {split} split with the final weights..."
        for split in ("validation", "test")
    ], err[-2000:]


@pytest.mark.slow
def test_other_libraries_are_quiet_by_default_and_back_with_verbose(
    clocked_run, tmp_path, capfd, caplog
):
    """Quiet in a fresh interpreter (the libraries imported after the set-up read its
    environment: the clocked run) and in this one (they are imported already: set up through
    their own functions); ``-v`` brings their messages back. In this process hfattn's records
    reach pytest's log capture, not stderr."""
    from hfattn.cli import main
    from hfattn.commands.logging_setup import configure_logging, set_verbose

    run, err = clocked_run
    assert list((run / "checkpoints").glob("step-*"))  # checkpoints with a shared tensor
    assert not [noise for noise in NOISE if noise in err], err
    assert (
        "INFO hfattn.tokenization.characters: char tokenizer:" in err
    )  # hfattn's own messages stay

    assert main(["generate", str(run), "--prompt", "Zoë:\n", "--max-new-tokens", "5"]) == 0
    quiet = capfd.readouterr()
    assert quiet.out.startswith("Zoë:\n")
    assert "prompt characters not in the vocabulary" in caplog.text  # hfattn's warning
    said = quiet.err + caplog.text
    assert not [noise for noise in NOISE if noise in said], said

    recipe = small_recipe(
        tmp_path, model=TIED, training={"max_steps": 2, "eval_every": 2, "save_every": 2}
    )
    try:
        assert main(["train", str(recipe), "-v"]) == 0
        verbose = capfd.readouterr().err + caplog.text
    finally:  # the default set-up back for the next tests of this process
        set_verbose(False)
        configure_logging()
    assert "Removed shared tensor {'lm_head.weight'} while saving" in verbose
    assert "Writing model shards" in verbose
