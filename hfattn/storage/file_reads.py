"""Files read back: a user's text file as UTF-8 and a written weights file.

- :func:`read_utf8_text` reads a user's text file, naming the line that is not UTF-8
  (:func:`not_utf8_error`); :func:`iter_utf8_text` reads a large one a chunk at a time
  (:data:`READ_CHUNK_BYTES`).
- :func:`read_safetensors` reads a written weights file back, tensor by tensor, and
  :func:`reads_back` checks that a written file reads back whole (the writes themselves are
  :mod:`hfattn.storage.file_io`'s).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


READ_CHUNK_BYTES = 16 << 20
"""Bytes read at a time from a large text file (:func:`iter_utf8_text`)."""


def read_utf8_text(path: str | Path) -> str:
    """The text of the UTF-8 file ``path``.

    Raises:
        ValueError: the file is not UTF-8, naming it, the line and the column of the first
            byte that is not, and how to convert it (:func:`not_utf8_error`).
    """
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise not_utf8_error(path, err.start) from None


def iter_utf8_text(
    path: str | Path, start: int = 0, stop: int | None = None, chunk_bytes: int = READ_CHUNK_BYTES
) -> Iterator[str]:
    """The text of bytes ``start`` to ``stop`` (the end of the file by default) of the UTF-8
    file ``path``, in pieces decoded from ``chunk_bytes`` bytes at a time: memory bounded by a
    chunk whatever the file's size. ``start`` and ``stop`` must fall between characters; a
    character cut by a chunk's end is completed by the next chunk (an incremental decoder).

    Raises:
        ValueError: the bytes are not UTF-8 (:func:`not_utf8_error`: the file, line, column).
    """
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")()
    stop = Path(path).stat().st_size if stop is None else stop
    with open(path, "rb") as handle:
        handle.seek(start)
        position = start  # of the first byte not read yet
        while position < stop:
            chunk = handle.read(min(chunk_bytes, stop - position))
            if not chunk:
                break
            pending = len(decoder.getstate()[0])
            try:
                text = decoder.decode(chunk)
            except UnicodeDecodeError as err:
                raise not_utf8_error(path, position - pending + err.start) from None
            position += len(chunk)
            if text:
                yield text
        if decoder.getstate()[0]:  # a character cut off at ``stop``
            raise not_utf8_error(path, position - len(decoder.getstate()[0]))


def not_utf8_error(path: str | Path, position: int) -> ValueError:
    """The error of a text file whose byte ``position`` is not UTF-8: one line naming the file,
    the line and column of that byte (counted by reading the file up to it, a chunk at a time)
    and how to convert the file."""
    line, line_start, offset = 1, 0, 0
    with open(path, "rb") as handle:
        while offset < position:
            chunk = handle.read(min(READ_CHUNK_BYTES, position - offset))
            if not chunk:
                break
            line += chunk.count(b"\n")
            last = chunk.rfind(b"\n")
            line_start = offset + last + 1 if last >= 0 else line_start
            offset += len(chunk)
        handle.seek(position)
        byte = handle.read(1).hex()
    return ValueError(
        f"{path}, line {line:,}, column {position - line_start + 1}: byte 0x{byte} is not "
        f"UTF-8; text files must be UTF-8 (convert it, e.g. `iconv -f latin1 -t utf-8 {path} > "
        "new.txt`)"
    )


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
    "READ_CHUNK_BYTES",
    "iter_utf8_text",
    "not_utf8_error",
    "read_safetensors",
    "read_utf8_text",
    "reads_back",
]
