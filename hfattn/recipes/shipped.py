"""The recipes that come with hfattn, by name: ``hfattn train char_rnn_shakespeare``.

A recipe argument (``train``, ``prepare``, ``baseline``, ``sweep``, and ``load_recipe`` in code)
is a path to a YAML file or the name of a shipped recipe: a file of ``recipes/`` (the wheel's
``hfattn/_assets/recipes/``, found by :func:`hfattn.common.assets.asset_dir`), with or without
its ``.yaml``. :func:`resolve_recipe` decides, once, for every command: parsing calls it
(:mod:`hfattn.recipes.parsing`). A file of that name in the current folder wins over the shipped
recipe, and hfattn says so in one line. The search spaces of ``hfattn sweep --space`` are named
the same way, among ``recipes/sweeps/`` (:data:`SWEEPS`).

``hfattn recipes`` lists them (:func:`shipped_recipes`, :func:`recipe_description`).
"""

from __future__ import annotations

import logging
from pathlib import Path

from ..common.assets import asset_dir
from ..common.field_checks import did_you_mean

logger = logging.getLogger(__name__)

SUFFIX = ".yaml"
"""The suffix of a recipe file; a name may leave it out."""
SWEEPS = "sweeps"
"""The sub-folder of ``recipes/`` holding the search spaces of ``hfattn sweep --space``."""

_noted: set[tuple[str, str]] = set()
"""``(name, cwd)`` whose shadowing by a local file was said already (the outline and the full
check of one command resolve the same name)."""


def shipped_recipes(folder: str = "") -> dict[str, Path]:
    """``{name: path}`` of each shipped recipe, sorted by name (``folder`` :data:`SWEEPS`: the
    search spaces); empty when hfattn finds no ``recipes/`` folder."""
    try:
        root = asset_dir("recipes") / folder
    except FileNotFoundError:
        return {}
    return {path.stem: path for path in sorted(root.glob(f"*{SUFFIX}"))}


def recipe_description(path: Path) -> str:
    """The first line of the comment that opens the recipe file ``path`` (``""`` without one)."""
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.strip():
            return line.strip().lstrip("#").strip() if line.lstrip().startswith("#") else ""
    return ""


def resolve_recipe(given: str | Path, *, folder: str = "", what: str = "recipe file") -> Path:
    """The file that the recipe argument ``given`` names: ``given`` itself when it is a file;
    for a bare name (no folder part; ``.yaml`` optional), ``./<name>.yaml`` when it exists, else
    the shipped recipe of that name (``folder`` :data:`SWEEPS`: a search space). A local file
    that hides a shipped recipe is reported, once, at INFO.

    Raises:
        FileNotFoundError: ``recipe file not found: x (nor the name of a shipped one:
            `hfattn recipes` lists them; did you mean 'char_rnn_shakespeare'?)``.
    """
    path = Path(given)
    bare = path.parent == Path(".") and path.name not in ("", ".", "..")
    if not bare:
        if path.is_file():
            return path
        raise FileNotFoundError(f"{what} not found: {given}")
    name = path.name.removesuffix(SUFFIX)
    shipped = shipped_recipes(folder)
    local = next((p for p in (path, Path(f"{name}{SUFFIX}")) if p.is_file()), None)
    if local is not None:
        hidden = name in shipped and local.resolve() != shipped[name].resolve()
        if hidden and (name, str(Path.cwd())) not in _noted:
            _noted.add((name, str(Path.cwd())))
            logger.info("%s: the file of the current folder, not the shipped %s", local, name)
        return local
    if name in shipped:
        return shipped[name]
    raise FileNotFoundError(
        f"{what} not found: {given} (nor the name of a shipped one: `hfattn recipes` lists "
        f"them{did_you_mean(name, shipped)})"
    )


__all__ = ["SUFFIX", "SWEEPS", "recipe_description", "resolve_recipe", "shipped_recipes"]
