"""A command run as a user runs it, watched from outside: the resident memory of its whole
process tree, sampled every ``poll_s`` seconds, until a condition on its files holds.

:func:`run_watched` starts the command in its own session (its children with it), and at each
sample sums the RSS of the process and all its descendants (``psutil``), keeping the peak of
the sum and the peak of each process (named ``command`` for the one started, ``rank N`` for a
process whose environment holds ``RANK``, as ``torchrun`` sets it, else its name and pid).
``until()`` is asked after every sample; when it returns true, or the command exits, runs past
``timeout_s`` or past ``rss_limit_bytes`` (a run that would take the shared machine's memory
down), the whole tree is killed (:func:`kill_tree`) and the :class:`Watched` outcome returned.

The sum of RSS counts a page mapped by two processes twice (shared libraries, a memory-mapped
file both read): it is the memory the tree asks of the machine at worst, what an OOM killer
looks at process by process; the per-process peaks say how it splits.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

GB = 1e9


@dataclass
class Watched:
    """What :func:`run_watched` saw of one command."""

    status: str
    """``done`` (``until`` held), ``exited`` (before it held), ``timed out`` or ``over RSS
    limit``."""
    returncode: int | None
    """The command's exit status when it exited by itself; ``None`` when it was stopped
    (killed at the end of the watch)."""
    seconds: float
    """From the start of the command to the end of the watch."""
    peak_rss: int = 0
    """The highest sum of the tree's RSS at one sample, in bytes."""
    peak_rss_per_process: dict[str, int] = field(default_factory=dict)
    """The highest RSS of each process, by its name (see the module docstring)."""
    samples: int = 0
    marks: dict[str, float] = field(default_factory=dict)
    """Seconds from the start at which :meth:`Watch.mark` named an event."""
    peak_rss_after: dict[str, int] = field(default_factory=dict)
    """For each mark, the highest sum of the tree's RSS from the mark on."""


class Watch:
    """The state of one watch, given to ``until``: :meth:`mark` an event (the first step
    seen) to have its time and the peak RSS after it recorded."""

    def __init__(self, started: float):
        self.started = started
        self.marks: dict[str, float] = {}
        self.peak_after: dict[str, int] = {}

    def elapsed(self) -> float:
        """Seconds since the command started."""
        return time.monotonic() - self.started

    def mark(self, name: str) -> None:
        """Record that ``name`` happened now (the first call for a name counts)."""
        if name not in self.marks:
            self.marks[name] = self.elapsed()
            self.peak_after[name] = 0


def process_label(process: psutil.Process, root_pid: int) -> str:
    """``command`` for the process started, ``rank N`` for a process launched with
    ``RANK=N``, else ``NAME PID``."""
    if process.pid == root_pid:
        return "command"
    try:
        rank = process.environ().get("RANK")
    except (psutil.Error, OSError):
        rank = None
    if rank is not None:
        return f"rank {rank}"
    try:
        return f"{process.name()} {process.pid}"
    except psutil.Error:
        return f"process {process.pid}"


FINAL_LABELS = ("command", "rank ")
"""Labels that a process keeps; any other is read again at the next sample (a process caught
between its fork and its exec has its parent's environment, without ``RANK`` yet)."""


def tree_rss(root: psutil.Process, labels: dict[int, str]) -> dict[int, int]:
    """The RSS of ``root`` and of each of its descendants, by pid (``labels`` gets each pid's
    label, read again until it is final); a process that ends while it is read is left out."""
    try:
        processes = [root, *root.children(recursive=True)]
    except psutil.Error:
        return {}
    rss = {}
    for process in processes:
        try:
            value = process.memory_info().rss
            if not labels.get(process.pid, "").startswith(FINAL_LABELS):
                labels[process.pid] = process_label(process, root.pid)
        except psutil.Error:
            continue
        rss[process.pid] = value
    return rss


def kill_tree(process: subprocess.Popen) -> None:
    """Kill the command and every process under it: each descendant by its pid (``torchrun``
    starts its workers in sessions of their own), then the command's session (it was started
    with ``start_new_session``)."""
    try:
        descendants = psutil.Process(process.pid).children(recursive=True)
    except psutil.Error:
        descendants = []
    for child in descendants:
        try:
            child.kill()
        except psutil.Error:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()
    deadline = time.monotonic() + 10
    for child in descendants:  # gone, or a zombie its new parent has not reaped yet
        while time.monotonic() < deadline and is_running(child):
            time.sleep(0.02)


def is_running(process: psutil.Process) -> bool:
    """Whether ``process`` still runs (a zombie does not)."""
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def run_watched(
    command: list[str],
    *,
    env: dict[str, str],
    cwd: Path,
    log_path: Path,
    until: Callable[[Watch], bool],
    poll_s: float = 0.1,
    timeout_s: float = 3600.0,
    rss_limit_bytes: float | None = None,
) -> Watched:
    """Run ``command`` (its output into ``log_path``) and watch its process tree until
    ``until(watch)`` holds; see the module docstring."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    labels: dict[int, str] = {}
    peaks: dict[int, int] = {}
    peak, samples, status = 0, 0, "exited"
    with open(log_path, "wb") as log:
        started = time.monotonic()
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=log,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)  # fmt: skip
        watch = Watch(started)
        root = psutil.Process(process.pid)
        try:
            while True:
                rss = tree_rss(root, labels)
                total = sum(rss.values())
                samples += 1
                peak = max(peak, total)
                for pid, value in rss.items():
                    peaks[pid] = max(peaks.get(pid, 0), value)
                for name in watch.peak_after:
                    watch.peak_after[name] = max(watch.peak_after[name], total)
                if until(watch):
                    status = "done"
                    break
                if process.poll() is not None:  # the files it wrote last decide
                    status = "done" if until(watch) else "exited"
                    break
                if watch.elapsed() > timeout_s:
                    status = "timed out"
                    break
                if rss_limit_bytes is not None and total > rss_limit_bytes:
                    status = "over RSS limit"
                    break
                time.sleep(poll_s)
        finally:
            returncode = process.poll()
            kill_tree(process)
    return Watched(status=status, returncode=returncode,
                   seconds=watch.elapsed(), peak_rss=peak,
                   peak_rss_per_process=_by_label(peaks, labels),
                   samples=samples, marks=dict(watch.marks),
                   peak_rss_after=dict(watch.peak_after))  # fmt: skip


def _by_label(peaks: dict[int, int], labels: dict[int, str]) -> dict[str, int]:
    """Each process's peak under its last label (the largest where two share one)."""
    out: dict[str, int] = {}
    for pid, value in peaks.items():
        out[labels[pid]] = max(out.get(labels[pid], 0), value)
    return out


__all__ = ["GB", "Watch", "Watched", "is_running", "kill_tree", "run_watched", "tree_rss"]
