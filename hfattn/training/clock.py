"""The training clock and the time budget (``training.max_minutes``).

:class:`TrainingClock` counts the seconds spent training: those since the loop started (and
before a resume) less the evaluations' (``progress.eval_s``), so that ``max_minutes``, the
schedule that follows it and tokens/s count training only. With ``max_minutes`` the schedule
follows the clock (:meth:`TrainingClock.follow_time_budget`) and the progress bar shows the share
of the run done, whichever of the clock and the steps leads. Its ETA counts from steady steps
only (:class:`StepPace`): the first steps of a session and the steps that compile a graph are
left out, and the bar names a compile while it runs.
"""

from __future__ import annotations

import time

from accelerate import Accelerator
from tqdm.auto import tqdm

from ..common.progress import progress_bar
from .checkpoints import Progress
from .processes import max_over_processes
from .schedules import NEEDS_TOTAL_STEPS, schedule_length

STEPS_BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"
"""The progress bar of a run: the steps done out of ``total_steps``, the time so far and the
postfix, whose ``eta`` is :class:`StepPace`'s (tqdm's own estimate, from the mean of every step
since the start, would count the compiles and first steps of a run as its pace)."""
TIMED_BAR_FORMAT = "{l_bar}{bar}| [{elapsed}{postfix}]"
"""The progress bar of a run with ``training.max_minutes``: its percentage is the schedule's
(what the clock or the steps have used up), so no step count out of ``total_steps`` is shown
(the step is in the postfix)."""
BAR_LABEL = "train"
"""The progress bar's label, but during a step that compiles (:meth:`TrainingClock.label`)."""


class StepPace:
    """The seconds an optimizer step takes once training is steady: the mean over the steps of
    this session after its first ``settle`` steps, leaving out every step that compiled a
    graph (and the ``settle`` steps after it: caches and allocators warm up)."""

    def __init__(self, settle: int = 2):
        self.settle = settle
        self.steps, self.seconds, self.to_skip = 0, 0.0, settle
        self.last: float | None = None

    def step(self, elapsed_s: float, compiled: bool) -> None:
        """A step ended at ``elapsed_s`` training seconds; ``compiled``: it compiled a graph."""
        last, self.last = self.last, elapsed_s
        if compiled:
            self.to_skip = self.settle
        elif self.to_skip:
            self.to_skip -= 1
        elif last is not None:
            self.steps += 1
            self.seconds += elapsed_s - last

    @property
    def seconds_per_step(self) -> float | None:
        """The steady seconds a step (``None`` before ``settle + 1`` steady steps)."""
        return self.seconds / self.steps if self.steps >= self.settle + 1 else None


class TrainingClock:
    """The clock of one run: ``cfg`` its ``training:`` section, ``scheduler`` the learning-rate
    schedule of ``total_steps`` steps that it drives with ``max_minutes``. ``total_steps`` is
    ``None`` for a run planned by the clock alone (``epochs: null``, no ``max_steps``): its
    schedule is :func:`~hfattn.training.schedules.schedule_length` steps long and moves with the
    clock only."""

    def __init__(self, cfg, scheduler, total_steps: int | None, accelerator: Accelerator):
        self.cfg, self.scheduler = cfg, scheduler
        self.by_clock_alone = total_steps is None
        self.total_steps = schedule_length(cfg, total_steps)
        self.accelerator = accelerator
        self.start = time.monotonic()
        self.pace = StepPace()

    def resume(self, p: Progress) -> None:
        """Start the clock at ``p.elapsed_s`` seconds of training (those of earlier sessions)."""
        self.start = time.monotonic() - p.elapsed_s - p.eval_s

    def elapsed(self, p: Progress) -> float:
        """The training seconds so far: wall seconds since the start less ``p.eval_s``."""
        return time.monotonic() - self.start - p.eval_s

    def over_budget(self, elapsed_s: float) -> bool:
        """Whether ``elapsed_s`` training seconds have used up ``max_minutes`` (if set)."""
        return self.cfg.max_minutes is not None and elapsed_s >= 60 * self.cfg.max_minutes

    def follow_time_budget(self, elapsed_s: float) -> None:
        """With ``max_minutes``, run the schedule on the share of the run already done, so that
        it ends annealed at the clock whatever the machine's speed.

        With a step budget too (``T = total_steps``), the share is ``max(step / T, elapsed /
        budget)``: a run that the clock stops before its last step still ends with the
        schedule's last learning rate. Planned by the clock alone, the counter after the warmup
        ``W`` is ``W + (T − W) · elapsed / budget`` (``T − W`` =
        :data:`~hfattn.training.schedules.CLOCK_SCHEDULE_STEPS`): a ``linear`` schedule's factor
        is then ``1 − elapsed / budget``, 0 at the clock. The counter only moves forward, and
        only for the schedules that decay to an end (``linear``, ``cosine``): ``noam`` and the
        warmups count steps. All processes take the largest counter, so they keep one learning
        rate. The warmup counts optimizer steps (the clock is followed from step
        ``warmup_steps`` on): a counter that jumped with the clock would pass a warmup of 1,000
        steps within the first few dozen steps of a run whose ``max_steps`` lies far beyond what
        the clock allows."""
        cfg, scheduler = self.cfg, self.scheduler
        if cfg.max_minutes is None or scheduler.last_epoch < cfg.warmup_steps:
            return
        if cfg.schedule not in NEEDS_TOTAL_STEPS:
            return
        share = self.clock_share(elapsed_s)
        if self.by_clock_alone:
            warmup = cfg.warmup_steps
            by_time = warmup + round((self.total_steps - warmup) * share)
        else:
            by_time = int(self.total_steps * share)
        by_time = min(max_over_processes(self.accelerator, by_time), self.total_steps)
        if by_time > scheduler.last_epoch:
            scheduler.last_epoch = by_time - 1
            scheduler.step()

    def clock_share(self, elapsed_s: float) -> float:
        """The share of ``max_minutes`` that ``elapsed_s`` training seconds used, at most 1."""
        return min(elapsed_s / (60 * self.cfg.max_minutes), 1.0)

    def share_done(self, step: int, elapsed_s: float) -> float:
        """The share of the run done at ``step`` after ``elapsed_s`` training seconds: the
        steps' ``step / total_steps`` or, with ``max_minutes``, the larger of it and the
        clock's ``elapsed / budget`` (the clock's alone for a run planned by it)."""
        share = 0.0 if self.by_clock_alone else min(step / self.total_steps, 1.0)
        if self.cfg.max_minutes is not None:
            share = max(share, self.clock_share(elapsed_s))
        return share

    def bar_position(self, step: int, elapsed_s: float) -> int:
        """Where the progress bar of ``total_steps`` stands: :meth:`share_done` of it, which
        reaches the end when the clock stops the run."""
        return round(self.share_done(step, elapsed_s) * self.total_steps)

    def progress_bar(self, step: int, elapsed_s: float) -> tqdm:
        """The run's bar (:func:`~hfattn.common.progress.progress_bar`, shown from the start):
        steps out of ``total_steps``; with ``max_minutes``, the share of the run done
        (:meth:`bar_position`: the clock's or the steps', whichever leads), the step next to it.
        Its ``eta`` comes from :meth:`show_step`."""
        return progress_bar(
            total=self.total_steps,
            initial=self.bar_position(step, elapsed_s),
            shown=self.accelerator.is_local_main_process,
            desc=BAR_LABEL,
            unit="step",
            bar_format=STEPS_BAR_FORMAT if self.cfg.max_minutes is None else TIMED_BAR_FORMAT,
            delay=0,  # from the first step
        )

    def eta_seconds(self, step: int, elapsed_s: float) -> float | None:
        """The training seconds left at ``step`` (``elapsed_s`` trained): the steps left at the
        steady pace (:class:`StepPace`), and no more than the time budget left; ``None`` until
        the pace is known."""
        pace = self.pace.seconds_per_step
        if pace is None:
            return None
        left = float("inf") if self.by_clock_alone else (self.total_steps - step) * pace
        if self.cfg.max_minutes is not None:
            left = min(left, 60 * self.cfg.max_minutes - elapsed_s)
        return max(left, 0.0)

    def show_step(
        self, bar: tqdm, postfix: dict, step: int, elapsed_s: float, compiled: bool = False
    ) -> None:
        """Move ``bar`` to :meth:`bar_position` after ``step`` ended at ``elapsed_s`` training
        seconds (``compiled``: the step compiled a graph), with the step (with
        ``max_minutes``) and the steady ETA in its ``postfix``."""
        self.pace.step(elapsed_s, compiled)
        if self.cfg.max_minutes is not None:
            postfix["step"] = step
        eta = self.eta_seconds(step, elapsed_s)
        postfix["eta"] = "?" if eta is None else tqdm.format_interval(eta)
        bar.set_postfix(postfix, refresh=False)
        bar.update(self.bar_position(step, elapsed_s) - bar.n)

    @staticmethod
    def label(bar: tqdm, compiling: str | None) -> None:
        """Show on ``bar`` what the next step does: ``compiling`` (e.g. "compiling shape 3 of
        8") while it compiles, the plain label otherwise."""
        text = compiling or BAR_LABEL
        if not bar.disable and bar.desc != text:  # a disabled bar (other ranks) has no desc
            bar.set_description_str(text)  # refreshes the bar: seen before the step starts


__all__ = ["BAR_LABEL", "STEPS_BAR_FORMAT", "TIMED_BAR_FORMAT", "StepPace", "TrainingClock"]
