"""Prepared data: a corpus tokenized once, kept on disk, memory-mapped by every later run.

A task prepares its data (tokenizer + token ids of every split, as
:class:`~hfattn.storage.ragged.RaggedIds`) into a folder of the prepared-data cache,
``$HFATTN_PREPARED_DIR``, else ``$HF_HOME/hfattn/prepared``
(:func:`prepared_root`). The folder's name is the task and a fingerprint of everything the
result depends on (:func:`data_key`): the data source (a file's or folder's path, size and
modification time, :func:`source_identity`; an embedded corpus or Hub id by name), the
settings of the ``data:`` and ``tokenizer:`` sections that change the ids, and
:data:`FORMAT_VERSION`. A second run, a ``--resume``, or another model with the same data and
tokenizer settings maps the folder instead of preparing it again, and says so in one line.

:func:`prepare` builds a folder aside and renames it into place once its ``manifest.json``
is written, under a file lock (``filelock``: the kernel releases it when its holder dies): a
preparation killed at any moment leaves no folder a later run takes for complete, and of
several processes (``torchrun``) or runs asking for the same data one prepares while the others
wait and then map its files. A cache location that cannot be written (read only, no
permission) falls back to a temporary folder, said in one line. :func:`list_prepared` and
:func:`remove_prepared` serve ``hfattn cache``, and :func:`remove_stale` deletes what
preparations killed before they finished left aside.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from ..common.launch import process_rank
from ..storage.file_io import atomic_dir, atomic_write_json, unwritable_folder
from .cache import hfattn_cache_dir

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
"""The version of the prepared-data layout; a change of it prepares every corpus anew."""
MANIFEST_FILE = "manifest.json"
"""Written last into a prepared folder: a folder without it is not prepared data."""
ROOT_VARIABLE = "HFATTN_PREPARED_DIR"
"""The environment variable that moves the prepared-data cache."""
WAIT_NOTICE_S = 1.0
"""A process that waits this long for another's preparation says so."""
MAIN_FIRST_S = 60.0
"""How long a process other than the main one of a launch leaves the preparation to it
(:func:`_take_turn`) before it prepares itself (the main one may have failed)."""


def prepared_root() -> Path:
    """The prepared-data cache: ``$HFATTN_PREPARED_DIR``, else ``$HF_HOME/hfattn/prepared``."""
    if os.environ.get(ROOT_VARIABLE):
        return Path(os.environ[ROOT_VARIABLE]).expanduser()
    return hfattn_cache_dir() / "prepared"


def source_identity(source: str) -> dict:
    """What identifies ``data.source``'s content without reading it: for a local file or
    folder its absolute path and the size and modification time (ns) of every file under it;
    for anything else (an embedded corpus, a Hub id) its name."""
    path = Path(source).expanduser()
    if not path.exists():
        return {"name": source}
    path = path.resolve()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    stats = [
        (str(p.relative_to(path)) if p != path else "", p.stat().st_size, p.stat().st_mtime_ns)
        for p in files
    ]
    return {"path": str(path), "files": stats}


def data_key(task: str, settings: dict) -> str:
    """The folder name of ``task``'s data prepared with ``settings`` (JSON-able: the source's
    :func:`source_identity`, the data and tokenizer settings): ``task-`` and 16 hex digits of
    the SHA-256 of the settings and :data:`FORMAT_VERSION`."""
    text = json.dumps({"format": FORMAT_VERSION, "task": task, **settings}, sort_keys=True,
                      default=str)  # fmt: skip
    return f"{task}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"


def folder_size(folder: Path) -> int:
    """Bytes of the files under ``folder``."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def human_size(size: int) -> str:
    """``size`` bytes as ``12.3 MB``."""
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    raise AssertionError("unreachable")


@dataclass
class Prepared:
    """A prepared folder and how this run came by it."""

    folder: Path
    reused: bool
    """The folder was prepared before (by an earlier run or another process of this one)."""
    seconds: float
    """Seconds this process spent preparing or waiting for the folder."""
    prepared_by: str = ""
    """``host:pid (rank r)`` of the process that prepared it."""

    def record(self) -> dict:
        """What ``eval_results.json`` records of the preparation."""
        return {"folder": str(self.folder), "reused": self.reused,
                "seconds": round(self.seconds, 2), "prepared_by": self.prepared_by}  # fmt: skip


def _complete(folder: Path) -> dict | None:
    try:
        return json.loads((folder / MANIFEST_FILE).read_text())
    except (OSError, ValueError):
        return None


_FALLBACK_ROOTS: dict[Path, Path] = {}
"""The temporary folder this process prepares in, for each cache location it cannot write."""


def _fallback_root(root: Path, reason: str) -> Path:
    if root in _FALLBACK_ROOTS:  # said once per process; later preparations go there too
        return _FALLBACK_ROOTS[root]
    tmp = _FALLBACK_ROOTS[root] = Path(tempfile.mkdtemp(prefix="hfattn-prepared-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    logger.warning(
        "cannot write the prepared-data cache %s (%s): preparing in %s, removed at exit "
        "(set %s to a writable folder to keep it)",
        root, reason, tmp, ROOT_VARIABLE,
    )  # fmt: skip
    return tmp


def _writable_root() -> Path:
    root = prepared_root()
    blocked = unwritable_folder(root / "x")
    if blocked is not None:
        what = "not writable" if blocked.is_dir() else "a file, not a folder"
        return _fallback_root(root, f"{blocked} is {what}")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return _fallback_root(root, exc.strerror or str(exc))
    return root


def _reused(folder: Path, manifest: dict, start: float) -> Prepared:
    logger.info(
        "reusing prepared data %s (%s; prepared by %s)",
        folder, human_size(folder_size(folder)), manifest.get("prepared_by", "?"),
    )  # fmt: skip
    return Prepared(folder, True, time.monotonic() - start, manifest.get("prepared_by", ""))


def _take_turn(lock: FileLock, folder: Path, what: str) -> None:
    """Acquire ``lock`` of ``folder``, saying so once when another process holds it. A process
    other than the main one (rank 0) of a launch gives way for :data:`MAIN_FIRST_S`: a lock it
    gets while the data is not there yet is released again, so that the main process, whose
    messages are the ones printed, prepares, and the others wait and map."""
    give_way_until = time.monotonic() + (MAIN_FIRST_S if process_rank() else 0.0)
    said = False
    while True:
        try:
            lock.acquire(timeout=WAIT_NOTICE_S)
        except Timeout:
            if not said:
                logger.info("waiting for another process preparing %s into %s", what, folder)
                said = True
            continue
        if _complete(folder) is not None or time.monotonic() >= give_way_until:
            return
        lock.release()
        time.sleep(WAIT_NOTICE_S / 10)


def prepare(
    task: str, settings: dict, build: Callable[[Path], dict | None], *, what: str
) -> Prepared:
    """The prepared folder of ``task``'s data under ``settings`` (:func:`data_key`): the one
    in the cache when complete, else one that ``build(folder)`` fills (returning facts for the
    manifest, or ``None``), built aside and renamed into place under the folder's lock.

    ``what`` names the data in the log lines (``"the char corpus of big.txt"``).
    """
    start = time.monotonic()
    name = data_key(task, settings)
    folder = prepared_root() / name
    manifest = _complete(folder)
    if manifest is not None:
        return _reused(folder, manifest, start)
    root = _writable_root()
    folder = root / name
    lock = FileLock(root / f".{name}.lock")
    _take_turn(lock, folder, what)
    try:
        manifest = _complete(folder)
        if manifest is not None:
            return _reused(folder, manifest, start)
        # we hold the lock: what lies there is left by a preparation or removal cut short
        for stale in [*_aside(root, name), *([folder] if folder.exists() else [])]:
            logger.info("removing %s, left by a preparation cut short", stale)
            shutil.rmtree(stale, ignore_errors=True)
        by = f"{socket.gethostname()}:{os.getpid()} (rank {process_rank()})"
        logger.info("preparing %s into %s", what, folder)
        with atomic_dir(folder, keep_existing=True) as tmp:
            facts = build(tmp) or {}
            atomic_write_json(tmp / MANIFEST_FILE, {
                "task": task, "format": FORMAT_VERSION, "what": what, "prepared_by": by,
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "seconds": round(time.monotonic() - start, 2), "settings": settings, **facts,
            })  # fmt: skip
    finally:
        lock.release()
    logger.info(
        "prepared %s in %.1f s: %s (%s)",
        what, time.monotonic() - start, folder, human_size(folder_size(folder)),
    )  # fmt: skip
    return Prepared(folder, False, time.monotonic() - start, by)


def _aside(root: Path, name: str) -> list[Path]:
    """The folders of ``name`` being built or removed aside (``.NAME.*.tmp``)."""
    return sorted(root.glob(f".{name}.*.tmp"))


def list_prepared(root: Path | None = None) -> list[dict]:
    """Every prepared folder of the cache: its ``name``, ``folder``, ``size`` (bytes) and
    manifest facts (``task``, ``what``, ``created``), oldest first. Folders being prepared or
    left by a preparation cut short (hidden, without a manifest) are not listed."""
    root = prepared_root() if root is None else root
    rows = []
    for folder in sorted(root.iterdir()) if root.is_dir() else ():
        manifest = (
            _complete(folder) if folder.is_dir() and not folder.name.startswith(".") else None
        )
        if manifest is not None:
            made = (folder / MANIFEST_FILE).stat().st_mtime_ns
            rows.append((made, {"name": folder.name, "folder": str(folder),
                                "size": folder_size(folder), **manifest}))  # fmt: skip
    return [row for _, row in sorted(rows, key=lambda made_row: made_row[0])]


def remove_prepared(names: Iterable[str], root: Path | None = None) -> list[Path]:
    """Delete the prepared folders ``names`` (each under its lock, so no preparation is cut,
    and renamed aside first, so a removal cut short leaves nothing taken for prepared data);
    the folders removed.

    Raises:
        ValueError: a name is not a prepared folder of the cache (nothing is removed then).
    """
    root = prepared_root() if root is None else root
    known = {row["name"] for row in list_prepared(root)}
    names = list(dict.fromkeys(names))
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(
            f"no prepared data named {unknown[0]!r} in {root} "
            f"(hfattn cache list shows {len(known)} folder(s))"
        )
    removed = []
    for name in names:
        with FileLock(root / f".{name}.lock"):
            aside = Path(tempfile.mkdtemp(prefix=f".{name}.", suffix=".tmp", dir=root))
            os.replace(root / name, aside / name)
            for folder in _aside(root, name):
                shutil.rmtree(folder)
        removed.append(root / name)  # the lock file stays: another process may be waiting on it
    return removed


def stale_folders(root: Path | None = None) -> list[Path]:
    """The folders of the cache set aside by preparations or removals (``.NAME.*.tmp``): under
    way, or left by one cut short (``kill -9``, a crash) that no later preparation of the same
    data has cleared."""
    root = prepared_root() if root is None else root
    return sorted(p for p in root.glob(".*.tmp") if p.is_dir()) if root.is_dir() else []


def remove_stale(root: Path | None = None) -> list[Path]:
    """Delete the :func:`stale_folders` that no process is working on (its data's lock is
    free); the folders removed."""
    root = prepared_root() if root is None else root
    removed = []
    for folder in stale_folders(root):
        lock = FileLock(root / f".{folder.name[1:].split('.')[0]}.lock")
        try:
            lock.acquire(timeout=0)
        except Timeout:  # a preparation under way
            continue
        try:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
        finally:
            lock.release()
    return removed


__all__ = [
    "FORMAT_VERSION",
    "MANIFEST_FILE",
    "ROOT_VARIABLE",
    "Prepared",
    "data_key",
    "folder_size",
    "human_size",
    "list_prepared",
    "prepare",
    "prepared_root",
    "remove_prepared",
    "remove_stale",
    "source_identity",
    "stale_folders",
]
