"""Recipes: one YAML file per experiment, read and checked once, before anything is trained.

The package holds every piece of recipe parsing:

- :mod:`~hfattn.recipes.schema`: the sections every task shares (``training:``, ``hub:``,
  ``lora:``, the bases of ``evaluation:`` / ``generation:`` / ``tokenizer:`` / ``data:``) and
  :class:`~hfattn.recipes.schema.RecipeBase`, whose subclasses the tasks declare;
- :mod:`~hfattn.recipes.model_section`: the ``model:`` section, checked against its model
  type's config class (which it builds) or naming a pretrained checkpoint;
- :mod:`~hfattn.recipes.loading`: :func:`load_recipe` (the YAML, its ``--set`` overrides, every
  check, the built model config on ``recipe.model_config``) and :func:`recipe_outline` (the
  few fields the checks before training read, without torch).

The field checks themselves (:class:`RecipeError`, ``require*``) live in
:mod:`hfattn.field_checks`, below the data and training layers that use them too.
"""

from __future__ import annotations

from .loading import (
    TASK_NAMES,
    TASK_PACKAGES,
    Recipe,
    RecipeOutline,
    check_finite,
    check_overrides,
    check_shapes,
    default_recipe,
    load_recipe,
    recipe_class,
    recipe_outline,
    task_recipe_module,
)
from .schema import RecipeBase, RecipeError

__all__ = [
    "TASK_NAMES",
    "TASK_PACKAGES",
    "Recipe",
    "RecipeBase",
    "RecipeError",
    "RecipeOutline",
    "check_finite",
    "check_overrides",
    "check_shapes",
    "default_recipe",
    "load_recipe",
    "recipe_class",
    "recipe_outline",
    "task_recipe_module",
]
