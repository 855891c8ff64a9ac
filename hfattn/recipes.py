"""Recipes: one YAML file per experiment, validated before anything is trained.

:func:`load_recipe` reads the YAML (plus ``--set key=value`` overrides), finds its ``task:``
(:mod:`hfattn.tasks`) and merges everything into that task's structured recipe class
(:class:`~hfattn.schema.RecipeBase` + the task's own sections). Unknown keys and wrong types
are rejected with the dotted name of the field; value checks (ranges, choices) follow in each
section's ``__post_init__``; ``model:`` is checked against its config class. The common
sections live in :mod:`hfattn.schema`, the task's in its module.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from .schema import RecipeBase, RecipeError, require
from .tasks import TASK_NAMES, get_task

Recipe = RecipeBase
"""Every task's recipe class subclasses this one."""


def default_recipe(task: str = "causal-lm") -> RecipeBase:
    """A recipe of ``task`` with every default (for model folders saved without a recipe)."""
    return get_task(task).recipe_class()


def _task_of(*configs) -> str:
    merged = OmegaConf.merge(*configs)
    name = merged.get("task", "causal-lm") if OmegaConf.is_dict(merged) else None
    require(name in TASK_NAMES, "task", f"{name!r} is not one of {', '.join(TASK_NAMES)}")
    return name


def load_recipe(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> RecipeBase:
    """Read a recipe YAML, apply ``key=value`` overrides and validate everything.

    Raises:
        RecipeError: naming the offending field (``training.batch_size: ...``).
        FileNotFoundError: when ``path`` does not exist.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"recipe file not found: {path}")
    try:
        raw = OmegaConf.load(path)
        dotlist = OmegaConf.from_dotlist(list(overrides))
        task = get_task(_task_of(raw, dotlist))
        merged = OmegaConf.merge(OmegaConf.structured(task.recipe_class), raw, dotlist)
        recipe = OmegaConf.to_object(merged)
    except OmegaConfBaseException as err:
        reason = str(err).splitlines()[0]
        raise RecipeError(f"{getattr(err, 'full_key', None) or path}: {reason}") from None
    validate_model_section(recipe.model)
    return recipe


def validate_model_section(model: dict[str, Any]):
    """Check ``model:`` against the config class of ``model.type`` and build that config.

    Returns the config (with a placeholder vocabulary size)."""
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    import hfattn  # noqa: F401  (registers the model types)

    model = dict(model)
    model_type = model.pop("type", None)
    require(model_type is not None, "model.type", "is required")
    require(model_type in CONFIG_MAPPING, "model.type", f"unknown model type {model_type!r}")
    config_cls = CONFIG_MAPPING[model_type]
    require("vocab_size" not in model, "model.vocab_size", "is set from the tokenizer")
    preset = model.pop("preset", None)
    known = {f.name for f in dataclasses.fields(config_cls)}
    for key in model:
        require(key in known, f"model.{key}", f"is not a field of {config_cls.__name__}")
    try:
        if preset is not None:
            return config_cls.from_preset(preset, **model)
        return AutoConfig.for_model(model_type, **model)
    except (ValueError, TypeError) as err:
        raise RecipeError(f"model.{err}") from None


def build_job(recipe: RecipeBase):
    """Turn a validated recipe into its task's training job (model, tokenizer, data, ...)."""
    return get_task(recipe.task).build_job(recipe)


def run_recipe(recipe: RecipeBase, *, resume: bool = False, callbacks=()):
    """Train a recipe end to end; push to the Hub when ``hub.push_to_hub`` is set."""
    from .training.engine import train

    task = get_task(recipe.task)
    job = task.build_job(recipe)
    result = train(
        job,
        recipe.training,
        recipe.output_dir,
        resume=resume,
        recipe_yaml=recipe.to_yaml(),
        recipe_name=recipe.name,
        generation_defaults=task.generation_defaults(recipe),
        callbacks=callbacks,
    )
    if recipe.hub.push_to_hub and not result.interrupted:
        from accelerate import PartialState

        if PartialState().is_main_process:
            from .hub.push import push_model_folder

            push_model_folder(
                result.output_dir,
                recipe.hub.repo_id,
                private=recipe.hub.private,
                space=recipe.hub.space,
            )
    return result


__all__ = [
    "Recipe",
    "RecipeError",
    "build_job",
    "default_recipe",
    "load_recipe",
    "run_recipe",
    "validate_model_section",
]
