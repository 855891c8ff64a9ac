"""The training loop shared by every recipe, on Accelerate (one CPU, one GPU, many of either).

:func:`train` builds the optimizer and schedule, then loops over optimizer steps: forward,
backward (with gradient accumulation and clipping, mixed precision), the schedule's step, a
``metrics.jsonl`` record every ``log_every`` steps, a validation every ``eval_every`` steps
(the best model kept), a checkpoint every ``save_every`` steps; it stops at the step budget,
the time budget (``max_minutes``, the schedule then follows the clock) or a first
Ctrl-C / SIGTERM (a resumable checkpoint is written). A finished run is evaluated on its
splits and saved as a model folder (:mod:`hfattn.training.results`). The checkpoint of the last
step comes first: the final validation, checkpoint averaging, final evaluation, sample and model
folder follow it, a signal stops any of them at once (:mod:`hfattn.training.stop_signals`) and
``resume=True`` goes on with what is left, training no step again. Evaluations are timed
and kept off the training clock: ``elapsed_s`` (what ``max_minutes``, ``train_runtime_s`` and
tokens/s read) counts training only; each validation record of ``metrics.jsonl`` carries its
``eval_s``, and ``eval_results.json`` the evaluation seconds during training, those of the
final evaluation and the wall time of the whole run. Stateful jobs carry the
recurrent state (detached: truncated BPTT) from batch to batch and reset it at every epoch.
With ``training.compile`` (``auto``: the char-RNN on CUDA) the loss
step runs through ``torch.compile`` (:mod:`hfattn.training.compiling`); nothing else does.

On CUDA the step does not wait for the device: the losses stay device tensors until a
``metrics.jsonl`` record reads them, token counts and FLOPs come from the host batch before
its (pinned, non-blocking) copy, AdamW runs fused (:func:`~hfattn.training.optim.adamw_kernel`)
and, with ``on_nonfinite_loss: stop``, a non-finite loss is looked for at the log,
evaluation and checkpoint steps rather than after every batch. Every train record carries the
interval's target tokens/s, MFU (:mod:`hfattn.training.throughput`; CUDA only) and the seconds
spent waiting for batches (``data_wait_s``).

Checkpoints (:mod:`hfattn.training.checkpoints`) make a run killed at any point (even SIGKILL,
even in the middle of a checkpoint write) continue with ``resume=True`` to the same weights
and log as an uninterrupted run, bit for bit on CPU. A NaN or infinite loss stops the run
(``training.on_nonfinite_loss: stop``; the last checkpoint is kept) or skips that optimizer
step (``skip``, at most ``training.max_skipped_steps`` times).

Callbacks (:class:`TrainingCallback`, or a plain function of :class:`Progress` called at the
end of every optimizer step) watch the run and may ask it to stop.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState
from accelerate.utils import broadcast_object_list, set_seed
from tqdm.auto import tqdm

from ..data.seq2seq import IGNORE_INDEX
from ..storage.run_folder import (
    METRICS_FILE,
    checkpoint_step,
    clear_output_dir,
    complete_checkpoints,
    latest_checkpoint,
    resume_command,
    write_recipe,
)
from .checkpoints import (
    Progress,
    average_checkpoint_weights,
    load_best_weights,
    load_checkpoint,
    load_saved_weights,
    record_progress,
    save_best_weights,
    write_checkpoint,
)
from .compiling import (
    COMPILE_PAD_MULTIPLE,
    CompileClock,
    compile_for_training,
    resolve_compile,
)
from .host_memory import freed_memory_kept
from .job import NonFiniteLossError, TrainingCallback, TrainingJob, TrainResult, as_callbacks
from .optim import build_optimizer
from .precision import resolve_mixed_precision
from .prefetch import prefetched
from .results import eval_results, save_run_results, training_summary
from .schedules import build_lr_scheduler, check_warmup_fits_epochs, schedule_steps
from .stop_signals import Interrupted, signals_held, stop_at_once, stop_on_signals
from .throughput import FlopCounter, device_peak_flops, mfu

logger = logging.getLogger(__name__)


TIMED_BAR_FORMAT = "{l_bar}{bar}| [{elapsed}<{remaining}{postfix}]"
"""The progress bar of a run with ``training.max_minutes``: its percentage is the schedule's
(what the clock or the steps have used up), so no step count out of ``total_steps`` is shown
(the step is in the postfix)."""


class _Run:
    """One training run: owns the accelerator, the optimizer and the files of ``output_dir``."""

    def __init__(self, job: TrainingJob, cfg, output_dir: Path, callbacks, planned_training=None):
        self.job, self.cfg, self.output_dir = job, cfg, output_dir
        self.callbacks = as_callbacks(callbacks)
        # A second run in the same process (a notebook, the tests) may ask for another
        # precision: forget the previous run's settings, keep the distributed set-up.
        AcceleratorState._reset_state(reset_partial_state=False)
        steps = cfg.gradient_accumulation_steps
        # the device comes from Accelerate's distributed set-up: the precision follows it
        acc = Accelerator(mixed_precision="no", gradient_accumulation_steps=steps)
        precision = resolve_mixed_precision(cfg.mixed_precision, acc.device)
        if precision != "no":
            AcceleratorState._reset_state(reset_partial_state=False)
            acc = Accelerator(mixed_precision=precision, gradient_accumulation_steps=steps)
        self.accelerator = acc
        if job.batches.batch_size % acc.num_processes:
            raise ValueError(
                f"training.batch_size={job.batches.batch_size} must be divisible by the "
                f"number of processes ({acc.num_processes})"
            )
        check_rows_per_process(job.batches, acc.num_processes)
        steps_per_epoch = max(1, len(job.batches) // cfg.gradient_accumulation_steps)
        check_warmup_fits_epochs(cfg, steps_per_epoch)
        self.total_steps = schedule_steps(cfg, steps_per_epoch)
        optimizer = build_optimizer(
            cfg.optimizer,
            job.model,
            lr=cfg.learning_rate,
            weight_decay=cfg.weight_decay,
            betas=tuple(cfg.betas),
            device=acc.device,
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
        # training.compile: the loss step calls a compiled view of the prepared module; its
        # checkpoints, evaluations and saved folder use the module itself (the same parameters,
        # the state-dict keys without torch.compile's `_orig_mod.` prefix)
        # batches in fixed shapes (length buckets) live on the device when they fit there
        shapes = getattr(job.batches, "shapes", None)
        if shapes is not None:
            job.batches.to(acc.device)
        self.compiled = resolve_compile(
            cfg.compile, config.model_type, acc.device, fixed_shapes=shapes is not None
        )
        self.loss_model = (
            compile_for_training(self.model, None if shapes is None else len(shapes))
            if self.compiled
            else self.model
        )
        if self.compiled and shapes is None and hasattr(job.batches, "pad_to_multiple_of"):
            job.batches.pad_to_multiple_of = COMPILE_PAD_MULTIPLE  # a handful of shapes
        self.compile_clock = CompileClock(acc.device, enabled=self.compiled)
        self.count_flops = FlopCounter(job.model)
        self.peak_flops, self.peak_source = device_peak_flops(acc.device, acc.mixed_precision)
        self.speed = _Speedometer()
        self.session_start, self.wall_before = time.monotonic(), 0.0  # see wall_seconds
        self.run_tokens_from, self.run_flops = 0, 0.0
        acc.register_for_checkpointing(self.scheduler)
        planned = planned_training or cfg
        self.progress = Progress(
            planned_steps=schedule_steps(planned, steps_per_epoch),
            planned_minutes=planned.max_minutes,
        )
        self.state = None
        self.metrics_path = output_dir / METRICS_FILE
        self.skip_step = False  # a micro-batch of the current step had a non-finite loss
        # each micro-batch's finiteness read at once (skip must know before the optimizer
        # step; free on a CPU), or gathered on the device and read at log/eval/save steps
        self.check_every_loss = checks_every_loss(cfg.on_nonfinite_loss, acc.device)
        self.nonfinite = torch.zeros((), dtype=torch.bool, device=acc.device)
        self.checked_step = 0  # the step up to which every loss is known finite
        self.grad_norm = None  # the last optimizer step's gradient norm (a device tensor)

    def flops_per_token(self) -> float | None:
        """Training FLOPs per target token of this session's steps (``None`` before any)."""
        tokens = self.progress.train_tokens - self.run_tokens_from
        return self.run_flops / tokens if tokens else None

    @property
    def total_peak(self) -> float | None:
        """The peak FLOP/s of all processes together (``None`` on CPUs)."""
        if self.peak_flops is None:
            return None
        return self.peak_flops * self.accelerator.num_processes

    # ---- files -------------------------------------------------------------------------
    def log(self, record: dict) -> None:
        """Append one record to ``metrics.jsonl`` (main process)."""
        if self.accelerator.is_main_process:
            with open(self.metrics_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")

    def save_checkpoint(self) -> None:
        """:func:`~hfattn.training.checkpoints.write_checkpoint` of the current step."""
        self.check_gathered_losses()
        p = self.progress
        p.unlogged_losses[:] = _floats(p.unlogged_losses)  # progress.json holds numbers
        p.wall_s = self.wall_seconds()

        def state_saved(folder: Path) -> None:
            for callback in self.callbacks:
                callback.on_checkpoint_state_saved(p, folder)

        write_checkpoint(
            self.accelerator,
            self.output_dir,
            p,
            self.state,
            keep=self.cfg.keep_checkpoints,
            metrics_path=self.metrics_path,
            on_state_saved=state_saved,
        )

    def resume_from(self, checkpoint: Path) -> None:
        """Continue from ``checkpoint`` (:func:`~hfattn.training.checkpoints.load_checkpoint`).
        A checkpoint written once training had ended (``progress.training_end``) goes on with
        what follows training, the loop skipped, unless this run's budget is larger: a higher
        ``training.max_steps`` (epochs left) after the step budget, a higher (or no)
        ``training.max_minutes`` after the time budget. A callback's stop stands."""
        self.progress, self.state = load_checkpoint(self.accelerator, checkpoint, self.metrics_path)
        self.wall_before = self.progress.wall_s
        p, cfg = self.progress, self.cfg
        if p.training_end == "completed":
            reopened = p.step < self.total_steps and p.epoch < cfg.epochs
        elif p.training_end == "time budget":
            reopened = cfg.max_minutes is None or p.elapsed_s < 60 * cfg.max_minutes
        else:
            reopened = False
        if reopened:
            p.training_end, p.averaged = None, False
        elif p.training_end not in (None, "completed"):
            p.should_stop, p.stop_reason = True, p.training_end  # the loop is skipped

    def record_in_checkpoint(self) -> None:
        """Record the progress made since the checkpoint of the current step was written in
        that checkpoint (:func:`~hfattn.training.checkpoints.record_progress`)."""
        self.progress.wall_s = self.wall_seconds()
        record_progress(self.accelerator, self.output_dir, self.progress, self.metrics_path)

    def wall_seconds(self) -> float:
        """Wall-clock seconds of the whole run so far: this session's since :func:`train` set
        it up, plus the sessions before a resume up to their last checkpoint (``wall_s`` of
        :class:`~hfattn.training.checkpoints.Progress`)."""
        return self.wall_before + time.monotonic() - self.session_start

    # ---- evaluation --------------------------------------------------------------------
    def evaluate(self, split: str, final: bool = False) -> tuple[dict, float]:
        """Score ``split`` on the main process and share the result with every process
        (``final``: with the job's ``final_evaluate`` when it has one). Returns the scores and
        the seconds the main process's evaluation took (shared too: every process takes the
        same seconds off its training clock)."""
        acc = self.accelerator
        result = [None]
        if acc.is_main_process:
            began = time.monotonic()
            score = (final and self.job.final_evaluate) or self.job.evaluate
            scores = score(acc.unwrap_model(self.model), split)
            result[0] = (scores, time.monotonic() - began)
        broadcast_object_list(result)
        return result[0]

    def validate(self) -> tuple[dict, float]:
        """:meth:`evaluate` the validation split in the middle of training, off the training
        clock: its seconds are added to ``progress.eval_s`` (which the loop takes off
        ``elapsed_s``, so that ``max_minutes``, the schedule that follows it and tokens/s count
        training only) and taken out of the speedometer's interval."""
        scores, seconds = self.evaluate("validation")
        self.progress.eval_s += seconds
        self.speed.exclude(seconds)
        return scores, seconds

    def periodic_eval(self) -> None:
        """Score the validation split now and keep the weights when they are the best."""
        self.check_gathered_losses()
        self.keep_validation(*self.validate())

    def keep_validation(self, scores: dict, seconds: float) -> None:
        """Log the validation ``scores`` of the current step (scored in ``seconds``), mark the
        step validated and keep the weights when they are the best."""
        p = self.progress
        self.log({"step": p.step, "epoch": p.epoch, "split": "validation", **scores,
                  "eval_s": round(seconds, 3)})  # fmt: skip
        p.evaluated_step = p.step
        if self.keep_if_best(scores):
            p.best_averaged_steps = None

    def keep_if_best(self, scores: dict) -> bool:
        """Save the model's current weights as the best when ``scores`` (a validation) beat
        the best so far by ``training.metric_for_best_model``; returns whether they did."""
        p = self.progress
        score, greater = scores[self.cfg.metric_for_best_model], self.cfg.larger_metric_is_better
        if p.best_score is None or (score > p.best_score if greater else score < p.best_score):
            p.best_score, p.best_step = score, p.step
            save_best_weights(self.accelerator, self.model, self.output_dir)
            return True
        return False

    def score_checkpoint_average(self) -> None:
        """``training.average_checkpoints: N``: load the mean weights of the newest N
        checkpoints (:func:`~hfattn.training.checkpoints.average_checkpoint_weights`), score
        them on the validation split (logged as split ``validation-averaged``, with the
        checkpoint steps) and keep them as the best model when they beat it; the model's own
        weights are restored afterwards (an interrupt too). The record, the best weights and
        ``progress.averaged`` land together in the checkpoint of the current step
        (:func:`~hfattn.training.stop_signals.signals_held`)."""
        p = self.progress
        folders = complete_checkpoints(self.output_dir)[-self.cfg.average_checkpoints :]
        if len(folders) < 2:
            logger.info("training.average_checkpoints: only %d checkpoint, nothing to average",
                        len(folders))  # fmt: skip
            p.averaged = True
            self.record_in_checkpoint()
            return
        model = self.accelerator.unwrap_model(self.model)
        own = {k: v.detach().clone() for k, v in model.state_dict().items()}
        load_saved_weights(model, average_checkpoint_weights(folders))
        steps = [checkpoint_step(folder) for folder in folders]
        try:
            scores, seconds = self.validate()
            with signals_held():
                self.log({"step": p.step, "epoch": p.epoch, "split": "validation-averaged",
                          "averaged_steps": steps, **scores,
                          "eval_s": round(seconds, 3)})  # fmt: skip
                if self.keep_if_best(scores):
                    p.best_averaged_steps = steps
                p.averaged = True
                self.record_in_checkpoint()
        finally:
            model.load_state_dict(own)

    def train_step(self, batch) -> torch.Tensor | None:
        """One micro-batch: forward, backward and, when it ends an accumulation, the optimizer
        step. Returns the loss (a float32 tensor on the device, not read here), or ``None`` when
        it was not finite and the step is skipped (``training.on_nonfinite_loss: skip``; its
        gradients are dropped)."""
        acc, cfg = self.accelerator, self.cfg
        with acc.accumulate(self.model):
            stateful = self.job.batches.stateful
            loss, state = self.job.compute_loss(self.loss_model, batch, self.state, stateful)
            nonfinite = ~torch.isfinite(loss.detach()).all()
            if self.check_every_loss:
                # decided together: a process that skipped backward would leave the others
                # waiting in DDP's gradient all-reduce
                finite = not _any_process(acc, bool(nonfinite))
            else:
                self.nonfinite |= nonfinite
                finite = True
            if finite:
                acc.backward(loss)
            else:
                self.on_nonfinite_loss(loss)
            if acc.sync_gradients and self.skip_step:
                self.optimizer.zero_grad()
                self.skip_step = False
                self.grad_norm = None
            else:
                if acc.sync_gradients and cfg.max_grad_norm:
                    norm = acc.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
                    self.grad_norm = norm if isinstance(norm, torch.Tensor) else None
                self.optimizer.step()
                self.optimizer.zero_grad()
        if not finite:
            self.state = None  # a carried state after a non-finite loss is not trusted
            return None
        self.state = state if stateful else None
        return loss.detach().float()

    def check_gathered_losses(self) -> None:
        """Raise when a loss gathered on the device since the last check was not finite
        (``on_nonfinite_loss: stop`` on an accelerator, where each loss is not read at once).

        Raises:
            NonFiniteLossError: naming the steps it lies between and the last good checkpoint.
        """
        if self.check_every_loss:
            return
        p = self.progress
        if _any_process(self.accelerator, bool(self.nonfinite)):
            kept = latest_checkpoint(self.output_dir)
            raise NonFiniteLossError(
                f"a training loss after step {self.checked_step} (up to step {p.step}, epoch "
                f"{p.epoch}) is not finite; stopped without saving it"
                + (f"; the last good checkpoint is {kept}" if kept else "")
                + ". Lower training.learning_rate or set training.max_grad_norm"
            )
        self.checked_step = p.step

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
        the largest counter, so they keep one learning rate. The warmup counts optimizer steps
        (the clock is followed from step ``warmup_steps`` on): a counter that jumped with the
        clock would pass a warmup of 1,000 steps within the first few dozen steps of a run whose
        ``max_steps`` lies far beyond what the clock allows."""
        if self.cfg.max_minutes is None or self.scheduler.last_epoch < self.cfg.warmup_steps:
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
        # the training clock: the seconds since `start` less those of the evaluations (eval_s)
        start = time.monotonic() - p.elapsed_s - p.eval_s
        last_saved, losses = p.step, p.unlogged_losses
        bar, postfix = self.progress_bar(), {}
        reuse = cfg.reuse_freed_memory and acc.device.type == "cpu"
        self.checked_step = p.step
        self.speed.start(p.train_tokens)
        self.run_tokens_from, self.run_flops = p.train_tokens, 0.0
        with stop_on_signals(p), freed_memory_kept(reuse):
            while p.epoch < cfg.epochs and p.step < self.total_steps and not p.should_stop:
                epoch = self.job.batches.epoch(p.epoch, start=p.batch_in_epoch)
                if acc.device.type == "cuda" and not on_device(self.job.batches):
                    epoch = prefetched(epoch)  # built on the host while the GPU steps
                for batch in self.speed.timed(epoch):
                    p.train_tokens += trained_tokens(batch)
                    flops = self.count_flops(batch)  # the global batch's, from its shapes
                    if not self.run_flops:  # this session's first batch, before its step
                        step_flops = flops * cfg.gradient_accumulation_steps / acc.num_processes
                        warn_if_sized_for_gpu(step_flops, acc.device)
                    self.speed.flops += flops
                    self.run_flops += flops
                    rows = _rows_of(batch, acc.process_index, acc.num_processes, acc.device)
                    with self.compile_clock.timing(rows):  # a compiled shape's first step
                        loss = self.train_step(rows)
                    if loss is not None:
                        losses.append(loss)
                    p.batch_in_epoch += 1
                    if not acc.sync_gradients:
                        continue
                    self.scheduler.step()
                    p.step += 1
                    p.elapsed_s = time.monotonic() - start - p.eval_s
                    self.follow_time_budget(p.elapsed_s)
                    if cfg.max_minutes is not None:
                        postfix["step"] = p.step
                        bar.set_postfix(postfix, refresh=False)
                    bar.update(self.bar_position() - bar.n)
                    if p.step % cfg.log_every == 0 or p.step == self.total_steps:
                        self.check_gathered_losses()
                        losses[:] = _floats(losses)  # the one read of the interval's losses
                        record = {"step": p.step, "epoch": p.epoch, "split": "train",
                                  "loss": _logged_loss(acc, losses),
                                  "learning_rate": self.scheduler.get_last_lr()[0],
                                  "tokens": p.train_tokens,
                                  "elapsed_s": round(p.elapsed_s, 2)}  # fmt: skip
                        if self.grad_norm is not None:
                            record["grad_norm"] = float(self.grad_norm)
                        if p.skipped_steps:
                            record["skipped_steps"] = p.skipped_steps
                        if self.compiled:
                            record["compile_s"] = round(self.compile_clock.seconds, 2)
                        record.update(self.speed.interval(p.train_tokens, self.total_peak))
                        self.log(record)
                        postfix["loss"] = f"{record['loss']:.4f}"
                        postfix["tok/s"] = f"{record['tokens_per_s']:,.0f}"
                        if record.get("mfu") is not None:
                            postfix["MFU"] = f"{record['mfu']:.1%}"
                        bar.set_postfix(postfix)
                        losses.clear()
                    if cfg.eval_every and p.step % cfg.eval_every == 0:
                        self.periodic_eval()
                    for callback in self.callbacks:
                        callback.on_step_end(p)
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
            p.elapsed_s = time.monotonic() - start - p.eval_s
            interrupted = _any_process(acc, p.interrupted or p.stop_reason == "interrupted")
            reason = None if p.stop_reason == "interrupted" else p.stop_reason
            if reason is not None or p.step >= self.total_steps or p.epoch >= cfg.epochs:
                p.training_end = reason or "completed"
            # the last state is always resumable, and says whether training is over: written
            # before the final validation, averaging, evaluation and model folder
            if p.step != last_saved or p.step == 0:
                self.save_checkpoint()
            elif p.training_end is not None:
                self.record_in_checkpoint()
        return interrupted

    def finish_training(self) -> None:
        """What follows the checkpoint of the last step before the final evaluation, each part
        recorded in that checkpoint once done (its log record, best weights and progress land
        together, :func:`~hfattn.training.stop_signals.signals_held`), so that a resume goes
        on after the last part done: the validation of the last steps (best-model tracking
        sees them) and, with ``training.average_checkpoints``, the score of the averaged
        checkpoints."""
        cfg, p = self.cfg, self.progress
        if cfg.eval_every and (p.evaluated_step or 0) != p.step:
            scores, seconds = self.validate()
            with signals_held():
                self.keep_validation(scores, seconds)
                self.record_in_checkpoint()
        if cfg.average_checkpoints and not p.averaged:
            self.score_checkpoint_average()


class _Speedometer:
    """The speed of the steps since the last ``metrics.jsonl`` train record: the seconds, the
    target tokens, the FLOPs (:class:`~hfattn.training.throughput.FlopCounter` of each global
    batch, added by the loop) and the seconds spent waiting for the next batch."""

    def __init__(self):
        self.since, self.tokens, self.flops, self.data_wait_s = time.monotonic(), 0, 0.0, 0.0

    def start(self, tokens: int) -> None:
        """Open an interval at the current time, ``tokens`` trained so far."""
        self.since, self.tokens, self.flops, self.data_wait_s = time.monotonic(), tokens, 0.0, 0.0

    def exclude(self, seconds: float) -> None:
        """Leave ``seconds`` (an evaluation's) out of the current interval."""
        self.since += seconds

    def timed(self, batches):
        """Yield ``batches``, adding the time each ``next`` takes to ``data_wait_s``."""
        iterator = iter(batches)
        while True:
            asked = time.monotonic()
            batch = next(iterator, None)
            self.data_wait_s += time.monotonic() - asked
            if batch is None:
                return
            yield batch

    def interval(self, tokens: int, peak_flops: float | None) -> dict:
        """The fields of the interval's train record (``tokens_per_s``, ``mfu``: ``None``
        without a peak, ``data_wait_s``); opens the next interval."""
        seconds = time.monotonic() - self.since
        fields = {
            "tokens_per_s": round((tokens - self.tokens) / seconds, 1) if seconds > 0 else None,
            "mfu": mfu(self.flops, seconds, peak_flops),
            "data_wait_s": round(self.data_wait_s, 3),
        }
        if fields["mfu"] is not None:
            fields["mfu"] = round(fields["mfu"], 4)
        self.start(tokens)
        return fields


def checks_every_loss(on_nonfinite_loss: str, device: torch.device) -> bool:
    """Whether each micro-batch's loss is checked for finiteness as soon as it is computed:
    with ``on_nonfinite_loss: skip`` (the optimizer step must know), and on a CPU (reading a
    host tensor costs nothing). Else (``stop`` on an accelerator) the check waits for the next
    log, evaluation or checkpoint step, so that the device is never waited for between them."""
    return on_nonfinite_loss == "skip" or torch.device(device).type == "cpu"


def _logged_loss(accelerator: Accelerator, losses: list[float]) -> float:
    """The ``loss`` of a train record: the mean of the interval's ``losses`` (NaN without
    one); with several processes, the mean over the processes of each one's mean
    (``accelerator.reduce(..., "mean")``, once a record), which is the mean over the whole
    global batches when every process trains on the same number of rows and each row weighs
    the same (a classifier's rows: one label each), as one process on those batches logs."""
    loss = sum(losses) / len(losses) if losses else math.nan
    if accelerator.num_processes == 1:
        return loss
    mean = torch.tensor([loss], dtype=torch.float64, device=accelerator.device)
    return accelerator.reduce(mean, reduction="mean").item()


GPU_STEP_FLOPS = 5e11
"""The training FLOPs of an optimizer step (each process's share, counted by
:class:`~hfattn.training.throughput.FlopCounter`) above which a step is sized for a GPU: the
GPU recipes' steps count 1.6 to 8.6 TFLOP, those of the recipes made for a CPU at most 0.08
TFLOP; a CPU takes seconds to minutes for one of them."""


def warn_if_sized_for_gpu(step_flops: float, device) -> bool:
    """Warn, in one line, when a run on a CPU ``device`` has optimizer steps of more than
    :data:`GPU_STEP_FLOPS` training FLOPs each (``step_flops``: one process's share of the
    first step); returns whether it warned."""
    if torch.device(device).type != "cpu" or step_flops <= GPU_STEP_FLOPS:
        return False
    with tqdm.external_write_mode(file=sys.stderr):  # above the progress bar, not in it
        logger.warning(
            "this recipe's steps are sized for a GPU: each is %.3g TFLOP of training "
            "arithmetic (above %.3g), which takes a CPU seconds to minutes a step; docs/"
            "training.md, 'Training on a GPU', says how to run it on one",
            step_flops / 1e12,
            GPU_STEP_FLOPS / 1e12,
        )
    return True


def _floats(values: list) -> list[float]:
    """``values`` (numbers, and scalar tensors on the device) as numbers, in one read."""
    tensors = [value for value in values if isinstance(value, torch.Tensor)]
    if not tensors:
        return list(values)
    read = iter(torch.stack(tensors).tolist())
    return [next(read) if isinstance(value, torch.Tensor) else value for value in values]


def trained_tokens(batch) -> int:
    """The tokens a global batch trains on: the per-token labels that count (not
    ``IGNORE_INDEX``) when the labels are ``[B, T]`` (a language model's or a translation's
    targets); else the non-padding inputs (``attention_mask``) or every input id (a
    classifier); for a bare ``[B, T + 1]`` window of a language model, its ``B × T``
    next-token targets."""
    counted = getattr(batch, "num_tokens", None)  # counted on the host by the batcher
    if counted is not None:
        return counted
    if isinstance(batch, dict):
        labels = batch.get("labels")
        if labels is not None and labels.dim() == 2:
            return int((labels != IGNORE_INDEX).sum())
        if batch.get("attention_mask") is not None:
            return int(batch["attention_mask"].sum())
        return batch["input_ids"].numel()
    return batch[:, 1:].numel()


def check_rows_per_process(batches, num_processes: int) -> None:
    """Refuse batches that some of ``num_processes`` would get no row of: a batcher cut by
    size (``training.max_tokens``) whose fewest rows (``min_rows``) are fewer than the
    processes that split each batch by rows."""
    min_rows = getattr(batches, "min_rows", batches.batch_size)
    if min_rows < num_processes:
        raise ValueError(
            f"training.max_tokens fits only {min_rows} pair(s) of the longest lengths in a "
            f"batch, fewer than the {num_processes} processes that share it: raise "
            "training.max_tokens or lower data.max_source_length / max_target_length"
        )


def _rows_of(batch, index: int, count: int, device):
    """Process ``index``'s share of a global batch (a tensor or a dict of tensors) split by
    rows over ``count`` processes, on ``device``: rows ``⌊index·B/count⌋`` to
    ``⌊(index+1)·B/count⌋`` of its ``B`` (equal shares when ``count`` divides ``B``; a batch cut
    by size may not). To CUDA the rows go through pinned host memory, copied without waiting
    (the copy overlaps the device's queue; the host batch is not reused)."""
    num_rows = len(next(iter(batch.values())) if isinstance(batch, dict) else batch)
    rows = slice(index * num_rows // count, (index + 1) * num_rows // count)
    if isinstance(batch, dict):
        return {key: _to_device(value[rows], device) for key, value in batch.items()}
    return _to_device(batch[rows], device)


def _to_device(tensor: torch.Tensor, device) -> torch.Tensor:
    """``tensor`` on ``device``: itself when it is there (a batch gathered on the device),
    pinned and non-blocking to CUDA, a plain ``.to`` elsewhere."""
    device = torch.device(device)
    if tensor.device.type == device.type and device.index in (None, tensor.device.index):
        return tensor
    if device.type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


def on_device(batches) -> bool:
    """Whether ``batches`` are gathered on an accelerator (a bucketed split that fits there:
    :meth:`hfattn.data.token_buckets.BucketedBatches.to`), not built on the host."""
    return getattr(batches, "device", torch.device("cpu")).type != "cpu"


def _any_process(accelerator: Accelerator, flag: bool) -> bool:
    if accelerator.num_processes == 1:
        return flag
    t = torch.tensor([float(flag)], device=accelerator.device)
    return bool(accelerator.reduce(t, reduction="sum").item() > 0)


def check_process_group() -> None:
    """Refuse a process that a launcher started as one of ``WORLD_SIZE`` > 1 (torchrun,
    accelerate launch) while Accelerate set up a single process: each would train alone into
    the same ``output_dir``. Called before anything is written.

    Raises:
        ValueError: naming both counts and the command that starts N CPU processes.
    """
    world = int(os.environ.get("WORLD_SIZE") or 1)
    if world <= 1:
        return
    from accelerate import PartialState
    from accelerate.utils import parse_flag_from_env

    # as AcceleratorState sets it up (PartialState alone does not read ACCELERATE_USE_CPU)
    if PartialState(cpu=parse_flag_from_env("ACCELERATE_USE_CPU")).num_processes == 1:
        raise ValueError(
            f"WORLD_SIZE={world} but Accelerate set up a single process: each of the {world} "
            "would train alone into the same output_dir. On CPUs start N processes with "
            "`ACCELERATE_USE_CPU=1 torchrun --standalone --nproc_per_node N -m hfattn train "
            "RECIPE`; on GPUs with `accelerate launch --multi_gpu --num_processes N -m hfattn "
            "train RECIPE`"
        )


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
    callbacks: Sequence[TrainingCallback | Callable[[Progress], None]] = (),
    planned_training=None,
) -> TrainResult:
    """Train ``job.model`` with the ``training:`` section ``cfg`` and save it to ``output_dir``.

    ``output_dir`` ends up a complete model folder (``save_pretrained`` + tokenizer), with
    ``eval_results.json``, ``metrics.jsonl``, ``loss_curve.png``, ``recipe.yaml`` and
    ``checkpoints/``. With ``resume`` the newest checkpoint is loaded and training continues
    exactly where it stopped. ``callbacks`` (:class:`TrainingCallback`, or functions called
    after every optimizer step) may set ``progress.should_stop``. ``planned_training`` is the
    recipe file's own ``training:`` section (before ``--set`` overrides; default ``cfg``): the
    steps it plans are recorded, so that a run cut short of its recipe says so
    (:func:`hfattn.storage.run_folder.training_shortfall`).

    The caller has checked the recipe and the folder (:func:`hfattn.orchestration.run.run_recipe`:
    ``training.metric_for_best_model`` among the metrics the job reports, ``resume`` and
    ``overwrite`` not both, with ``resume`` a checkpoint to continue from, without it a folder
    that holds no other run unless ``overwrite``); the engine trusts those checks. With
    ``overwrite`` the old run's checkpoints, log and model files are removed first, so an old
    run's checkpoints can never be mistaken for the new run's.

    Raises:
        CheckpointLoadError: the newest checkpoint is damaged, or does not fit the model
            (the recipe differs from the run's).
    """
    output_dir = Path(output_dir)
    check_process_group()  # before anything is written
    checkpoint = latest_checkpoint(output_dir) if resume else None
    if overwrite:
        clear_output_dir(output_dir)
    set_seed(cfg.seed)
    run = _Run(job, cfg, output_dir, callbacks, planned_training)
    acc = run.accelerator
    if acc.is_main_process:
        output_dir.mkdir(parents=True, exist_ok=True)
    if checkpoint is not None:
        run.resume_from(checkpoint)
    elif acc.is_main_process and run.metrics_path.exists():
        run.metrics_path.unlink()  # a fresh run starts a fresh log
    if acc.is_main_process and recipe_yaml is not None:  # once the checkpoint fits it
        write_recipe(output_dir, recipe_yaml)
    acc.wait_for_everyone()

    interrupted = run.run()
    p = run.progress
    result = TrainResult(output_dir=output_dir, progress=p, interrupted=interrupted)
    if not interrupted:
        try:  # the checkpoint of the last step is written: a first signal stops at once
            with stop_at_once(p.step):
                run.finish_training()
                _evaluate_and_save(run, result, recipe_name, generation_defaults)
        except Interrupted:
            p.should_stop = p.interrupted = result.interrupted = True
    if result.interrupted:
        # the caller says so (`hfattn train` prints how to continue): logged once, not twice
        logger.debug("stopped at step %d; continue with %s", p.step, resume_command(output_dir))
    return result


def _evaluate_and_save(
    run: _Run, result: TrainResult, recipe_name: str | None, generation_defaults: dict | None
) -> None:
    """The end of a run whose training is over: the best weights loaded (with
    ``training.load_best_at_end``), every split of ``job.eval_splits`` scored into
    ``result.metrics``, the sample drawn, and the model folder saved with
    ``eval_results.json`` written last (:func:`~hfattn.training.results.save_run_results`):
    a folder without it is not finished, and ``--resume`` does all of this again."""
    job, cfg, acc, p, output_dir = run.job, run.cfg, run.accelerator, run.progress, run.output_dir
    model = acc.unwrap_model(run.model)
    if cfg.load_best_at_end and p.best_step is not None:
        load_best_weights(model, output_dir)
    final_eval_s = 0.0
    for split in dict.fromkeys(job.eval_splits):
        result.metrics[split], seconds = run.evaluate(split, final=True)
        final_eval_s += seconds
    if acc.is_main_process:
        for key, value in (generation_defaults or {}).items():
            setattr(model.generation_config, key, value)
        training = training_summary(
            p,
            run.total_steps,
            acc,
            recipe_name,
            cfg.max_minutes,
            flops_per_token=run.flops_per_token(),
            peak_flops=(run.peak_flops, run.peak_source),
            final_eval_s=final_eval_s,
            wall_s=run.wall_seconds(),
        )
        results = eval_results(result.metrics, job.card_metadata, training)
        if job.sample is not None:
            result.sample = job.sample(model)
        save_run_results(output_dir, model, job.tokenizer, results, run.metrics_path)
    acc.wait_for_everyone()


__all__ = [
    "GPU_STEP_FLOPS",
    "check_process_group",
    "check_rows_per_process",
    "checks_every_loss",
    "train",
    "trained_tokens",
    "warn_if_sized_for_gpu",
]
