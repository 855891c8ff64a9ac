"""Checkpoints of a training run: what they hold, how they are written, read back and pruned.

A checkpoint is the folder ``checkpoints/step-N`` of the run (names from
:mod:`hfattn.storage.run_folder`): Accelerate's state (weights, optimizer, scheduler, RNG of every
process), the carried recurrent state of a stateful job (``recurrent_state_<rank>.safetensors``)
and :class:`Progress` (``progress.json``: the data position, the best score, the seconds of
training, of evaluation and of the whole run, the length of ``metrics.jsonl`` at that moment,
the train losses not yet logged, the prepared data trained on). The checkpoint of the last
step also says that training had ended, and records what followed it once done (the final
validation, the averaged checkpoints' score: :func:`record_progress`).

Writes are atomic: the checkpoint is written under ``.tmp-step-N`` and renamed once whole, so
a crash (even SIGKILL) in the middle of a write leaves the previous checkpoint the newest one.
Reading back tells a damaged file (:class:`CheckpointLoadError` naming it) from an intact
checkpoint that does not fit the model or optimizer built from the recipe (the recipe differs).
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from accelerate.utils import SAFE_MODEL_NAME
from safetensors.torch import load_file, save_file

from ..storage.file_io import (
    atomic_path,
    atomic_write_json,
    move_dir_into_place,
    write_failure,
    writing,
)
from ..storage.file_reads import reads_back
from ..storage.model_folder import first_damaged_file
from ..storage.run_folder import (
    BEST_WEIGHTS,
    CHECKPOINT_PREFIX,
    PROGRESS_FILE,
    checkpoints_dir,
    complete_checkpoints,
    resume_command,
)
from ..storage.run_status import RunWriteError, write_failed_message

logger = logging.getLogger(__name__)


class CheckpointWriteError(RunWriteError):
    """Writing a checkpoint failed (a full disk, no permission, a lost mount); the message
    names the file, the cause and the previous checkpoint, which is left intact."""


class CheckpointLoadError(ValueError):
    """A checkpoint cannot be read for ``--resume``; the message names the file."""


@dataclass
class StopRequest:
    """A request to end training after the current optimizer step: made by a callback
    (:meth:`request`), the time budget, or a first SIGINT / SIGTERM
    (:func:`~hfattn.training.stop_signals.stop_on_signals`, which also sets ``interrupted``)."""

    requested: bool = False
    reason: str | None = None
    """Why: ``"time budget"``, ``"interrupted"`` or a callback's own words."""
    interrupted: bool = False
    """A SIGINT/SIGTERM asked the run to stop, whatever ``reason`` says (a run stopping for its
    time budget keeps that reason)."""

    def request(self, reason: str) -> None:
        """Ask the run to stop after this step for ``reason`` (a request already made keeps its
        reason)."""
        if not self.requested:
            self.requested, self.reason = True, reason


@dataclass
class Progress:
    """Where training stands; saved in every checkpoint as ``progress.json``."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    elapsed_s: float = 0.0
    """Seconds of training (the clock of ``training.max_minutes``): evaluations not counted."""
    eval_s: float = 0.0
    """Seconds spent evaluating during training (the periodic validations and the scoring of
    averaged checkpoints), kept out of ``elapsed_s``. (A ``progress.json`` written before this
    field existed loads with 0.)"""
    wall_s: float = 0.0
    """Wall-clock seconds of the whole run up to this checkpoint, over all its sessions
    (training, evaluations, checkpoints, set-up)."""
    first_step_wall_s: float | None = None
    """Wall-clock seconds from the command's start to the end of the run's first optimizer step
    (set-up, data, tokenizer, model and the first step's compile included)."""
    compile_s: float = 0.0
    """Seconds of the steps in which ``torch.compile`` compiled a graph, over all sessions
    (:class:`~hfattn.training.compiling.CompileWatch`)."""
    compiles: int = 0
    """Graphs ``torch.compile`` compiled for the training step, over all sessions."""
    best_score: float | None = None
    """The best validation value of ``training.metric_for_best_model`` so far."""
    best_step: int | None = None
    best_averaged_steps: list[int] | None = None
    """The checkpoint steps whose average is the best model
    (``training.average_checkpoints``); ``None`` when the best is one checkpoint."""
    evaluated_step: int | None = None
    """The step of the last validation (the final one is skipped when it is this step)."""
    unlogged_losses: list[float] = field(default_factory=list)
    """Train losses since the last ``metrics.jsonl`` train record (they are averaged into the
    next one, after a resume too)."""
    planned_steps: int | None = None
    """The optimizer steps the recipe plans, before any ``--set`` override of its budget
    (:func:`hfattn.training.schedules.schedule_steps` of the recipe file's ``training:``)."""
    planned_minutes: float | None = None
    """The recipe file's ``training.max_minutes``, before any ``--set`` override: a run stopped
    by that clock is complete (:func:`hfattn.storage.run_status.training_shortfall`)."""
    skipped_steps: int = 0
    """Optimizer steps skipped for a non-finite loss (``training.on_nonfinite_loss: skip``)."""
    train_tokens: int = 0
    """Tokens trained on so far, over all processes (:func:`~hfattn.training.speed.trained_tokens`
    of every global batch)."""
    train_flops: float | None = None
    """Training FLOPs of every global batch so far, over all processes
    (:class:`~hfattn.training.throughput.FlopCounter`): over ``train_tokens``, the run's
    ``train_flops_per_token``. A run starts it at 0; ``None`` when a checkpoint that did not
    count them was resumed (the FLOPs per token is then unknown)."""
    commands: list[str] = field(default_factory=list)
    """The command lines of the run's sessions up to this checkpoint, the first first
    (``hfattn train recipe.yaml``, then each ``hfattn train --resume ...``): its results file
    records them all."""
    prepared_data: str | None = None
    """The name of the prepared data the run trains on (its folder in the prepared-data cache,
    :func:`hfattn.data.prepared.data_key`): a resume maps the same data, or is refused before
    preparing other data (:func:`hfattn.data.prepared.resuming`). ``None`` in a checkpoint
    written without the record (its resume cannot check the data) or of a job without
    prepared data."""
    data_changes: list[dict] = field(default_factory=list)
    """The changes of prepared data that resumes made with ``--allow-data-change``, the first
    first: ``{"step": N, "from": NAME, "to": NAME}`` each (``eval_results.json`` records them
    under ``data_preparation``)."""
    metrics_bytes: int | None = None
    """Length of ``metrics.jsonl`` when the checkpoint was written (resume cuts it back)."""
    training_end: str | None = None
    """Why training ended, once it has: ``"completed"`` (its step or epoch budget), ``"time
    budget"`` or a callback's ``stop_reason``. Recorded in the checkpoint of the last step,
    which is written before the final validation: a resume of it skips the training loop and
    goes on with the phases after it (unless a larger budget reopens training)."""
    averaged: bool = False
    """Whether the average of the last checkpoints (``training.average_checkpoints``) has been
    scored at the end of training (recorded with its result: a resume does not score it
    again)."""
    stop: StopRequest = field(default_factory=StopRequest)
    """Whether the run is to stop after this step, and why: the run's control, not one of its
    counters (not saved in ``progress.json``)."""

    @property
    def flops_per_token(self) -> float | None:
        """Training FLOPs per token of the run so far (``train_flops / train_tokens``; ``None``
        before any token or when the FLOPs are unknown)."""
        if self.train_flops is None or not self.train_tokens:
            return None
        return self.train_flops / self.train_tokens

    def state_dict(self) -> dict:
        """The fields saved in ``progress.json``: the counters, not the stop request."""
        return {k: v for k, v in asdict(self).items() if k != "stop"}


def write_checkpoint(
    accelerator,
    output_dir: Path,
    progress: Progress,
    state,
    *,
    keep: int,
    metrics_path: Path,
    on_state_saved: Callable[[Path], None] | None = None,
) -> None:
    """Write ``checkpoints/step-N`` of ``progress.step`` atomically (a temporary folder, then
    a rename) and prune all but the newest ``keep``. ``state`` is the carried recurrent state
    (a tensor, a tuple of tensors, or ``None``). ``on_state_saved(tmp_folder)`` is called once
    Accelerate's state is written, before ``progress.json`` and the rename. A write cut short
    (a second Ctrl-C, a full disk) removes its temporary folder.

    Raises:
        CheckpointWriteError: a file of it could not be written (:func:`write_failure`: an
            ``OSError``, or what ``torch.save`` and ``safetensors`` raise for a failed write):
            the message names the file and the cause; the previous checkpoint is untouched and
            named too.
    """
    root = checkpoints_dir(output_dir)
    target = root / f"{CHECKPOINT_PREFIX}{progress.step}"
    tmp = root / f".tmp-{CHECKPOINT_PREFIX}{progress.step}"
    try:
        with writing(target, staged=tmp):
            _write(accelerator, tmp, progress, state, metrics_path, on_state_saved)
            if accelerator.is_main_process:
                move_dir_into_place(tmp, target)
                for old in complete_checkpoints(output_dir)[:-keep]:
                    shutil.rmtree(old)
            accelerator.wait_for_everyone()
    except BaseException as exc:
        if accelerator.is_main_process:
            shutil.rmtree(tmp, ignore_errors=True)
        failure = write_failure(exc, target)
        if failure is None:
            raise
        what = f"the checkpoint of step {progress.step} is not written (nothing of it is left)"
        raise CheckpointWriteError(write_failed_message(output_dir, failure, what)) from exc


def _write(accelerator, tmp: Path, progress: Progress, state, metrics_path, on_state_saved):
    """The files of one checkpoint, under ``tmp``."""
    if accelerator.is_main_process and tmp.exists():
        shutil.rmtree(tmp)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp))
    if on_state_saved is not None:
        on_state_saved(tmp)
    if state is not None:
        tensors = state if isinstance(state, tuple) else (state,)
        save_file(
            {f"state_{i}": t.detach().cpu().contiguous() for i, t in enumerate(tensors)},
            str(tmp / f"recurrent_state_{accelerator.process_index}.safetensors"),
        )
    if accelerator.is_main_process:
        progress.metrics_bytes = metrics_path.stat().st_size if metrics_path.exists() else 0
        atomic_write_json(tmp / PROGRESS_FILE, progress.state_dict())
    accelerator.wait_for_everyone()


def record_progress(accelerator, output_dir: Path, progress: Progress, metrics_path: Path) -> None:
    """Rewrite ``progress.json`` of the checkpoint of ``progress.step`` (atomically) with
    ``progress`` as it stands and the current length of ``metrics_path``: what was done since the
    checkpoint was written (the end of training, the final validation and its best weights,
    the averaged checkpoints' score) is recorded in it, so that a resume neither repeats it nor
    cuts its records from the log."""
    if accelerator.is_main_process:
        folder = checkpoints_dir(output_dir) / f"{CHECKPOINT_PREFIX}{progress.step}"
        progress.metrics_bytes = metrics_path.stat().st_size if metrics_path.exists() else 0
        atomic_write_json(folder / PROGRESS_FILE, progress.state_dict())
    accelerator.wait_for_everyone()


def load_checkpoint(accelerator, path: Path, metrics_path: Path) -> tuple[Progress, object]:
    """Restore Accelerate's state from the checkpoint folder ``path``, cut ``metrics.jsonl``
    back to what it held when the checkpoint was written and remove temporary folders that a
    crash left. Returns the saved :class:`Progress` and the carried recurrent state (``None``
    for a stateless job).

    Raises:
        CheckpointLoadError: a file of the checkpoint is missing, truncated or corrupt (the
            message names it), or the checkpoint is intact but does not fit the model or
            optimizer (the recipe differs from the run's).
    """
    progress_file = path / PROGRESS_FILE
    try:
        saved = json.loads(progress_file.read_text(encoding="utf-8"))
        progress = Progress(**saved)
    except (OSError, ValueError, TypeError) as exc:
        raise _unreadable(progress_file, exc) from None
    # accelerate only logs a random-state file it cannot read (resume would then silently
    # draw other random numbers: dropout, shuffling) and reports a missing schedule state
    # as a count mismatch: check these small files first
    for name in (f"random_states_{accelerator.process_index}.pkl", "custom_checkpoint_0.pkl"):
        if not reads_back(path / name):
            raise _unreadable(path / name, ValueError("missing, truncated or corrupt"))
    state_file = path / f"recurrent_state_{accelerator.process_index}.safetensors"
    state = None
    try:
        accelerator.load_state(str(path))
        if state_file.exists():
            tensors = load_file(str(state_file))
            parts = tuple(tensors[f"state_{i}"].to(accelerator.device) for i in range(len(tensors)))
            state = parts if len(parts) > 1 else parts[0]
    except Exception as exc:  # noqa: BLE001 (torch, safetensors and pickle each raise their own)
        missing = isinstance(exc, FileNotFoundError) and exc.filename
        damaged = Path(missing) if missing else first_damaged_file(path)
        if damaged is None:  # every file reads back: the model or optimizer differs
            raise _mismatched(path, exc) from None
        raise _unreadable(damaged, exc) from None
    if accelerator.is_main_process:
        _cut_log(metrics_path, progress.metrics_bytes, progress.step)
        for stale in path.parent.glob(f".tmp-{CHECKPOINT_PREFIX}*"):
            shutil.rmtree(stale)  # a write that a crash (SIGKILL, power loss) cut short
    logger.info("resumed from %s at step %d", path, progress.step)
    return progress, state


def save_best_weights(accelerator, model, output_dir: Path) -> None:
    """Save the weights of the (unwrapped) ``model`` as the run's best so far, atomically."""
    if accelerator.is_main_process:
        weights = accelerator.unwrap_model(model).state_dict()
        with atomic_path(checkpoints_dir(output_dir) / BEST_WEIGHTS) as tmp:
            save_file(
                {k: v.detach().cpu().clone().contiguous() for k, v in weights.items()}, str(tmp)
            )


def load_best_weights(model, output_dir: Path) -> bool:
    """Load the run's best weights into ``model``; ``False`` when none were saved."""
    best = checkpoints_dir(output_dir) / BEST_WEIGHTS
    if not best.exists():
        return False
    model.load_state_dict(load_file(str(best)))
    return True


def average_checkpoint_weights(folders: Sequence[Path]) -> dict[str, torch.Tensor]:
    """The mean of the model weights saved in the checkpoint ``folders`` (Accelerate's
    ``model.safetensors`` of each), tensor by tensor: ``θ̄ = (1/N) Σ_i θ_i``. This is the
    checkpoint averaging of Vaswani et al. (2017, §6.1: the last 5 checkpoints, written
    10 minutes apart), which smooths the noise of the last optimizer steps. Floating-point
    tensors are summed in float64 and cast back; any other tensor (a counter, a mask) is
    taken from the newest folder.

    Raises:
        ValueError: ``folders`` is empty, or their tensors differ in names or shapes.
    """
    if not folders:
        raise ValueError("average_checkpoint_weights needs at least one checkpoint folder")
    weights = [
        load_file(str(Path(folder) / f"{SAFE_MODEL_NAME}.safetensors")) for folder in folders
    ]
    newest = weights[-1]
    for folder, other in zip(folders, weights, strict=True):
        if other.keys() != newest.keys() or any(
            other[k].shape != v.shape for k, v in newest.items()
        ):
            raise ValueError(
                f"the checkpoint {folder} holds other tensors than {folders[-1]}: "
                "only checkpoints of one run can be averaged"
            )
    averaged = {}
    for name, last in newest.items():
        if last.is_floating_point():
            total = sum(w[name].to(torch.float64) for w in weights)
            averaged[name] = (total / len(weights)).to(last.dtype)
        else:
            averaged[name] = last
    return averaged


def load_saved_weights(model: torch.nn.Module, weights: dict[str, torch.Tensor]) -> None:
    """Copy ``weights``, a state dict as safetensors stores it (one name for tensors that
    share memory, such as tied embeddings), into ``model``. The names it lacks must be the
    other names of tied tensors (the rule of ``safetensors.torch.load_model``).

    Raises:
        ValueError: ``weights`` has names the model lacks, or lacks a tensor that is not tied.
    """
    own = model.state_dict()
    missing, unexpected = model.load_state_dict(weights, strict=False)
    loaded = {own[name].data_ptr() for name in weights if name in own}
    untied = [name for name in missing if own[name].data_ptr() not in loaded]
    if unexpected or untied:
        raise ValueError(
            f"the weights do not fit the model: missing {untied or 'nothing'}, "
            f"unexpected {unexpected or 'nothing'}"
        )


def _unreadable(file: Path, exc: BaseException) -> CheckpointLoadError:
    """The error for a checkpoint file (or folder) that cannot be read."""
    folder = file if file.is_dir() else file.parent
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return CheckpointLoadError(
        f"--resume: cannot read {file} ({type(exc).__name__}: {reason}); the checkpoint is "
        f"damaged: delete {folder} to resume from the previous checkpoint, if any"
    )


def _mismatched(checkpoint: Path, exc: BaseException) -> CheckpointLoadError:
    """The error for an intact checkpoint that does not fit the model or optimizer built from
    the recipe (another ``hidden_size``, another optimizer): the recipe is what differs."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    details = [line for line in lines if not line.startswith("Error(s) in loading")]
    reason = "; ".join(details[:3]) if details else type(exc).__name__
    if len(details) > 3:
        reason += f"; ... ({len(details) - 3} more)"
    folder = checkpoint.parent.parent
    return CheckpointLoadError(
        f"--resume: the recipe differs from the run's: {reason}. The checkpoint {checkpoint} "
        f"is intact: continue the run with its own recipe (`{resume_command(folder)}`), "
        "or train this recipe into another output_dir (--set output_dir=runs/NAME)"
    )


def _cut_log(metrics_path: Path, length: int | None, step: int) -> None:
    """Cut ``metrics.jsonl`` back to ``length`` bytes (its size when the checkpoint of
    ``step`` was written), dropping what a killed run logged after it."""
    if not metrics_path.exists() or length is None:
        return
    data = metrics_path.read_bytes()
    if len(data) < length:
        logger.warning(
            "%s is shorter than when the checkpoint of step %d was written; keeping it as is",
            metrics_path,
            step,
        )
        return
    if len(data) > length:
        with atomic_path(metrics_path) as tmp:
            tmp.write_bytes(data[:length])
        logger.info("%s: dropped the records logged after step %d", metrics_path.name, step)


__all__ = [
    "CheckpointLoadError",
    "CheckpointWriteError",
    "Progress",
    "average_checkpoint_weights",
    "load_best_weights",
    "load_saved_weights",
    "load_checkpoint",
    "record_progress",
    "save_best_weights",
    "write_checkpoint",
]
