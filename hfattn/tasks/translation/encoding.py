"""The translation data as the model reads it: the pairs of a recipe's ``data:`` section
(:func:`load_pairs`), sources and targets as token ids cut to the model's limits
(:func:`encode_sources`, :func:`encode_targets`; :func:`cut_sources` cuts ids tokenized
before), and references written as the tokenizer can write them (:func:`reference_text`).

Light: no torch (``hfattn export ctranslate2`` encodes sources with it); the data sets load
on use.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ...common.field_checks import require
from ...data.translation import load_translation_splits
from ..base import split_settings
from .recipe import PairDataSection

DATASET_NAMES = {
    "bible": ("Bible en-es (World English Bible / Reina-Valera 1909)", "sword-bible-en-es"),
    "dates": ("CLDR dates en-es (babel)", "hfattn-dates-en-es"),
    "numbers": ("Numbers in words en-es (num2words)", "hfattn-numbers-en-es"),
    "date-normalization": ("Date normalisation (Géron)", "hfattn-date-normalization"),
}
"""The names the model card gives each embedded source: ``(name, type)``."""

logger = logging.getLogger(__name__)


class SourceTooLongError(ValueError):
    """A source sentence has more tokens than the model accepts and truncation is refused."""


def load_pairs(data: PairDataSection, source: str | None = None) -> dict[str, tuple[list, list]]:
    """``{split: (sources, targets)}`` of the recipe's data (or of ``source``)."""
    splits = load_translation_splits(
        source or data.source,
        source_lang=data.source_lang,
        target_lang=data.target_lang,
        size=data.size,
        preprocessing=data.preprocessing,
        **split_settings(data),
    )
    target_lang = target_language(splits["train"], data.source_lang)
    return {
        split: (
            [row[data.source_lang] for row in dataset["translation"]],
            [row[target_lang] for row in dataset["translation"]],
        )
        for split, dataset in splits.items()
    }


def target_language(dataset, source_lang: str) -> str:
    """The language key of the ``translation`` column that is not ``source_lang``."""
    languages = list(dataset.features["translation"])
    others = [lang for lang in languages if lang != source_lang]
    if len(others) != 1:
        raise ValueError(
            f"data.source_lang: {source_lang!r} with languages {languages}: expected one other"
        )
    return others[0]


def encode_sources(
    tokenizer, texts: Sequence[str], limit: int | None, *, on_too_long: str = "warn"
) -> list[list[int]]:
    """Token ids of ``texts`` (with ``<eos>``), cut to ``limit`` tokens (the last kept token is
    ``<eos>``) with one warning naming how many were cut, or refused with ``on_too_long="error"``.
    """
    if on_too_long not in ("warn", "error"):
        raise ValueError(f"on_too_long: {on_too_long!r} is not one of warn, error")
    encoded = tokenizer(list(texts))["input_ids"]
    return cut_sources(tokenizer, texts, encoded, limit, on_too_long=on_too_long)


def cut_sources(
    tokenizer,
    texts: Sequence[str],
    encoded: Sequence[list[int]],
    limit: int | None,
    *,
    on_too_long: str = "warn",
) -> list[list[int]]:
    """``encoded`` (the token ids of ``texts``, with ``<eos>``, as the tokenizer gives them) cut
    to ``limit`` tokens as :func:`encode_sources` cuts them, in a new list (``encoded`` is left
    as it is, so that ids tokenized once can be cut to several limits)."""
    if on_too_long not in ("warn", "error"):
        raise ValueError(f"on_too_long: {on_too_long!r} is not one of warn, error")
    encoded = list(encoded)
    too_long = [i for i, ids in enumerate(encoded) if limit is not None and len(ids) > limit]
    if too_long and on_too_long == "error":
        first = too_long[0]
        raise SourceTooLongError(
            f"source {first} has {len(encoded[first])} tokens; the model accepts at most {limit}"
        )
    if too_long:
        logger.warning(
            "%d source(s) longer than %d tokens were truncated (first: %r)",
            len(too_long),
            limit,
            texts[too_long[0]][:60],
        )
        for i in too_long:
            encoded[i] = encoded[i][: limit - 1] + [tokenizer.eos_token_id]
    return encoded


def encode_targets(tokenizer, texts: list[str], limit: int, on_too_long: str) -> list[list[int]]:
    """Label ids of ``texts`` (ending in ``<eos>``), cut to ``limit`` tokens like the sources."""
    with_eos = tokenizer(text_target=list(texts))["input_ids"]
    too_long = [i for i, ids in enumerate(with_eos) if len(ids) > limit]
    if too_long:
        require(
            on_too_long == "warn",
            "data.max_target_length",
            f"target {too_long[0]} has {len(with_eos[too_long[0]])} tokens (> {limit})",
        )
        logger.warning("%d target(s) longer than %d tokens were truncated", len(too_long), limit)
        for i in too_long:
            with_eos[i] = with_eos[i][: limit - 1] + [tokenizer.eos_token_id]
    return with_eos


def reference_text(tokenizer, text: str) -> str:
    """``text`` as the tokenizer can write it back: its normaliser applied (lowercase, stripped
    punctuation for word-level), words joined by single spaces where ``decode`` does so, but
    out-of-vocabulary words kept — the reference that BLEU and exact match compare with."""
    from tokenizers import models

    backend = tokenizer.backend_tokenizer
    if backend.normalizer is not None:
        text = backend.normalizer.normalize_str(text)
    if isinstance(backend.model, models.WordLevel) and backend.decoder is None:
        pieces = backend.pre_tokenizer.pre_tokenize_str(text) if backend.pre_tokenizer else []
        text = " ".join(piece for piece, _ in pieces) if pieces else text
    return " ".join(text.split())


__all__ = [
    "DATASET_NAMES",
    "SourceTooLongError",
    "cut_sources",
    "encode_sources",
    "encode_targets",
    "load_pairs",
    "reference_text",
    "target_language",
]
