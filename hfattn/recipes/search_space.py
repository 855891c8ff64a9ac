"""The search space of a sweep (``hfattn sweep RECIPE --space SPACE.yaml``), read and checked
against the recipe before anything slow is loaded.

A space is a YAML mapping keyed by the dotted field names that ``--set`` takes, each naming one
distribution::

    training.learning_rate: {log_uniform: [1.0e-4, 1.0e-2]}
    model.dropout: {uniform: [0.0, 0.4]}
    training.warmup_steps: {int_uniform: [0, 200]}
    tokenizer.vocab_size: {choice: [2000, 4000, 8000]}

:func:`load_search_space` checks the file's shape, each distribution and its arguments, then
each value a trial may be given against the recipe's own rules: both ends of a range and every
choice, each as ``--set FIELD=VALUE`` on the recipe through the checks ``hfattn train`` makes
before it imports torch (:func:`~hfattn.recipes.parsing.recipe_outline`,
:func:`~hfattn.recipes.run_checks.check_before_training`,
:func:`~hfattn.recipes.parsing.check_recipe_values`). A rule is declared once, on its field: a
range is checked by its ends, so a field whose rule is a range (every numeric rule of hfattn's
recipes) accepts every value between them. The first failure is one :class:`RecipeError`
naming the field and what it allows. :func:`check_model_configs` then builds the model config
for each value of a ``model.*`` field (torch: seconds, still before any data).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ..common.field_checks import RecipeError
from .model_section import validate_model_section
from .parsing import check_recipe_values, recipe_outline
from .run_checks import check_before_training
from .shipped import SWEEPS, resolve_recipe

DISTRIBUTIONS = ("uniform", "log_uniform", "int_uniform", "choice")
"""The distributions a space may name, each as ``{name: [arguments]}``."""
NOT_SEARCHED = (
    "name",
    "task",
    "output_dir",
    "training.metric_for_best_model",
    "training.greater_is_better",
)
"""Fields a sweep sets itself (each trial's ``output_dir`` is its folder in the sweep folder),
or that would change what the trials are compared by."""


@dataclass(frozen=True)
class SearchParam:
    """One field of a search space: its dotted ``name``, its ``distribution``
    (:data:`DISTRIBUTIONS`) and ``low`` / ``high`` (a range) or ``choices``."""

    name: str
    distribution: str
    low: float | int | None = None
    high: float | int | None = None
    choices: tuple = ()

    def describe(self) -> str:
        """The distribution as the space file writes it: ``log_uniform [0.0001, 0.01]``."""
        given = list(self.choices) if self.distribution == "choice" else [self.low, self.high]
        return f"{self.distribution} {given}"

    def as_dict(self) -> dict:
        """``{distribution: [arguments]}``, as the space file writes it (recorded in a study,
        whose continuation must search the same space)."""
        given = list(self.choices) if self.distribution == "choice" else [self.low, self.high]
        return {self.distribution: given}


def set_item(name: str, value) -> str:
    """``NAME=VALUE``, the ``--set`` item that gives the field ``name`` the ``value``
    (``null`` for ``None``, ``true`` / ``false`` for booleans, a float with its full
    precision)."""
    if value is None:
        return f"{name}=null"
    if isinstance(value, bool):
        return f"{name}={'true' if value else 'false'}"
    return f"{name}={value!r}" if isinstance(value, float) else f"{name}={value}"


def _read_space(path: Path) -> dict:
    """The space file as a mapping; its YAML and its top level checked.

    Raises:
        RecipeError, FileNotFoundError: a file that is not YAML or not a mapping of fields.
    """
    import yaml

    path = resolve_recipe(path, folder=SWEEPS, what="--space: search space file")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise RecipeError(f"--space {path}: not valid YAML ({problem})") from None
    if not isinstance(data, dict) or not data:
        raise RecipeError(
            f"--space {path}: a mapping of dotted fields to distributions, e.g. "
            "training.learning_rate: {log_uniform: [1.0e-4, 1.0e-2]}"
        )
    return data


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _param(name: str, given) -> SearchParam:
    """The :class:`SearchParam` of the space's entry ``name: given``, its shape checked (not
    yet against the recipe).

    Raises:
        RecipeError: ``model.dropout: a distribution is one of uniform, ...``.
    """
    if not isinstance(name, str) or name in NOT_SEARCHED:
        raise RecipeError(
            f"{name}: not a field a sweep searches (any field but {', '.join(NOT_SEARCHED)})"
        )
    allowed = ", ".join(f"{{{d}: [...]}}" for d in DISTRIBUTIONS)
    if not isinstance(given, dict) or len(given) != 1:
        raise RecipeError(f"{name}: one distribution, one of {allowed}; got {given!r}")
    (distribution, args), = given.items()  # fmt: skip
    if distribution not in DISTRIBUTIONS:
        raise RecipeError(f"{name}: unknown distribution {distribution!r}; one of {allowed}")
    if distribution == "choice":
        scalar = (str, int, float, bool, type(None))
        if not isinstance(args, list) or not args or not all(isinstance(a, scalar) for a in args):
            raise RecipeError(
                f"{name}: choice takes a list of values (numbers, strings, true/false, null), "
                f"got {args!r}"
            )
        if len(set(map(repr, args))) != len(args):
            raise RecipeError(f"{name}: choice lists a value twice: {args!r}")
        return SearchParam(name, distribution, choices=tuple(args))
    if not (isinstance(args, list) and len(args) == 2 and all(map(_number, args))):
        raise RecipeError(f"{name}: {distribution} takes [low, high], two numbers; got {args!r}")
    low, high = args
    if not low < high:
        raise RecipeError(f"{name}: {distribution} [low, high] needs low < high, got {args!r}")
    if distribution == "log_uniform" and low <= 0:
        raise RecipeError(f"{name}: log_uniform [low, high] needs 0 < low, got {args!r}")
    if distribution == "int_uniform":
        if not all(isinstance(a, int) for a in args):
            raise RecipeError(f"{name}: int_uniform [low, high] takes integers, got {args!r}")
        return SearchParam(name, distribution, low, high)
    return SearchParam(name, distribution, float(low), float(high))


def _values_to_check(param: SearchParam) -> list[tuple[object, str]]:
    """The values of ``param`` checked against the recipe, each with where it comes from."""
    if param.distribution == "choice":
        return [(c, f"the choice {c!r} of {param.describe()}") for c in param.choices]
    values = [(param.low, "the low end"), (param.high, "the high end")]
    if param.distribution != "int_uniform":  # a float field: a value between two integers
        values.append(((param.low + param.high) / 2, "a value"))
    return [(v, f"{where} of {param.describe()}") for v, where in values]


def _fields_checked(recipe: Path, items: list[str]) -> None:
    """Every check ``hfattn train`` makes of the recipe with ``--set`` ``items`` before it
    imports torch."""
    check_before_training(recipe_outline(recipe, items))
    check_recipe_values(recipe, items)


def _config_built(recipe: Path, items: list[str]) -> None:
    """The model config built from the recipe with ``--set`` ``items``: its rules across
    fields (torch and the config classes: seconds)."""
    validate_model_section(check_recipe_values(recipe, items).model)


def _check_values(recipe: Path, overrides: list[str], param: SearchParam, check) -> None:
    """The recipe with ``--set name=value`` for each value of ``param``
    (:func:`_values_to_check`) must pass ``check`` (:func:`_fields_checked` or
    :func:`_config_built`).

    Raises:
        RecipeError: ``model.dropout: must be in [0, 1), got 1.5 (the high end of uniform
            [0.0, 1.5] in the search space)``.
    """
    name = param.name
    for value, where in _values_to_check(param):
        try:
            check(recipe, [*overrides, set_item(name, value)])
        except (RecipeError, ValueError) as err:
            message = str(err)
            for start in (f"{name}: ", f"{name} "):
                message = message.removeprefix(start)
            if "not an integer" in message and param.distribution in ("uniform", "log_uniform"):
                message += "; an integer field takes int_uniform or choice"
            raise RecipeError(f"{name}: {message} ({where} in the search space)") from None


def check_model_configs(
    params: list[SearchParam], recipe: str | Path, overrides: list[str] | tuple[str, ...] = ()
) -> None:
    """Build the model config for each value of each ``model.*`` parameter of a space that
    :func:`load_search_space` accepted: the config class's rules across fields (a decoder
    size that its ``bridge`` refuses). Imports torch (seconds), loads no data. Each parameter
    is checked with the recipe's values of the others: a combination of two searched values
    that a config refuses fails its trial.

    Raises:
        RecipeError: as :func:`load_search_space`.
    """
    for param in params:
        if param.name.startswith("model."):
            _check_values(Path(recipe), list(overrides), param, _config_built)


def load_search_space(
    space: str | Path, recipe: str | Path, overrides: list[str] | tuple[str, ...] = ()
) -> list[SearchParam]:
    """The parameters of the search space file ``space``, each checked against the recipe file
    ``recipe`` with its ``--set`` ``overrides``: the field exists and takes every value the
    distribution can give (both ends of a range, a value between them for a float field,
    every choice). Imports neither torch nor the data (a fraction of a second).

    Raises:
        RecipeError: the first problem, naming the field and what it allows.
        FileNotFoundError: ``space`` or ``recipe`` does not exist.
    """
    recipe, overrides = Path(recipe), list(overrides)
    _fields_checked(recipe, overrides)  # the recipe itself first
    params = [_param(name, given) for name, given in _read_space(Path(space)).items()]
    for param in params:
        _check_values(recipe, overrides, param, _fields_checked)
    return params


__all__ = [
    "DISTRIBUTIONS",
    "NOT_SEARCHED",
    "SearchParam",
    "check_model_configs",
    "load_search_space",
    "set_item",
]
