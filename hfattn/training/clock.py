"""The training clock and the time budget (``training.max_minutes``).

:class:`TrainingClock` counts the seconds spent training: those since the loop started (and
before a resume) less the evaluations' (``progress.eval_s``), so that ``max_minutes``, the
schedule that follows it and tokens/s count training only. With ``max_minutes`` the schedule
follows the clock (:meth:`TrainingClock.follow_time_budget`) and the progress bar shows the share
of the run done, whichever of the clock and the steps leads.
"""

from __future__ import annotations

import time

from accelerate import Accelerator
from tqdm.auto import tqdm

from .checkpoints import Progress
from .processes import max_over_processes

TIMED_BAR_FORMAT = "{l_bar}{bar}| [{elapsed}<{remaining}{postfix}]"
"""The progress bar of a run with ``training.max_minutes``: its percentage is the schedule's
(what the clock or the steps have used up), so no step count out of ``total_steps`` is shown
(the step is in the postfix)."""


class TrainingClock:
    """The clock of one run: ``cfg`` its ``training:`` section, ``scheduler`` the learning-rate
    schedule of ``total_steps`` steps that it drives with ``max_minutes``."""

    def __init__(self, cfg, scheduler, total_steps: int, accelerator: Accelerator):
        self.cfg, self.scheduler, self.total_steps = cfg, scheduler, total_steps
        self.accelerator = accelerator
        self.start = time.monotonic()

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
        """With ``max_minutes``, run the schedule on the share of the run already done,
        ``max(step / total_steps, elapsed / budget)``: a run that the clock stops before its
        last step still ends with the schedule's last learning rate (annealed), whatever the
        machine's speed. The schedule counter jumps ahead when time leads; all processes take
        the largest counter, so they keep one learning rate. The warmup counts optimizer steps
        (the clock is followed from step ``warmup_steps`` on): a counter that jumped with the
        clock would pass a warmup of 1,000 steps within the first few dozen steps of a run whose
        ``max_steps`` lies far beyond what the clock allows."""
        cfg, scheduler = self.cfg, self.scheduler
        if cfg.max_minutes is None or scheduler.last_epoch < cfg.warmup_steps:
            return
        by_time = int(self.total_steps * elapsed_s / (60 * cfg.max_minutes))
        by_time = min(max_over_processes(self.accelerator, by_time), self.total_steps)
        if by_time > scheduler.last_epoch:
            scheduler.last_epoch = by_time - 1
            scheduler.step()

    def bar_position(self, step: int) -> int:
        """Where the progress bar stands: the steps done or, with ``max_minutes``, the
        schedule's counter, ``max(step, elapsed / budget × total_steps)`` (see
        :meth:`follow_time_budget`), which reaches the end when the clock stops the run."""
        position = step
        if self.cfg.max_minutes is not None:
            position = max(position, self.scheduler.last_epoch)
        return min(position, self.total_steps)

    def progress_bar(self, step: int) -> tqdm:
        """The run's tqdm bar on stderr: steps out of ``total_steps``; with ``max_minutes``, the
        share of the run done (:meth:`bar_position`: the clock's or the steps', whichever leads),
        the step next to it."""
        return tqdm(
            total=self.total_steps,
            initial=self.bar_position(step),
            disable=not self.accelerator.is_local_main_process,
            desc="train",
            bar_format=None if self.cfg.max_minutes is None else TIMED_BAR_FORMAT,
        )

    def show_step(self, bar: tqdm, postfix: dict, step: int) -> None:
        """Move ``bar`` to :meth:`bar_position` (the step in its ``postfix`` with
        ``max_minutes``)."""
        if self.cfg.max_minutes is not None:
            postfix["step"] = step
            bar.set_postfix(postfix, refresh=False)
        bar.update(self.bar_position(step) - bar.n)


__all__ = ["TIMED_BAR_FORMAT", "TrainingClock"]
