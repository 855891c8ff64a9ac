"""Recipes: one YAML file per experiment, read and checked once, before anything is trained.

The package holds every piece of recipe parsing:

- :mod:`~hfattn.recipes.schema`: the sections every task shares (``training:``, ``hub:``,
  ``lora:``, the bases of ``evaluation:`` / ``generation:`` / ``tokenizer:`` / ``data:``) and
  :class:`~hfattn.recipes.schema.RecipeBase`, whose subclasses the tasks declare;
- :mod:`~hfattn.recipes.model_section`: the ``model:`` section, checked against its model
  type's config class (which it builds) or naming a pretrained checkpoint;
- :mod:`~hfattn.recipes.parsing`: :func:`load_recipe` (the YAML, its ``--set`` overrides, every
  check, once, in order, for the :class:`Run` it is loaded for; the built model config on
  ``recipe.model_config``, what was checked on ``recipe.checks``) and :func:`recipe_outline`
  (the few fields the checks before training read, without torch);
- :mod:`~hfattn.recipes.run_checks`: the checks of a run that need no data (the flags, the
  schedule against its steps, ``data.source``, the ``hub`` settings, the run folder);
- :mod:`~hfattn.recipes.shipped`: the recipes that come with hfattn, by name
  (:func:`resolve_recipe`, which parsing calls for every recipe argument);
- :mod:`~hfattn.recipes.registry`: the tasks a recipe may name, each registered by the task's
  own light ``recipe`` module (importing :mod:`hfattn.tasks` registers them all).

The field checks themselves (:class:`RecipeError`, ``require*``) live in
:mod:`hfattn.common.field_checks`, below the data and training layers that use them too.
"""

from __future__ import annotations

from . import parsing
from .parsing import *  # noqa: F403  (its public names: parsing.__all__)
from .registry import TaskRecipe, register_task_recipe, task_names, task_recipe
from .schema import RecipeBase
from .shipped import recipe_description, resolve_recipe, shipped_recipes

__all__ = [
    *parsing.__all__,
    "RecipeBase",
    "recipe_description",
    "resolve_recipe",
    "shipped_recipes",
    "TaskRecipe",
    "register_task_recipe",
    "task_names",
    "task_recipe",
]
