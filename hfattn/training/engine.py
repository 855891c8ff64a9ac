"""The training loop shared by every recipe, on Accelerate (one CPU, one GPU, many of either).

:func:`train` sets the run up (:mod:`~hfattn.training.processes`,
:mod:`~hfattn.training.session`) and :func:`_train_loop` loops over optimizer steps: forward,
backward (gradient accumulation, clipping, mixed precision), the schedule's step, a
``metrics.jsonl`` record every ``log_every`` steps, a validation every ``eval_every`` steps
(the best model kept), a checkpoint every ``save_every`` steps. It stops at the step budget,
the time budget (``max_minutes``: the schedule then follows the clock,
:mod:`~hfattn.training.clock`) or a first Ctrl-C / SIGTERM (a resumable checkpoint is
written). Its named pieces live beside it: the non-finite-loss policy
(:mod:`~hfattn.training.nonfinite`: ``training.on_nonfinite_loss`` stops the run or skips the
step), the speed of the train records (:mod:`~hfattn.training.speed`: tokens/s, MFU,
``data_wait_s``), the checkpoints (:mod:`~hfattn.training.checkpoints`: a run killed at any
point continues with ``resume=True`` to the same weights and log, bit for bit on CPU) and the
end of a run (:mod:`~hfattn.training.finishing`: the checkpoint of the last step, then the
final validation, checkpoint averaging, final evaluation and model folder, each stopped at
once by a signal, :mod:`~hfattn.training.stop_signals`). Evaluations are kept off the
training clock: ``elapsed_s`` counts training only.

Stateful jobs carry the recurrent state (detached: truncated BPTT) from batch to batch and
reset it at every epoch. With ``training.compile`` the loss step runs through
``torch.compile`` (:mod:`~hfattn.training.compiling`). The regularizers of the step
(:mod:`~hfattn.training.regularization`): the job's ``noise`` (word dropout) on each training
batch before its forward, and R-Drop (``training.r_drop_alpha``), two passes of the loss. On
CUDA the step does not wait for the device: losses stay device tensors until a record reads
them, token counts and FLOPs come from the host batch before its pinned, non-blocking copy.
Callbacks (:class:`TrainingCallback`, or a plain function of :class:`Progress` called at the
end of every optimizer step) watch the run and may ask it to stop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
from accelerate.utils import set_seed
from tqdm.auto import tqdm

from ..storage.file_io import writing
from ..storage.resume_checks import clear_output_dir
from ..storage.run_folder import TRACKER_LOGS_DIR, latest_checkpoint, resume_command, write_recipe
from ..storage.run_status import run_writes
from .checkpoints import Progress
from .finishing import evaluate_and_save, finish_training, save_last_step
from .host_memory import cap_primitive_cache, freed_memory_kept
from .nonfinite import NonFiniteLosses, checks_every_loss
from .prefetch import prefetched
from .processes import (
    any_process,
    build_accelerator,
    check_process_group,
    check_rows_per_process,
    logged_loss,
    on_device,
    rows_of,
)
from .regularization import training_loss
from .session import TrainingSession
from .speed import floats, trained_tokens
from .stop_signals import Interrupted, stop_at_once, stop_on_signals
from .trackers import start_trackers
from .training_job import TrainingCallback, TrainingJob, TrainResult

logger = logging.getLogger(__name__)


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
    after every optimizer step) may stop it with ``progress.stop.request(reason)``.
    ``planned_training`` is the recipe file's own ``training:`` section (before ``--set``
    overrides; default ``cfg``): the steps it plans are recorded, so that a run cut short of
    its recipe says so (:func:`hfattn.storage.run_status.training_shortfall`).

    The caller has checked the recipe and the folder (:func:`hfattn.orchestration.run.run_recipe`:
    ``training.metric_for_best_model`` among the metrics the job reports, ``resume`` and
    ``overwrite`` not both, with ``resume`` a checkpoint to continue from, without it a folder
    that holds no other run unless ``overwrite``); the engine trusts those checks. With
    ``overwrite`` the old run's checkpoints, log and model files are removed first, so an old
    run's checkpoints can never be mistaken for the new run's.

    Raises:
        CheckpointLoadError: the newest checkpoint is damaged, or does not fit the model
            (the recipe differs from the run's).
        RunWriteError: a file of the run could not be written (a full disk, no permission): the
            message names it, the cause, the last good checkpoint and how to continue.
    """
    output_dir = Path(output_dir)
    check_process_group()  # before anything is written
    with run_writes(output_dir):  # a failed write: one error, the last checkpoint stands
        checkpoint = latest_checkpoint(output_dir) if resume else None
        if overwrite:
            clear_output_dir(output_dir)
        set_seed(cfg.seed)
        acc = build_accelerator(cfg.mixed_precision, cfg.gradient_accumulation_steps,
                                cfg.report_to, output_dir / TRACKER_LOGS_DIR)  # fmt: skip
        if acc.device.type == "cpu" and acc.mixed_precision == "bf16":
            cap_primitive_cache()  # before the first bf16 product builds oneDNN's cache
        every_loss = checks_every_loss(cfg.on_nonfinite_loss, acc.device)
        nonfinite = NonFiniteLosses(acc, cfg, output_dir, every_loss)
        run = TrainingSession(job, cfg, output_dir, acc, nonfinite, callbacks, planned_training)
        if acc.is_main_process:
            with writing(output_dir):
                output_dir.mkdir(parents=True, exist_ok=True)
        if checkpoint is not None:
            run.resume_from(checkpoint)
        elif acc.is_main_process and run.metrics_path.exists():
            run.metrics_path.unlink()  # a fresh run starts a fresh log
        if acc.is_main_process and recipe_yaml is not None:  # once the checkpoint fits it
            write_recipe(output_dir, recipe_yaml)
        start_trackers(acc, cfg.report_to, output_dir, run.progress.step)
        acc.wait_for_everyone()

        try:
            interrupted = _train_loop(run)
            p = run.progress
            result = TrainResult(output_dir=output_dir, progress=p, interrupted=interrupted)
            if not interrupted:
                try:  # the checkpoint of the last step is written: a first signal stops at once
                    with stop_at_once(p.step):
                        finish_training(run)
                        evaluate_and_save(run, result, recipe_name, generation_defaults)
                except Interrupted:
                    p.stop.requested = p.stop.interrupted = result.interrupted = True
        finally:
            # The DDP wrapper goes while the process group lives: released after
            # `end_training` destroyed the group, its gradient reducer held the group's last
            # reference, and its deallocation (GIL held) joined gloo's threads while one of
            # them waited for the GIL to free a finished work's tensors: one process of a
            # two-process CPU run hung at its exit. Only a launch of several processes has a
            # wrapper to release: `free_memory` runs a full garbage collection (0.1-0.3 s).
            run.model = run.loss_model = None
            if acc.num_processes > 1:
                acc.free_memory()
            acc.end_training()  # the trackers' files closed, whatever ended the run
        if result.interrupted:
            # the caller says so (`hfattn train` prints how to continue): logged once, not twice
            logger.debug("stopped at step %d; continue with %s", p.step, resume_command(output_dir))
        return result


def _train_loop(run: TrainingSession) -> bool:
    """Train until the step budget, the time budget or a stop request, then write the
    checkpoint of the last step. Returns True when the run was interrupted."""
    acc, cfg, p, clock = run.accelerator, run.cfg, run.progress, run.clock
    batches, losses, last_saved = run.job.batches, p.unlogged_losses, p.step
    clock.resume(p)  # the seconds trained before, the evaluations' left out
    bar, postfix = clock.progress_bar(p.step, p.elapsed_s), {}
    run.nonfinite.checked_step = p.step
    run.speed.start(p.train_tokens)
    run.flops.start()
    reuse = cfg.reuse_freed_memory and acc.device.type == "cpu"
    with stop_on_signals(p), freed_memory_kept(reuse), bar:  # the bar closed on an error too
        if run.validation_owed() and not p.stop.requested:
            run.periodic_eval()  # the validation a stop cut short, before any further step
        while run.steps_left(p) and not p.stop.requested:
            epoch = batches.epoch(p.epoch, start=p.batch_in_epoch)
            if acc.device.type == "cuda" and not on_device(batches):
                epoch = prefetched(epoch)  # built on the host while the GPU steps
            for batch in run.speed.timed(epoch):
                run.count_batch(batch)  # tokens, FLOPs (and a GPU-sized step's warning)
                rows = rows_of(batch, acc.process_index, acc.num_processes, acc.device)
                if run.job.noise is not None:
                    rows = run.job.noise(rows)  # word dropout: training batches only
                clock.label(bar, run.compile_watch.compiling_label(rows))
                with run.compile_watch.step(rows):  # counts and times the compiles
                    loss = _train_step(run, rows)
                if loss is not None:
                    losses.append(loss)
                p.batch_in_epoch += 1
                if not acc.sync_gradients:
                    continue
                run.scheduler.step()
                p.step += 1
                p.elapsed_s = clock.elapsed(p)
                if p.first_step_wall_s is None:
                    p.first_step_wall_s = run.wall_seconds()
                clock.follow_time_budget(p.elapsed_s)
                clock.show_step(bar, postfix, p.step, p.elapsed_s, run.compile_watch.compiled_last)
                if p.step % cfg.log_every == 0 or p.step == run.total_steps:
                    _log_train(run, bar, postfix)
                if cfg.eval_every and p.step % cfg.eval_every == 0:
                    run.periodic_eval()
                for callback in run.callbacks:
                    callback.on_step_end(p)
                if clock.over_budget(p.elapsed_s):
                    p.stop.request("time budget")
                stop = not run.steps_left(p) or any_process(acc, p.stop.requested)
                if cfg.save_every and p.step % cfg.save_every == 0:
                    run.save_checkpoint()
                    last_saved = p.step
                if stop:
                    break
            else:
                p.epoch += 1
                p.batch_in_epoch = 0
                run.state = None  # a new epoch starts every stream from the beginning
        bar.close()
        p.elapsed_s = clock.elapsed(p)
        return save_last_step(run, last_saved)


def _train_step(run: TrainingSession, batch) -> torch.Tensor | None:
    """One micro-batch: forward, backward and, when it ends an accumulation, the optimizer
    step. Returns the loss (a float32 tensor on the device, not read here), or ``None`` when
    it was not finite and the step is skipped (``training.on_nonfinite_loss: skip``; its
    gradients are dropped)."""
    acc, cfg = run.accelerator, run.cfg
    # no_sync on the module whose forward runs: a regional compile's copy of a DDP module
    # keeps its own require_backward_grad_sync (compiling.compile_for_training)
    with acc.accumulate(run.loss_model):
        stateful = run.job.batches.stateful
        step = training_loss(run.job.compute_loss, run.loss_model, batch, run.state, stateful,
                             cfg.r_drop_alpha)  # fmt: skip
        loss, state = step.loss, step.state
        finite = run.nonfinite.finite(loss)
        if finite:
            acc.backward(loss)
        else:
            run.nonfinite.on_nonfinite(loss, run.progress)  # raises, or marks the step skipped
        if acc.sync_gradients and run.nonfinite.take_skip():
            run.optimizer.zero_grad()
            run.grad_norm = None
        else:
            if acc.sync_gradients and cfg.max_grad_norm:
                norm = acc.clip_grad_norm_(run.model.parameters(), cfg.max_grad_norm)
                run.grad_norm = norm if isinstance(norm, torch.Tensor) else None
            run.optimizer.step()
            run.optimizer.zero_grad()
    if not finite:
        run.state = None  # a carried state after a non-finite loss is not trusted
        return None
    run.state = state if stateful else None
    return loss.detach().float()


def _log_train(run: TrainingSession, bar: tqdm, postfix: dict) -> None:
    """Append the train record of the steps since the last one to ``metrics.jsonl`` (the mean
    loss, learning rate, tokens, training seconds, speed) and show it on ``bar``."""
    acc, p = run.accelerator, run.progress
    run.nonfinite.check_gathered(p)
    losses = p.unlogged_losses
    losses[:] = floats(losses)  # the one read of the interval's losses
    record = {"step": p.step, "epoch": p.epoch, "split": "train",
              "loss": logged_loss(acc, losses),
              "learning_rate": run.scheduler.get_last_lr()[0],
              "tokens": p.train_tokens,
              "elapsed_s": round(p.elapsed_s, 2),
              "wall_s": round(run.wall_seconds(), 2)}  # fmt: skip
    if run.grad_norm is not None:
        record["grad_norm"] = float(run.grad_norm)
    if p.skipped_steps:
        record["skipped_steps"] = p.skipped_steps
    if run.compiled:
        record["compile_s"], record["compiles"] = run.compile_totals()
    record.update(run.speed.interval(p.train_tokens, run.flops.total_peak))
    run.log(record)
    postfix["loss"] = f"{record['loss']:.4f}"
    postfix["tok/s"] = f"{record['tokens_per_s']:,.0f}"
    if record.get("mfu") is not None:
        postfix["MFU"] = f"{record['mfu']:.1%}"
    bar.set_postfix(postfix)
    losses.clear()


__all__ = [
    "check_process_group",
    "check_rows_per_process",
    "checks_every_loss",
    "on_device",
    "train",
    "trained_tokens",
]
