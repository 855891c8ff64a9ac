"""Tasks as plug-ins: one package per task, found by name.

A task is a package ``hfattn/tasks/<name>/`` named in :data:`hfattn.recipes.TASK_PACKAGES`:
its ``recipe`` module declares the recipe sections (light: parsing a recipe imports it and
nothing heavier), its ``task`` module the ``TASK`` object (:mod:`hfattn.tasks.base`) that
builds the training job, scores a saved model and gives the card's facts, beside its data
encoding and inference. Its Space app goes in ``spaces/<card.space_app>/``.
"""

from __future__ import annotations

import importlib

from ..recipes import TASK_NAMES, TASK_PACKAGES
from .base import Task, TaskInfo


def get_task(name: str) -> Task:
    """The task registered as ``name``.

    Raises:
        ValueError: ``task: 'x' is not one of causal-lm, classification, translation``.
    """
    if name not in TASK_PACKAGES:
        raise ValueError(f"task: {name!r} is not one of {', '.join(TASK_NAMES)}")
    return importlib.import_module(f"{TASK_PACKAGES[name]}.task").TASK


def all_tasks() -> list[Task]:
    """Every registered task, in :data:`hfattn.recipes.TASK_PACKAGES` order."""
    return [get_task(name) for name in TASK_NAMES]


__all__ = ["TASK_NAMES", "Task", "TaskInfo", "all_tasks", "get_task"]
