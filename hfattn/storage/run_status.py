"""What a run folder tells the user about its run, each in one sentence: a run interrupted
before it finished (:func:`interrupted_run_message`: how to continue it or save its model), a
finished run that a resume would not train further (:func:`finished_run_message`), a finished
run that stopped early (:func:`training_shortfall`), and a write of the run that failed (a full
disk, no permission), which ends it with :class:`RunWriteError` naming the file, the cause, the
last good checkpoint and the command that continues the run (:func:`write_failed_message`).
"""

from __future__ import annotations

import errno
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .file_io import FileWriteError
from .run_folder import (
    checkpoint_step,
    eval_results_path,
    latest_checkpoint,
    read_progress,
    require_checkpoint,
    resume_command,
    run_state,
)


class RunWriteError(ValueError):
    """A file of the run could not be written (a full disk, no permission): the message names
    the file, the cause, the last good checkpoint and how to continue
    (:func:`write_failed_message`). (A ``ValueError``, like every error the ``train`` command
    reports as one line.)"""


def write_failed_message(folder: str | Path, failure: FileWriteError, what: str = "") -> str:
    """The one line that ends a run in ``folder`` whose write failed (``failure`` names the
    file and the cause; ``what`` says what was lost, ``"the checkpoint of step 40 is not
    written"``): the last good checkpoint and the command that continues from it, or that
    there is none."""
    previous = latest_checkpoint(folder)
    fix = _FIXES.get(failure.errno, "fix the cause")
    return f"{failure}{'; ' + what if what else ''}; " + (
        f"the last good checkpoint {previous} is intact: {fix} and continue with "
        f"`{resume_command(folder)}`"
        if previous is not None
        else f"there is no checkpoint yet: {fix} and train again"
    )


@contextmanager
def run_writes(folder: str | Path) -> Iterator[None]:
    """End the run in ``folder`` with :class:`RunWriteError` (:func:`write_failed_message`)
    when a write in the block fails (:class:`~hfattn.storage.file_io.FileWriteError`)."""
    try:
        yield
    except FileWriteError as failure:
        raise RunWriteError(write_failed_message(folder, failure)) from failure


_FIXES = {
    errno.ENOSPC: "free some space",
    errno.EDQUOT: "free some space",
    errno.EFBIG: "raise the file-size limit (ulimit -f)",
    errno.EACCES: "make the folder writable",
    errno.EPERM: "make the folder writable",
    errno.EROFS: "make the folder writable",
}
"""What to do about a failed write, by its cause."""


def interrupted_run_message(folder: str | Path) -> str | None:
    """For a run stopped before it finished (:func:`run_state` ``"interrupted"``: no final
    evaluation, whether or not its model files are written): one sentence with the step of its
    newest checkpoint, how to continue it, and how to save the model of that checkpoint now
    (resuming with ``training.max_steps`` at that step ends the run at once: it evaluates and
    saves the model); for a run interrupted after its last step, that ``--resume`` finishes it.
    ``None`` for any other folder (a model folder that holds no run among them): every command
    that loads a model refuses a folder with this sentence."""
    if run_state(folder) != "interrupted":
        return None
    checkpoint = require_checkpoint(folder)
    step = checkpoint_step(checkpoint)
    if _training_ended(checkpoint):
        return (
            f"{folder} is a training run interrupted after its last step ({step:,}): its "
            "checkpoint holds the trained weights, the model folder is not finished yet. Finish it "
            f"with `{resume_command(folder)}`"
        )
    return (
        f"{folder} is a training run interrupted at step {step:,}: it holds checkpoints but no "
        f"saved model yet. Continue it with `{resume_command(folder)}`, or save the model of "
        f"its last checkpoint with `{resume_command(folder)} --set training.max_steps={step}`"
    )


def _training_ended(checkpoint: Path) -> bool:
    """Whether the ``progress.json`` of ``checkpoint`` records that training had ended
    (``training_end``: the final validation, evaluation and model folder were still to come);
    ``False`` when it cannot be read (``--resume`` reports a damaged checkpoint)."""
    return read_progress(checkpoint).get("training_end") is not None


def finished_run_message(folder: str | Path, training) -> str | None:
    """For a finished run (:func:`run_state` ``"finished"``) that the ``training:`` section
    ``training`` (the stored recipe with any ``--set`` overrides) would not train further:
    one line saying it is already finished, where it stopped, and how to extend it. ``None``
    when there is more to train (a larger ``max_steps``, ``max_minutes`` or ``epochs``) or the
    run is not finished.

    From the ``training`` record of :data:`EVAL_RESULTS_FILE`: the run trains further only
    while ``global_step < max_steps``, ``train_runtime_s < 60 × max_minutes`` and
    ``epochs_completed < epochs``, as the training loop decides."""
    if run_state(folder) != "finished":
        return None
    done = json.loads(eval_results_path(folder).read_text(encoding="utf-8")).get("training") or {}
    step, runtime_s = done.get("global_step"), done.get("train_runtime_s")
    epochs = done.get("epochs_completed")
    if not isinstance(step, int):
        return None
    if training.max_steps is not None and step >= training.max_steps:
        how = f"training.max_steps={training.max_steps}", f"training.max_steps=N (> {step})"
    elif training.max_minutes is not None and (runtime_s or 0) >= 60 * training.max_minutes:
        how = f"training.max_minutes={training.max_minutes}", "training.max_minutes=M"
    elif isinstance(epochs, int) and training.epochs is not None and epochs >= training.epochs:
        how = f"training.epochs={training.epochs}", None
    else:
        return None
    extend = (
        f"Extend it with `{resume_command(folder)} --set {how[1]}`"
        if how[1]
        else "More epochs are another run (--set output_dir=runs/NAME)"
    )
    return (
        f"{folder} is already finished: it stopped at step {step:,} ({how[0]}) and saved its "
        f"model; nothing changed. {extend}"
    )


SHORT_RUN_FRACTION = 0.5
"""A run that trained fewer than this share of the steps its recipe plans is *short*."""
BUDGET_STOPS = ("completed", "time budget")
"""The ``stop_reason`` of a run that ended by its own budget: its step (or epoch) budget, or its
clock (``training.max_minutes``). Any other reason (a callback's, a divergence) is an early
stop."""


def _ran_on_its_own_clock(training: dict) -> bool:
    """Whether a run stopped by its clock had at least the ``training.max_minutes`` of its
    recipe file (``planned_minutes``), not a shorter one set by ``--set``."""
    run, planned = training.get("max_minutes"), training.get("planned_minutes")
    return run is None or (planned is not None and run >= planned)


def training_shortfall(folder: str | Path) -> str | None:
    """A sentence saying that the finished run in ``folder`` stopped early, or ``None`` when it
    is complete (or the folder records no such numbers, as a plain ``save_pretrained`` folder).

    From the ``training`` record of :data:`EVAL_RESULTS_FILE`: a run ended by its recipe's own
    clock (``stop_reason`` ``"time budget"``) is complete however many of its planned steps it
    made; a run ended by its step budget is short when ``global_step < SHORT_RUN_FRACTION ×
    planned_steps``, the plan being the recipe file's own, before ``--set`` overrides (a recipe
    cut short with ``--set training.max_steps=200`` or ``training.max_minutes=1`` is short
    even though it used up its budget); a run stopped for any other reason is short."""
    path = eval_results_path(folder)
    if not path.is_file():
        return None
    training = json.loads(path.read_text(encoding="utf-8")).get("training") or {}
    step = training.get("global_step")
    planned = training.get("planned_steps") or training.get("schedule_steps")
    if not isinstance(step, int) or not isinstance(planned, int) or planned <= 0:
        return None
    reason = training.get("stop_reason") or "completed"
    if reason in BUDGET_STOPS:
        if reason == "time budget" and _ran_on_its_own_clock(training):
            return None
        if step >= SHORT_RUN_FRACTION * planned:
            return None
    why = "" if reason == "completed" else f", ended by the {reason}"
    return (
        f"training stopped at step {step:,} of the {planned:,} its recipe plans "
        f"({step / planned:.0%}{why}): its scores and samples are those of an undertrained model"
    )


__all__ = [
    "BUDGET_STOPS",
    "SHORT_RUN_FRACTION",
    "RunWriteError",
    "finished_run_message",
    "interrupted_run_message",
    "run_writes",
    "training_shortfall",
    "write_failed_message",
]
