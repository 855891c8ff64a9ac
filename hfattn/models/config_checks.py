"""Checks and presets shared by the hfattn configurations.

Only the standard library is imported: ``save_pretrained`` copies this file next to the
configuration that uses it (``trust_remote_code``).
"""

from __future__ import annotations

from typing import ClassVar


def check_positive_int(name: str, value) -> None:
    """Raise ``ValueError`` unless ``value`` is a positive ``int`` (``bool`` is refused)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer; got {value!r}")


def check_positive_ints(config, names) -> None:
    """:func:`check_positive_int` on each field of ``config`` named in ``names``."""
    for name in names:
        check_positive_int(name, getattr(config, name))


def check_rates(config, names) -> None:
    """Raise ``ValueError`` naming the field unless each field of ``config`` named in ``names``
    is a number in [0, 1) (a dropout, a label smoothing; ``bool`` is refused) or ``None`` (an
    optional rate left unset)."""
    for name in names:
        value = getattr(config, name)
        if value is not None and (isinstance(value, bool) or not 0.0 <= value < 1.0):
            raise ValueError(f"{name} must be in [0, 1); got {value!r}")


def check_choice(name: str, value, allowed, *, optional: bool = False) -> None:
    """Raise ``ValueError`` naming the field and the allowed values unless ``value in allowed``
    (or ``value`` is ``None`` when the field is ``optional``: left unset)."""
    if value not in allowed and not (optional and value is None):
        names = ", ".join("None" if v is None else str(v) for v in allowed)
        raise ValueError(f"{name} must be one of {names}; got {value!r}")


class PresetsMixin:
    """``from_preset(name, **overrides)`` over the class's ``PRESETS`` table."""

    PRESETS: ClassVar[dict[str, dict]] = {}

    @classmethod
    def from_preset(cls, name: str, **overrides):
        """Build a config from the named preset (a key of ``PRESETS``) plus overrides."""
        if name not in cls.PRESETS:
            raise ValueError(f"preset must be one of {', '.join(cls.PRESETS)}; got {name!r}")
        return cls(**{**cls.PRESETS[name], **overrides})


__all__ = [
    "PresetsMixin",
    "check_choice",
    "check_positive_int",
    "check_positive_ints",
    "check_rates",
]
