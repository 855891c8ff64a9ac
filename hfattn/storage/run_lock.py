"""The lock of a run folder: one process trains into a run folder at a time. ``hfattn train``
holds the folder (:func:`held_run_folder`, the lock file
:data:`~hfattn.storage.run_folder.LOCK_FILE` naming the holder) from before its first write to
its exit; :func:`check_not_busy` refuses a held folder before its other checks.
"""

from __future__ import annotations

import datetime
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from .file_io import FileWriteError, writing
from .run_folder import LOCK_FILE, RunFolderError
from .run_status import RunWriteError


class RunFolderBusy(RunFolderError):
    """Another process trains into the run folder (it holds :data:`LOCK_FILE`)."""


@contextmanager
def held_run_folder(folder: str | Path) -> Iterator[None]:
    """Hold the run folder ``folder`` (created if missing) for this process while the block
    runs: an exclusive ``flock`` on :data:`LOCK_FILE` (``filelock``), taken without waiting,
    whose file records this process's pid, host and start time for the message of a refused
    run. The kernel releases the lock when its process ends, however it ends, so a lock file
    left by a killed run is free: there is no stale state to detect, and of two runs starting
    together exactly one holds the folder. At the end the file is removed (while still held:
    a run waiting on its old inode sees it unlinked and takes the lock anew) and so is the
    folder when it was made here and is left empty. Only the main process of a multi-process
    run holds it.

    Raises:
        RunFolderBusy: another process holds ``folder``, naming it.
        RunWriteError: the folder or its lock cannot be written (no permission, a full disk).
    """
    folder = Path(folder)
    made = not folder.exists()
    lock = _folder_lock(folder, record_holder=True)
    try:
        with writing(folder / LOCK_FILE):
            folder.mkdir(parents=True, exist_ok=True)
            _acquire(lock, folder)
    except FileWriteError as failure:
        raise RunWriteError(
            f"{failure}: output_dir must be a folder this user can write; make it writable or "
            "pick another output_dir (--set output_dir=runs/NAME)"
        ) from None
    try:
        yield
    finally:
        (folder / LOCK_FILE).unlink(missing_ok=True)
        lock.release()
        if made:
            try:
                folder.rmdir()  # only an empty folder: a run that wrote nothing
            except OSError:
                pass


def _folder_lock(folder: Path, *, record_holder: bool = False) -> FileLock:
    """The non-blocking ``flock`` of ``folder``'s :data:`LOCK_FILE`; with ``record_holder``
    the file is given this process's record (:func:`_this_process`) once it is held."""

    def record(fd: int) -> None:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(_this_process()).encode(), 0)

    return FileLock(folder / LOCK_FILE, blocking=False, thread_local=False,
                    on_acquired=record if record_holder else None)  # fmt: skip


def _acquire(lock: FileLock, folder: Path) -> None:
    """Take ``lock`` of ``folder`` now, or refuse the folder naming its holder.

    Raises:
        RunFolderBusy: another process holds it.
    """
    try:
        lock.acquire()
    except Timeout:
        raise RunFolderBusy(_busy_message(folder, _read_lock(folder / LOCK_FILE) or {})) from None


def _this_process() -> dict:
    """The holder record of this process: pid, host, start time."""
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    return {"pid": os.getpid(), "host": socket.gethostname(), "started": started}


def _read_lock(lock: Path) -> dict | None:
    """The holder recorded in ``lock`` (``{}`` for an unreadable or half-written one), or
    ``None`` when there is no lock."""
    try:
        holder = json.loads(lock.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def check_not_busy(folder: str | Path) -> None:
    """Refuse ``folder`` when another process holds it (:func:`held_run_folder`): the checks of
    a run folder (its checkpoints, its recipe) then name the run that trains there rather
    than what it has not written yet. The lock taken afterwards is what decides.

    Raises:
        RunFolderBusy: another process holds ``folder``, naming it.
    """
    folder = Path(folder)
    if not (folder / LOCK_FILE).exists():
        return
    lock = _folder_lock(folder)
    try:
        _acquire(lock, folder)
    except FileNotFoundError:  # the folder went away meanwhile
        return
    (folder / LOCK_FILE).unlink(missing_ok=True)  # free: leave no lock file behind
    lock.release()


def _busy_message(folder: Path, holder: dict) -> str:
    """The refusal of a run folder that ``holder`` (its lock's record) trains into."""
    who = (
        f"pid {holder.get('pid')} on {holder.get('host')}, since {holder.get('started')}"
        if holder
        else "a process that is starting"
    )
    return (
        f"output_dir {folder} is in use by another hfattn train ({who}; {folder / LOCK_FILE}): "
        "one run trains into a folder at a time. Wait for it to end, or train into another "
        "output_dir (--set output_dir=runs/NAME)"
    )


__all__ = ["RunFolderBusy", "check_not_busy", "held_run_folder"]
