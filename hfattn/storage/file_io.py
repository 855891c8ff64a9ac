"""The one home of hfattn's file writes: atomic (a temporary name in the same folder, then a
rename), with the mode a plain ``open`` gives (``0o666 & ~umask``; folders ``0o777 & ~umask``),
not the private ``0o600`` of ``mkstemp`` and of ``safetensors``' own writer. (Reading files
back, a user's text and written weights, is :mod:`hfattn.storage.file_reads`.)

- :func:`atomic_write_text`, :func:`atomic_write_bytes`, :func:`atomic_write_json`: a whole
  file from memory.
- :func:`atomic_path`: a temporary path for a writer that needs one (``safetensors``,
  ``matplotlib``, gensim), renamed onto the target once written.
- :func:`atomic_files`: a temporary folder for a writer of several files into an existing
  folder (``save_pretrained``); each file is renamed into it once all are written.
- :func:`atomic_dir` and :func:`move_dir_into_place`: a whole folder built aside, then renamed
  onto its target (a CTranslate2 export, a converted dataset, a checkpoint).
- :func:`append_text`: a line added to a log; a write cut short is cut back off.

Every file and folder is flushed to the disk (``fsync``) before the rename that publishes it,
and the folder holding the rename after it (:func:`fsync_path`): a power cut leaves the old
file or the whole new one.

A write that fails for lack of space, permission or a file-size limit raises
:class:`FileWriteError` naming the file as the user knows it (not its temporary name) and the
cause, whichever library wrote it (:func:`write_failure`: ``torch.save`` and ``safetensors``
report a failed write in their own errors); the temporary file is removed.

An ``OSError`` of these writes names the user's file or folder, never the temporary name it
was raised on (``.ct2.74quhve4.tmp``); :func:`unwritable_folder` finds, before any slow work,
the folder that would refuse such a write.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class FileWriteError(OSError):
    """A file could not be written: no space left, no permission, a file-size limit, a
    read-only or lost mount. ``filename`` is the file as the user knows it (the target of an
    atomic write, not its temporary name), ``strerror`` the cause; ``str()`` is
    ``cannot write FILE (CAUSE)``."""

    def __str__(self) -> str:
        return f"cannot write {self.filename} ({self.strerror})"


TORCH_WRITE_FAILURES = ("PytorchStreamWriter failed", "inline_container.cc", "file write failed")
"""Words of the ``RuntimeError`` that ``torch.save`` raises when its zip writer cannot write
(``[enforce fail at inline_container.cc:672] . unexpected pos 5154816 vs 5154704``: the file
is shorter than what was written to it). It says neither the file nor why."""
_OS_ERROR_CODE = re.compile(r"\(os error (\d+)\)")
"""The ``(os error 28)`` in the message of a failed write of ``safetensors`` (Rust)."""
STAGED_PREFIX = ".staged-"
"""The name's start of the temporary folder in which :func:`atomic_files` writes its files."""
NEARLY_FULL_BYTES = 1 << 20
"""Free bytes below which a write that stopped short is put down to a full disk."""


def _cause_unsaid(near: Path) -> tuple[int, str]:
    """The likely ``(errno, cause)`` of a write near ``near`` that stopped short without saying
    why (``torch.save``): a full disk, else the file-size limit (``ulimit -f``) when one is set,
    else an input/output error."""
    import resource

    folder = next((p for p in (near, *near.parents) if p.exists()), Path("."))
    if shutil.disk_usage(folder).free < NEARLY_FULL_BYTES:
        return errno.ENOSPC, os.strerror(errno.ENOSPC)
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY:
        return errno.EFBIG, f"{os.strerror(errno.EFBIG)}: the file-size limit is {limit:,} bytes"
    return errno.EIO, "the write stopped short"


def write_failure(exc: BaseException, file: str | Path) -> FileWriteError | None:
    """The :class:`FileWriteError` of ``file`` that ``exc``, raised while writing it, amounts
    to, or ``None`` when ``exc`` is not a failed write (a bug, an interrupt, a lost network
    connection): an ``OSError`` with an ``errno`` (its ``strerror``), the ``RuntimeError`` of
    ``torch.save``'s zip writer (:data:`TORCH_WRITE_FAILURES`; its cause found by
    :func:`_cause_unsaid`) and the ``SafetensorError`` of a failed write (its ``os error``
    code)."""
    file = Path(file)
    if isinstance(exc, FileWriteError):
        return exc
    if isinstance(exc, OSError):
        if exc.errno is None or isinstance(exc, (ConnectionError, TimeoutError)):
            return None  # a download's error (URLError), not the file's
        return FileWriteError(exc.errno, exc.strerror or os.strerror(exc.errno), str(file))
    message = str(exc)
    if isinstance(exc, RuntimeError) and any(w in message for w in TORCH_WRITE_FAILURES):
        return FileWriteError(*_cause_unsaid(file), str(file))
    code = _OS_ERROR_CODE.search(message)
    if type(exc).__name__ == "SafetensorError" and code is not None:
        return FileWriteError(int(code[1]), os.strerror(int(code[1])), str(file))
    return None


WRITERS = {("torch.serialization", "save"): "f", ("safetensors.torch", "save_file"): "filename"}
"""The writers whose errors do not name their file: ``(module, function)`` and the argument
that holds the path (``torch.save(obj, f)``, ``safetensors.torch.save_file(tensors,
filename)``)."""


def _writer_path(exc: BaseException) -> str | None:
    """The path given to the innermost :data:`WRITERS` call in the traceback of ``exc``."""
    path, frame = None, exc.__traceback__
    while frame is not None:
        code, scope = frame.tb_frame.f_code, frame.tb_frame.f_globals
        argument = WRITERS.get((scope.get("__name__"), code.co_name))
        if argument is not None:
            path = frame.tb_frame.f_locals.get(argument, path)
        frame = frame.tb_next
    return path


def _failed_file(exc: BaseException, target: Path, staged: Path | None) -> Path | None:
    """The file that a failed write of ``target`` (its files written in the temporary folder
    ``staged``, when given) is about, named by its place under ``target``: the file the error
    names (an ``OSError``'s ``filename``, or ``filename2``, the destination of a copy; else
    the path given to ``torch.save`` or ``safetensors``), else ``target``. ``None`` when the
    error names a file that is none of these (a read of another file failed, not the write)."""
    names = [getattr(exc, "filename", None), getattr(exc, "filename2", None)]
    names = [Path(os.path.abspath(n)) for n in names if isinstance(n, (str, os.PathLike))]
    if not names:
        writer = _writer_path(exc)
        if not isinstance(writer, (str, os.PathLike)):
            return target
        names = [Path(os.path.abspath(writer))]
    target, staged = Path(os.path.abspath(target)), staged and Path(os.path.abspath(staged))
    for named in reversed(names):  # a copy's destination first
        if staged is not None and named.is_relative_to(staged):
            return target / named.relative_to(staged)
        if named.parent == target and named.name.startswith(STAGED_PREFIX):
            return target  # the temporary folder of its files (atomic_files)
        if named.is_relative_to(target) or named in target.parents:
            return named  # the file, or a folder that could not be made
        if named.parent == target.parent and named.name.startswith(f".{target.name}."):
            return target  # its temporary name
    return None


@contextmanager
def writing(target: str | Path, staged: Path | None = None) -> Iterator[None]:
    """Turn a failed write in the block into the :class:`FileWriteError`
    (:func:`write_failure`) of ``target``, or, when the block writes the files of ``target``
    in the temporary folder ``staged``, of the file that failed, named by its place under
    ``target``. Any other error passes unchanged, an ``OSError`` about another file too (a
    read)."""
    target = Path(target)
    try:
        yield
    except Exception as exc:
        file = _failed_file(exc, target, staged)
        failure = None if file is None else write_failure(exc, file)
        if failure is None:
            raise
        raise failure from exc


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


def fsync_path(path: Path) -> None:
    """Flush ``path`` (a file, or a folder's entries) to the disk: before a rename makes a
    written file visible under its real name, and after it, for the folder that holds the
    rename, so that a power cut leaves the old file or the whole new one, never a renamed but
    empty one."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(path: Path) -> None:
    """:func:`fsync_path` every file and folder under ``path`` (files first), and ``path``."""
    for root, folders, files in os.walk(path, topdown=False):
        for name in files:
            fsync_path(Path(root) / name)
        for name in folders:
            fsync_path(Path(root) / name)
    fsync_path(path)


def unwritable_folder(target: str | Path) -> Path | None:
    """The folder that refuses the atomic write of ``target`` (a file or folder, made with a
    temporary name next to it): the nearest existing folder above ``target`` when this process
    may not create entries in it (no write permission, a read-only file system); ``None``
    when the write can go ahead."""
    folder = Path(os.path.abspath(Path(target).expanduser())).parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return None if os.access(folder, os.W_OK | os.X_OK) else folder


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it gets :func:`plain_mode` and is
    renamed onto ``path`` (``os.replace``), on error it is removed, so ``path`` is never left
    half-written.

    Raises:
        FileWriteError: the write failed (:func:`write_failure`), naming ``path``.
    """
    path = Path(path)
    tmp = None
    try:
        with writing(path):
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix, dir=path.parent)
            os.close(fd)
            yield Path(tmp)
            os.chmod(tmp, plain_mode())
            fsync_path(Path(tmp))
            os.replace(tmp, path)
            fsync_path(path.parent)
    finally:
        if tmp is not None and os.path.exists(tmp):
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
    error nothing is moved. The temporary folder is removed either way.

    Raises:
        FileWriteError: a write failed (:func:`write_failure`), naming the file in ``folder``.
    """
    folder = Path(folder)
    with writing(folder):
        folder.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=STAGED_PREFIX, dir=folder))
    try:
        with writing(folder, staged=tmp):
            yield tmp
            give_plain_modes(tmp)
            fsync_tree(tmp)
            for file in sorted(p for p in tmp.rglob("*") if p.is_file()):
                target = folder / file.relative_to(tmp)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(file, target)
                fsync_path(target.parent)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def move_dir_into_place(tmp: Path, target: Path, *, keep_existing: bool = False) -> Path:
    """Give the finished folder ``tmp`` and its files :func:`plain_mode` and rename it onto
    ``target``. A folder already at ``target`` is replaced (moved aside first, deleted once
    ``tmp`` is in place, put back if the rename fails) or, with ``keep_existing``, kept (another
    process that built the same folder won the race) and ``tmp`` is deleted."""
    tmp, target = Path(tmp), Path(target)
    give_plain_modes(tmp)
    fsync_tree(tmp)
    if keep_existing or not target.exists():
        try:
            os.replace(tmp, target)
        except OSError:
            if not (keep_existing and target.is_dir()):  # not a lost race: a real error
                raise
            shutil.rmtree(tmp, ignore_errors=True)
        fsync_path(target.parent)
        return target
    aside = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent))
    try:
        os.replace(target, aside / target.name)
        try:
            os.replace(tmp, target)
        except OSError:
            os.replace(aside / target.name, target)  # put the previous folder back
            raise
        fsync_path(target.parent)
    finally:
        shutil.rmtree(aside, ignore_errors=True)
    return target


@contextmanager
def atomic_dir(target: str | Path, *, keep_existing: bool = False) -> Iterator[Path]:
    """Yield a fresh temporary folder next to ``target``; on success it is put in ``target``'s
    place (:func:`move_dir_into_place`), on error it is removed and ``target`` is left as it
    was.

    Raises:
        FileWriteError: a write failed (:func:`write_failure`), naming the file under ``target``.
    """
    target = Path(target)
    with writing(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        with writing(target, staged=tmp):
            yield tmp
            move_dir_into_place(tmp, target, keep_existing=keep_existing)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def append_text(path: str | Path, text: str) -> None:
    """Add ``text`` (UTF-8) to the end of ``path`` (a log: created when missing); a write cut
    short (a full disk) is cut back off, so the file never ends in half a record.

    Raises:
        FileWriteError: the write failed (:func:`write_failure`), naming ``path``.
    """
    data = memoryview(text.encode("utf-8"))
    with writing(path):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            length = os.fstat(fd).st_size
            try:
                while data:
                    data = data[os.write(fd, data) :]
            except BaseException:
                os.ftruncate(fd, length)
                raise
        finally:
            os.close(fd)


__all__ = [
    "FileWriteError",
    "append_text",
    "atomic_dir",
    "atomic_files",
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "fsync_path",
    "fsync_tree",
    "give_plain_modes",
    "move_dir_into_place",
    "plain_mode",
    "unwritable_folder",
    "write_failure",
    "writing",
]
