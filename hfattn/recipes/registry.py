"""The tasks a recipe's ``task:`` may name, registered by the tasks themselves.

Each task's light ``recipe`` module (``hfattn/tasks/<task>/recipe.py``: no torch) ends with
:func:`register_task_recipe`, handing this layer its recipe class, the metrics its evaluation
reports and its check of ``data.source``. Registration points downward: parsing a recipe never
imports a task. Importing :mod:`hfattn.tasks` registers every task of hfattn (the command line,
the run orchestration and the Hub code do so before they parse a recipe).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..common.field_checks import RecipeError


@dataclass(frozen=True)
class TaskRecipe:
    """What parsing and checking a recipe needs of one task."""

    name: str
    """The recipe's ``task:`` value (``translation``)."""
    recipe_class: type
    """Its recipe dataclass, a subclass of :class:`~hfattn.recipes.schema.RecipeBase`."""
    reported_metrics: tuple[str, ...]
    """The metrics its evaluation reports (what ``training.metric_for_best_model`` may name)."""
    check_data_source: Callable[[str], None]
    """Raises ``ValueError`` / ``FileNotFoundError`` when ``data.source`` names no dataset the
    task can load; reads no data."""
    embedded_sources: tuple[str, ...] = ()
    """The ``data.source`` names of its embedded datasets (never taken for a local path)."""


_TASK_RECIPES: dict[str, TaskRecipe] = {}
"""``task:`` name → its :class:`TaskRecipe`, in registration order."""


def register_task_recipe(
    name: str,
    recipe_class: type,
    reported_metrics: tuple[str, ...],
    check_data_source: Callable[[str], None],
    embedded_sources: Iterable[str] = (),
) -> TaskRecipe:
    """Register the task ``name`` (called once, by the task's ``recipe`` module) and return its
    :class:`TaskRecipe` (``embedded_sources``: the names of its embedded datasets).

    Raises:
        ValueError: another recipe class is registered under ``name``.
    """
    registered = TaskRecipe(name, recipe_class, tuple(reported_metrics), check_data_source,
                            tuple(embedded_sources))  # fmt: skip
    known = _TASK_RECIPES.setdefault(name, registered)
    if known.recipe_class is not recipe_class:
        raise ValueError(f"task {name!r} is already registered by {known.recipe_class.__name__}")
    return known


def embedded_sources(name) -> tuple[str, ...]:
    """The embedded dataset names of the registered task ``name`` (none for a task that is not
    registered)."""
    known = _TASK_RECIPES.get(name) if isinstance(name, str) else None
    return known.embedded_sources if known else ()


def task_names() -> tuple[str, ...]:
    """The registered ``task:`` names, in registration order."""
    return tuple(_TASK_RECIPES)


def task_recipe(name) -> TaskRecipe:
    """The registered task ``name``.

    Raises:
        RecipeError: ``task: 'x' is not one of causal-lm, classification, translation`` (or,
            when no task is registered, that ``hfattn.tasks`` registers them).
    """
    if isinstance(name, str) and name in _TASK_RECIPES:
        return _TASK_RECIPES[name]
    if not _TASK_RECIPES:
        raise RecipeError(
            f"task: {name!r} is not registered: no task is; `import hfattn.tasks` registers "
            "hfattn's tasks before a recipe is parsed"
        )
    if not isinstance(name, str):  # a list or a mapping in the YAML
        kind = type(name).__name__.removesuffix("Config").lower()
        raise RecipeError(f"task: must be one of {', '.join(_TASK_RECIPES)}, not a {kind}")
    raise RecipeError(f"task: {name!r} is not one of {', '.join(_TASK_RECIPES)}")


__all__ = ["TaskRecipe", "embedded_sources", "register_task_recipe", "task_names", "task_recipe"]
