"""The checks that name a bad field: every recipe section, data source and baseline option
raises :class:`RecipeError` ``"<field>: <what is allowed>"`` through these helpers.

The bottom of the package (no hfattn import, no third-party import), so that every layer, the
data sources and the training loop included, can check its fields the same way.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Callable, Iterable, Sequence


class RecipeError(ValueError):
    """A recipe field is unknown, mistyped or out of range (the message names the field)."""


def require(condition: bool, field_name: str, message: str) -> None:
    """Raise :class:`RecipeError` ``"<field_name>: <message>"`` unless ``condition``."""
    if not condition:
        raise RecipeError(f"{field_name}: {message}")


def require_choice(value: str | None, field_name: str, allowed: tuple[str, ...]) -> None:
    """``value`` must be one of ``allowed`` (the message lists them)."""
    require(value in allowed, field_name, f"{value!r} is not one of {', '.join(allowed)}")


def did_you_mean(name: str, choices: Iterable[str], *, show: Callable[[str], str] = repr) -> str:
    """``"; did you mean 'learning_rate'?"`` when one of ``choices`` is close to ``name``
    (:func:`difflib.get_close_matches`), else ``""``: the one "did you mean" of every message (a
    recipe field, a data source, a model folder). ``show`` writes the close choice (quoted by
    default; a model folder shows its path: ``; did you mean runs/x2?``)."""
    close = difflib.get_close_matches(str(name), list(choices), n=1)
    return f"; did you mean {show(close[0])}?" if close else ""


def require_known_key(key: str, field_name: str, known: Iterable[str], section: str) -> None:
    """``key`` must be one of ``known``, the fields of ``section`` (the message lists them
    and suggests the closest).

    Raises:
        RecipeError: ``training.lerning_rate: not a field of training (...); did you mean
            'learning_rate'?``.
    """
    known = list(known)
    if key not in known:  # the closest field is looked for only once the key is refused
        fields = ", ".join(known)
        raise RecipeError(
            f"{field_name}: not a field of {section} ({fields}){did_you_mean(key, known)}"
        )


_TYPE_NAMES = {
    bool: "true or false",
    int: "an integer",
    float: "a number",
    str: "a string",
    list: "a list",
    tuple: "a list",
    dict: "a mapping",
}
"""How a type error names the allowed type (:func:`describe_type`)."""


def describe_type(hint) -> str | None:
    """The type hint of a field as a type error names it: ``int`` → "an integer", ``float |
    int`` → "a number", ``int | None`` → "an integer or null", ``list[str]`` → "a list", a
    section (a dataclass) → "a mapping of fields"; ``None`` for a hint it cannot name
    (``Any``)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        names = [describe_type(arg) for arg in args if arg is not type(None)]
        if not names or None in names:
            return None
        if "a number" in names and "an integer" in names:  # an integer is a number
            names.remove("an integer")
        names = list(dict.fromkeys(names))
        if type(None) in args:
            names.append("null")
        return " or ".join(names)
    if hint is type(None):
        return "null"
    if dataclasses.is_dataclass(hint):
        return "a mapping of fields"
    return _TYPE_NAMES.get(typing.get_origin(hint) or hint)


def type_error(field_name: str, value: object, hint) -> RecipeError:
    """The one type error of every field: ``model.hidden_size: 'big' is not an integer``
    (``value``, ``null`` for ``None``, and the type that ``hint`` allows, :func:`describe_type`)."""
    allowed = describe_type(hint) or f"of type {getattr(hint, '__name__', hint)}"
    shown = "null" if value is None else repr(value)
    return RecipeError(f"{field_name}: {shown} is not {allowed}")


def require_positive(section: object, prefix: str, *names: str) -> None:
    """Every named field of ``section`` must be ``None`` or > 0."""
    for name in names:
        value = getattr(section, name)
        require(value is None or value > 0, f"{prefix}.{name}", f"must be > 0, got {value}")


def require_fraction(section: object, prefix: str, *names: str, high: float = 0.5) -> None:
    """Every named field of ``section`` must lie in the open interval (0, ``high``)."""
    for name in names:
        value = getattr(section, name)
        require(0 < value < high, f"{prefix}.{name}", f"must be in (0, {high}), got {value}")


def field_default(section: object, name: str):
    """The default that the dataclass ``section`` declares for its field ``name`` (a
    ``default_factory`` called for it)."""
    declared = next(f for f in dataclasses.fields(section) if f.name == name)
    if declared.default_factory is not dataclasses.MISSING:
        return declared.default_factory()
    return declared.default


def require_default(section: object, prefix: str, names: Iterable[str], reason: str) -> None:
    """Every named field of the dataclass ``section`` must hold its declared default
    (:func:`field_default`): a field that the section's other values (or the recipe's model or
    source) leave unused is refused when it is set, ``reason`` saying why and what to do.

    Raises:
        RecipeError: ``training.betas: [0.9, 0.98] is not used by optimizer sgd (...)``.
    """
    for name in names:
        value = getattr(section, name)
        require(value == field_default(section, name), f"{prefix}.{name}", f"{value!r} {reason}")


def require_reported_metric(metric: str, reported: Sequence[str]) -> None:
    """``training.metric_for_best_model`` must be ``loss`` or one of ``reported``, the metrics
    the task's validation reports (the message lists them)."""
    choices = tuple(dict.fromkeys(("loss", *reported)))
    require(
        metric in choices,
        "training.metric_for_best_model",
        f"{metric!r} is not one of {', '.join(choices)} (what this task's validation reports)",
    )


__all__ = [
    "RecipeError",
    "describe_type",
    "did_you_mean",
    "field_default",
    "require",
    "require_choice",
    "require_default",
    "require_fraction",
    "require_known_key",
    "require_positive",
    "require_reported_metric",
    "type_error",
]
