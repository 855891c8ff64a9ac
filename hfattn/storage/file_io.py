"""The one home of hfattn's file writes: atomic (a temporary name in the same folder, then a
rename), with the mode a plain ``open`` gives (``0o666 & ~umask``; folders ``0o777 & ~umask``),
not the private ``0o600`` of ``mkstemp`` and of ``safetensors``' own writer; and the check that a
written file reads back whole.

- :func:`atomic_write_text`, :func:`atomic_write_bytes`, :func:`atomic_write_json`: a whole
  file from memory.
- :func:`atomic_path`: a temporary path for a writer that needs one (``safetensors``,
  ``matplotlib``, gensim), renamed onto the target once written.
- :func:`atomic_files`: a temporary folder for a writer of several files into an existing
  folder (``save_pretrained``); each file is renamed into it once all are written.
- :func:`atomic_dir` and :func:`move_dir_into_place`: a whole folder built aside, then renamed
  onto its target (a CTranslate2 export, a converted dataset, a checkpoint).

An ``OSError`` of these writes names the user's file or folder, never the temporary name it
was raised on (``.ct2.74quhve4.tmp``); :func:`unwritable_folder` finds, before any slow work,
the folder that would refuse such a write.

:func:`read_utf8_text` reads a user's text file, naming the line that is not UTF-8;
:func:`read_safetensors` reads a written weights file back, tensor by tensor.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def plain_mode(*, folder: bool = False) -> int:
    """The mode ``open`` (``0o666``) or ``mkdir`` (``0o777``) gives under the current umask."""
    return (0o777 if folder else 0o666) & ~_umask()


def give_plain_modes(path: Path) -> None:
    """Give ``path`` (a file, or a folder and everything under it) :func:`plain_mode`."""
    path = Path(path)
    if not path.is_dir():
        os.chmod(path, plain_mode())
        return
    os.chmod(path, plain_mode(folder=True))
    for root, folders, files in os.walk(path):
        for name in folders:
            os.chmod(os.path.join(root, name), plain_mode(folder=True))
        for name in files:
            os.chmod(os.path.join(root, name), plain_mode())


def unwritable_folder(target: str | Path) -> Path | None:
    """The folder that refuses the atomic write of ``target`` (a file or folder, made with a
    temporary name next to it): the nearest existing folder above ``target`` when this process
    may not create entries in it (no write permission, a read-only file system); ``None``
    when the write can go ahead."""
    folder = Path(os.path.abspath(Path(target).expanduser())).parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return None if os.access(folder, os.W_OK | os.X_OK) else folder


def _users_path(filename, folder: Path, prefix: str, target: Path) -> Path | None:
    """Where ``filename`` (a path an ``OSError`` names) lands: for a temporary entry of
    ``folder`` whose name starts with ``prefix``, or a path under one, the same place under
    ``target``; ``None`` for any other path."""
    if filename is None:
        return None
    path = Path(os.path.abspath(os.fsdecode(filename)))
    folder = Path(os.path.abspath(folder))
    for above in (path, *path.parents):
        if above.parent == folder and above.name.startswith(prefix):
            return target / path.relative_to(above)
    return None


@contextmanager
def _errors_name(target: Path, folder: Path, prefix: str) -> Iterator[None]:
    """Within the block, an ``OSError`` on a temporary entry of ``folder`` (a name starting
    with ``prefix``) is raised again naming ``target``, or the path under it that the entry
    stood for: the user's file or folder, not a name they never gave."""
    try:
        yield
    except OSError as err:
        path = _users_path(err.filename, folder, prefix, Path(target)) or _users_path(
            err.filename2, folder, prefix, Path(target)
        )
        if path is None:
            raise
        raise type(err)(err.errno, err.strerror, str(path)) from err


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it gets :func:`plain_mode` and is
    renamed onto ``path`` (``os.replace``), on error it is removed, so ``path`` is never left
    half-written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _errors_name(path, path.parent, f".{path.name}."):
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix, dir=path.parent)
        os.close(fd)
        try:
            yield Path(tmp)
            os.chmod(tmp, plain_mode())
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, data) -> None:
    """Write ``data`` as indented JSON to ``path`` atomically."""
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


@contextmanager
def atomic_files(folder: str | Path) -> Iterator[Path]:
    """Yield a temporary folder inside ``folder``; on success every file written there gets
    :func:`plain_mode` and is renamed into ``folder`` (a file already there is replaced), on
    error nothing is moved. The temporary folder is removed either way."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with _errors_name(folder, folder, ".staged-"):
        tmp = Path(tempfile.mkdtemp(prefix=".staged-", dir=folder))
        try:
            yield tmp
            give_plain_modes(tmp)
            for file in sorted(p for p in tmp.rglob("*") if p.is_file()):
                target = folder / file.relative_to(tmp)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(file, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def move_dir_into_place(tmp: Path, target: Path, *, keep_existing: bool = False) -> Path:
    """Give the finished folder ``tmp`` and its files :func:`plain_mode` and rename it onto
    ``target``. A folder already at ``target`` is replaced (moved aside first, deleted once
    ``tmp`` is in place, put back if the rename fails) or, with ``keep_existing``, kept (another
    process that built the same folder won the race) and ``tmp`` is deleted."""
    tmp, target = Path(tmp), Path(target)
    give_plain_modes(tmp)
    if keep_existing or not target.exists():
        try:
            os.replace(tmp, target)
        except OSError:
            if not (keep_existing and target.is_dir()):  # not a lost race: a real error
                raise
            shutil.rmtree(tmp, ignore_errors=True)
        return target
    aside = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent))
    try:
        os.replace(target, aside / target.name)
        try:
            os.replace(tmp, target)
        except OSError:
            os.replace(aside / target.name, target)  # put the previous folder back
            raise
    finally:
        shutil.rmtree(aside, ignore_errors=True)
    return target


@contextmanager
def atomic_dir(target: str | Path, *, keep_existing: bool = False) -> Iterator[Path]:
    """Yield a fresh temporary folder next to ``target``; on success it is put in ``target``'s
    place (:func:`move_dir_into_place`), on error it is removed and ``target`` is left as it
    was."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _errors_name(target, target.parent, f".{target.name}."):
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
        try:
            yield tmp
            move_dir_into_place(tmp, target, keep_existing=keep_existing)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def read_utf8_text(path: str | Path) -> str:
    """The text of the UTF-8 file ``path``.

    Raises:
        ValueError: the file is not UTF-8, naming it, the line and the column of the first
            byte that is not, and how to convert it.
    """
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        byte = data[err.start : err.start + 1].hex()
        raise ValueError(
            f"{path}, line {line:,}, column {column}: byte 0x{byte} is not UTF-8; text files "
            f"must be UTF-8 (convert it, e.g. `iconv -f latin1 -t utf-8 {path} > new.txt`)"
        ) from None


def read_safetensors(file: Path) -> Iterator[tuple[str, torch.Tensor]]:
    """``(name, tensor)`` for every tensor of the safetensors ``file``, each read whole: the one
    read-back of written weights (:func:`reads_back`, and the weights check before a push).

    Raises:
        Exception: what ``safetensors`` raises for a truncated or corrupt file (its own error
            types), when the file is opened or a tensor is read.
    """
    from safetensors import safe_open

    with safe_open(str(file), framework="pt") as handle:
        for name in handle.keys():  # noqa: SIM118 (safe_open has no __iter__)
            yield name, handle.get_tensor(name)


def reads_back(file: Path) -> bool:
    """Whether a file reads back whole: every tensor of a safetensors file
    (:func:`read_safetensors`), a JSON file, or the zip container (with its CRC checksums) of
    ``torch.save``."""
    import zipfile

    try:
        if file.suffix == ".safetensors":
            for _ in read_safetensors(file):
                pass
        elif file.suffix == ".json":
            json.loads(file.read_text(encoding="utf-8"))
        else:
            with zipfile.ZipFile(file) as archive:
                return archive.testzip() is None
    except Exception:  # noqa: BLE001 (any failure to read back means damaged)
        return False
    return True


__all__ = [
    "atomic_dir",
    "atomic_files",
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "give_plain_modes",
    "move_dir_into_place",
    "plain_mode",
    "read_safetensors",
    "read_utf8_text",
    "reads_back",
    "unwritable_folder",
]
