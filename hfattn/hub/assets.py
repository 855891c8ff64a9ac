"""Locate the top-level asset folders (``model_cards/``, ``spaces/``) that publishing reads."""

from __future__ import annotations

import os
from pathlib import Path

ASSETS_ENV = "HFATTN_ASSETS_DIR"
"""Environment variable naming a folder that holds ``model_cards/`` and ``spaces/`` (overrides
the copies next to the package)."""

_PACKAGE_DIR = Path(__file__).resolve().parents[1]


def asset_dir(name: str) -> Path:
    """The folder ``name`` (``"model_cards"`` or ``"spaces"``).

    Looked up in ``$HFATTN_ASSETS_DIR``, then inside the installed package (``hfattn/_assets``),
    then next to the package in a source checkout.

    Raises:
        FileNotFoundError: naming every place looked at.
    """
    candidates = []
    if os.environ.get(ASSETS_ENV):
        candidates.append(Path(os.environ[ASSETS_ENV]) / name)
    candidates += [_PACKAGE_DIR / "_assets" / name, _PACKAGE_DIR.parent / name]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"hfattn asset folder {name!r} not found; looked in: "
        + ", ".join(str(c) for c in candidates)
        + f" (set {ASSETS_ENV} to a folder containing {name}/)"
    )
