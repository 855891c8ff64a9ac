"""Prepared data: a corpus tokenized once, kept on disk, memory-mapped by every later run.

A task prepares its data (tokenizer + token ids of every split, as
:class:`~hfattn.storage.ragged.RaggedIds`) into a folder of the prepared-data cache,
``$HFATTN_PREPARED_DIR``, else ``$HF_HOME/hfattn/prepared``
(:func:`prepared_root`). The folder's name is the task and a fingerprint of everything the
result depends on (:func:`data_key`): the data source (:func:`source_identity`; an embedded
corpus or Hub id by name), the settings of the ``data:`` and ``tokenizer:`` sections that change
the ids, and :data:`FORMAT_VERSION`. A second run, a ``--resume``, or another model with the
same data and tokenizer settings maps the folder instead of preparing it again, and says so in
one line.

A local source file is known by its path, size and modification time and by a digest of a
sample of its bytes (:func:`file_sample`: the first and the last 64 KiB block and 14 evenly
spaced between, 1 MiB read whatever the file's size, a few milliseconds). The sample catches an
edit that keeps the file's size and whose modification time was put back (``cp -p``,
``rsync -t``, ``touch -r``) when the edit touches a sampled block, as any edit of a file of up
to 1 MiB does; an edit of a larger file that lies wholly between sampled blocks, its size and
modification time kept, goes unseen (delete the old preparation, ``hfattn cache remove NAME``,
to prepare such a file anew). The identity of a file holds the sample's digest: data prepared
by an hfattn whose identity held none has another key and is prepared anew once.

A resumed run maps the data its checkpoint was trained on: while its job is built
(:func:`resuming`), a preparation whose key differs from the checkpoint's is refused before
anything is prepared, naming both and what changed, unless ``--allow-data-change`` lets the run
go on with the new data (said in one warning line).

:func:`prepare` builds a folder aside and renames it into place once its ``manifest.json``
is written, under a file lock (``filelock``: the kernel releases it when its holder dies): a
preparation killed at any moment leaves no folder a later run takes for complete, and of
several processes (``torchrun``) or runs asking for the same data one prepares while the others
wait and then map its files. A cache location that cannot be written (read only, no
permission) falls back to a temporary folder, said in one line. The cache's folders are
listed and removed (``hfattn cache``) by :mod:`hfattn.data.prepared_cache`.
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from ..common.launch import process_rank
from ..storage.file_io import atomic_dir, atomic_write_json, unwritable_folder
from .cache import hfattn_cache_dir

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
"""The version of the prepared-data layout; a change of it prepares every corpus anew. (A
change of what the key holds, such as the fields of :func:`source_identity`, changes every key
without it.)"""
MANIFEST_FILE = "manifest.json"
"""Written last into a prepared folder: a folder without it is not prepared data."""
ROOT_VARIABLE = "HFATTN_PREPARED_DIR"
"""The environment variable that moves the prepared-data cache."""
WAIT_NOTICE_S = 1.0
"""A process that waits this long for another's preparation says so."""
MAIN_FIRST_S = 60.0
"""How long a process other than the main one of a launch leaves the preparation to it
(:func:`_take_turn`) before it prepares itself (the main one may have failed)."""
SAMPLE_BLOCKS = 16
"""Blocks of a source file whose bytes are part of its identity (:func:`file_sample`)."""
SAMPLE_BLOCK_BYTES = 64 << 10
"""Bytes of each sampled block (:func:`file_sample`)."""
IDENTITY_FILE_FIELDS = ("name", "size", "mtime_ns", "sample")
"""What the identity of a local source holds of each of its files (:func:`source_identity`)."""


def prepared_root() -> Path:
    """The prepared-data cache: ``$HFATTN_PREPARED_DIR``, else ``$HF_HOME/hfattn/prepared``."""
    if os.environ.get(ROOT_VARIABLE):
        return Path(os.environ[ROOT_VARIABLE]).expanduser()
    return hfattn_cache_dir() / "prepared"


def file_sample(path: Path, size: int) -> str:
    """The BLAKE2b digest (32 hex digits) of a sample of the bytes of the file ``path`` of
    ``size`` bytes: :data:`SAMPLE_BLOCKS` blocks of :data:`SAMPLE_BLOCK_BYTES`, the first, the
    last and the others evenly spaced between (the whole file when it is no larger than they
    are). The bytes read are bounded (1 MiB), whatever the file's size."""
    digest = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as handle:
        if size <= SAMPLE_BLOCKS * SAMPLE_BLOCK_BYTES:
            digest.update(handle.read(SAMPLE_BLOCKS * SAMPLE_BLOCK_BYTES))
            return digest.hexdigest()
        last = size - SAMPLE_BLOCK_BYTES
        for block in range(SAMPLE_BLOCKS):
            handle.seek(block * last // (SAMPLE_BLOCKS - 1))
            digest.update(handle.read(SAMPLE_BLOCK_BYTES))
    return digest.hexdigest()


def source_identity(source: str) -> dict:
    """What identifies ``data.source``'s content without reading it whole: for a local file or
    folder its absolute path and, for every file under it, its :data:`IDENTITY_FILE_FIELDS`
    (``[name, size, modification time in ns, sample digest]``, :func:`file_sample`); for
    anything else (an embedded corpus, a Hub id) its name."""
    path = Path(source).expanduser()
    if not path.exists():
        return {"name": source}
    path = path.resolve()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    stats = []
    for file in files:
        stat = file.stat()
        name = str(file.relative_to(path)) if file != path else ""
        stats.append([name, stat.st_size, stat.st_mtime_ns, file_sample(file, stat.st_size)])
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


def read_manifest(folder: Path) -> dict | None:
    """The manifest of the prepared folder ``folder``, or ``None`` when it has none (a folder
    being prepared, or not prepared data)."""
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
        if read_manifest(folder) is not None or time.monotonic() >= give_way_until:
            return
        lock.release()
        time.sleep(WAIT_NOTICE_S / 10)


class DataChangedError(ValueError):
    """A resumed run's data gives other prepared data than its checkpoint was trained on
    (:func:`resuming`); the message names both folders, the likely cause and the ways on."""


@dataclass(frozen=True)
class TrainedOn:
    """The prepared data that the checkpoint a run resumes from was trained on."""

    name: str
    """The prepared folder's name (:func:`data_key`)."""
    step: int
    """The checkpoint's step."""
    allow_change: bool = False
    """Whether the run may go on with other data (``--allow-data-change``)."""


_TRAINED_ON: ContextVar[TrainedOn | None] = ContextVar("hfattn_trained_on", default=None)
"""The data the run whose job is being built resumes on (:func:`resuming`)."""


@contextmanager
def resuming(trained_on: TrainedOn) -> Iterator[None]:
    """While the block builds the job of a run resumed from a checkpoint trained on
    ``trained_on``, every :func:`prepare` compares the key of the data it is asked for with
    ``trained_on.name`` first, before it reuses or prepares anything (the key is computed from
    the source's identity and the settings, cheaply: no preparation, however large the data):
    other data is refused with :class:`DataChangedError`, or, with
    ``trained_on.allow_change``, said in one warning line. Every process of a launch computes
    the same key, so all of them refuse together."""
    token = _TRAINED_ON.set(trained_on)
    try:
        yield
    finally:
        _TRAINED_ON.reset(token)


def _check_trained_on(name: str, settings: dict) -> None:
    """Refuse the prepared data ``name`` (of ``settings``) in a resumed run whose checkpoint was
    trained on other data (:func:`resuming`), or warn when the change is allowed.

    Raises:
        DataChangedError: naming both folders and what changed (:func:`_what_changed`).
    """
    trained_on = _TRAINED_ON.get()
    if trained_on is None or trained_on.name == name:
        return
    cause, moved = _what_changed(trained_on.name, settings)
    if moved is not None:  # the same files under another path: the same data
        logger.info("--resume: data.source moved from %s to %s, the same files (sizes, "
                    "modification times, sampled bytes): the data the checkpoint was trained "
                    "on", *moved)  # fmt: skip
        return
    was = f"the checkpoint of step {trained_on.step} was trained on prepared data {trained_on.name}"
    if not trained_on.allow_change:
        raise DataChangedError(
            f"--resume: {was} but the recipe's data now gives {name} ({cause}); continue on the "
            "new data with --allow-data-change, or restore the data"
        )
    logger.warning("--allow-data-change: %s; training goes on with %s (%s)", was, name, cause)


def _what_changed(old_name: str, settings: dict) -> tuple[str, tuple[str, str] | None]:
    """What made the data of ``settings`` differ from the prepared data ``old_name``, from the
    manifest of ``old_name`` when the cache still holds it: ``(cause, moved)``. ``cause`` is a
    few words: ``data.source /x/corpus.txt changed since`` (or ``is gone``), hfattn's
    prepared-data format, or the other settings that differ (``its dataset changed since``: a
    Hub dataset's fingerprint; ``its tokenizer ...``: a pretrained tokenizer's). ``moved`` is
    ``(old path, new path)`` when the settings differ by the path of ``data.source`` alone, its
    files the same (names, sizes, modification times, sampled bytes: :func:`source_identity`),
    as when a project folder is moved; else ``None``."""
    old = read_manifest(prepared_root() / old_name)
    if old is None:
        return f"{old_name} is no longer in the prepared-data cache to tell what changed", None
    if old.get("format") != FORMAT_VERSION:
        return "hfattn's prepared-data format changed since", None
    before = old.get("settings") or {}
    now = json.loads(json.dumps(settings, default=str))
    changed = [key for key in sorted(before.keys() | now.keys()) if before.get(key) != now.get(key)]
    was, source = before.get("source") or {}, now.get("source") or {}
    if changed == ["source"] and "path" in was and "path" in source:
        if was.get("files") == source.get("files"):
            return "", (was["path"], source["path"])
    causes = []
    if "source" in changed:
        if "path" in source:
            causes.append(f"data.source {source['path']} changed since")
        else:
            causes.append(f"data.source {was.get('path') or source.get('name')} is gone")
    others = [key for key in changed if key != "source"]
    if others:
        causes.append(f"its {', '.join(others)} changed since")
    return "; ".join(causes) or "its settings changed since", None


def prepare(
    task: str, settings: dict, build: Callable[[Path], dict | None], *, what: str
) -> Prepared:
    """The prepared folder of ``task``'s data under ``settings`` (:func:`data_key`): the one
    in the cache when complete, else one that ``build(folder)`` fills (returning facts for the
    manifest, or ``None``), built aside and renamed into place under the folder's lock.

    ``what`` names the data in the log lines (``"the char corpus of big.txt"``).

    Raises:
        DataChangedError: in a resumed run (:func:`resuming`), ``settings`` give other data than
            its checkpoint was trained on.
    """
    start = time.monotonic()
    name = data_key(task, settings)
    _check_trained_on(name, settings)
    folder = prepared_root() / name
    manifest = read_manifest(folder)
    if manifest is not None:
        return _reused(folder, manifest, start)
    root = _writable_root()
    folder = root / name
    lock = FileLock(lock_path(root, name))
    _take_turn(lock, folder, what)
    try:
        manifest = read_manifest(folder)
        if manifest is not None:
            return _reused(folder, manifest, start)
        # we hold the lock: what lies there is left by a preparation or removal cut short
        for stale in [*aside_folders(root, name), *([folder] if folder.exists() else [])]:
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


def aside_folders(root: Path, name: str) -> list[Path]:
    """The folders of ``name`` being built or removed aside in ``root`` (``.NAME.*.tmp``)."""
    return sorted(root.glob(f".{name}.*.tmp"))


def lock_path(root: Path, name: str) -> Path:
    """The lock file of the prepared data ``name`` in ``root`` (``.NAME.lock``), held while it
    is prepared or removed."""
    return root / f".{name}.lock"


__all__ = [
    "FORMAT_VERSION",
    "IDENTITY_FILE_FIELDS",
    "MANIFEST_FILE",
    "ROOT_VARIABLE",
    "SAMPLE_BLOCKS",
    "SAMPLE_BLOCK_BYTES",
    "DataChangedError",
    "Prepared",
    "TrainedOn",
    "aside_folders",
    "data_key",
    "file_sample",
    "folder_size",
    "human_size",
    "lock_path",
    "prepare",
    "prepared_root",
    "read_manifest",
    "resuming",
    "source_identity",
]
