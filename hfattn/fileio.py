"""Atomic file writes (a temporary name in the same folder, then a rename) and the check that
a written file reads back whole."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it is renamed onto ``path``
    (``os.replace``), on error it is removed, so ``path`` is never left half-written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def atomic_write_json(path: str | Path, data) -> None:
    """Write ``data`` as indented JSON to ``path`` atomically."""
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def reads_back(file: Path) -> bool:
    """Whether a file reads back whole: every tensor of a safetensors file, a JSON file, or
    the zip container (with its CRC checksums) of ``torch.save``."""
    import zipfile

    from safetensors import safe_open

    try:
        if file.suffix == ".safetensors":
            with safe_open(str(file), framework="pt") as handle:
                for name in handle.keys():  # noqa: SIM118 (safe_open has no __iter__)
                    handle.get_tensor(name)
        elif file.suffix == ".json":
            json.loads(file.read_text(encoding="utf-8"))
        else:
            with zipfile.ZipFile(file) as archive:
                return archive.testzip() is None
    except Exception:  # noqa: BLE001 (any failure to read back means damaged)
        return False
    return True


__all__ = ["atomic_path", "atomic_write_json", "atomic_write_text", "reads_back"]
