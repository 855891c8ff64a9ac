"""The run folder: what ``hfattn train`` leaves in ``output_dir``, named in one place.

A run *is* its folder (the saved model's own files are named in :mod:`hfattn.storage.model_folder`).
It holds the resolved recipe it was trained from (:data:`RECIPE_FILE`),
its checkpoints (:data:`CHECKPOINTS_DIR`, one ``step-N`` folder each), the training log
(:data:`METRICS_FILE`), and once finished the saved model with :data:`EVAL_RESULTS_FILE` and
:data:`LOSS_CURVE_FILE`. This module names those files and finds them (the checkpoints, the
stored recipe, the state of the run); its neighbours do the other jobs of a run folder:

- :mod:`hfattn.storage.resume_checks`: ``hfattn train --resume FOLDER`` continues the run from
  the recipe stored here, and ``hfattn train RECIPE --resume`` is checked against it first, so
  two different runs are never mixed in one folder; ``--overwrite`` replaces a run.
- :mod:`hfattn.storage.run_lock`: one process trains into a run folder at a time, holding the
  lock file :data:`LOCK_FILE`.
- :mod:`hfattn.storage.run_status`: what the folder tells the user about its run (interrupted,
  finished, cut short) and the one line that ends a run whose write failed.

These modules are light (no torch, no accelerate at import): the resume checks run before
anything slow is loaded.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import yaml

from .file_io import atomic_path
from .model_folder import WEIGHTS_FILE

RECIPE_FILE = "recipe.yaml"
"""The resolved recipe of the run (every default filled in, ``--set`` overrides applied)."""
CHECKPOINTS_DIR = "checkpoints"
"""The folder of the run's checkpoints (``step-N`` folders, ``best/``, ``.tmp-step-N``)."""
CHECKPOINT_PREFIX = "step-"
"""A complete checkpoint folder is ``CHECKPOINTS_DIR/step-N``."""
PROGRESS_FILE = "progress.json"
"""Where training stands, in every checkpoint folder
(:class:`hfattn.training.checkpoints.Progress`)."""
BEST_WEIGHTS = Path("best") / WEIGHTS_FILE
"""The weights of the best validation so far, under ``CHECKPOINTS_DIR``."""
CTRANSLATE2_DIR = "ct2"
"""The CTranslate2 export of a model folder, beside its weights
(``hfattn export RUN --format ctranslate2 RUN/ct2``): ``hfattn push`` uploads it with the model,
``hfattn translate --engine ctranslate2`` and the translation Space serve it."""
METRICS_FILE = "metrics.jsonl"
"""The training log: one JSON record a line."""
EVAL_RESULTS_FILE = "eval_results.json"
"""The final evaluation (written when the run finishes)."""
LOSS_CURVE_FILE = "loss_curve.png"
"""The training curve (written when the run finishes)."""
CONFUSION_MATRIX_FILE = "confusion_matrix.json"
"""The test-split confusion matrix of a classification run, with its label names."""
SAMPLES_FILE = "samples.md"
"""The sample generated after training (prompt, settings, text), written next to the model as
Markdown; the model card shows it under "Samples" (it is not uploaded as a file)."""
TRACKER_LOGS_DIR = "logs"
"""Where the experiment trackers that write files (TensorBoard) keep them
(``training.report_to``); never published."""
LOCK_FILE = ".train.lock"
"""The lock file of a run folder being trained into
(:func:`hfattn.storage.run_lock.held_run_folder`): ``flock``-ed by its holder and holding its
pid, host and start time as JSON. Hidden: never published, never taken for a run's file."""
RUN_FILES = (METRICS_FILE, EVAL_RESULTS_FILE, LOSS_CURVE_FILE, RECIPE_FILE, SAMPLES_FILE)
"""The files of a run that ``--overwrite`` removes (besides checkpoints and weights)."""


class RunFolderError(ValueError):
    """The run folder cannot be used as asked (another run's recipe, nothing to resume)."""


def recipe_path(folder: str | Path) -> Path:
    """The stored resolved recipe of the run in ``folder``."""
    return Path(folder) / RECIPE_FILE


def checkpoints_dir(folder: str | Path) -> Path:
    """The checkpoints folder of the run in ``folder``."""
    return Path(folder) / CHECKPOINTS_DIR


def metrics_path(folder: str | Path) -> Path:
    """The training log of the run in ``folder``."""
    return Path(folder) / METRICS_FILE


def eval_results_path(folder: str | Path) -> Path:
    """The final evaluation of the run in ``folder``."""
    return Path(folder) / EVAL_RESULTS_FILE


def complete_checkpoints(output_dir: str | Path) -> list[Path]:
    """The complete checkpoint folders (``step-N``) under ``output_dir/checkpoints``, oldest
    first (a write in progress, ``.tmp-step-N``, is not one)."""
    root = checkpoints_dir(output_dir)
    if not root.is_dir():
        return []
    done = [p for p in root.iterdir() if p.name.startswith(CHECKPOINT_PREFIX) and p.is_dir()]
    return sorted(done, key=checkpoint_step)


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    """The newest complete checkpoint folder under ``output_dir/checkpoints`` (or ``None``)."""
    done = complete_checkpoints(output_dir)
    return done[-1] if done else None


def require_checkpoint(folder: str | Path) -> Path:
    """The newest complete checkpoint of the run in ``folder``, for ``--resume``.

    Raises:
        FileNotFoundError: there is none (nothing to resume).
    """
    checkpoint = latest_checkpoint(folder)
    if checkpoint is None:
        raise FileNotFoundError(f"--resume: no checkpoint under {checkpoints_dir(folder)}")
    return checkpoint


def read_progress(checkpoint: Path) -> dict:
    """The :data:`PROGRESS_FILE` of the checkpoint folder ``checkpoint`` as a plain mapping
    (:class:`hfattn.training.checkpoints.Progress`'s fields), ``{}`` when it cannot be read
    (``--resume`` reports a damaged checkpoint when it loads it): for the checks that read a
    field or two before anything slow is loaded."""
    try:
        progress = json.loads((checkpoint / PROGRESS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return progress if isinstance(progress, dict) else {}


def run_state(folder: str | Path) -> str:
    """``"missing"`` (no folder), ``"empty"`` (nothing to resume), ``"interrupted"`` (a
    checkpoint, no final evaluation) or ``"finished"`` (the final evaluation is written)."""
    folder = Path(folder)
    if not folder.is_dir():
        return "missing"
    if eval_results_path(folder).is_file():
        return "finished"
    return "interrupted" if latest_checkpoint(folder) is not None else "empty"


def write_recipe(folder: str | Path, recipe_yaml: str) -> None:
    """Store the resolved recipe ``recipe_yaml`` in ``folder`` (atomically)."""
    with atomic_path(recipe_path(folder)) as tmp:
        tmp.write_text(recipe_yaml, encoding="utf-8")


def read_recipe(folder: str | Path) -> dict | None:
    """The stored recipe (:data:`RECIPE_FILE`) of the run or model ``folder`` as a plain mapping,
    or ``None`` when the folder has none (a run from before recipes were stored, a bare
    ``save_pretrained`` folder): the one reader of it, for ``--resume`` and for ``hfattn push``.

    Raises:
        RunFolderError: ``runs/x/recipe.yaml: not valid YAML (...)`` or ``runs/x/recipe.yaml:
            expected a mapping, got list``.
    """
    path = recipe_path(folder)
    if not path.is_file():
        return None
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise RunFolderError(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise RunFolderError(f"{path}: expected a mapping, got {type(data).__name__}")
    return data


def resume_command(folder: str | Path) -> str:
    """The command line that continues the run in ``folder``, the folder quoted for the shell
    (``hfattn train --resume 'runs/my run'``) so that it can be pasted as printed."""
    return f"hfattn train --resume {shlex.quote(str(folder))}"


def checkpoint_step(checkpoint: Path) -> int:
    """The optimizer step of a ``step-N`` checkpoint folder."""
    return int(checkpoint.name[len(CHECKPOINT_PREFIX) :])


__all__ = [
    "BEST_WEIGHTS",
    "CHECKPOINTS_DIR",
    "CHECKPOINT_PREFIX",
    "CONFUSION_MATRIX_FILE",
    "CTRANSLATE2_DIR",
    "EVAL_RESULTS_FILE",
    "LOCK_FILE",
    "LOSS_CURVE_FILE",
    "METRICS_FILE",
    "PROGRESS_FILE",
    "RECIPE_FILE",
    "RUN_FILES",
    "SAMPLES_FILE",
    "TRACKER_LOGS_DIR",
    "RunFolderError",
    "checkpoint_step",
    "checkpoints_dir",
    "complete_checkpoints",
    "eval_results_path",
    "latest_checkpoint",
    "metrics_path",
    "read_progress",
    "read_recipe",
    "recipe_path",
    "require_checkpoint",
    "resume_command",
    "run_state",
    "write_recipe",
]
