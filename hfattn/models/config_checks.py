"""The value rules of the hfattn configurations, declared on their fields, and their presets.

A config field states its rule where it is declared, ``dropout: float | int = rate(0.1)``
(:func:`positive_int`, :func:`non_negative_int`, :func:`positive_number`, :func:`rate`,
:func:`choice`: a dataclass field whose metadata holds the
rule); the config's ``__post_init__`` applies every rule (:func:`check_field_rules`) and the
recipe checks read the same declarations from the configuration file's source, before torch is
imported (:func:`hfattn.common.models_source.config_field_rules`). A rule spans one field; a
rule between fields (``bridge="concat"`` and the sizes it needs) stays in ``__post_init__``.

Only the standard library is imported: ``save_pretrained`` copies this file next to the
configuration that uses it (``trust_remote_code``), and the recipe checks load it on its own.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

RULE = "hfattn_rule"
"""The key of a config field's metadata that holds its rule."""


def _is_number(value, types=(int, float)) -> bool:
    """``value`` is an instance of ``types`` and not a ``bool`` (which Python counts as an
    ``int``)."""
    return isinstance(value, types) and not isinstance(value, bool)


class PositiveInt:
    """An integer >= 1 (``bool`` refused); ``None`` is left to the field's type."""

    def problem(self, value) -> str | None:
        """What is wrong with ``value`` (``"must be a positive integer, got 0"``), or ``None``."""
        if value is None or (_is_number(value, int) and value > 0):
            return None
        return f"must be a positive integer, got {value!r}"


class NonNegativeInt:
    """An integer >= 0 (``bool`` refused): a size where 0 turns a feature off."""

    def problem(self, value) -> str | None:
        """What is wrong with ``value`` (``"must be an integer >= 0, got -1"``), or ``None``."""
        if _is_number(value, int) and value >= 0:
            return None
        return f"must be an integer >= 0, got {value!r}"


class PositiveNumber:
    """A number > 0 (``bool`` refused): a scale, a temperature."""

    def problem(self, value) -> str | None:
        """What is wrong with ``value`` (``"must be a number > 0, got 0"``), or ``None``."""
        if _is_number(value) and value > 0:
            return None
        return f"must be a number > 0, got {value!r}"


class Rate:
    """A number in [0, 1): a dropout, a label smoothing (``bool`` refused); ``None`` is left
    to the field's type."""

    def problem(self, value) -> str | None:
        """What is wrong with ``value`` (``"must be in [0, 1), got 1.5"``), or ``None``."""
        if value is None or (_is_number(value) and 0.0 <= value < 1.0):
            return None
        return f"must be in [0, 1), got {value!r}"


class Choice:
    """One of ``allowed``; ``None`` is left to the field's type (an optional field left unset)."""

    def __init__(self, allowed):
        self.allowed = tuple(allowed)

    def problem(self, value) -> str | None:
        """What is wrong with ``value`` (``"must be one of gru, lstm; got 'rnn'"``), or ``None``."""
        return None if value is None or value in self.allowed else self.refusal(value)

    def refusal(self, value) -> str:
        """``"must be one of gru, lstm; got 'rnn'"``."""
        return f"must be one of {', '.join(map(str, self.allowed))}; got {value!r}"


def _ruled(default, rule):
    """A dataclass field with ``default`` and ``rule`` in its metadata."""
    return dataclasses.field(default=default, metadata={RULE: rule})


def positive_int(default):
    """A config field that must be a positive integer (:class:`PositiveInt`)."""
    return _ruled(default, PositiveInt())


def non_negative_int(default):
    """A config field that must be an integer >= 0 (:class:`NonNegativeInt`)."""
    return _ruled(default, NonNegativeInt())


def positive_number(default):
    """A config field that must be a number > 0 (:class:`PositiveNumber`)."""
    return _ruled(default, PositiveNumber())


def rate(default):
    """A config field that must lie in [0, 1) (:class:`Rate`)."""
    return _ruled(default, Rate())


def choice(default, allowed):
    """A config field that must be one of ``allowed`` (:class:`Choice`)."""
    return _ruled(default, Choice(allowed))


RULE_FIELDS = {
    "positive_int": positive_int,
    "non_negative_int": non_negative_int,
    "positive_number": positive_number,
    "rate": rate,
    "choice": choice,
}
"""The field declarations that carry a rule, by the name a configuration file calls them."""


def field_rules(config_class) -> dict:
    """Field name → rule of every field of ``config_class`` declared with a rule."""
    return {
        f.name: f.metadata[RULE] for f in dataclasses.fields(config_class) if RULE in f.metadata
    }


def check_field_rules(config) -> None:
    """Raise ``ValueError`` ``"<field> <what is allowed>, got <value>"`` for the first field
    of ``config`` whose value breaks the rule it was declared with."""
    for name, rule in field_rules(type(config)).items():
        problem = rule.problem(getattr(config, name))
        if problem is not None:
            raise ValueError(f"{name} {problem}")


def check_choice(name: str, value, allowed) -> None:
    """Raise ``ValueError`` naming ``name`` and the allowed values unless ``value in allowed``
    (for an option that is no config field)."""
    if value not in allowed:
        raise ValueError(f"{name} {Choice(allowed).refusal(value)}")


class PresetsMixin:
    """``from_preset(name, **overrides)`` over the class's ``PRESETS`` table."""

    PRESETS: ClassVar[dict[str, dict]] = {}

    @classmethod
    def from_preset(cls, name: str, **overrides):
        """Build a config from the named preset (a key of ``PRESETS``) plus overrides."""
        check_choice("preset", name, tuple(cls.PRESETS))
        return cls(**{**cls.PRESETS[name], **overrides})


__all__ = [
    "RULE",
    "RULE_FIELDS",
    "Choice",
    "NonNegativeInt",
    "PositiveInt",
    "PositiveNumber",
    "PresetsMixin",
    "Rate",
    "check_choice",
    "check_field_rules",
    "choice",
    "field_rules",
    "non_negative_int",
    "positive_int",
    "positive_number",
    "rate",
]
