"""A tiny training run built once per test session, even when several test files (and
``pytest -n`` workers) need the same one: ``make test`` hands whole files to its workers, so a
module fixture trains its run again in every file that asks for it."""

from __future__ import annotations

import fcntl
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def session_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The temporary folder of this test session that all its ``pytest-xdist`` workers share
    (each worker's own base folder is ``<session folder>/popen-gwN``), or the session's base
    folder when there are no workers."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if base.name.startswith("popen-gw") else base


def shared_run(
    tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], Path]
) -> Path:
    """The run folder ``build(folder)`` makes, built by the first caller of this session under
    a file lock and reused as it is by the others (the ones waiting too): callers must not
    modify it (copy it first)."""
    root = session_root(tmp_path_factory) / "shared_runs"
    root.mkdir(exist_ok=True)
    folder, done = root / name, root / f"{name}.built"  # written once the folder is complete
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        if not done.is_file():
            shutil.rmtree(folder, ignore_errors=True)  # what a failed build left
            built = build(folder)
            assert built == folder, (built, folder)
            done.touch()
    return folder
