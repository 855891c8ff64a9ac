"""Recipes: one YAML file per experiment, validated before anything is trained.

:func:`load_recipe` reads the YAML (plus ``--set key=value`` overrides), finds its ``task:``
(:mod:`hfattn.tasks`) and merges everything into that task's structured recipe class
(:class:`~hfattn.schema.RecipeBase` + the task's own sections). Unknown keys and wrong types
are rejected with the dotted name of the field; value checks (ranges, choices) follow in each
section's ``__post_init__``; ``model:`` is checked against its config class. The common
sections live in :mod:`hfattn.schema`, the task's in its module.

:func:`check_before_training` makes every check of a run that needs no data, tokenizer or
model (``output_dir``, the schedule against its steps, ``training.metric_for_best_model``,
``data.source``, the ``hub`` settings): :func:`run_recipe` on the loaded recipe, and
``hfattn train`` first on the :func:`recipe_outline` of the file, which imports neither the
task nor torch, so that these errors come in a fraction of a second.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from .pretrained import check_pretrained_section, is_pretrained, normalize_model_section
from .schema import (
    LICENSE_FORM,
    HubSection,
    RecipeBase,
    RecipeError,
    TrainingSection,
    require,
    require_reported_metric,
)
from .tasks import TASK_NAMES, get_task
from .training.schedules import check_schedule_steps

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
        raise _field_error(err, path) from None
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

    from . import models  # noqa: F401  (registers the model types; torch: seconds, imported on use)

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


# ---- the checks before anything is loaded -------------------------------------------------------
VALIDATION_METRICS = {
    "causal-lm": ("loss", "perplexity", "bits_per_char", "accuracy"),
    "classification": ("accuracy", "macro_f1", "loss"),
    "translation": ("bleu", "chrf", "exact_match", "token_accuracy", "loss"),
}
"""What each task's validation reports (the ``reported_metrics`` of its card metadata): the
choices of ``training.metric_for_best_model``. Written out here because the task modules import
torch, which the checks before training must not wait for; ``tests/test_fail_fast.py`` checks
them against each task's own list."""


@dataclass
class RecipeOutline:
    """The fields of a recipe that :func:`check_before_training` reads, typed and defaulted as
    the task's recipe class has them, but read without importing the task (and torch):
    :func:`recipe_outline`. ``data.source`` is ``None`` when the recipe leaves it to the task's
    default (an embedded dataset)."""

    task: str
    output_dir: str
    training: Any
    """The recipe's :class:`~hfattn.schema.TrainingSection` fields (an OmegaConf mapping)."""
    hub: HubSection
    data: types.SimpleNamespace


def recipe_outline(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> RecipeOutline:
    """The :class:`RecipeOutline` of a recipe file with its ``--set`` overrides, in a fraction
    of a second (:func:`load_recipe` imports the task, torch and the model's config: seconds).

    Only the outlined fields are checked here (their types, the ``hub`` section); the rest of
    the recipe is :func:`load_recipe`'s.

    Raises:
        RecipeError: naming the field (YAML syntax, a bad ``--set``, an unknown ``task``, a
            value of the wrong type in an outlined field).
        FileNotFoundError: when ``path`` does not exist.
    """
    path = Path(path)
    task, given = _given_recipe(path, overrides)
    fields = {f.name for f in dataclasses.fields(TrainingSection)}
    training = {k: v for k, v in (given.get("training") or {}).items() if k in fields}
    base = {key: given[key] for key in ("name", "output_dir", "hub") if key in given}
    try:
        recipe = OmegaConf.to_object(
            OmegaConf.merge(OmegaConf.structured(RecipeBase), {**base, "task": task})
        )
        typed = OmegaConf.create({"training": OmegaConf.structured(TrainingSection)})
        training = OmegaConf.merge(typed, {"training": training}).training
    except OmegaConfBaseException as err:
        raise _field_error(err, path) from None
    source = (given.get("data") or {}).get("source")
    return RecipeOutline(
        task=task,
        output_dir=recipe.output_dir,
        training=training,
        hub=recipe.hub,
        data=types.SimpleNamespace(source=source if isinstance(source, str) else None),
    )


def _given_recipe(path: Path, overrides) -> tuple[str, dict]:
    """The task and the recipe file ``path`` with its ``--set`` overrides merged in, as plain
    data (interpolations resolved), its sections checked to be mappings.

    Raises:
        RecipeError, FileNotFoundError: as :func:`recipe_outline`.
    """
    if not path.is_file():
        raise FileNotFoundError(f"recipe file not found: {path}")
    check_overrides(overrides)
    raw = _read_yaml(path)
    try:
        dotlist = OmegaConf.from_dotlist(list(overrides))
        task = _task_of(raw, dotlist)
        for given in (raw, dotlist):
            if isinstance(given.get("model"), str):  # model: <hub id | folder>
                given.model = normalize_model_section(given.model)
            _check_outline_shapes(OmegaConf.to_container(given))
        return task, OmegaConf.to_container(OmegaConf.merge(raw, dotlist), resolve=True)
    except OmegaConfBaseException as err:
        raise _field_error(err, path) from None


def _field_error(err: OmegaConfBaseException, path: Path) -> RecipeError:
    """OmegaConf's error as one line naming the field (else the recipe file)."""
    reason = str(err).splitlines()[0]
    return RecipeError(f"{getattr(err, 'full_key', None) or path}: {reason}")


def _check_outline_shapes(given: dict) -> None:
    """The outlined sections of ``given`` (a recipe as plain data) must be mappings
    (:func:`check_shapes` for the common sections; ``training`` and ``data`` belong to the task's
    recipe class, unknown here)."""
    check_shapes(given, RecipeBase)
    for name in ("training", "data"):
        value = given.get(name)
        require(
            value is None or isinstance(value, dict),
            name,
            f"expected a mapping of fields, got {type(value).__name__} {value!r}",
        )


def check_before_training(recipe, *, resume: bool = False, overwrite: bool = False) -> None:
    """Every check of a training run that needs no data, tokenizer or model, made before any
    of them is loaded: the flags, ``output_dir``, the schedule against its steps,
    ``training.metric_for_best_model``, ``data.source`` and the ``hub`` settings.

    ``recipe`` is a loaded recipe (:func:`run_recipe` checks it), or the :func:`recipe_outline`
    of a recipe file (``hfattn train`` checks that first, before it imports the task). Where a
    check needs the data (the epochs' steps against ``training.warmup_steps``), the engine
    makes it once the data is loaded.

    Raises:
        RecipeError: both ``resume`` and ``overwrite``; a schedule that does not fit its steps;
            a ``metric_for_best_model`` the task's validation does not report; a bad ``hub``
            section (repo id, no token, no licence for the card).
        ValueError: ``data.source`` names no dataset (:mod:`hfattn.data.sources`).
        FileExistsError: ``output_dir`` holds a run, without ``resume`` or ``overwrite``.
        FileNotFoundError: ``resume`` and ``output_dir`` holds no checkpoint; a
            ``data.source`` path that does not exist.
    """
    from .run_folder import RESUME_AND_OVERWRITE, check_output_dir, require_checkpoint

    if resume and overwrite:
        raise RecipeError(RESUME_AND_OVERWRITE)
    if resume:
        require_checkpoint(recipe.output_dir)
    else:
        check_output_dir(recipe.output_dir, overwrite)
    try:
        check_schedule_steps(recipe.training, resume=resume)
    except ValueError as err:
        raise RecipeError(str(err)) from None
    if recipe.task in VALIDATION_METRICS:
        require_reported_metric(
            recipe.training.metric_for_best_model, VALIDATION_METRICS[recipe.task]
        )
    check_data_source(recipe.task, recipe.data.source)
    check_hub_settings(recipe.hub, recipe.data.source)


def check_data_source(task: str, source: str | None) -> None:
    """``data.source`` (``None``: the task's embedded default) must name a dataset that the
    task's data module can load: the check of :mod:`hfattn.data.sources`, through that module.

    Raises:
        ValueError, FileNotFoundError: as :func:`hfattn.data.sources.check_source`.
    """
    from .data.classification import check_classification_source
    from .data.text import check_text_source
    from .data.translation import check_pair_source

    checks = {
        "causal-lm": check_text_source,
        "classification": check_classification_source,
        "translation": check_pair_source,
    }
    if source is not None and task in checks:
        checks[task](source)


def check_hub_settings(hub: HubSection, data_source: str | None = None) -> None:
    """With ``hub.push_to_hub``, the repo id must be one the Hub accepts, a token must be
    at hand and the card must have a licence (``hub.license``, else the declared licence of
    ``data_source``): all fail now, not after training.

    Raises:
        RecipeError: ``hub: repo_id must be 'owner/name' ...``, ``hub: no Hugging Face
            token ...`` or ``hub.license: not set and the license of data.source ...``.
    """
    if not hub.push_to_hub:
        return
    # only a recipe that publishes reads the hub and data modules
    from .data.licenses import data_license
    from .hub.push import HubPushError, resolve_token, validate_repo_id

    try:
        validate_repo_id(hub.repo_id)
        resolve_token()
    except HubPushError as err:
        raise RecipeError(f"hub: {err}") from None
    require(
        hub.license is not None or data_license(data_source) is not None,
        "hub.license",
        f"not set and the license of data.source {data_source!r} is unknown: the model card "
        f"needs one to publish ({LICENSE_FORM}, e.g. --set hub.license=apache-2.0)",
    )


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
        RecipeError, ValueError, FileExistsError, FileNotFoundError: what
            :func:`check_before_training` refuses, before anything is loaded.
        hfattn.run_folder.RunFolderError: ``resume`` with a recipe that differs from the
            run's stored one in more than :data:`hfattn.run_folder.RESUMABLE_FIELDS`.
    """
    check_before_training(recipe, resume=resume, overwrite=overwrite)
    if resume:  # another run's folder fails before anything is loaded
        from .run_folder import check_resume

        check_resume(recipe.output_dir, recipe.to_yaml())
    from .training.engine import train

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
    "VALIDATION_METRICS",
    "Recipe",
    "RecipeError",
    "RecipeOutline",
    "build_job",
    "check_before_training",
    "check_data_source",
    "check_hub_settings",
    "default_recipe",
    "load_recipe",
    "recipe_outline",
    "run_recipe",
    "validate_model_section",
]
