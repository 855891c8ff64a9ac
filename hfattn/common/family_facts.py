"""The torch-free modules of :mod:`hfattn.models` (:mod:`~hfattn.models.families`,
:mod:`~hfattn.models.score_names`), read from their files.

Importing them through their package would import ``hfattn.models`` (torch and every
architecture, seconds); the recipe checks and the Hub card need them before that.
"""

from __future__ import annotations

import functools
import importlib.util
import types
from pathlib import Path

_MODELS_DIR = Path(__file__).parent.parent / "models"


@functools.cache
def load_models_module(name: str) -> types.ModuleType:
    """``hfattn/models/<name>.py``, executed from its file without importing
    ``hfattn.models``; only for the modules there that import nothing but the standard
    library (``families``, ``score_names``)."""
    spec = importlib.util.spec_from_file_location(
        f"hfattn_models_{name}", _MODELS_DIR / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


__all__ = ["load_models_module"]
