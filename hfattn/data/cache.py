"""Where hfattn keeps data it converts or downloads: ``$HF_HOME/hfattn`` (default
``~/.cache/huggingface/hfattn``), next to the Hugging Face caches users already know."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def hf_home() -> Path:
    """The Hugging Face home folder: ``$HF_HOME``, else ``$XDG_CACHE_HOME/huggingface``, else
    ``~/.cache/huggingface`` (read at call time, so tests can point it elsewhere)."""
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(xdg).expanduser() / "huggingface"


def hfattn_cache_dir() -> Path:
    """``hf_home() / "hfattn"``: the folder for hfattn's converted datasets and downloads."""
    return hf_home() / "hfattn"


def build_dir_atomically(target: Path, build: Callable[[Path], None]) -> Path:
    """Create the folder ``target`` by calling ``build(tmp)`` on a fresh temporary folder next
    to it, then renaming it onto ``target``; on error the temporary folder is removed, so
    ``target`` is either complete or absent. If another process finished ``target`` first,
    its copy is kept."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        build(tmp)
        try:
            os.replace(tmp, target)
        except OSError:
            if not target.is_dir():  # not a lost race: a real error
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


__all__ = ["build_dir_atomically", "hf_home", "hfattn_cache_dir"]
