"""The folders of the prepared-data cache (:mod:`hfattn.data.prepared`), listed and removed:
what ``hfattn cache list`` and ``hfattn cache remove`` do.

:func:`list_prepared` lists every prepared folder with its manifest's facts and marks the ones
no recipe would reuse (:func:`stale_reason`: a local source that changed or is gone since it was
prepared); :func:`remove_prepared` deletes prepared folders by name, and :func:`remove_aside`
what preparations killed before they finished left aside. A removal leaves no lock file behind
(:func:`held_for_removal`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from .prepared import (
    FORMAT_VERSION,
    IDENTITY_FILE_FIELDS,
    MANIFEST_FILE,
    aside_folders,
    folder_size,
    lock_path,
    prepared_root,
    read_manifest,
    source_identity,
)


def local_sources(settings) -> list[dict]:
    """The identities of local files or folders (:func:`~hfattn.data.prepared.source_identity`
    with a ``path``) among the recorded ``settings`` of a preparation, at any depth (the
    ``data.source``, a pretrained model's folder)."""
    if isinstance(settings, dict):
        if isinstance(settings.get("path"), str) and isinstance(settings.get("files"), list):
            return [settings]
        return [found for value in settings.values() for found in local_sources(value)]
    if isinstance(settings, list):
        return [found for value in settings for found in local_sources(value)]
    return []


def stale_reason(manifest: dict) -> str | None:
    """Why no recipe would reuse the prepared data of ``manifest``, or ``None`` when one would
    as far as can be told (a Hub id or an embedded corpus is known by its name alone):
    ``"source missing"`` (a local file or folder recorded in its settings is gone),
    ``"source changed"`` (its identity is no longer the recorded one: the key a recipe gives
    now differs) or ``"made by an older hfattn"`` (another prepared-data format, or a source
    identity without the sample of its bytes). Reads a bounded sample of each local source
    file (:func:`~hfattn.data.prepared.file_sample`)."""
    if manifest.get("format") != FORMAT_VERSION:
        return "made by an older hfattn"
    for recorded in local_sources(manifest.get("settings")):
        if any(len(entry) != len(IDENTITY_FILE_FIELDS) for entry in recorded["files"]):
            return "made by an older hfattn"
        if not Path(recorded["path"]).exists():
            return "source missing"
        if source_identity(recorded["path"]) != recorded:
            return "source changed"
    return None


def list_prepared(root: Path | None = None) -> list[dict]:
    """Every prepared folder of the cache: its ``name``, ``folder``, ``size`` (bytes), manifest
    facts (``task``, ``what``, ``created``) and ``stale`` (:func:`stale_reason`, ``None`` for
    data a recipe would reuse), oldest first. Folders being prepared or left by a preparation
    cut short (hidden, without a manifest) are not listed."""
    root = prepared_root() if root is None else root
    rows = []
    for folder in sorted(root.iterdir()) if root.is_dir() else ():
        manifest = (
            read_manifest(folder) if folder.is_dir() and not folder.name.startswith(".") else None
        )
        if manifest is not None:
            made = (folder / MANIFEST_FILE).stat().st_mtime_ns
            rows.append((made, {"name": folder.name, "folder": str(folder),
                                "size": folder_size(folder), **manifest,
                                "stale": stale_reason(manifest)}))  # fmt: skip
    return [row for _, row in sorted(rows, key=lambda made_row: made_row[0])]


@contextmanager
def held_for_removal(root: Path, name: str, *, wait: bool = True) -> Iterator[None]:
    """Hold the lock of the prepared data ``name`` in ``root`` while the block removes what
    the cache has of it, then delete the lock file (:func:`~hfattn.data.prepared.lock_path`)
    while still holding it: a removal leaves no ``.NAME.lock`` behind. Without ``wait``, a lock
    another process holds is not waited for.

    Deleting a held lock file is safe for a process waiting on it (a preparation of the same
    data): it waits on the file it opened, and once this process releases that file's lock,
    ``filelock`` (on Unix) finds the file it locked unlinked (``st_nlink == 0``) and locks the
    path anew, a new file: no process ever prepares under a lock that another cannot find, so
    two preparations of one name never overlap. A process that opens the path after the
    deletion makes that new file and may hold it before this one lets go of the old: the
    deletion is the last step of the removal, so it finds the removal done and prepares under
    its own lock. A block that fails leaves the lock file (with the data it did not remove).

    Raises:
        filelock.Timeout: without ``wait``, another process holds the lock (the block does not
            run).
    """
    path = lock_path(root, name)
    with FileLock(path, timeout=-1 if wait else 0):
        yield
        path.unlink(missing_ok=True)


def remove_prepared(names: Iterable[str], root: Path | None = None) -> list[Path]:
    """Delete the prepared folders ``names`` (each under its lock, so no preparation is cut,
    and renamed aside first, so a removal cut short leaves nothing taken for prepared data),
    and their lock files (:func:`held_for_removal`); the folders removed.

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
        with held_for_removal(root, name):
            aside = Path(tempfile.mkdtemp(prefix=f".{name}.", suffix=".tmp", dir=root))
            os.replace(root / name, aside / name)
            for folder in aside_folders(root, name):
                shutil.rmtree(folder)
        removed.append(root / name)
    return removed


def folders_aside(root: Path | None = None) -> list[Path]:
    """The folders of the cache set aside by preparations or removals (``.NAME.*.tmp``): under
    way, or left by one cut short (``kill -9``, a crash) that no later preparation of the same
    data has cleared."""
    root = prepared_root() if root is None else root
    return sorted(p for p in root.glob(".*.tmp") if p.is_dir()) if root.is_dir() else []


def remove_aside(root: Path | None = None) -> list[Path]:
    """Delete the :func:`folders_aside` that no process is working on (its data's lock is
    free), and the free lock files of data the cache does not hold (left by a preparation that
    failed or by data removed before); the folders removed."""
    root = prepared_root() if root is None else root
    removed = []
    for folder in folders_aside(root):
        try:
            with held_for_removal(root, folder.name[1:].split(".")[0], wait=False):
                shutil.rmtree(folder, ignore_errors=True)
        except Timeout:  # a preparation under way
            continue
        removed.append(folder)
    for lock in sorted(root.glob(".*.lock")) if root.is_dir() else ():
        name = lock.name[1 : -len(".lock")]
        if read_manifest(root / name) is None:
            try:
                with held_for_removal(root, name, wait=False):
                    pass
            except Timeout:  # a preparation under way
                continue
    return removed


__all__ = [
    "folders_aside",
    "held_for_removal",
    "list_prepared",
    "local_sources",
    "remove_aside",
    "remove_prepared",
    "stale_reason",
]
