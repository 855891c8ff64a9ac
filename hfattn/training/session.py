"""One training run's state: the prepared model, optimizer and schedule, its progress, and the
files of its ``output_dir`` (``metrics.jsonl``, checkpoints, best weights).

:class:`TrainingSession` sets a run up (batch-size checks, optimizer, schedule, Accelerate's
``prepare``, ``training.compile``), writes and resumes its checkpoints
(:mod:`hfattn.training.checkpoints`) and scores the validation split off the training clock;
:func:`hfattn.training.engine.train` runs its loop.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from accelerate import Accelerator
from accelerate.utils import broadcast_object_list

from ..common.command_clock import command_started
from ..common.machine import command_line
from ..storage.file_io import append_text
from ..storage.run_folder import METRICS_FILE
from .checkpoints import (
    Progress,
    load_checkpoint,
    record_progress,
    save_best_weights,
    write_checkpoint,
)
from .clock import TrainingClock
from .compiling import COMPILE_PAD_MULTIPLE, CompileWatch, compile_for_training, resolve_compile
from .nonfinite import NonFiniteLosses
from .optim import training_optimizer
from .processes import check_batch_size, check_rows_per_process
from .schedules import (
    build_lr_scheduler,
    check_warmup_fits_epochs,
    schedule_length,
    schedule_steps,
)
from .speed import SessionFlops, Speedometer, floats, trained_tokens, warn_if_sized_for_gpu
from .stop_signals import Interrupted
from .trackers import tracked_scalars
from .training_job import TrainingJob, as_callbacks


class TrainingSession:
    """One training run of ``job`` with the ``training:`` section ``cfg`` on ``accelerator``:
    owns the optimizer, the schedule and the files of ``output_dir``; ``nonfinite`` is its
    non-finite-loss policy, ``planned_training`` the recipe file's own ``training:`` section."""

    def __init__(
        self,
        job: TrainingJob,
        cfg,
        output_dir: Path,
        accelerator: Accelerator,
        nonfinite: NonFiniteLosses,
        callbacks=(),
        planned_training=None,
    ):
        self.job, self.cfg, self.output_dir = job, cfg, output_dir
        self.accelerator = acc = accelerator
        self.nonfinite = nonfinite
        self.callbacks = as_callbacks(callbacks)
        check_batch_size(job.batches.batch_size, acc.num_processes)
        check_rows_per_process(job.batches, acc.num_processes)
        steps_per_epoch = max(1, len(job.batches) // cfg.gradient_accumulation_steps)
        check_warmup_fits_epochs(cfg, steps_per_epoch)
        self.total_steps = schedule_steps(cfg, steps_per_epoch)
        optimizer = training_optimizer(
            cfg, job.model, device=acc.device, mixed_precision=acc.mixed_precision
        )
        config = job.model.config
        self.scheduler = build_lr_scheduler(
            cfg.schedule,
            optimizer,
            warmup_steps=cfg.warmup_steps,
            total_steps=schedule_length(cfg, self.total_steps),
            d_model=getattr(config, "d_model", None) or getattr(config, "hidden_size", None),
        )
        self.model, self.optimizer = acc.prepare(job.model, optimizer)
        # the steps run in training mode (dropout on), as Trainer's do: from_pretrained returns
        # a model in eval mode, and each evaluation puts back the mode it found
        self.model.train()
        # batches in fixed shapes (length buckets) live on the device when they fit there
        job.batches = job.batches.to(acc.device)
        shapes = job.batches.shapes
        self.compiled = resolve_compile(cfg.compile, config.model_type, acc.device)
        # training.compile: the loss step calls a compiled view of the prepared module; its
        # checkpoints, evaluations and saved folder use the module itself (the same parameters,
        # the state-dict keys without torch.compile's `_orig_mod.` prefix)
        regional = cfg.compile == "regional"
        self.loss_model = (
            compile_for_training(self.model, regional=regional, dynamic_shapes=shapes is not None)
            if self.compiled
            else self.model
        )
        if self.compiled:
            job.batches.round_widths(COMPILE_PAD_MULTIPLE)  # a handful of shapes
        # buckets share one graph: their row and length dimensions are marked dynamic
        self.compile_watch = CompileWatch(
            acc.device,
            enabled=self.compiled,
            num_shapes=None if shapes is None else len(shapes),
            regional=regional,
        )
        passes = 2 if cfg.r_drop_alpha else 1  # R-Drop: two forwards and backwards a batch
        self.flops = SessionFlops(
            job.model, acc.device, acc.mixed_precision, acc.num_processes, passes
        )
        self.speed = Speedometer()
        self.clock = TrainingClock(cfg, self.scheduler, self.total_steps, acc)
        # see wall_seconds: from the command's start, or this session's
        self.session_start, self.wall_before = command_started() or time.monotonic(), 0.0
        acc.register_for_checkpointing(self.scheduler)
        planned = planned_training or cfg
        self.progress = Progress(
            planned_steps=schedule_steps(planned, steps_per_epoch),
            planned_minutes=planned.max_minutes,
            train_flops=0.0,
            commands=[command_line()],
            prepared_data=self.prepared_data(),
        )
        self.state = None  # the recurrent state carried from batch to batch (stateful jobs)
        self.metrics_path = output_dir / METRICS_FILE
        self.grad_norm = None  # the last optimizer step's gradient norm (a device tensor)
        # the weights the model holds when they are not the current step's (weights_key)
        self.loaded_weights: tuple | None = None
        self._scores: dict[tuple, dict] = {}  # see scores_of

    # ---- meters ------------------------------------------------------------------------
    def count_batch(self, batch) -> None:
        """Count a global ``batch`` before its step: its tokens in the progress, its FLOPs
        (from its shapes) in the session's, the speed interval's and the run's (``None`` once
        a resume met a checkpoint that did not count them); at the session's first
        batch, warn when the run's steps are sized for a GPU and it trains on a CPU
        (:func:`~hfattn.training.speed.warn_if_sized_for_gpu`)."""
        acc = self.accelerator
        self.progress.train_tokens += trained_tokens(batch)
        first = not self.flops.flops
        flops = self.flops.add(batch)
        if first:
            steps = self.cfg.gradient_accumulation_steps
            warn_if_sized_for_gpu(flops * steps / acc.num_processes, acc.device)
        self.speed.flops += flops
        p = self.progress
        p.train_flops = None if p.train_flops is None else p.train_flops + flops

    # ---- files -------------------------------------------------------------------------
    def log(self, record: dict) -> None:
        """Append one record to ``metrics.jsonl`` (main process; a record cut short by a full
        disk is cut back off, :func:`~hfattn.storage.file_io.append_text`) and give its scalars
        to the trackers of ``training.report_to``."""
        if self.accelerator.is_main_process:
            append_text(self.metrics_path, json.dumps(record) + "\n")
        if self.cfg.report_to:
            self.accelerator.log(tracked_scalars(record), step=record["step"])

    def save_checkpoint(self) -> None:
        """:func:`~hfattn.training.checkpoints.write_checkpoint` of the current step."""
        p = self.progress
        self.nonfinite.check_gathered(p)
        p.unlogged_losses[:] = floats(p.unlogged_losses)  # progress.json holds numbers
        self._record_clocks()

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

    def steps_left(self, p: Progress) -> bool:
        """Whether the step and epoch budgets leave steps to train after ``p``: ``p.step <
        total_steps`` and ``p.epoch < epochs`` (a run planned by the clock alone has neither:
        its clock ends it, :meth:`~hfattn.training.clock.TrainingClock.over_budget`)."""
        steps_ok = self.total_steps is None or p.step < self.total_steps
        return steps_ok and (self.cfg.epochs is None or p.epoch < self.cfg.epochs)

    def resume_from(self, checkpoint: Path) -> None:
        """Continue from ``checkpoint`` (:func:`~hfattn.training.checkpoints.load_checkpoint`).
        A checkpoint written once training had ended (``progress.training_end``) goes on with
        what follows training, the loop skipped, unless this run's budget is larger: a higher
        ``training.max_steps`` (epochs left) after the step budget, a higher (or no)
        ``training.max_minutes`` after the time budget. A callback's stop stands. This
        session's command is added to ``progress.commands``, and the prepared data it trains
        on to the progress (:meth:`_carry_prepared_data`)."""
        self.progress, self.state = load_checkpoint(self.accelerator, checkpoint, self.metrics_path)
        self.wall_before = self.progress.wall_s
        p, cfg = self.progress, self.cfg
        self.compile_watch.seconds, self.compile_watch.compiles = p.compile_s, p.compiles
        p.commands.append(command_line())
        self._carry_prepared_data(p)
        if p.training_end == "completed":
            reopened = self.steps_left(p)
        elif p.training_end == "time budget":
            reopened = cfg.max_minutes is None or p.elapsed_s < 60 * cfg.max_minutes
        else:
            reopened = False
        if reopened:
            p.training_end, p.averaged = None, False
        elif p.training_end not in (None, "completed"):
            p.stop.request(p.training_end)  # the loop is skipped

    def prepared_data(self) -> str | None:
        """The name of the prepared data the job trains on (its folder in the prepared-data
        cache, from ``job.data_preparation``), or ``None`` for a job without one."""
        folder = self.job.data_preparation.get("folder")
        return Path(folder).name if folder else None

    def _carry_prepared_data(self, p: Progress) -> None:
        """Record in the resumed progress ``p`` the prepared data this session trains on. Data
        other than the checkpoint's (a resume with ``--allow-data-change``: the refusal
        otherwise comes before the data is prepared,
        :func:`hfattn.data.prepared.resuming`) is added to ``p.data_changes``; the changes of
        the run so far go to its ``data_preparation`` record (``eval_results.json``)."""
        now = self.prepared_data()
        if p.prepared_data is not None and now is not None and now != p.prepared_data:
            p.data_changes.append({"step": p.step, "from": p.prepared_data, "to": now})
        p.prepared_data = now
        if p.data_changes:
            self.job.data_preparation = {**self.job.data_preparation, "changes": p.data_changes}

    def record_in_checkpoint(self) -> None:
        """Record the progress made since the checkpoint of the current step was written in
        that checkpoint (:func:`~hfattn.training.checkpoints.record_progress`)."""
        self._record_clocks()
        record_progress(self.accelerator, self.output_dir, self.progress, self.metrics_path)

    def compile_totals(self) -> tuple[float, int]:
        """The seconds of the steps that compiled a graph and the graphs compiled, over this
        session and those before a resume (the watch starts from the checkpoint's)."""
        return round(self.compile_watch.seconds, 2), self.compile_watch.compiles

    def _record_clocks(self) -> None:
        """Put the run's clocks in its progress before a checkpoint records it: the wall
        seconds and the compiles so far."""
        p = self.progress
        p.wall_s = self.wall_seconds()
        p.compile_s, p.compiles = self.compile_totals()

    def wall_seconds(self) -> float:
        """Wall-clock seconds of the whole run so far: this session's since its command started
        (:mod:`hfattn.common.command_clock`; without one, since :func:`train` set it up), plus
        the sessions before a resume up to their last checkpoint (``wall_s`` of
        :class:`~hfattn.training.checkpoints.Progress`)."""
        return self.wall_before + time.monotonic() - self.session_start

    # ---- evaluation --------------------------------------------------------------------
    def weights_key(self) -> tuple:
        """What names the weights the model holds: ``("step", N)`` (the current step's, or
        step N's best weights loaded back) or ``("averaged", (steps...))``."""
        return self.loaded_weights or ("step", self.progress.step)

    def best_weights_key(self) -> tuple | None:
        """:meth:`weights_key` of the best weights kept so far (``None``: none)."""
        p = self.progress
        if p.best_averaged_steps:
            return ("averaged", tuple(p.best_averaged_steps))
        return None if p.best_step is None else ("step", p.best_step)

    def _scoring_key(self, split: str, final: bool) -> tuple:
        """The weights, the split and the scoring (``final`` only where the job scores the
        end of training otherwise: its ``final_evaluate``)."""
        return self.weights_key(), split, bool(final and self.job.final_evaluate)

    def scores_of(self, split: str, final: bool = False) -> dict | None:
        """The scores :meth:`evaluate` already gave ``split`` in this session with the weights
        the model holds and the same scoring, or ``None``: the end of training does not
        decode the validation split twice with the same weights and settings."""
        scores = self._scores.get(self._scoring_key(split, final))
        return None if scores is None else dict(scores)

    def evaluate(self, split: str, final: bool = False) -> tuple[dict, float]:
        """Score ``split`` on the main process and share the result with every process
        (``final``: with the job's ``final_evaluate`` when it has one). Returns the scores and
        the seconds the main process's evaluation took (shared too: every process takes the
        same seconds off its training clock). The scores are kept for :meth:`scores_of` (those
        of the current and the best weights only).

        Raises:
            Interrupted: on every process, when a stop requested during the evaluation ended
                it between two batches (:mod:`hfattn.common.stop_request`).
        """
        acc = self.accelerator
        result = [None]
        if acc.is_main_process:
            began = time.monotonic()
            score = (final and self.job.final_evaluate) or self.job.evaluate
            try:
                scores = score(acc.unwrap_model(self.model), split)
                result[0] = (scores, time.monotonic() - began)
            except Interrupted:  # stopped between batches: the other processes stop too
                pass
        broadcast_object_list(result)
        if result[0] is None:
            raise Interrupted
        kept = (self.weights_key(), self.best_weights_key())
        self._scores = {k: v for k, v in self._scores.items() if k[0] in kept}
        self._scores[self._scoring_key(split, final)] = dict(result[0][0])
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
        """Score the validation split now and keep the weights when they are the best. A stop
        requested meanwhile ends the validation after its current batch, nothing logged: the
        step's checkpoint then records it unvalidated (``evaluated_step``), and a resume
        validates it first (:meth:`validation_owed`)."""
        self.nonfinite.check_gathered(self.progress)
        try:
            scores, seconds = self.validate()
        except Interrupted:
            return
        self.keep_validation(scores, seconds)

    def validation_owed(self) -> bool:
        """Whether the current step, one that ``training.eval_every`` validates, lost its
        validation to a stop (:meth:`periodic_eval`) and training goes on from it: a resumed
        run validates it before its next step, as an uninterrupted run did."""
        p, every = self.progress, self.cfg.eval_every
        return (
            bool(every)
            and p.step > 0
            and self.steps_left(p)
            and p.step % every == 0
            and (p.evaluated_step != p.step)
        )

    def keep_validation(self, scores: dict, seconds: float) -> None:
        """Log the validation ``scores`` of the current step (scored in ``seconds``), mark the
        step validated and keep the weights when they are the best."""
        p = self.progress
        self.log({"step": p.step, "epoch": p.epoch, "split": "validation", **scores,
                  "eval_s": round(seconds, 3),
                  "wall_s": round(self.wall_seconds(), 2)})  # fmt: skip
        p.evaluated_step = p.step
        if self.keep_if_best(scores):
            p.best_averaged_steps = None
        for callback in self.callbacks:
            callback.on_evaluate(p, scores)

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


__all__ = ["TrainingSession"]
