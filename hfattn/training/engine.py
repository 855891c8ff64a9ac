"""The training loop shared by every recipe, on Accelerate (one CPU, one GPU, many of either).

Features: mixed precision, gradient accumulation, gradient clipping, named optimizers and
schedules, a wall-clock budget, periodic evaluation with best-model tracking, tqdm progress
(under a wall-clock budget, the share of the run done: it reaches 100 % when the clock stops
the run), metrics as JSON lines plus a loss-curve PNG, atomic checkpoints every N steps, exact resume
(data position, optimizer, scheduler, RNG and carried recurrent state), and clean stops on
Ctrl-C / SIGTERM that leave a resumable checkpoint. Stateful jobs carry the recurrent state
(detached) from batch to batch and reset it at every epoch.

Surviving faults: a run killed at any point (even SIGKILL, even in the middle of a checkpoint
write) continues with ``resume=True`` to the same weights as an uninterrupted run, bit for
bit on CPU. A checkpoint records how long ``metrics.jsonl`` was when it was written (and the
train losses not yet logged): resuming cuts the log back to that length, so no step is
logged twice or left out. A checkpoint write that fails (a full disk) removes its temporary
folder and stops with :class:`CheckpointWriteError` naming the previous, intact checkpoint; a
checkpoint that cannot be read is a :class:`CheckpointLoadError` naming the file. A NaN or
infinite loss stops the run (``training.on_nonfinite_loss: stop``, the default; the last
checkpoint is kept) or skips that optimizer step (``skip``, at most
``training.max_skipped_steps`` times).

Fault injection for tests: ``HFATTN_FAULT_AT=step:N`` makes the process SIGKILL itself once
step ``N`` is done and logged (before its checkpoint is written), ``HFATTN_FAULT_AT=checkpoint:N``
in the middle of writing the checkpoint of step ``N`` (after the weights and optimizer state,
before ``progress.json`` and the rename). It is read once, by :func:`fault_point`.
"""

from __future__ import annotations

import json
import logging
import math
import os
import platform
import shutil
import signal
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState
from accelerate.utils import broadcast_object_list, set_seed
from safetensors.torch import load_file, save_file
from tqdm.auto import tqdm

from ..fileio import atomic_path, atomic_write_json
from ..run_folder import (
    CHECKPOINT_PREFIX,
    CHECKPOINTS_DIR,
    EVAL_RESULTS_FILE,
    LOSS_CURVE_FILE,
    METRICS_FILE,
    RESUME_AND_OVERWRITE,
    claim_output_dir,
    latest_checkpoint,
    require_checkpoint,
    resume_command,
    write_recipe,
)
from ..schema import require_reported_metric
from .optim import build_optimizer
from .schedules import build_lr_scheduler, check_warmup_fits_epochs

logger = logging.getLogger(__name__)


@dataclass
class TrainingJob:
    """Everything task-specific the loop needs.

    Attributes:
        model: the ``PreTrainedModel`` to train.
        tokenizer: saved next to the model.
        batches: ``len()``, ``epoch(e, start)`` yielding global batches (a tensor, or a dict of
            tensors, dim 0 = examples), ``batch_size`` and a ``stateful`` flag.
        compute_loss: ``(model, batch, state, stateful) -> (loss, new_state)``; ``model`` may
            be wrapped (DDP), so statefulness is passed in, not read from the model. A stateful
            task returns the state already detached (truncated BPTT); it is a tensor or a tuple
            of tensors (saved with checkpoints).
        evaluate: ``(model, split) -> {metric: value}`` with a ``loss`` entry.
        eval_splits: splits scored at the end (``validation`` is also scored periodically).
        sample: optional ``model -> str`` shown at the end of training.
        card_metadata: task / dataset names recorded in ``eval_results.json``.
    """

    model: Any
    tokenizer: Any
    batches: Any
    compute_loss: Callable
    evaluate: Callable[[Any, str], dict]
    eval_splits: Sequence[str] = ("validation", "test")
    sample: Callable[[Any], str] | None = None
    card_metadata: dict = field(default_factory=dict)


class NonFiniteLossError(ValueError):
    """The training loss became NaN or infinite; nothing after the last checkpoint is saved."""


class CheckpointWriteError(ValueError):
    """Writing a checkpoint failed (a full disk, a lost mount); the message names the error and
    the previous checkpoint, which is left intact. (A ``ValueError``, like every error the
    ``train`` command reports as one line.)"""


class CheckpointLoadError(ValueError):
    """A checkpoint cannot be read for ``--resume``; the message names the file."""


TIMED_BAR_FORMAT = "{l_bar}{bar}| [{elapsed}<{remaining}{postfix}]"
"""The progress bar of a run with ``training.max_minutes``: its percentage is the schedule's
(what the clock or the steps have used up), so no step count out of ``total_steps`` is shown
(the step is in the postfix)."""

FAULT_ENV = "HFATTN_FAULT_AT"
"""Environment variable of the fault-injection hook (see the module docstring)."""
FAULT_POINTS = ("step", "checkpoint")


def fault_point() -> tuple[str, int] | None:
    """``(where, step)`` parsed from ``$HFATTN_FAULT_AT`` (``step:N`` or ``checkpoint:N``), or
    ``None`` when it is unset.

    Raises:
        ValueError: the value is not ``<point>:<step>`` with a known point and a step >= 1.
    """
    value = os.environ.get(FAULT_ENV, "").strip()
    if not value:
        return None
    where, _, step = value.partition(":")
    if where not in FAULT_POINTS or not step.isdigit() or int(step) < 1:
        raise ValueError(
            f"{FAULT_ENV}={value!r}: expected <point>:<step> with point one of "
            f"{', '.join(FAULT_POINTS)} and step >= 1, e.g. step:7"
        )
    return where, int(step)


@dataclass
class Progress:
    """Where training stands; saved in every checkpoint as ``progress.json``."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    elapsed_s: float = 0.0
    best_score: float | None = None
    """The best validation value of ``training.metric_for_best_model`` so far."""
    best_step: int | None = None
    evaluated_step: int | None = None
    """The step of the last validation (the final one is skipped when it is this step)."""
    unlogged_losses: list[float] = field(default_factory=list)
    """Train losses since the last ``metrics.jsonl`` train record (they are averaged into the
    next one, after a resume too)."""
    planned_steps: int | None = None
    """The optimizer steps the recipe plans, before any ``--set`` override of its budget
    (:func:`schedule_steps` of the recipe file's ``training:`` section)."""
    skipped_steps: int = 0
    """Optimizer steps skipped for a non-finite loss (``training.on_nonfinite_loss: skip``)."""
    metrics_bytes: int | None = None
    """Length of ``metrics.jsonl`` when the checkpoint was written (resume cuts it back)."""
    should_stop: bool = False
    stop_reason: str | None = None

    def state_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k not in ("should_stop", "stop_reason")}


@dataclass
class TrainResult:
    """What :func:`train` returns."""

    output_dir: Path
    progress: Progress
    metrics: dict[str, dict] = field(default_factory=dict)
    sample: str | None = None
    interrupted: bool = False


@contextmanager
def _stop_on_signals(progress: Progress):
    """First SIGINT/SIGTERM asks the loop to checkpoint and stop; a second one aborts."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        if progress.should_stop and progress.stop_reason == "interrupted":
            raise KeyboardInterrupt
        progress.should_stop, progress.stop_reason = True, "interrupted"
        logger.warning("%s received: saving a checkpoint and stopping", signal.Signals(signum).name)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _hardware(accelerator: Accelerator) -> str:
    if accelerator.device.type == "cuda":
        name = torch.cuda.get_device_name(accelerator.device)
        return f"{accelerator.num_processes}× {name}"
    return f"{accelerator.num_processes} process(es) on a {os.cpu_count()}-core {platform.machine()} CPU"


class _Run:
    """One training run: owns the accelerator, the optimizer and the files of ``output_dir``."""

    def __init__(self, job: TrainingJob, cfg, output_dir: Path, callbacks, planned_training=None):
        self.job, self.cfg, self.output_dir, self.callbacks = job, cfg, output_dir, callbacks
        # A second run in the same process (a notebook, the tests) may ask for another
        # precision: forget the previous run's settings, keep the distributed set-up.
        AcceleratorState._reset_state(reset_partial_state=False)
        self.accelerator = Accelerator(
            mixed_precision=cfg.mixed_precision,
            gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        )
        acc = self.accelerator
        if cfg.mixed_precision == "fp16" and acc.device.type == "cpu":
            logger.warning("training.mixed_precision=fp16 has no effect on CPU; use bf16 there")
        if job.batches.batch_size % acc.num_processes:
            raise ValueError(
                f"training.batch_size={job.batches.batch_size} must be divisible by the "
                f"number of processes ({acc.num_processes})"
            )
        # run_recipe checks this before the data loads; a job built by hand is checked here
        require_reported_metric(
            cfg.metric_for_best_model, job.card_metadata.get("reported_metrics", ())
        )
        per_process = job.batches.batch_size // acc.num_processes
        self.rows = slice(acc.process_index * per_process, (acc.process_index + 1) * per_process)
        steps_per_epoch = max(1, len(job.batches) // cfg.gradient_accumulation_steps)
        check_warmup_fits_epochs(cfg, steps_per_epoch)
        self.total_steps = schedule_steps(cfg, steps_per_epoch)
        optimizer = build_optimizer(
            cfg.optimizer,
            job.model.parameters(),
            lr=cfg.learning_rate,
            weight_decay=cfg.weight_decay,
            betas=tuple(cfg.betas),
        )
        config = job.model.config
        self.scheduler = build_lr_scheduler(
            cfg.schedule,
            optimizer,
            warmup_steps=cfg.warmup_steps,
            total_steps=self.total_steps,
            d_model=getattr(config, "d_model", None) or getattr(config, "hidden_size", None),
        )
        self.model, self.optimizer = acc.prepare(job.model, optimizer)
        acc.register_for_checkpointing(self.scheduler)
        self.progress = Progress(
            planned_steps=schedule_steps(planned_training or cfg, steps_per_epoch)
        )
        self.state = None
        self.metrics_path = output_dir / METRICS_FILE
        self.checkpoint_root = output_dir / CHECKPOINTS_DIR
        self.fault = fault_point()
        self.skip_step = False  # a micro-batch of the current step had a non-finite loss

    def fault_hook(self, where: str) -> None:
        """SIGKILL this process at ``where`` of the current step when ``$HFATTN_FAULT_AT`` asks
        for it (tests of crash recovery)."""
        if self.fault == (where, self.progress.step):
            logger.warning("%s=%s:%d: killing this process", FAULT_ENV, where, self.progress.step)
            os.kill(os.getpid(), signal.SIGKILL)

    # ---- files -------------------------------------------------------------------------
    def log(self, record: dict) -> None:
        if self.accelerator.is_main_process:
            with open(self.metrics_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")

    def save_checkpoint(self) -> None:
        """Write ``checkpoints/step-N`` atomically (temp folder, then rename) and prune; a
        write cut short (a second Ctrl-C / SIGTERM, a full disk) removes its temp folder.

        Raises:
            CheckpointWriteError: the write failed with an ``OSError``; the previous
                checkpoint is untouched and named in the message.
        """
        tmp = self.checkpoint_root / f".tmp-{CHECKPOINT_PREFIX}{self.progress.step}"
        try:
            self._write_checkpoint(tmp)
        except BaseException as exc:
            if self.accelerator.is_main_process:
                shutil.rmtree(tmp, ignore_errors=True)
            if not isinstance(exc, OSError):
                raise
            previous = latest_checkpoint(self.output_dir)
            raise CheckpointWriteError(
                f"writing the checkpoint of step {self.progress.step} under "
                f"{self.checkpoint_root} failed ({exc.strerror or exc}); "
                + (
                    f"the previous checkpoint {previous} is intact: free some space and "
                    f"continue with `{resume_command(self.output_dir)}`"
                    if previous is not None
                    else "there is no earlier checkpoint: free some space and train again"
                )
            ) from exc

    def _write_checkpoint(self, tmp: Path) -> None:
        acc, step = self.accelerator, self.progress.step
        final = self.checkpoint_root / f"{CHECKPOINT_PREFIX}{step}"
        if acc.is_main_process and tmp.exists():
            shutil.rmtree(tmp)
        acc.wait_for_everyone()
        acc.save_state(str(tmp))
        self.fault_hook("checkpoint")
        if self.state is not None:
            tensors = self.state if isinstance(self.state, tuple) else (self.state,)
            save_file(
                {f"state_{i}": t.detach().cpu().contiguous() for i, t in enumerate(tensors)},
                str(tmp / f"recurrent_state_{acc.process_index}.safetensors"),
            )
        if acc.is_main_process:
            self.progress.metrics_bytes = (
                self.metrics_path.stat().st_size if self.metrics_path.exists() else 0
            )
            atomic_write_json(tmp / "progress.json", self.progress.state_dict())
        acc.wait_for_everyone()
        if acc.is_main_process:
            if final.exists():
                shutil.rmtree(final)
            os.replace(tmp, final)
            kept = sorted(
                (p for p in self.checkpoint_root.iterdir() if p.name.startswith(CHECKPOINT_PREFIX)),
                key=lambda p: int(p.name[len(CHECKPOINT_PREFIX) :]),
            )
            for old in kept[: -self.cfg.keep_checkpoints]:
                shutil.rmtree(old)
        acc.wait_for_everyone()

    def load_checkpoint(self, path: Path) -> None:
        """Restore the run from the checkpoint folder ``path`` and cut ``metrics.jsonl`` back
        to what it held when the checkpoint was written.

        Raises:
            CheckpointLoadError: a file of the checkpoint is missing, truncated or corrupt
                (the message names it).
        """
        acc = self.accelerator
        progress_file = path / "progress.json"
        try:
            saved = json.loads(progress_file.read_text(encoding="utf-8"))
            if "best_loss" in saved:  # checkpoints written before metric_for_best_model
                saved["best_score"] = saved.pop("best_loss")
            planned = self.progress.planned_steps
            self.progress = Progress(**saved)
            if self.progress.planned_steps is None:  # a checkpoint from before it was stored
                self.progress.planned_steps = planned
        except (OSError, ValueError, TypeError) as exc:
            raise _unreadable(progress_file, exc) from None
        # accelerate only logs a random-state file it cannot read (resume would then silently
        # draw other random numbers: dropout, shuffling) and reports a missing schedule state
        # as a count mismatch: check these small files first
        for name in (f"random_states_{acc.process_index}.pkl", "custom_checkpoint_0.pkl"):
            if not reads_back(path / name):
                raise _unreadable(path / name, ValueError("missing, truncated or corrupt"))
        state_file = path / f"recurrent_state_{acc.process_index}.safetensors"
        try:
            acc.load_state(str(path))
            if state_file.exists():
                tensors = load_file(str(state_file))
                parts = tuple(tensors[f"state_{i}"].to(acc.device) for i in range(len(tensors)))
                self.state = parts if len(parts) > 1 else parts[0]
        except Exception as exc:  # noqa: BLE001 (torch, safetensors and pickle each raise their own)
            missing = isinstance(exc, FileNotFoundError) and exc.filename
            damaged = Path(missing) if missing else _damaged_file(path)
            if damaged is None:  # every file reads back: the model or optimizer differs
                raise _mismatched(path, exc) from None
            raise _unreadable(damaged, exc) from None
        if acc.is_main_process:
            _cut_log(self.metrics_path, self.progress.metrics_bytes, self.progress.step)
            for stale in self.checkpoint_root.glob(f".tmp-{CHECKPOINT_PREFIX}*"):
                shutil.rmtree(stale)  # a write that a crash (SIGKILL, power loss) cut short
        logger.info("resumed from %s at step %d", path, self.progress.step)

    def save_best(self) -> None:
        if self.accelerator.is_main_process:
            weights = self.accelerator.unwrap_model(self.model).state_dict()
            with atomic_path(self.checkpoint_root / "best" / "model.safetensors") as tmp:
                save_file(
                    {k: v.detach().cpu().clone().contiguous() for k, v in weights.items()}, str(tmp)
                )

    # ---- evaluation --------------------------------------------------------------------
    def evaluate(self, split: str) -> dict:
        """Score ``split`` on the main process and share the result with every process."""
        acc = self.accelerator
        result = [None]
        if acc.is_main_process:
            result[0] = self.job.evaluate(acc.unwrap_model(self.model), split)
        broadcast_object_list(result)
        return result[0]

    def periodic_eval(self) -> None:
        scores = self.evaluate("validation")
        p = self.progress
        self.log({"step": p.step, "epoch": p.epoch, "split": "validation", **scores})
        p.evaluated_step = p.step
        score, greater = scores[self.cfg.metric_for_best_model], self.cfg.larger_metric_is_better
        if p.best_score is None or (score > p.best_score if greater else score < p.best_score):
            p.best_score, p.best_step = score, p.step
            self.save_best()

    # ---- the loop ----------------------------------------------------------------------
    def train_step(self, batch) -> float | None:
        """One micro-batch: forward, backward and, when it ends an accumulation, the optimizer
        step. Returns the loss, or ``None`` when it was not finite and the step is skipped
        (``training.on_nonfinite_loss: skip``; its gradients are dropped)."""
        acc, cfg = self.accelerator, self.cfg
        with acc.accumulate(self.model):
            stateful = self.job.batches.stateful
            loss, state = self.job.compute_loss(self.model, batch, self.state, stateful)
            # decided together: a process that skipped backward would leave the others
            # waiting in DDP's gradient all-reduce
            finite = not _any_process(acc, not bool(torch.isfinite(loss.detach()).all()))
            if finite:
                acc.backward(loss)
            else:
                self.on_nonfinite_loss(loss)
            if acc.sync_gradients and self.skip_step:
                self.optimizer.zero_grad()
                self.skip_step = False
            else:
                if acc.sync_gradients and cfg.max_grad_norm:
                    acc.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
                self.optimizer.step()
                self.optimizer.zero_grad()
        if not finite:
            self.state = None  # a carried state after a non-finite loss is not trusted
            return None
        self.state = state if stateful else None
        return loss.detach().float().item()

    def on_nonfinite_loss(self, loss) -> None:
        """Skip the current optimizer step (``training.on_nonfinite_loss: skip``, up to
        ``training.max_skipped_steps`` steps), else stop.

        Raises:
            NonFiniteLossError: naming the step and the last good checkpoint (kept).
        """
        cfg, p = self.cfg, self.progress
        value = loss.detach().float().flatten()[0].item() if loss.numel() else float("nan")
        where = f"at step {p.step + 1} (epoch {p.epoch}, batch {p.batch_in_epoch})"
        skip = cfg.on_nonfinite_loss == "skip"
        if skip and (self.skip_step or p.skipped_steps < cfg.max_skipped_steps):
            if not self.skip_step:
                p.skipped_steps += 1
                self.skip_step = True
            logger.warning(
                "training loss is %s %s: skipping this optimizer step (%d of at most %d skipped)",
                value,
                where,
                p.skipped_steps,
                cfg.max_skipped_steps,
            )
            return
        kept = latest_checkpoint(self.output_dir)
        raise NonFiniteLossError(
            f"training loss is {value} {where}; stopped without saving it"
            + (
                f" after skipping {p.skipped_steps} steps "
                f"(training.max_skipped_steps={cfg.max_skipped_steps})"
                if skip
                else ""
            )
            + (f"; the last good checkpoint is {kept}" if kept else "")
            + ". Lower training.learning_rate or set training.max_grad_norm"
        )

    def follow_time_budget(self, elapsed_s: float) -> None:
        """With ``max_minutes``, run the schedule on the share of the run already done,
        ``max(step / total_steps, elapsed / budget)``: a run that the clock stops before its
        last step still ends with the schedule's last learning rate (annealed), whatever the
        machine's speed. The schedule counter jumps ahead when time leads; all processes take
        the largest counter, so they keep one learning rate."""
        if self.cfg.max_minutes is None:
            return
        by_time = int(self.total_steps * elapsed_s / (60 * self.cfg.max_minutes))
        if self.accelerator.num_processes > 1:
            t = torch.tensor([float(by_time)], device=self.accelerator.device)
            by_time = int(self.accelerator.reduce(t, reduction="max").item())
        by_time = min(by_time, self.total_steps)
        if by_time > self.scheduler.last_epoch:
            self.scheduler.last_epoch = by_time - 1
            self.scheduler.step()

    def bar_position(self) -> int:
        """Where the progress bar stands: the steps done or, with ``max_minutes``, the
        schedule's counter, ``max(step, elapsed / budget × total_steps)`` (see
        :meth:`follow_time_budget`), which reaches the end when the clock stops the run."""
        position = self.progress.step
        if self.cfg.max_minutes is not None:
            position = max(position, self.scheduler.last_epoch)
        return min(position, self.total_steps)

    def progress_bar(self) -> tqdm:
        """The run's tqdm bar on stderr: steps out of ``total_steps``; with ``max_minutes``, the
        share of the run done (:meth:`bar_position`: the clock's or the steps', whichever leads),
        the step next to it."""
        return tqdm(
            total=self.total_steps,
            initial=self.bar_position(),
            disable=not self.accelerator.is_local_main_process,
            desc="train",
            bar_format=None if self.cfg.max_minutes is None else TIMED_BAR_FORMAT,
        )

    def run(self) -> bool:
        """Train until the step budget, the time budget or a stop request. Returns True when
        the run was interrupted (a checkpoint has been written)."""
        acc, cfg, p = self.accelerator, self.cfg, self.progress
        start, last_saved, losses = time.monotonic() - p.elapsed_s, p.step, p.unlogged_losses
        bar, postfix = self.progress_bar(), {}
        with _stop_on_signals(p):
            while p.epoch < cfg.epochs and p.step < self.total_steps and not p.should_stop:
                for batch in self.job.batches.epoch(p.epoch, start=p.batch_in_epoch):
                    loss = self.train_step(_rows_of(batch, self.rows, acc.device))
                    if loss is not None:
                        losses.append(loss)
                    p.batch_in_epoch += 1
                    if not acc.sync_gradients:
                        continue
                    self.scheduler.step()
                    p.step += 1
                    p.elapsed_s = time.monotonic() - start
                    self.follow_time_budget(p.elapsed_s)
                    if cfg.max_minutes is not None:
                        postfix["step"] = p.step
                        bar.set_postfix(postfix, refresh=False)
                    bar.update(self.bar_position() - bar.n)
                    if p.step % cfg.log_every == 0 or p.step == self.total_steps:
                        record = {"step": p.step, "epoch": p.epoch, "split": "train",
                                  "loss": sum(losses) / len(losses) if losses else math.nan,
                                  "learning_rate": self.scheduler.get_last_lr()[0],
                                  "elapsed_s": round(p.elapsed_s, 2)}  # fmt: skip
                        if p.skipped_steps:
                            record["skipped_steps"] = p.skipped_steps
                        self.log(record)
                        postfix["loss"] = f"{record['loss']:.4f}"
                        bar.set_postfix(postfix)
                        losses.clear()
                    if cfg.eval_every and p.step % cfg.eval_every == 0:
                        self.periodic_eval()
                    for callback in self.callbacks:
                        callback(p)
                    self.fault_hook("step")
                    over_time = cfg.max_minutes is not None and p.elapsed_s >= 60 * cfg.max_minutes
                    if over_time and not p.should_stop:
                        p.should_stop, p.stop_reason = True, "time budget"
                    stop = p.step >= self.total_steps or _any_process(acc, p.should_stop)
                    if cfg.save_every and p.step % cfg.save_every == 0:
                        self.save_checkpoint()
                        last_saved = p.step
                    if stop:
                        break
                else:
                    p.epoch += 1
                    p.batch_in_epoch = 0
                    self.state = None  # a new epoch starts every stream from the beginning
        bar.close()
        p.elapsed_s = time.monotonic() - start
        finished = p.stop_reason != "interrupted"
        if finished and cfg.eval_every and (p.evaluated_step or 0) != p.step:
            self.periodic_eval()  # best-model tracking also sees the last steps
        if p.step != last_saved:  # the last state is always resumable
            self.save_checkpoint()
        return p.stop_reason == "interrupted"


def reads_back(file: Path) -> bool:
    """Whether a checkpoint file reads back whole: every tensor of a safetensors file, a JSON
    file, or the zip container (with its checksums) of ``torch.save``."""
    import zipfile

    from safetensors import safe_open

    try:
        if file.suffix == ".safetensors":
            with safe_open(str(file), framework="pt") as handle:
                for name in handle.keys():  # noqa: SIM118 (safe_open has no __iter__)
                    handle.get_tensor(name)
        elif file.suffix == ".json":
            json.loads(file.read_text(encoding="utf-8"))
        else:
            with zipfile.ZipFile(file) as archive:
                return archive.testzip() is None
    except Exception:  # noqa: BLE001 (any failure to read back means damaged)
        return False
    return True


def _damaged_file(folder: Path) -> Path | None:
    """The first file of the checkpoint ``folder`` that does not read back whole, or ``None``."""
    files = sorted(p for p in folder.iterdir() if p.is_file())
    return next((file for file in files if not reads_back(file)), None)


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
    ``step`` was written), dropping what a killed run logged after it. Checkpoints that do not
    record the length (older ones) drop the records after ``step`` instead."""
    if not metrics_path.exists():
        return
    data = metrics_path.read_bytes()
    if length is None:
        kept = []
        for line in data.decode("utf-8").splitlines(keepends=True):
            try:
                if json.loads(line)["step"] <= step:
                    kept.append(line)
            except (ValueError, KeyError):
                pass  # a line cut short by a crash
        new = "".join(kept).encode("utf-8")
    elif len(data) < length:
        logger.warning(
            "%s is shorter than when the checkpoint of step %d was written; keeping it as is",
            metrics_path,
            step,
        )
        return
    else:
        new = data[:length]
    if new != data:
        with atomic_path(metrics_path) as tmp:
            tmp.write_bytes(new)
        logger.info("%s: dropped the records logged after step %d", metrics_path.name, step)


def _rows_of(batch, rows: slice, device):
    """This process' share of a global batch (a tensor or a dict of tensors), on ``device``."""
    if isinstance(batch, dict):
        return {key: value[rows].to(device) for key, value in batch.items()}
    return batch[rows].to(device)


def schedule_steps(cfg, steps_per_epoch: int) -> int:
    """The optimizer steps a ``training:`` section runs:
    ``min(epochs × steps_per_epoch, max_steps)``."""
    steps = cfg.epochs * steps_per_epoch
    return steps if cfg.max_steps is None else min(steps, cfg.max_steps)


def _any_process(accelerator: Accelerator, flag: bool) -> bool:
    if accelerator.num_processes == 1:
        return flag
    t = torch.tensor([float(flag)], device=accelerator.device)
    return bool(accelerator.reduce(t, reduction="sum").item() > 0)


def train(
    job: TrainingJob,
    cfg,
    output_dir: str | Path,
    *,
    resume: bool = False,
    overwrite: bool = False,
    recipe_yaml: str | None = None,
    recipe_name: str | None = None,
    generation_defaults: dict | None = None,
    callbacks: Sequence[Callable[[Progress], None]] = (),
    planned_training=None,
) -> TrainResult:
    """Train ``job.model`` with the ``training:`` section ``cfg`` and save it to ``output_dir``.

    ``output_dir`` ends up a complete model folder (``save_pretrained`` + tokenizer), with
    ``eval_results.json``, ``metrics.jsonl``, ``loss_curve.png``, ``recipe.yaml`` and
    ``checkpoints/``. With ``resume`` the newest checkpoint is loaded and training continues
    exactly where it stopped. ``callbacks`` run after every optimizer step and may set
    ``progress.should_stop``. ``planned_training`` is the recipe file's own ``training:``
    section (before ``--set`` overrides; default ``cfg``): the steps it plans are recorded,
    so that a run cut short of its recipe says so (:func:`hfattn.run_folder.training_shortfall`).

    A fresh run owns its folder: one that already holds a run (checkpoints or a saved model)
    is refused unless ``resume`` (continue it) or ``overwrite`` (its checkpoints, log and
    model files are removed first), so an old run's checkpoints can never be mistaken for
    the new run's.

    Raises:
        FileExistsError: ``output_dir`` holds another run and neither flag is set.
        FileNotFoundError: ``resume`` and ``output_dir`` holds no checkpoint (nothing is
            written then).
        ValueError: both ``resume`` and ``overwrite``.
        CheckpointLoadError: the newest checkpoint is damaged, or does not fit the model
            (the recipe differs from the run's).
    """
    output_dir = Path(output_dir)
    if resume and overwrite:
        raise ValueError(RESUME_AND_OVERWRITE)
    # checked first: a failed resume leaves nothing behind
    checkpoint = require_checkpoint(output_dir) if resume else None
    if not resume:
        claim_output_dir(output_dir, overwrite)
    set_seed(cfg.seed)
    run = _Run(job, cfg, output_dir, callbacks, planned_training)
    acc = run.accelerator
    if acc.is_main_process:
        output_dir.mkdir(parents=True, exist_ok=True)
    if checkpoint is not None:
        run.load_checkpoint(checkpoint)
    elif acc.is_main_process and run.metrics_path.exists():
        run.metrics_path.unlink()  # a fresh run starts a fresh log
    if acc.is_main_process and recipe_yaml is not None:  # once the checkpoint fits it
        write_recipe(output_dir, recipe_yaml)
    acc.wait_for_everyone()

    interrupted = run.run()
    result = TrainResult(output_dir=output_dir, progress=run.progress, interrupted=interrupted)
    if interrupted:
        logger.warning(
            "stopped at step %d; continue with %s", run.progress.step, resume_command(output_dir)
        )
        return result

    model = acc.unwrap_model(run.model)
    best = run.checkpoint_root / "best" / "model.safetensors"
    if cfg.load_best_at_end and run.progress.best_step is not None and best.exists():
        model.load_state_dict(load_file(str(best)))
    for split in dict.fromkeys(job.eval_splits):
        result.metrics[split] = run.evaluate(split)
    if acc.is_main_process:
        _export(model, job, result, run, recipe_name, generation_defaults or {})
        if job.sample is not None:
            result.sample = job.sample(model)
    acc.wait_for_everyone()
    return result


def _export(
    model, job: TrainingJob, result: TrainResult, run: _Run, recipe_name, generation_defaults
):
    """Final folder: weights + config + generation config + tokenizer + results + curve."""
    for key, value in generation_defaults.items():
        setattr(model.generation_config, key, value)
    model.save_pretrained(result.output_dir)
    job.tokenizer.save_pretrained(result.output_dir)
    p, acc = run.progress, run.accelerator
    meta = job.card_metadata
    atomic_write_json(
        result.output_dir / EVAL_RESULTS_FILE,
        {
            "task_type": meta.get("task_type"),
            "task_name": meta.get("task_name"),
            "dataset_name": meta.get("dataset_name"),
            "dataset_type": meta.get("dataset_type"),
            "results": [
                {
                    "split": split,
                    "metric_type": name,
                    "metric_name": meta.get("metric_names", {}).get(name, name),
                    "value": value,
                }  # fmt: skip
                for split, scores in result.metrics.items()
                for name, value in scores.items()
                if name in meta.get("reported_metrics", scores) and isinstance(value, float)
            ],
            "all_metrics": result.metrics,
            "training": {
                "recipe": recipe_name,
                "global_step": p.step,
                "schedule_steps": run.total_steps,
                "planned_steps": p.planned_steps,
                "epochs_completed": p.epoch,
                "best_step": p.best_step,
                "skipped_steps": p.skipped_steps,
                "train_runtime_s": round(p.elapsed_s, 1),
                "stop_reason": p.stop_reason or "completed",
                "hardware": _hardware(acc),
                "num_processes": acc.num_processes,
                "mixed_precision": acc.mixed_precision,
            },
        },
    )
    plot_loss_curve(run.metrics_path, result.output_dir / LOSS_CURVE_FILE)


def plot_loss_curve(metrics_path: Path, out_path: Path) -> None:
    """Train and validation loss against the optimizer step, from ``metrics.jsonl``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = (
        [json.loads(line) for line in metrics_path.read_text().splitlines()]
        if metrics_path.exists()
        else []
    )
    fig, ax = plt.subplots(figsize=(7, 4))
    for split, style in (("train", "-"), ("validation", "o-")):
        points = [
            (r["step"], r["loss"])
            for r in records
            if r["split"] == split and math.isfinite(r["loss"])
        ]
        if points:
            ax.plot(*zip(*points, strict=True), style, label=split)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("loss (nats / token)")
    ax.set_title("Training curve")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    with atomic_path(out_path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)


__all__ = [
    "FAULT_ENV",
    "CheckpointLoadError",
    "CheckpointWriteError",
    "NonFiniteLossError",
    "Progress",
    "TrainResult",
    "TrainingJob",
    "fault_point",
    "latest_checkpoint",
    "plot_loss_curve",
    "reads_back",
    "schedule_steps",
    "train",
]
