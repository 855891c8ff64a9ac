"""Locate the folders hfattn ships beside its code (``recipes/``, ``model_cards/``, ``spaces/``).

In the source tree they are top-level folders, as users of the Hub world know them; the wheel
carries the same files as package data under ``hfattn/_assets/`` (``setup.py`` maps each folder
there, so there is one copy in the source tree). :func:`asset_dir` finds them either way.
"""

from __future__ import annotations

import os
from pathlib import Path

ASSETS_ENV = "HFATTN_ASSETS_DIR"
"""Environment variable naming a folder that holds ``recipes/``, ``model_cards/`` and
``spaces/`` (overrides the copies that come with the package)."""

ASSET_FOLDERS = ("recipes", "model_cards", "spaces")
"""The top-level folders of the source tree that the wheel carries under ``hfattn/_assets/``
(``setup.py`` names the same: ``tests/recipes/test_shipped.py`` checks that they agree)."""

_PACKAGE_DIR = Path(__file__).resolve().parents[1]


def asset_dir(name: str) -> Path:
    """The folder ``name`` (one of :data:`ASSET_FOLDERS`).

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


__all__ = ["ASSETS_ENV", "ASSET_FOLDERS", "asset_dir"]
