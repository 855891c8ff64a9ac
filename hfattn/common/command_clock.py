"""When the hfattn command of this process started: the origin of the wall seconds that a run
records (``wall_s`` of ``metrics.jsonl``, ``first_step_wall_s`` and ``wall_time_s`` of
``eval_results.json``), so that they count what a user waits for, from the command to the saved
model, interpreter start, imports and data loading included.

:func:`mark_command_start` is called by the command line's entry point; a run started from
Python code without it counts from the start of its training session.
"""

from __future__ import annotations

import time

_started: float | None = None
"""The command's start on the ``time.monotonic`` clock; ``None`` until marked."""


def mark_command_start(process_start: bool = True) -> None:
    """Mark the command's start: the start of this process (``process_start``: the process
    runs the command, e.g. the ``hfattn`` console script or ``accelerate launch -m hfattn``),
    or now (a command called in a running process)."""
    global _started
    _started = time.monotonic()
    if process_start:
        import psutil  # accelerate's dependency; about 10 ms to import

        _started -= max(0.0, time.time() - psutil.Process().create_time())


def command_started() -> float | None:
    """The command's start on the ``time.monotonic`` clock (``None``: not marked)."""
    return _started


__all__ = ["command_started", "mark_command_start"]
