"""The translation data as the model reads it: the pairs of a recipe's ``data:`` section
(:func:`load_pair_splits`, Arrow tables; :func:`load_pairs`, lists for small data; read in
batches by :func:`pair_batches`), sources and targets as token ids cut to the model's limits
(:func:`encode_sources`, :func:`encode_targets`, :func:`encode_flat` in batches; the rule of
:class:`RowCutter`, and :func:`cut_sources` for ids tokenized before), and
references written as the tokenizer can write them (:func:`reference_text`).

Light: no torch, and numpy on use (``hfattn export ctranslate2`` encodes sources with it, and
``hfattn --help`` imports it); the data sets load on use.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...common.field_checks import RecipeError
from ...data.translation import load_translation_splits, pair_batches
from ..base import scoring_data, split_settings
from .recipe import ON_TOO_LONG, PairDataSection

if TYPE_CHECKING:
    import numpy as np

    from ...storage.ragged import RaggedIds
    from ...tokenization.translation import BatchEncoder

DATASET_NAMES = {
    "bible": ("Bible en-es (World English Bible / Reina-Valera 1909)", "sword-bible-en-es"),
    "bible+kjv": (
        "Bible en-es (World English Bible and King James Version / Reina-Valera 1909)",
        "sword-bible-en-es",
    ),
    "dates": ("CLDR dates en-es (babel)", "hfattn-dates-en-es"),
    "numbers": ("Numbers in words en-es (num2words)", "hfattn-numbers-en-es"),
    "date-normalization": ("Date normalisation (Géron)", "hfattn-date-normalization"),
}
"""The names the model card gives each embedded source: ``(name, type)``."""

logger = logging.getLogger(__name__)


class SourceTooLongError(ValueError):
    """A source sentence has more tokens than the model accepts and truncation is refused."""


def load_pair_splits(data: PairDataSection, source: str | None = None):
    """``(splits, target_lang)``: the ``DatasetDict`` of the recipe's data (or of ``source``;
    a single file whole, in :data:`~hfattn.tasks.base.WHOLE_FILE_SPLIT`:
    :func:`~hfattn.tasks.base.scoring_data`), memory-mapped Arrow tables for a dataset folder
    or Hub dataset, and the language key of its targets (``data.target_lang``, or the one
    beside ``data.source_lang``). The pairs are read by
    :func:`~hfattn.data.translation.pair_batches` (defined there, exported here)."""
    data = scoring_data(data, source)
    splits = load_translation_splits(
        data.source,
        source_lang=data.source_lang,
        target_lang=data.target_lang,
        size=data.size,
        preprocessing=data.preprocessing,
        translation_column=data.translation_column,
        max_held_out_pairs=data.max_held_out_pairs,
        **split_settings(data),
    )
    return splits, target_language(splits["train"], data.source_lang)


def load_pairs(
    data: PairDataSection, source: str | None = None, splits: Sequence[str] | None = None
) -> dict[str, tuple[list, list]]:
    """``{split: (sources, targets)}`` of the recipe's data (or of ``source``) as lists, for
    the ``splits`` named (default: all; small data, or the held-out splits)."""
    loaded, target_lang = load_pair_splits(data, source)
    pairs = {}
    for split in loaded if splits is None else splits:
        sources, targets = [], []
        for batch_sources, batch_targets in pair_batches(
            loaded[split], data.source_lang, target_lang
        ):
            sources += batch_sources
            targets += batch_targets
        pairs[split] = (sources, targets)
    return pairs


def encode_flat(encoder: BatchEncoder, texts: list[str], dtype) -> tuple[np.ndarray, np.ndarray]:
    """Token ids of ``texts`` encoded by ``encoder`` (special tokens added, in parallel in Rust)
    as flat ``values`` of ``dtype`` and each text's length."""
    import numpy as np  # on use, as in cut_flat

    ids = encoder.encode(texts)
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    values = np.fromiter(itertools.chain.from_iterable(ids), dtype=dtype, count=int(lengths.sum()))
    return values, lengths


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
    RowCutter.check(on_too_long)
    encoded = tokenizer(list(texts))["input_ids"]
    return cut_sources(tokenizer, texts, encoded, limit, on_too_long=on_too_long)


def cut_sources(
    tokenizer,
    texts: Sequence[str],
    encoded: Sequence[Sequence[int]],
    limit: int | None,
    *,
    on_too_long: str = "warn",
) -> list[list[int]]:
    """``encoded`` (the token ids of ``texts``, with ``<eos>``, as the tokenizer gives them) cut
    to ``limit`` tokens as :func:`encode_sources` cuts them, in a new list (``encoded`` is left
    as it is, so that ids tokenized once can be cut to several limits)."""
    cutter = RowCutter("source", limit, tokenizer.eos_token_id, on_too_long)
    return cutter.cut_rows(encoded, texts)


def encode_targets(tokenizer, texts: list[str], limit: int, on_too_long: str) -> list[list[int]]:
    """Label ids of ``texts`` (ending in ``<eos>``), cut to ``limit`` tokens like the sources."""
    cutter = RowCutter("target", limit, tokenizer.eos_token_id, on_too_long)
    return cutter.cut_rows(tokenizer(text_target=list(texts))["input_ids"], texts)


def cut_flat(
    values: np.ndarray, lengths: np.ndarray, limit: int | None, eos_token_id: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Rows given flat (``values`` of all of them, each one's length) cut to ``limit`` values,
    the last value kept of a cut row replaced by ``eos_token_id``: row :math:`r` of length
    :math:`l > L` becomes :math:`r_{1..L-1} \Vert \langle eos \rangle`. Returns the values, the
    lengths and the indices of the rows that were cut (none: ``values`` as given)."""
    import numpy as np  # on use: the CLI's start imports this module (see the docstring)

    lengths = np.asarray(lengths, dtype=np.int64)
    cut = np.flatnonzero(lengths > limit) if limit is not None else np.zeros(0, np.int64)
    if not len(cut):
        return values, lengths, cut
    kept = np.minimum(lengths, limit)
    within = np.arange(len(values)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    out = np.asarray(values)[within < np.repeat(kept, lengths)]
    out[np.cumsum(kept)[cut] - 1] = eos_token_id
    return out, kept, cut


class RowCutter:
    """Cuts one side (``"source"`` or ``"target"``) of a split to ``limit`` tokens batch after
    batch (:func:`cut_flat`): with ``on_too_long="error"`` the first longer row is refused
    (:class:`SourceTooLongError`; a target: ``data.max_target_length``), else the rows cut are
    counted for one warning (:meth:`warn`) naming how many and the first."""

    def __init__(self, side: str, limit: int | None, eos_token_id: int, on_too_long: str = "warn"):
        self.check(on_too_long)
        self.side, self.limit, self.eos_token_id = side, limit, eos_token_id
        self.on_too_long = on_too_long
        self.rows, self.count, self.first = 0, 0, ""

    @staticmethod
    def check(on_too_long: str) -> None:
        """Refuse an ``on_too_long`` that is not ``warn`` or ``error``."""
        if on_too_long not in ON_TOO_LONG:
            raise ValueError(f"on_too_long: {on_too_long!r} is not one of {', '.join(ON_TOO_LONG)}")

    def __call__(
        self, values: np.ndarray, lengths: np.ndarray, texts: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The next rows (flat, with their ``texts``) cut: ``(values, lengths)``."""
        values, kept, cut = cut_flat(values, lengths, self.limit, self.eos_token_id)
        if len(cut) and self.on_too_long == "error":
            raise self.refusal(self.rows + int(cut[0]), int(lengths[cut[0]]))
        if len(cut) and not self.count:
            self.first = texts[cut[0]][:60]
        self.rows, self.count = self.rows + len(kept), self.count + len(cut)
        return values, kept

    def refusal(self, index: int, length: int) -> ValueError:
        """The error that refuses row ``index`` of ``length`` tokens."""
        if self.side == "source":
            return SourceTooLongError(
                f"source {index} has {length} tokens; the model accepts at most {self.limit}"
            )
        return RecipeError(
            f"data.max_target_length: target {index} has {length} tokens (> {self.limit})"
        )

    def cut_ids(self, ids: RaggedIds, texts: Sequence[str]) -> RaggedIds:
        """``ids`` (the rows of ``texts``) cut, itself when no row is longer; warns of the rows
        cut."""
        import numpy as np  # on use, as in cut_flat

        values, lengths = self(ids.values[ids.offsets[0] : ids.offsets[-1]], ids.lengths, texts)
        self.warn()
        return type(ids)(values, np.concatenate([[0], np.cumsum(lengths)])) if self.count else ids

    def cut_rows(self, encoded: Sequence[Sequence[int]], texts: Sequence[str]) -> list[list[int]]:
        """``encoded`` (lists of ids, small data) cut, as new lists; warns of the rows cut."""
        import numpy as np  # on use, as in cut_flat

        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        flat = itertools.chain.from_iterable(encoded)
        values = np.fromiter(flat, dtype=np.int64, count=int(lengths.sum()))
        values, lengths = self(values, lengths, texts)
        self.warn()
        return (
            [row.tolist() for row in np.split(values, np.cumsum(lengths)[:-1])]
            if len(encoded)
            else []
        )

    def facts(self) -> dict:
        """What :meth:`warn` says, as JSON (kept with prepared data)."""
        return {"side": self.side, "limit": self.limit, "count": self.count, "first": self.first}

    def warn(self) -> None:
        """One warning when rows were cut (:func:`warn_cut`)."""
        warn_cut(self.facts())


def warn_cut(facts: dict) -> None:
    """The warning of :meth:`RowCutter.warn` from its :meth:`~RowCutter.facts` (nothing when
    no row was cut)."""
    if not facts["count"]:
        return
    if facts["side"] == "source":
        logger.warning(
            "%d source(s) longer than %d tokens were truncated (first: %r)",
            facts["count"], facts["limit"], facts["first"],
        )  # fmt: skip
    else:
        logger.warning(
            "%d target(s) longer than %d tokens were truncated", facts["count"], facts["limit"]
        )


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
    "RowCutter",
    "SourceTooLongError",
    "cut_flat",
    "cut_sources",
    "encode_flat",
    "encode_sources",
    "encode_targets",
    "load_pair_splits",
    "load_pairs",
    "pair_batches",
    "reference_text",
    "target_language",
    "warn_cut",
]
