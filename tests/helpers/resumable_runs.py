"""What the run-folder tests share (``tests/storage/test_resume.py``, ``test_short_runs.py``,
``test_run_lock.py``): a ten-step training budget for :func:`~tests.helpers.recipe_helpers.small_recipe`
that saves no checkpoint of its own, a callback that interrupts a run at a step (as Ctrl-C
does), and a snapshot of a folder's files to tell that nothing was rewritten."""

from __future__ import annotations

TRAINING = {"max_steps": 10, "eval_every": 10, "save_every": 100, "log_every": 1}


def interrupt_at(step):
    """A callback that stops the run (as Ctrl-C does) once it has done step ``step``."""

    def callback(progress):
        if progress.step >= step:
            progress.stop.request("interrupted")

    return callback


def snapshot(folder):
    """Every file under ``folder`` with its modification time and content."""
    return {
        path: (path.stat().st_mtime_ns, path.read_bytes())
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }
