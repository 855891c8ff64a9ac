"""Tasks as plug-ins: one package per task, found by name.

A task is a package ``hfattn/tasks/<name>/``: its ``recipe`` module declares the recipe
sections and registers them with :mod:`hfattn.recipes.registry` (light: parsing a recipe needs
it and nothing heavier), its ``task`` module the ``TASK`` object (:mod:`hfattn.tasks.base`)
that builds the training job, scores a saved model and gives the card's facts, beside its data
encoding and inference. Its Space app goes in ``spaces/<card.space_app>/``.

Importing this package registers every task (their ``recipe`` modules, no torch); a task's
``task`` module (torch) is imported when :func:`get_task` first asks for it.
"""

from __future__ import annotations

import importlib

from ..recipes import RecipeError, task_recipe
from . import causal_lm, classification, translation
from .base import Task, TaskInfo

_TASK_PACKAGES = {
    package.TASK_RECIPE.name: package for package in (causal_lm, classification, translation)
}
"""``task:`` name → its package, in registration order."""

TASK_NAMES = tuple(_TASK_PACKAGES)
"""Every task's ``task:`` name."""


def get_task(name: str) -> Task:
    """The task registered as ``name``: its package's ``task.TASK``.

    Raises:
        ValueError: ``task: 'x' is not one of causal-lm, classification, translation``.
    """
    try:
        task_recipe(name)
    except RecipeError as err:
        raise ValueError(str(err)) from None
    return importlib.import_module(f"{_TASK_PACKAGES[name].__name__}.task").TASK


def all_tasks() -> list[Task]:
    """Every registered task, in :data:`TASK_NAMES` order."""
    return [get_task(name) for name in TASK_NAMES]


__all__ = ["TASK_NAMES", "Task", "TaskInfo", "all_tasks", "get_task"]
