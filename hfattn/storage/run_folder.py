"""The run folder: what ``hfattn train`` leaves in ``output_dir``, named in one place.

A run *is* its folder (the saved model's own files are named in :mod:`hfattn.storage.model_folder`).
It holds the resolved recipe it was trained from (:data:`RECIPE_FILE`),
its checkpoints (:data:`CHECKPOINTS_DIR`, one ``step-N`` folder each), the training log
(:data:`METRICS_FILE`), and once finished the saved model with :data:`EVAL_RESULTS_FILE` and
:data:`LOSS_CURVE_FILE`. ``hfattn train --resume FOLDER`` continues the run from the recipe
stored here; ``hfattn train RECIPE --resume`` is checked against it first
(:func:`check_resume`), so two different runs are never mixed in one folder.

One process trains into a run folder at a time: ``hfattn train`` holds it
(:func:`held_run_folder`, the lock file :data:`LOCK_FILE` naming the holder) from before its
first write to its exit. A write of the run that fails (a full disk, no permission) ends it
with :class:`RunWriteError`, which names the file, the cause, the last good checkpoint and the
command that continues the run (:func:`write_failed_message`).

This module is light (no torch, no accelerate at import): the resume checks run before
anything slow is loaded.
"""

from __future__ import annotations

import datetime
import errno
import json
import os
import shlex
import shutil
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml
from filelock import FileLock, Timeout

from .file_io import FileWriteError, atomic_path, writing
from .location import absolute_source
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
"""The lock file of a run folder being trained into (:func:`held_run_folder`): ``flock``-ed by
its holder and holding its pid, host and start time as JSON. Hidden: never published, never
taken for a run's file."""
RUN_FILES = (METRICS_FILE, EVAL_RESULTS_FILE, LOSS_CURVE_FILE, RECIPE_FILE, SAMPLES_FILE)
"""The files of a run that ``--overwrite`` removes (besides checkpoints and weights)."""

RESUMABLE_FIELDS = (
    "training.max_steps",
    "training.max_minutes",
    "training.log_every",
    "training.eval_every",
    "training.save_every",
    "training.keep_checkpoints",
    "training.average_checkpoints",
    "training.reuse_freed_memory",
    "training.report_to",
    "hub",
)
"""The recipe fields a resumed run may change (its budget, its logging, eval and checkpoint
intervals, how many checkpoints it keeps and averages at the end, whether it keeps freed host
memory for reuse, the trackers it reports to, and every ``hub.*`` field, which says how to
publish the run, not how it trains); any other difference means another run."""
RESUME_AND_OVERWRITE = (
    "--resume continues the run in output_dir and --overwrite replaces it: give one, not both"
)
"""The refusal of ``--resume`` together with ``--overwrite``."""
IGNORED_FIELDS = ("output_dir",)
"""Fields not compared on resume (the folder is the run, wherever it now lies)."""


class RunFolderError(ValueError):
    """The run folder cannot be used as asked (another run's recipe, nothing to resume)."""


class RunFolderBusy(RunFolderError):
    """Another process trains into the run folder (it holds :data:`LOCK_FILE`)."""


class RunWriteError(ValueError):
    """A file of the run could not be written (a full disk, no permission): the message names
    the file, the cause, the last good checkpoint and how to continue
    (:func:`write_failed_message`). (A ``ValueError``, like every error the ``train`` command
    reports as one line.)"""


@dataclass
class FieldChange:
    """One recipe field whose value differs between the stored and the given recipe."""

    name: str
    stored: object
    given: object

    def __str__(self) -> str:
        return f"{self.name}: {_show(self.stored)} vs {_show(self.given)}"


def _show(value) -> str:
    """``value`` as it is spelt in YAML (``64``, ``null``, ``[a, b]``)."""
    if value is _ABSENT:
        return "<absent>"
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return text.removesuffix("...").strip()


_ABSENT = object()


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


def _flatten(data, prefix: str = "") -> dict[str, object]:
    if isinstance(data, dict) and data:
        flat: dict[str, object] = {}
        for key, value in data.items():
            flat.update(_flatten(value, f"{prefix}{key}."))
        return flat
    return {prefix[:-1]: data}


def recipe_differences(stored: dict, given: dict) -> list[FieldChange]:
    """The fields (dotted names, sorted) whose values differ between two recipe mappings,
    :data:`IGNORED_FIELDS` left out; a ``data.source`` path is compared as the absolute path it
    names (:func:`~hfattn.storage.location.absolute_source`)."""
    a, b = _flatten(stored), _flatten(given)
    changes = []
    for name in sorted(a.keys() | b.keys()):
        if name in IGNORED_FIELDS or name.split(".")[0] in IGNORED_FIELDS:
            continue
        old, new = a.get(name, _ABSENT), b.get(name, _ABSENT)
        if name == "data.source" and isinstance(old, str) and isinstance(new, str):
            old, new = absolute_source(old), absolute_source(new)  # a run stored it relative
        if old != new:
            changes.append(FieldChange(name, old, new))
    return changes


def is_resumable(name: str) -> bool:
    """Whether the dotted recipe field ``name`` may change on resume: it is one of
    :data:`RESUMABLE_FIELDS` or lies in a section listed there (``hub.license``)."""
    return any(name == field or name.startswith(f"{field}.") for field in RESUMABLE_FIELDS)


def check_resume(folder: str | Path, recipe_yaml: str) -> list[FieldChange]:
    """Check that the run in ``folder`` can be resumed with the resolved recipe
    ``recipe_yaml``; return the changed :data:`RESUMABLE_FIELDS` (the stored recipe is
    rewritten with them when training starts).

    Cheap (reads two small files): called before the model and data are loaded.

    Raises:
        FileNotFoundError: there is no checkpoint to resume from.
        RunFolderError: the recipe differs from the stored one in other fields (the message names
        them: ``model.hidden_size: 64 vs
            128``).
    """
    folder = Path(folder)
    require_checkpoint(folder)
    stored = read_recipe(folder)
    if stored is None:
        return []
    changes = recipe_differences(stored, yaml.safe_load(recipe_yaml))
    other = [c for c in changes if not is_resumable(c.name)]
    if other:
        raise RunFolderError(
            f"--resume: the recipe differs from the run's in {folder} "
            f"({recipe_path(folder)} vs given): {'; '.join(map(str, other))}. Only "
            f"{', '.join(RESUMABLE_FIELDS)} may change on resume: continue the run as it "
            f"was with `{resume_command(folder)}`, or train the new recipe into "
            "another output_dir (--set output_dir=runs/NAME)"
        )
    return changes


def check_output_dir(output_dir: str | Path, overwrite: bool) -> None:
    """Refuse a folder that already holds a training run (checkpoints or saved weights) unless
    ``overwrite``: made before anything is loaded (:func:`clear_output_dir` clears it later).

    Raises:
        FileExistsError: naming what the folder holds and the three ways on.
    """
    output_dir = Path(output_dir)
    held = [p.name for p in (checkpoints_dir(output_dir), *output_dir.glob("*.safetensors"))]
    held = [name for name in held if (output_dir / name).exists()]
    if held and not overwrite:
        raise FileExistsError(
            f"output_dir {output_dir} already holds a run ({', '.join(held)}); continue it "
            f"with `{resume_command(output_dir)}`, replace it with --overwrite, or pick "
            "another output_dir (--set output_dir=runs/NAME)"
        )


def clear_output_dir(output_dir: str | Path) -> None:
    """Remove the run that ``output_dir`` holds (``--overwrite``, once :func:`check_output_dir`
    has been made): its checkpoints, weights and run files (on the main process); any other
    file stays."""
    output_dir = Path(output_dir)
    from accelerate import PartialState  # 1.5 s; only a run that clears a folder needs it

    if PartialState().is_main_process:
        shutil.rmtree(checkpoints_dir(output_dir), ignore_errors=True)
        for path in [*output_dir.glob("*.safetensors"), *(output_dir / n for n in RUN_FILES)]:
            path.unlink(missing_ok=True)
    PartialState().wait_for_everyone()


def resume_command(folder: str | Path) -> str:
    """The command line that continues the run in ``folder``, the folder quoted for the shell
    (``hfattn train --resume 'runs/my run'``) so that it can be pasted as printed."""
    return f"hfattn train --resume {shlex.quote(str(folder))}"


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


@contextmanager
def held_run_folder(folder: str | Path) -> Iterator[None]:
    """Hold the run folder ``folder`` (created if missing) for this process while the block
    runs: an exclusive ``flock`` on :data:`LOCK_FILE` (``filelock``), taken without waiting,
    whose file records this process's pid, host and start time for the message of a refused
    run. The kernel releases the lock when its process ends, however it ends, so a lock file
    left by a killed run is free: there is no stale state to detect, and of two runs starting
    together exactly one holds the folder. At the end the file is removed (while still held:
    a run waiting on its old inode sees it unlinked and takes the lock anew) and so is the
    folder when it was made here and is left empty. Only the main process of a multi-process
    run holds it.

    Raises:
        RunFolderBusy: another process holds ``folder``, naming it.
        RunWriteError: the folder or its lock cannot be written (no permission, a full disk).
    """
    folder = Path(folder)
    made = not folder.exists()
    lock = _folder_lock(folder, record_holder=True)
    try:
        with writing(folder / LOCK_FILE):
            folder.mkdir(parents=True, exist_ok=True)
            _acquire(lock, folder)
    except FileWriteError as failure:
        raise RunWriteError(
            f"{failure}: output_dir must be a folder this user can write; make it writable or "
            "pick another output_dir (--set output_dir=runs/NAME)"
        ) from None
    try:
        yield
    finally:
        (folder / LOCK_FILE).unlink(missing_ok=True)
        lock.release()
        if made:
            try:
                folder.rmdir()  # only an empty folder: a run that wrote nothing
            except OSError:
                pass


def _folder_lock(folder: Path, *, record_holder: bool = False) -> FileLock:
    """The non-blocking ``flock`` of ``folder``'s :data:`LOCK_FILE`; with ``record_holder``
    the file is given this process's record (:func:`_this_process`) once it is held."""

    def record(fd: int) -> None:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(_this_process()).encode(), 0)

    return FileLock(folder / LOCK_FILE, blocking=False, thread_local=False,
                    on_acquired=record if record_holder else None)  # fmt: skip


def _acquire(lock: FileLock, folder: Path) -> None:
    """Take ``lock`` of ``folder`` now, or refuse the folder naming its holder.

    Raises:
        RunFolderBusy: another process holds it.
    """
    try:
        lock.acquire()
    except Timeout:
        raise RunFolderBusy(_busy_message(folder, _read_lock(folder / LOCK_FILE) or {})) from None


def _this_process() -> dict:
    """The holder record of this process: pid, host, start time."""
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    return {"pid": os.getpid(), "host": socket.gethostname(), "started": started}


def _read_lock(lock: Path) -> dict | None:
    """The holder recorded in ``lock`` (``{}`` for an unreadable or half-written one), or
    ``None`` when there is no lock."""
    try:
        holder = json.loads(lock.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def check_not_busy(folder: str | Path) -> None:
    """Refuse ``folder`` when another process holds it (:func:`held_run_folder`): the checks of
    a run folder (its checkpoints, its recipe) then name the run that trains there rather
    than what it has not written yet. The lock taken afterwards is what decides.

    Raises:
        RunFolderBusy: another process holds ``folder``, naming it.
    """
    folder = Path(folder)
    if not (folder / LOCK_FILE).exists():
        return
    lock = _folder_lock(folder)
    try:
        _acquire(lock, folder)
    except FileNotFoundError:  # the folder went away meanwhile
        return
    (folder / LOCK_FILE).unlink(missing_ok=True)  # free: leave no lock file behind
    lock.release()


def _busy_message(folder: Path, holder: dict) -> str:
    """The refusal of a run folder that ``holder`` (its lock's record) trains into."""
    who = (
        f"pid {holder.get('pid')} on {holder.get('host')}, since {holder.get('started')}"
        if holder
        else "a process that is starting"
    )
    return (
        f"output_dir {folder} is in use by another hfattn train ({who}; {folder / LOCK_FILE}): "
        "one run trains into a folder at a time. Wait for it to end, or train into another "
        "output_dir (--set output_dir=runs/NAME)"
    )


def checkpoint_step(checkpoint: Path) -> int:
    """The optimizer step of a ``step-N`` checkpoint folder."""
    return int(checkpoint.name[len(CHECKPOINT_PREFIX) :])


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
    try:
        progress = json.loads((checkpoint / PROGRESS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(progress, dict) and progress.get("training_end") is not None


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
    "CHECKPOINTS_DIR",
    "CHECKPOINT_PREFIX",
    "BEST_WEIGHTS",
    "CONFUSION_MATRIX_FILE",
    "PROGRESS_FILE",
    "EVAL_RESULTS_FILE",
    "LOSS_CURVE_FILE",
    "METRICS_FILE",
    "RECIPE_FILE",
    "CTRANSLATE2_DIR",
    "SAMPLES_FILE",
    "RESUMABLE_FIELDS",
    "is_resumable",
    "RESUME_AND_OVERWRITE",
    "require_checkpoint",
    "RUN_FILES",
    "SHORT_RUN_FRACTION",
    "BUDGET_STOPS",
    "checkpoint_step",
    "complete_checkpoints",
    "interrupted_run_message",
    "finished_run_message",
    "training_shortfall",
    "FieldChange",
    "LOCK_FILE",
    "TRACKER_LOGS_DIR",
    "check_not_busy",
    "RunFolderBusy",
    "RunFolderError",
    "RunWriteError",
    "held_run_folder",
    "run_writes",
    "write_failed_message",
    "check_resume",
    "checkpoints_dir",
    "clear_output_dir",
    "eval_results_path",
    "latest_checkpoint",
    "metrics_path",
    "read_recipe",
    "recipe_differences",
    "recipe_path",
    "resume_command",
    "run_state",
    "write_recipe",
]
