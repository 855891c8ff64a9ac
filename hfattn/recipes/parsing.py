"""Recipes: one YAML file per experiment, parsed and validated before anything is trained.

:func:`load_recipe` reads the YAML (plus ``--set key=value`` overrides), finds its ``task:``
among the registered ones (:mod:`hfattn.recipes.registry`) and merges everything into that
task's structured recipe class (:class:`~hfattn.recipes.schema.RecipeBase` + the task's own
sections, declared and registered by the task's light ``recipe`` module). Unknown keys and
wrong types are rejected with the dotted name of the field; value checks (ranges, choices)
follow in each section's ``__post_init__`` (:func:`check_recipe_values`, no torch); ``model:``
is checked against the rules declared on its config class's fields, then built into that config.
Given the :class:`Run` it is loaded for, :func:`load_recipe` also makes the checks of that run
that need no data (:mod:`hfattn.recipes.run_checks`), and the recipe it returns records what
was checked: the one recipe a run takes.

:func:`recipe_outline` reads the few fields that the checks before training need.

Parsing only: a run from its recipe is :mod:`hfattn.orchestration.run`'s.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import math
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ..common.field_checks import require_known_key
from ..storage.resume_checks import FieldChange
from .field_types import field_error, field_hints, section_class
from .model_section import (
    check_model_fields,
    check_model_types,
    normalize_model_section,
    validate_model_section,
)
from .registry import task_recipe
from .run_checks import check_before_training, check_run_folder
from .schema import (
    HubSection,
    RecipeBase,
    RecipeError,
    require,
)
from .shipped import resolve_recipe

logger = logging.getLogger(__name__)

Recipe = RecipeBase
"""Every task's recipe class subclasses this one."""


def recipe_class(task: str) -> type[RecipeBase]:
    """The recipe dataclass of the registered task ``task``
    (:func:`~hfattn.recipes.registry.task_recipe`)."""
    return task_recipe(task).recipe_class


def default_recipe(task: str = "causal-lm") -> RecipeBase:
    """A recipe of ``task`` with every default (for model folders saved without a recipe)."""
    return recipe_class(task)()


def _task_of(*configs) -> str:
    merged = OmegaConf.merge(*configs)
    name = merged.get("task", "causal-lm") if OmegaConf.is_dict(merged) else None
    return task_recipe(name).name


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
    mapping and non-UTF-8 bytes become one :class:`RecipeError` naming the file (and line).
    The file is parsed once per version (its path, size and modification time,
    :func:`_parsed_yaml`): the outline, the full load and the planned steps of one
    ``hfattn train`` read the same parse."""
    stat = path.stat()
    return OmegaConf.create(_parsed_yaml(path, stat.st_size, stat.st_mtime_ns))


@functools.lru_cache(maxsize=8)
def _parsed_yaml(path: Path, size: int, mtime_ns: int) -> dict:
    """The YAML of the recipe file ``path`` as plain data, parsed once per ``(size,
    mtime_ns)``; callers get it through :func:`_read_yaml` (a fresh OmegaConf copy each)."""
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
    return data


@dataclass(frozen=True)
class Run:
    """How a recipe is to be trained (:func:`load_recipe`'s ``run``): a new run in its
    ``output_dir`` (refused where one lies, unless ``overwrite``), or the run there continued
    (``resume``); ``folder``, the run folder given to ``hfattn train --resume``, is the recipe's
    ``output_dir``."""

    resume: bool = False
    overwrite: bool = False
    folder: str | None = None


@dataclass(frozen=True)
class RecipeChecks:
    """What :func:`load_recipe` checked a recipe for, kept on it (``recipe.checks``, set by
    :func:`load_recipe` alone): :func:`hfattn.orchestration.run.run_recipe` takes no recipe
    without it, and checks only what it does not cover."""

    run: Run | None
    """The run the recipe and its folder were checked for; ``None``: its fields alone (a
    recipe read to evaluate, or to be run as the caller of ``run_recipe`` says)."""
    changes: tuple[FieldChange, ...] = ()
    """With ``run.resume``: the resumable fields that differ from the run's stored recipe."""

    def covers(self, *, resume: bool, overwrite: bool) -> bool:
        """Whether the recipe was checked for a run with these ``resume`` and ``overwrite``."""
        run = self.run
        return run is not None and (run.resume, run.overwrite) == (resume, overwrite)


def load_recipe(
    path: str | Path, overrides: list[str] | tuple[str, ...] = (), *, run: Run | None = None
) -> RecipeBase:
    """Read a recipe YAML, apply ``key=value`` overrides and check everything, once, in this
    order, all but the last two before torch is imported (a fraction of a second):

    1. its outline (:func:`recipe_outline`): every key of every section, every type, every
       ``model:`` field against the rule declared on its config field;
    2. with ``run``, the checks before training
       (:func:`~hfattn.recipes.run_checks.check_before_training`: the flags, the schedule
       against its steps, ``training.metric_for_best_model``, ``data.source``, ``hub``);
    3. every section's values, and the extras it needs (:func:`check_recipe_values`);
    4. with a new ``run``, its folder: one that holds a run is refused unless ``overwrite``;
    5. the model config built from ``model:`` (``recipe.model_config``, ``None`` for a
       pretrained checkpoint; torch, seconds), from which the task's job builds the model;
    6. with ``run.resume``, the run to continue
       (:func:`~hfattn.recipes.run_checks.check_run_folder`).

    The recipe returned records what was checked (``recipe.checks``, :class:`RecipeChecks`):
    :func:`hfattn.orchestration.run.run_recipe` takes no other.

    Raises:
        RecipeError: naming the offending field (``training.batch_size: ...``).
        FileNotFoundError: ``path`` does not exist; ``run.resume`` without a checkpoint.
        FileExistsError: a new ``run`` into a folder that holds one, without ``overwrite``.
        ValueError: a ``data.source`` that names no dataset; a resumed run's recipe changed.
    """
    given = _given_configs(Path(path), overrides)  # read and shape-checked once
    outline = _outline(given)
    if run is not None:
        outline.output_dir = run.folder or outline.output_dir
        check_before_training(outline, resume=run.resume, overwrite=run.overwrite)
    recipe = _checked_values(given)
    recipe.output_dir = outline.output_dir
    if run is not None and not run.resume:
        check_run_folder(recipe, overwrite=run.overwrite)
    recipe.model_config = recipe.checked_model_config(validate_model_section(recipe.model))
    changes = ()
    if run is not None and run.resume:
        changes = tuple(check_run_folder(recipe, resume=True))
    recipe.checks = RecipeChecks(run, changes)
    return recipe


def check_recipe_values(
    path: str | Path, overrides: list[str] | tuple[str, ...] = ()
) -> RecipeBase:
    """The recipe file ``path`` with its ``--set`` overrides, every field's key, type and value
    checked (each section's ``__post_init__``), but its ``model:`` section not yet built into a
    config: what :func:`load_recipe` does short of importing ``transformers`` and torch (a
    fraction of a second). ``recipe.model_config`` is left unset, and so is ``recipe.checks``:
    only :func:`load_recipe` returns a recipe to train.

    Raises:
        RecipeError, FileNotFoundError: as :func:`load_recipe`.
    """
    return _checked_values(_given_configs(Path(path), overrides))


def _checked_values(given: _Given) -> RecipeBase:
    """:func:`check_recipe_values` of the recipe as :func:`_given_configs` read it."""
    try:
        check_finite(OmegaConf.to_container(given.merged))
        return OmegaConf.to_object(given.merged)
    except OmegaConfBaseException as err:
        raise field_error(err, given.path, given.cls) from None


def _shape(hint) -> str | None:
    """``"mapping"`` for a section (a dataclass) or a ``dict`` field, ``"list"`` for a list
    field, ``None`` for a scalar (or ``X | None`` of those)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return next(filter(None, map(_shape, typing.get_args(hint))), None)
    if dataclasses.is_dataclass(hint) or (typing.get_origin(hint) or hint) is dict:
        return "mapping"
    return "list" if (typing.get_origin(hint) or hint) in (list, tuple) else None


def check_shapes(given: dict, cls: type, prefix: str = "") -> None:
    """Every key of ``given`` (a recipe as plain data) must be a field of the recipe class
    ``cls`` (its nested sections included, ``model:`` aside: :mod:`hfattn.recipes.model_section`),
    every section a mapping and every list field a list.

    OmegaConf would name an unknown key without saying what the section has, report a scalar
    in a section's place as a merge error naming no field, and raise a bare ``TypeError`` for
    a list where a mapping belongs (or the reverse). ``null`` is left to OmegaConf.

    Raises:
        RecipeError: ``training.lerning_rate: not a field of training (...); did you mean
            'learning_rate'?`` or ``training: expected a mapping of fields, got int 5``.
    """
    hints = field_hints(cls)
    for key, value in given.items():
        name = f"{prefix}{key}"
        if not prefix:
            _require_in_a_section(key, hints)
        require_known_key(key, name, hints, prefix.rstrip(".") or "a recipe")
        shape = _shape(hints[key])
        if value is None:
            continue
        if shape == "mapping":
            require(
                isinstance(value, dict),
                name,
                f"expected a mapping of fields, got {type(value).__name__} {value!r}",
            )
            section = section_class(hints[key])
            if section is not None:
                check_shapes(value, section, f"{name}.")
        elif shape == "list":
            require(
                isinstance(value, list),
                name,
                f"expected a list, got {type(value).__name__} {value!r}",
            )


def _require_in_a_section(key: str, hints: dict) -> None:
    """A top-level ``key`` that is no field of a recipe but a field of one of its sections
    (``--set max_steps=3``) is refused naming the field it likely means.

    Raises:
        RecipeError: ``max_steps: not a field of a recipe; did you mean training.max_steps?``.
    """
    if key in hints:
        return
    sections = [
        name
        for name, hint in hints.items()
        if (section := section_class(hint)) is not None and key in field_hints(section)
    ]
    require(
        not sections,
        key,
        f"not a field of a recipe; did you mean {' or '.join(f'{s}.{key}' for s in sections)}?",
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


@dataclass
class RecipeOutline:
    """The fields of a recipe that :func:`check_before_training` reads, typed and defaulted as
    the task's recipe class has them, but read without importing the task (and torch):
    :func:`recipe_outline`. ``data.source`` is ``None`` when the recipe leaves it to the task's
    default (an embedded dataset)."""

    task: str
    output_dir: str
    training: Any
    """The recipe's :class:`~hfattn.recipes.schema.TrainingSection` fields (an OmegaConf
    mapping)."""
    hub: HubSection
    data: types.SimpleNamespace


def recipe_outline(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> RecipeOutline:
    """The :class:`RecipeOutline` of a recipe file with its ``--set`` overrides, in a fraction
    of a second (:func:`load_recipe` imports the task, torch and the model's config: seconds).

    Every key of every section is checked against the task's recipe class (its light
    ``recipe`` module), every section's values against their types, and the ``model:`` fields
    against the torch-free lists of their config class
    (:func:`~hfattn.recipes.model_section.check_model_fields`); the value checks of the
    sections are :func:`check_recipe_values`'s, the model config :func:`load_recipe`'s.

    Raises:
        RecipeError: naming the field (YAML syntax, a bad ``--set``, an unknown ``task``, an
            unknown key, a value of the wrong type, an unknown attention score).
        FileNotFoundError: when ``path`` does not exist.
    """
    return _outline(_given_configs(Path(path), overrides))


def _outline(configs: _Given) -> RecipeOutline:
    """:func:`recipe_outline` of the recipe as :func:`_given_configs` read it."""
    path, task, merged = configs.path, configs.task, configs.merged
    try:
        given = OmegaConf.to_container(configs.given, resolve=True)
        base = {key: given[key] for key in ("name", "output_dir", "hub") if key in given}
        recipe = OmegaConf.to_object(OmegaConf.merge(_schema(RecipeBase), {**base, "task": task}))
    except OmegaConfBaseException as err:
        raise field_error(err, path, configs.cls) from None
    model = _given_model(configs.cls, given.get("model"))
    check_model_types(model)
    check_model_fields(model)
    source = (given.get("data") or {}).get("source")
    return RecipeOutline(
        task=task,
        output_dir=recipe.output_dir,
        training=merged.training,
        hub=recipe.hub,
        data=types.SimpleNamespace(source=source if isinstance(source, str) else None),
    )


def _given_model(cls: type[RecipeBase], model) -> dict:
    """``model:`` as :func:`load_recipe` merges it: the given fields over the task's default
    (its ``type``), or the given section alone for a pretrained checkpoint."""
    if not isinstance(model, dict):
        return {}
    if "pretrained" in model:
        return model
    default = next(f for f in dataclasses.fields(cls) if f.name == "model").default_factory()
    return {**default, **model}


@functools.cache
def _schema(cls: type):
    """``OmegaConf.structured(cls)``, built once per class: every merge copies it."""
    return OmegaConf.structured(cls)


@dataclass(frozen=True)
class _Given:
    """A recipe file as :func:`_given_configs` reads it."""

    path: Path
    task: str
    cls: type[RecipeBase]
    given: Any
    """The file with its ``--set`` overrides merged in, as given (no defaults)."""
    merged: Any
    """``given`` merged onto the recipe class: types checked, defaults filled, no section's
    ``__post_init__`` run yet."""


def _given_configs(path: Path, overrides) -> _Given:
    """The recipe file ``path`` (resolved), its task and recipe class, and the file and its
    ``--set`` overrides as OmegaConf mappings (``model: <hub id | folder>`` spelt out as a
    section), their keys and section shapes checked against the recipe class
    (:func:`check_shapes`): what :func:`check_recipe_values` and :func:`recipe_outline` both
    start from, read once by :func:`load_recipe`.

    Raises:
        RecipeError, FileNotFoundError: as :func:`recipe_outline`.
    """
    path = resolve_recipe(path)  # a path, or the name of a shipped recipe
    check_overrides(overrides)
    raw = _read_yaml(path)
    try:
        dotlist = OmegaConf.from_dotlist(list(overrides))
        task = _task_of(raw, dotlist)
        cls = recipe_class(task)
        for given in (raw, dotlist):
            if isinstance(given.get("model"), str):  # model: <hub id | folder>
                given.model = normalize_model_section(given.model)
            check_shapes(OmegaConf.to_container(given), cls)
    except OmegaConfBaseException as err:
        raise field_error(err, path) from None
    try:
        given = OmegaConf.merge(raw, dotlist)
        merged = OmegaConf.merge(_schema(cls), given)
        if OmegaConf.is_dict(given.get("model")) and "pretrained" in given.model:
            merged.model = given.model  # not merged into the task's default ``type``
    except OmegaConfBaseException as err:
        raise field_error(err, path, cls) from None
    return _Given(path, task, cls, given, merged)


__all__ = [
    "Recipe",
    "RecipeChecks",
    "RecipeError",
    "RecipeOutline",
    "check_finite",
    "check_overrides",
    "check_recipe_values",
    "check_shapes",
    "default_recipe",
    "load_recipe",
    "recipe_class",
    "recipe_outline",
    "Run",
]
