"""Crash a training run at a chosen point, as a power cut or the OOM killer would: a
:class:`~hfattn.training.training_job.TrainingCallback` that SIGKILLs its own process.

A point is ``step:N`` (once step ``N`` is done and logged, before its checkpoint is written)
or ``checkpoint:N`` (in the middle of writing the checkpoint of step ``N``: after the weights
and optimizer state, before ``progress.json`` and the rename). :func:`cli_with_fault` runs
``hfattn.cli.main`` with every recipe run given that callback (``python -m tests.helpers.fault_injection
POINT ARGS...`` does it in a fresh interpreter). :func:`nan_loss_at` makes chosen training
losses NaN instead, as a diverging run would. :func:`limit_file_size` makes the files written
from a chosen moment stop at a size, as a full disk stops them; :func:`with_callbacks` gives
callbacks to the recipe runs of ``hfattn train`` in this process.
"""

from __future__ import annotations

import logging
import math
import os
import resource
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from hfattn.training.training_job import TrainingCallback

POINTS = ("step", "checkpoint")
logger = logging.getLogger(__name__)


class KillAt(TrainingCallback):
    """SIGKILL this process at ``where`` (one of :data:`POINTS`) of optimizer step ``step``."""

    def __init__(self, where: str, step: int):
        self.where, self.step = where, step

    def _kill_if(self, where: str, step: int) -> None:
        if (where, step) == (self.where, self.step):
            print(f"fault injection: killing this process at {where}:{step}", file=sys.stderr)
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    def on_step_end(self, progress) -> None:
        self._kill_if("step", progress.step)

    def on_checkpoint_state_saved(self, progress, folder) -> None:
        self._kill_if("checkpoint", progress.step)


def kill_at(point: str) -> KillAt:
    """The :class:`KillAt` of ``"<where>:<step>"``.

    Raises:
        ValueError: not ``<where>:<step>`` with a known point and a step >= 1.
    """
    where, _, step = point.partition(":")
    if where not in POINTS or not step.isdigit() or int(step) < 1:
        raise ValueError(f"fault point {point!r}: expected one of {POINTS} ':' a step >= 1")
    return KillAt(where, int(step))


def cli_with_fault(argv: list[str], point: str | None) -> int:
    """``hfattn.cli.main(argv)`` with :func:`kill_at` ``point`` given to every recipe run (no
    fault when ``point`` is ``None``)."""
    import hfattn.orchestration.run as orchestration
    from hfattn.cli import main

    if point is not None:
        callback, real = kill_at(point), orchestration.run_recipe

        def run_recipe(recipe, *, callbacks=(), **kwargs):
            return real(recipe, **kwargs, callbacks=[*callbacks, callback])

        orchestration.run_recipe = run_recipe
    return main(argv)


def with_callbacks(monkeypatch, *added) -> None:
    """Give the callbacks ``added`` to every recipe run of ``hfattn.cli.main`` in this
    process."""
    import hfattn.orchestration.run as orchestration

    real = orchestration.run_recipe

    def run_recipe(recipe, *, callbacks=(), **kwargs):
        return real(recipe, **kwargs, callbacks=[*callbacks, *added])

    monkeypatch.setattr(orchestration, "run_recipe", run_recipe)


@contextmanager
def limit_file_size() -> Iterator:
    """Yield ``limit(n)``: from its call on, a write past ``n`` bytes of a file fails with
    ``EFBIG`` (``RLIMIT_FSIZE``, with ``SIGXFSZ`` ignored), in every writer (Python, the C++
    zip writer of ``torch.save``, the Rust one of ``safetensors``), as a full disk makes it
    fail; lifted at the end."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    try:
        yield lambda n: resource.setrlimit(resource.RLIMIT_FSIZE, (n, hard))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)


def nan_loss_at(monkeypatch, calls: set[int], snapshots: dict | None = None) -> None:
    """Make the char-RNN training loss NaN at the given forward calls (1-based); record the
    weights each call sees in ``snapshots``."""
    import hfattn.tasks.causal_lm.job as causal_lm

    real_loss = causal_lm.causal_lm_loss
    count = [0]

    def loss_fn(model, window, state, stateful):
        count[0] += 1
        if snapshots is not None:
            snapshots[count[0]] = {k: v.detach().clone() for k, v in model.state_dict().items()}
        step = real_loss(model, window, state, stateful)
        return step._replace(loss=step.loss * math.nan) if count[0] in calls else step

    monkeypatch.setattr(causal_lm, "causal_lm_loss", loss_fn)


if __name__ == "__main__":
    sys.exit(cli_with_fault(sys.argv[2:], sys.argv[1]))
