"""Where hfattn keeps data it converts or downloads: ``$HF_HOME/hfattn`` (default
``~/.cache/huggingface/hfattn``), next to the Hugging Face caches users already know."""

from __future__ import annotations

import os
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


__all__ = ["hf_home", "hfattn_cache_dir"]
