"""The decoding settings a saved model runs with: the saved-settings rule of DESIGN.md.

A model folder's ``generation_config.json`` (the recipe's ``generation:`` section, saved at the
end of training; ``model.generation_config`` once the model is loaded, from a folder or a Hub
repo) is what every command decodes with. An option given on the command line (any value but
``None``) overrides one setting; a setting that the saved config leaves unset takes the
command's fallback. :func:`saved_decoding` is that rule, in one place: ``hfattn translate``
and ``hfattn plot attention`` (through :mod:`hfattn.tasks.translation.inference`) and ``hfattn
generate`` decode with it; ``hfattn evaluate`` and the end of training score with the saved
settings too (:func:`hfattn.tasks.translation.job.scoring_decoding`). The Spaces run without hfattn:
their controls start at the same saved values, read from ``model.generation_config``, with the
same fallbacks (:data:`TRANSLATION_FALLBACK`, :data:`TEXT_GENERATION_FALLBACK`).

The example inputs shown with a model (the recipe's ``generation.examples``, or a causal LM's
``generation.prompt``) come from the ``recipe.yaml`` of its folder through
:func:`hfattn.hub.card.example_inputs`, which the model card and the staged Space (its
``examples.json``) use.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

TRANSLATION_FALLBACK: Mapping[str, Any] = {"num_beams": 1, "max_new_tokens": 128}
"""A translation's settings when the saved config sets none: greedy search, 128 new tokens."""
TEXT_GENERATION_FALLBACK: Mapping[str, Any] = {
    "max_new_tokens": 300,
    "temperature": 1.0,
    "top_k": None,
    "top_p": None,
    "num_beams": 1,
}
"""A causal LM's settings when the saved config sets none: 300 new tokens sampled at
temperature 1 from the whole distribution (no top-k, no top-p), one beam."""


def saved_value(saved, name: str):
    """Setting ``name`` of a saved generation config (a ``GenerationConfig``, a
    ``generation_config.json`` mapping, or ``None`` for a model that has none); ``None`` when
    it is unset."""
    if saved is None:
        return None
    if isinstance(saved, Mapping):
        return saved.get(name)
    return getattr(saved, name, None)


def saved_decoding(saved, fallback: Mapping[str, Any], **given) -> dict[str, Any]:
    """The settings to decode with, one per name of ``fallback`` and ``given``: the ``given``
    value (a command-line option) when it is not ``None``, else the ``saved`` generation
    config's value when it sets one (:func:`saved_value`), else ``fallback``'s.

    ``saved_decoding(model.generation_config, TRANSLATION_FALLBACK, num_beams=None,
    max_new_tokens=20)`` is ``{"num_beams": 4, "max_new_tokens": 20}`` for a model saved with
    ``num_beams: 4``."""
    chosen = {}
    for name in dict.fromkeys([*fallback, *given]):
        value = given.get(name)
        if value is None:
            value = saved_value(saved, name)
        if value is None:
            value = fallback.get(name)
        chosen[name] = value
    return chosen


__all__ = [
    "TEXT_GENERATION_FALLBACK",
    "TRANSLATION_FALLBACK",
    "saved_decoding",
    "saved_value",
]
