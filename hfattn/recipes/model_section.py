"""The recipe's ``model:`` section: the fields of a model type's config class, or a pretrained
checkpoint (``model: <hub id | folder>``, loaded by :mod:`hfattn.tasks.pretrained`).

:func:`validate_model_section` checks every key and value type against the config class of
``model.type`` (a key the config does not have, a string where it wants an int) and builds the
config, so that a bad model section fails when the recipe is loaded, naming the field; the
types of the fields that hfattn's config classes declare are checked before torch is imported
(:func:`check_model_types`), in the words of every type error
(:func:`~hfattn.common.field_checks.type_error`).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import sys
import types
import typing
from typing import Any

from ..common.field_checks import RecipeError, did_you_mean, require, type_error
from ..common.models_source import (
    config_class_name,
    config_field_rules,
    config_field_types,
    config_fields,
    pretrained_config_fields,
)

logger = logging.getLogger(__name__)


PRETRAINED_KEYS = ("pretrained", "revision")
"""The keys a pretrained ``model:`` section may hold."""


def normalize_model_section(model: Any) -> Any:
    """``model: "<id or folder>"`` → ``{"pretrained": "<id or folder>"}``; anything else as is."""
    return {"pretrained": model} if isinstance(model, str) else model


def is_pretrained(model: dict[str, Any]) -> bool:
    """Whether a recipe's ``model:`` section names a pretrained checkpoint."""
    return "pretrained" in model


def check_pretrained_section(model: dict[str, Any]) -> None:
    """Only :data:`PRETRAINED_KEYS`, and ``pretrained`` a non-empty string."""
    for key in model:
        require(
            key in PRETRAINED_KEYS,
            f"model.{key}",
            f"does not apply to a pretrained model (allowed: {', '.join(PRETRAINED_KEYS)})",
        )
    name = model["pretrained"]
    require(
        isinstance(name, str) and bool(name.strip()),
        "model.pretrained",
        f"must be a Hub id or a local folder, got {name!r}",
    )


def check_model_types(model: dict[str, Any]) -> None:
    """Every value of ``model:`` that names a field of hfattn's config class of ``model.type``
    must have that field's type, checked in a few milliseconds from the class's source
    (:func:`~hfattn.common.models_source.config_field_types`), before torch is imported; the
    other keys are :func:`validate_model_section`'s. A pretrained checkpoint's section holds
    only its keys (:func:`check_pretrained_section`).

    Raises:
        RecipeError: ``model.hidden_size: 'big' is not an integer``.
    """
    if not isinstance(model, dict):
        return
    if is_pretrained(model):
        check_pretrained_section(model)
        return
    model_type = model.get("type")
    fields = config_field_types(model_type) if isinstance(model_type, str) else {}
    for key, value in model.items():
        if key in fields and not _matches(value, fields[key]):
            raise type_error(f"model.{key}", value, fields[key])


def require_config_key(key: str, class_name: str, known) -> None:
    """``key`` of ``model:`` must be a field of the config class ``class_name`` (fields
    ``known``); ``vocab_size`` is the tokenizer's.

    Raises:
        RecipeError: ``model.hiden_size: is not a field of CharRNNConfig; did you mean
            'hidden_size'?`` or ``model.vocab_size: is set from the tokenizer``.
    """
    require(key != "vocab_size", "model.vocab_size", "is set from the tokenizer")
    require(
        key in known,
        f"model.{key}",
        f"is not a field of {class_name}{did_you_mean(key, known)}",
    )


def check_model_fields(model: dict[str, Any]) -> None:
    """Every key of ``model:`` must be a field of the config class of ``model.type`` and every
    value within the rule its field is declared with (a positive integer, a rate in [0, 1), one
    of its choices: ``dropout: float | int = rate(0.1)`` in ``configuration_<type>.py``), read
    from the class's source in a few milliseconds, before torch is imported
    (:func:`~hfattn.common.models_source.config_field_rules`); the config class applies the same
    declarations once it is built (:func:`validate_model_section`). Run after
    :func:`check_model_types` (a value of the wrong type is its error). A pretrained checkpoint,
    or a type hfattn does not define, is left to :func:`validate_model_section`.

    Raises:
        RecipeError: ``model.hiden_size: is not a field of CharRNNConfig; did you mean
            'hidden_size'?``, ``model.hidden_size must be a positive integer, got -3``,
            ``model.dropout must be in [0, 1), got 1.5``, ``model.cell must be one of gru, lstm,
            rnn; got 'grux'; did you mean 'gru'?``.
    """
    if not isinstance(model, dict) or is_pretrained(model):
        return
    model_type = model.get("type")
    class_name = config_class_name(model_type) if isinstance(model_type, str) else None
    if class_name is None:
        return
    own = config_fields(model_type)
    rules = config_field_rules(model_type)
    for key, value in model.items():
        if key in ("type", "preset"):
            continue
        if key not in own or key == "vocab_size":  # a field every config inherits, or none
            require_config_key(key, class_name, (*pretrained_config_fields(), *own))
        problem = rules[key].problem(value) if key in rules else None
        if problem is not None:
            allowed = getattr(rules[key], "allowed", None)
            hint = did_you_mean(str(value), map(str, allowed)) if allowed else ""
            raise RecipeError(f"model.{key} {problem}{hint}")


def validate_model_section(model: dict[str, Any]):
    """Check ``model:`` against the config class of ``model.type`` and build that config.

    Returns the config (with a placeholder vocabulary size), or ``None`` for a pretrained
    checkpoint (``model.pretrained``: only its keys are checked here; the task loads it)."""
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    from .. import models  # noqa: F401  (registers the model types; torch: seconds, imported on use)

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
        require_config_key(key, config_cls.__name__, known)
        if not _matches(value, hints.get(key)):
            raise type_error(f"model.{key}", value, hints.get(key))
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


SPECIAL_TOKEN_IDS = ("pad_token_id", "unk_token_id", "bos_token_id", "eos_token_id")
"""The token ids a model config takes from the tokenizer it is trained with."""


def sized_model_config(recipe, tokenizer, special_tokens: tuple[str, ...] = SPECIAL_TOKEN_IDS):
    """A copy of the model config the recipe was loaded with (``recipe.model_config``, built
    once by :func:`hfattn.recipes.load_recipe`), sized to ``tokenizer``: its vocabulary size and
    the ids of its ``special_tokens``. The recipe's own config is left as it was loaded."""
    config = copy.deepcopy(recipe.model_config)
    config.vocab_size = len(tokenizer)
    for name in special_tokens:
        setattr(config, name, getattr(tokenizer, name))
    return config


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


__all__ = [
    "PRETRAINED_KEYS",
    "SPECIAL_TOKEN_IDS",
    "check_model_fields",
    "check_model_types",
    "check_pretrained_section",
    "is_pretrained",
    "normalize_model_section",
    "require_config_key",
    "sized_model_config",
    "validate_model_section",
]
