"""Runs crashed and resumed in child processes, as ``tests/training/test_faults.py`` and
``benchmarks/bench_faults.py`` make them: small recipes of each task, the points at which a
run is SIGKILLed (:func:`kill_points`), ``hfattn train`` in a child of a fork server that
imported hfattn once (:func:`train_in_child`), and what two runs are compared on
(:func:`records`, :func:`weights`)."""

from __future__ import annotations

import json
import multiprocessing
import sys
from pathlib import Path

import torch
import yaml
from safetensors.torch import load_file

from hfattn.recipes import load_recipe
from hfattn.storage.run_folder import latest_checkpoint
from tests.helpers.fault_injection import cli_with_fault
from tests.helpers.recipe_helpers import small_recipe, write_recipe
from tests.helpers.tiny_runs import TINY_TRANSLATION_MODELS

SAVE_EVERY = 4
RECIPES_DIR = Path(__file__).resolve().parents[2] / "recipes"

_SERVER = multiprocessing.get_context("forkserver")
# the server imports what a run imports once; each child would take 2-3 s to import it again
_SERVER.set_forkserver_preload(["tests.helpers.fault_injection", "tests.helpers.train_imports"])


def _cli_child(argv: list[str], fault: str | None) -> None:
    """Body of a child process: ``hfattn ARGV`` killed at ``fault`` (or not killed)."""
    sys.exit(cli_with_fault(argv, fault))


def start_cli_child(argv: list[str], fault: str | None = None) -> multiprocessing.Process:
    """Start ``hfattn ARGV`` in a child process of the fork server (hfattn, torch and a run's
    imports loaded once), killed at ``fault`` (:func:`~tests.helpers.fault_injection.kill_at`)
    when given; returns the started process."""
    child = _SERVER.Process(target=_cli_child, args=(argv, fault))
    child.start()
    return child


def train_in_child(recipe: Path, fault: str | None = None) -> int:
    """Run ``hfattn train recipe`` in a child process, with ``--resume`` when the run has a
    checkpoint (else ``--overwrite``: a crash before the first checkpoint starts over), as a
    user would after a crash. Returns the exit code (``-SIGKILL`` when the hook fired)."""
    output_dir = Path(load_recipe(recipe).output_dir)
    flag = "--resume" if latest_checkpoint(output_dir) is not None else "--overwrite"
    child = start_cli_child(["train", str(recipe), flag], fault)
    child.join(timeout=600)
    return child.exitcode


def records(
    run: Path, drop=("elapsed_s", "wall_s", "tokens_per_s", "mfu", "data_wait_s", "eval_s")
) -> list[dict]:
    """``metrics.jsonl`` of ``run`` without the fields that depend on the clock."""
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in drop} for line in lines]


def kill_points(total_steps: int, epochs: int) -> list[str]:
    """One SIGKILL point per epoch, alternating between a kill between checkpoints (after the
    step's log line and validation) and one in the middle of a checkpoint write; the last is
    in the middle of the final checkpoint."""
    per_epoch = total_steps // epochs
    points = []
    for epoch in range(epochs):
        step = (epoch * per_epoch + per_epoch // 2) | 1  # odd: never a checkpoint step
        save = min(-(-(step + 1) // SAVE_EVERY) * SAVE_EVERY, total_steps)
        points.append(f"checkpoint:{save}" if epoch % 2 else f"step:{step}")
    points[-1] = f"checkpoint:{total_steps}"
    return points


def char_rnn_recipe(folder: Path) -> Path:
    """A stateful char-RNN with dropout (the RNG must be restored too), three epochs."""
    return small_recipe(
        folder,
        model={"dropout": 0.2, "num_layers": 2},
        training={"mode": "stateful", "epochs": 3, "max_steps": None, "log_every": 3,
                  "eval_every": 6, "save_every": SAVE_EVERY, "load_best_at_end": False},
        evaluation={"splits": ["test"]},
    )  # fmt: skip


def seq2seq_recipe(folder: Path) -> Path:
    """A tiny Bahdanau encoder-decoder on generated date pairs, three epochs."""
    return write_recipe(
        folder,
        base={},
        task="translation",
        model={**TINY_TRANSLATION_MODELS["bahdanau"], "dropout": 0.1},
        tokenizer={"type": "char"},
        data={"source": "date-normalization", "size": 400, "validation_fraction": 0.1,
              "test_fraction": 0.1},
        training={"batch_size": 32, "epochs": 3, "learning_rate": 0.005, "log_every": 3,
                  "eval_every": 6, "save_every": SAVE_EVERY, "load_best_at_end": False},
        evaluation={"splits": ["test"], "batch_size": 64, "max_new_tokens": 16},
        generation={"max_new_tokens": 16, "num_beams": 1},
    )  # fmt: skip


def classification_recipe(folder: Path) -> Path:
    """``recipes/rnn_classifier_reber.yaml`` (a GRU classifier with input dropout) on 256
    training strings, three epochs."""
    base = yaml.safe_load((RECIPES_DIR / "rnn_classifier_reber.yaml").read_text())
    return write_recipe(
        folder,
        base=base,
        model={"input_dropout": 0.2},
        data={"train_size": 256},
        training={"epochs": 3, "log_every": 3, "eval_every": 6, "save_every": SAVE_EVERY,
                  "load_best_at_end": False},
        evaluation={"splits": ["test"], "batch_size": 256},
    )  # fmt: skip


RECIPES = {
    "char-rnn": char_rnn_recipe,
    "seq2seq": seq2seq_recipe,
    "classification": classification_recipe,
}


def weights(run_dir: Path) -> dict:
    """The tensors of ``run_dir``'s ``model.safetensors``."""
    return load_file(str(run_dir / "model.safetensors"))


def assert_same_weights(a: Path, b: Path, exact: bool = True) -> None:
    """The runs ``a`` and ``b`` saved the same weights: bit for bit, or (``exact=False``)
    within float32 rounding of a few steps (``rtol=1e-4``, ``atol=1e-5``)."""
    wa, wb = weights(a), weights(b)
    assert wa.keys() == wb.keys()
    for key in wa:
        if exact:
            assert torch.equal(wa[key], wb[key]), key
        else:
            torch.testing.assert_close(wa[key], wb[key], rtol=1e-4, atol=1e-5, msg=key)
