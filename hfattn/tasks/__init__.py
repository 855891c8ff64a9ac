"""Tasks as plug-ins: one module per task, found by name.

Adding a task is adding a module that defines ``TASK`` (see :mod:`hfattn.tasks.base`) and a
line in :data:`TASK_MODULES`; its Space app goes in ``spaces/<card.space_app>/``.
"""

from __future__ import annotations

import importlib

from .base import Task, TaskInfo

TASK_MODULES = {
    "causal-lm": "hfattn.tasks.causal_lm",
    "classification": "hfattn.tasks.classification",
    "translation": "hfattn.tasks.translation",
}
"""Recipe ``task:`` name → module defining ``TASK``."""

TASK_NAMES = tuple(TASK_MODULES)


def get_task(name: str) -> Task:
    """The task registered as ``name``.

    Raises:
        ValueError: ``task: 'x' is not one of causal-lm, translation``.
    """
    if name not in TASK_MODULES:
        raise ValueError(f"task: {name!r} is not one of {', '.join(TASK_NAMES)}")
    return importlib.import_module(TASK_MODULES[name]).TASK


def all_tasks() -> list[Task]:
    """Every registered task, in :data:`TASK_MODULES` order."""
    return [get_task(name) for name in TASK_NAMES]


__all__ = ["TASK_MODULES", "TASK_NAMES", "Task", "TaskInfo", "all_tasks", "get_task"]
