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
import logging
import math
import sys
import types
import typing
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from .pretrained import check_pretrained_section, is_pretrained, normalize_model_section
from .schema import RecipeBase, RecipeError, require
from .tasks import TASK_NAMES, get_task

logger = logging.getLogger(__name__)

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


def check_overrides(overrides: list[str] | tuple[str, ...]) -> None:
    """Every ``--set`` item must be ``KEY=VALUE`` with both sides non-empty (``KEY=null``
    unsets a field explicitly): ``training.max_steps`` or ``training.max_steps=`` would
    otherwise silently set it to null."""
    for item in overrides:
        key, equals, value = item.partition("=")
        require(
            bool(equals and key.strip() and value.strip()),
            f"--set {item}",
            "expected KEY=VALUE, e.g. training.max_steps=100 (KEY=null unsets a field)",
        )


def _read_yaml(path: Path):
    """The recipe file as an OmegaConf mapping; YAML syntax errors, a top level that is not a
    mapping and non-UTF-8 bytes become one :class:`RecipeError` naming the file (and line)."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise RecipeError(f"{path}: not UTF-8 text (byte {err.start})") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise RecipeError(f"{path}:{where}: not valid YAML ({problem})") from None
    if data is None:
        data = {}
    require(
        isinstance(data, dict),
        str(path),
        f"a recipe is a mapping of sections (name, task, model, ...), got a {type(data).__name__}",
    )
    return OmegaConf.create(data)


def load_recipe(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> RecipeBase:
    """Read a recipe YAML, apply ``key=value`` overrides and validate everything.

    Raises:
        RecipeError: naming the offending field (``training.batch_size: ...``).
        FileNotFoundError: when ``path`` does not exist.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"recipe file not found: {path}")
    check_overrides(overrides)
    raw = _read_yaml(path)
    if isinstance(raw.get("model"), str):  # model: <hub id | folder>
        raw.model = normalize_model_section(raw.model)
    try:
        dotlist = OmegaConf.from_dotlist(list(overrides))
        if isinstance(dotlist.get("model"), str):  # --set model=<hub id | folder>
            dotlist.model = normalize_model_section(dotlist.model)
        task = get_task(_task_of(raw, dotlist))
        for given in (raw, dotlist):
            check_shapes(OmegaConf.to_container(given), task.recipe_class)
        merged = OmegaConf.merge(OmegaConf.structured(task.recipe_class), raw, dotlist)
        given_model = OmegaConf.merge(raw, dotlist).get("model")
        if OmegaConf.is_dict(given_model) and "pretrained" in given_model:
            merged.model = given_model  # not merged into the task's default ``type``
        check_finite(OmegaConf.to_container(merged))
        recipe = OmegaConf.to_object(merged)
    except OmegaConfBaseException as err:
        reason = str(err).splitlines()[0]
        raise RecipeError(f"{getattr(err, 'full_key', None) or path}: {reason}") from None
    validate_model_section(recipe.model)
    return recipe


def _shape(hint) -> str | None:
    """``"mapping"`` for a section (a dataclass) or a ``dict`` field, ``"list"`` for a list
    field, ``None`` for a scalar (or ``X | None`` of those)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return next(filter(None, map(_shape, typing.get_args(hint))), None)
    if dataclasses.is_dataclass(hint) or (typing.get_origin(hint) or hint) is dict:
        return "mapping"
    return "list" if (typing.get_origin(hint) or hint) in (list, tuple) else None


def check_shapes(given: dict, cls: type, prefix: str = "") -> None:
    """Every section of ``given`` (a recipe as plain data) must be a mapping and every list
    field a list, checked against the recipe class ``cls`` (its nested sections included).

    OmegaConf would report a scalar in a section's place as a merge error naming no field, and
    raise a bare ``TypeError`` for a list where a mapping belongs (or the reverse). Unknown keys
    and ``null`` are left to OmegaConf, which names them.

    Raises:
        RecipeError: ``training: expected a mapping of fields, got int 5``.
    """
    hints = typing.get_type_hints(cls)
    for key, value in given.items():
        hint = hints.get(key)
        if hint is None or value is None:
            continue
        name, shape = f"{prefix}{key}", _shape(hint)
        if shape == "mapping":
            require(
                isinstance(value, dict),
                name,
                f"expected a mapping of fields, got {type(value).__name__} {value!r}",
            )
            section = next(
                (h for h in [hint, *typing.get_args(hint)] if dataclasses.is_dataclass(h)), None
            )
            if section is not None:
                check_shapes(value, section, f"{name}.")
        elif shape == "list":
            require(
                isinstance(value, list),
                name,
                f"expected a list, got {type(value).__name__} {value!r}",
            )


def check_finite(given, name: str = "") -> None:
    """No number anywhere in ``given`` (a recipe as plain data) may be NaN or infinite: a
    learning rate, temperature or size of ``.inf`` passes every range check and fails (or
    silently ruins the run) long after validation. Use ``null`` for "no limit".

    Raises:
        RecipeError: ``training.learning_rate: must be a finite number, got inf``.
    """
    if isinstance(given, dict):
        for key, value in given.items():
            check_finite(value, f"{name}.{key}" if name else str(key))
    elif isinstance(given, list):
        for index, value in enumerate(given):
            check_finite(value, f"{name}[{index}]")
    elif isinstance(given, float):
        require(math.isfinite(given), name, f"must be a finite number, got {given}")


def validate_model_section(model: dict[str, Any]):
    """Check ``model:`` against the config class of ``model.type`` and build that config.

    Returns the config (with a placeholder vocabulary size), or ``None`` for a pretrained
    checkpoint (``model.pretrained``: only its keys are checked here; the task loads it)."""
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    import hfattn  # noqa: F401  (registers the model types)

    model = dict(model)
    if is_pretrained(model):
        check_pretrained_section(model)
        return None
    model_type = model.pop("type", None)
    require(model_type is not None, "model.type", "is required")
    require(
        isinstance(model_type, str) and model_type in CONFIG_MAPPING,
        "model.type",
        f"unknown model type {model_type!r}",
    )
    config_cls = CONFIG_MAPPING[model_type]
    require("vocab_size" not in model, "model.vocab_size", "is set from the tokenizer")
    preset = model.pop("preset", None)
    require(
        preset is None or isinstance(preset, str),
        "model.preset",
        f"must be the name of a preset, got {preset!r}",
    )
    require(
        preset is None or hasattr(config_cls, "from_preset"),
        "model.preset",
        f"{config_cls.__name__} has no presets",
    )
    fields = {f.name: f for f in dataclasses.fields(config_cls)}
    known = set(fields)
    hints = {key: _field_type(config_cls, fields[key]) for key in model if key in fields}
    for key, value in model.items():
        require(key in known, f"model.{key}", f"is not a field of {config_cls.__name__}")
        require(
            _matches(value, hints.get(key)),
            f"model.{key}",
            f"{value!r} is not of type {_type_name(hints.get(key))}",
        )
    if preset is not None:
        overridden = sorted(set(model) & set(getattr(config_cls, "PRESETS", {}).get(preset, {})))
        if overridden:
            logger.warning(
                "model.preset %r: the recipe overrides its %s", preset, ", ".join(overridden)
            )
    try:
        if preset is not None:
            return config_cls.from_preset(preset, **model)
        return AutoConfig.for_model(model_type, **model)
    except (ValueError, TypeError) as err:
        raise RecipeError(f"model.{err}") from None


_SCALARS = {bool: (bool,), int: (int,), float: (int, float), str: (str,)}


def _matches(value, hint) -> bool:
    """Whether ``value`` fits a config field's simple type hint (``bool``, ``int``, ``float``,
    ``str``, ``X | None``, ``list``, ``dict``); other hints are left to the config."""
    if hint is None or hint is typing.Any:
        return True
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_matches(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    origin = typing.get_origin(hint) or hint
    if origin in _SCALARS:
        ok = isinstance(value, _SCALARS[origin])
        return ok and (origin is bool or not isinstance(value, bool))
    if origin in (list, dict, tuple):
        return isinstance(value, origin if origin is not tuple else (tuple, list))
    return True


def _field_type(config_cls, field):
    """A dataclass field's type, evaluated when it is a string annotation (``None`` when it
    cannot be: then the config's own checks apply)."""
    if not isinstance(field.type, str):
        return field.type
    try:
        return eval(field.type, vars(sys.modules[config_cls.__module__]))  # noqa: S307
    except Exception:  # an annotation naming something the module does not import
        return None


def _type_name(hint) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def build_job(recipe: RecipeBase):
    """Turn a validated recipe into its task's training job (model, tokenizer, data, ...)."""
    return get_task(recipe.task).build_job(recipe)


def run_recipe(
    recipe: RecipeBase,
    *,
    resume: bool = False,
    overwrite: bool = False,
    callbacks=(),
    planned: RecipeBase | None = None,
):
    """Train a recipe end to end; push to the Hub when ``hub.push_to_hub`` is set.

    ``resume`` continues the run in ``output_dir``; ``overwrite`` replaces it (a folder that
    holds another run is refused otherwise). ``planned`` is the recipe as its file has it,
    before ``--set`` overrides (default ``recipe``): the run records the steps it plans, so a
    run cut far short of them says so in its card.

    Raises:
        RecipeError: both ``resume`` and ``overwrite``, or a bad ``hub`` section.
        hfattn.run_folder.RunFolderError: ``resume`` with a recipe that differs from the
            run's stored one in more than :data:`hfattn.run_folder.RESUMABLE_FIELDS`.
        FileNotFoundError: ``resume`` and ``output_dir`` holds no checkpoint.
    """
    from .run_folder import RESUME_AND_OVERWRITE, check_resume
    from .training.engine import train

    if resume and overwrite:
        raise RecipeError(RESUME_AND_OVERWRITE)
    if resume:  # another run's folder, or nothing to resume, fails before anything is loaded
        check_resume(recipe.output_dir, recipe.to_yaml())
    if recipe.hub.push_to_hub:  # a bad repo id or a missing token fails now, not after training
        from .hub.push import HubPushError, resolve_token, validate_repo_id

        try:
            validate_repo_id(recipe.hub.repo_id)
            resolve_token()
        except HubPushError as err:
            raise RecipeError(f"hub: {err}") from None
    task = get_task(recipe.task)
    job = task.build_job(recipe)
    result = train(
        job,
        recipe.training,
        recipe.output_dir,
        resume=resume,
        overwrite=overwrite,
        recipe_yaml=recipe.to_yaml(),
        recipe_name=recipe.name,
        generation_defaults=task.generation_defaults(recipe),
        callbacks=callbacks,
        planned_training=None if planned is None else planned.training,
    )
    if recipe.hub.push_to_hub and not result.interrupted:  # settings checked before training
        from accelerate import PartialState

        if PartialState().is_main_process:
            from .hub.push import HubPushError, push_model_folder

            try:
                push_model_folder(
                    result.output_dir,
                    recipe.hub.repo_id,
                    private=recipe.hub.private,
                    space=recipe.hub.space,
                )
            except HubPushError as err:  # e.g. a run cut far short of its recipe
                raise RecipeError(
                    f"hub.push_to_hub: the model is saved in {result.output_dir} but was not "
                    f"pushed: {err}"
                ) from None
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
