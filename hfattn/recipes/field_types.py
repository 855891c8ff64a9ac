"""A recipe field's type hint, found by its dotted name, and OmegaConf's errors in the words
of hfattn's own field checks (``training.max_steps: 'twenty' is not an integer``)."""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException, ValidationError

from ..common.field_checks import describe_type, type_error
from .schema import RecipeError


def field_hints(cls: type) -> dict[str, Any]:
    """The type hints of the fields of the recipe (or section) class ``cls``: a ``ClassVar``
    (:attr:`~hfattn.recipes.schema.RecipeBase.model_config`) is no field a recipe may set."""
    hints = typing.get_type_hints(cls)
    return {k: v for k, v in hints.items() if typing.get_origin(v) is not typing.ClassVar}


def section_class(hint) -> type | None:
    """The dataclass of a section's type hint (``LoraSection | None`` → ``LoraSection``), or
    ``None`` for a plain mapping (``model: dict``)."""
    return next((h for h in [hint, *typing.get_args(hint)] if dataclasses.is_dataclass(h)), None)


def field_error(err: OmegaConfBaseException, path: Path, cls: type | None = None) -> RecipeError:
    """OmegaConf's error as one line naming the field (else the recipe file); a value that
    does not convert to the type of its field of the recipe class ``cls`` in the words of every
    type error (:func:`~hfattn.common.field_checks.type_error`): ``training.max_steps: 'twenty'
    is not an integer``, not OmegaConf's ``Value 'twenty' of type 'str' could not be converted
    to Integer``."""
    key = getattr(err, "full_key", None)
    if isinstance(err, ValidationError) and key and cls is not None:
        hint = field_hint(cls, key)
        if hint is not None and describe_type(hint) is not None:
            value = err.value
            value = OmegaConf.to_container(value) if OmegaConf.is_config(value) else value
            return type_error(key, value, hint)
    reason = str(err).splitlines()[0]
    return RecipeError(f"{key or path}: {reason}")


def field_hint(cls: type, key: str):
    """The type hint of the field ``key`` (``training.max_steps``, ``data.splits[1]``: a list's
    item) of the recipe class ``cls``, or ``None`` when ``key`` names no typed field."""
    hint = cls
    for part in key.split("."):
        name, *indices = part.replace("]", "").split("[")
        section = section_class(hint)
        if section is None or name not in field_hints(section):
            return None
        hint = field_hints(section)[name]
        for _ in indices:  # an item of a list field: the list's item type
            hint = item_type(hint)
    return hint


def item_type(hint):
    """The item type of a list field's hint (``list[str] | None`` → ``str``), or ``None``."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        hint = next((h for h in typing.get_args(hint) if h is not type(None)), None)
    args = typing.get_args(hint)
    return args[0] if args else None
