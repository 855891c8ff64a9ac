"""The causal-LM corpus, prepared once and memory-mapped: its tokenizer and the ids of every
split, in a folder of the prepared-data cache (:func:`hfattn.data.prepared.prepare`).

The folder (:class:`LMCorpus`) holds

- ``tokenizer/``: the tokenizer the ids were encoded with (``save_pretrained``);
- ``train``, ``validation``, ``test``: one :class:`~hfattn.storage.ragged.RaggedIds` per
  split, one row per document, its separator token first: the rows one after the other are
  exactly the id sequence that :func:`hfattn.batching.lm.encode_corpus` gives the documents;
- :data:`FACTS_FILE`: the separator, tokens, documents and characters of every split, and for
  a char tokenizer the characters that map to ``<unk>``.

Two ways to prepare, each keyed by the source (:func:`~hfattn.data.prepared.source_identity`
and a dataset's fingerprints), ``text_column``, the fractions and ``max_held_out_chars``, the
tokenizer settings and the separator (:func:`corpus_settings`):

- :func:`prepare_char_corpus`: the char tokenizer of ``tokenizer.min_frequency`` built from the
  training split's character counts (a vectorised count, a chunk at a time:
  :class:`~hfattn.tokenization.characters.CharCounts`), then every split encoded through a
  code-point lookup table (:func:`~hfattn.tokenization.characters.char_lookup`);
- :func:`prepare_tokenized_corpus`: a given tokenizer (a pretrained model's, keyed by its name
  and :func:`~hfattn.tokenization.fingerprint.tokenizer_fingerprint`; or a saved model's, to
  re-score it), encoding batches of documents in Rust (``tokenizer(texts)``). A long document
  read in chunks is cut into pieces just before a newline (or else a space) that follows a
  non-space character: a byte-level BPE (GPT-2) and whitespace pre-tokenizers split the text
  there anyway, so the pieces' ids are the whole text's; a tokenizer that adds a prefix space
  to every input (SentencePiece's metaspace) may differ at those cuts.

Once the folder is ready, prepared or found, one line states the characters and tokens of
every split, read from :data:`FACTS_FILE` (:func:`~hfattn.data.held_out.log_split_sizes`).

Memory stays bounded by a chunk of text (:data:`~hfattn.storage.file_reads.READ_CHUNK_BYTES`)
whatever the corpus' size; every pass shows a progress bar after two seconds.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...common.field_checks import require
from ...common.progress import progress_bar
from ...data.held_out import log_split_sizes
from ...data.prepared import Prepared, prepare, source_identity
from ...data.text import SPLIT_NAMES, TextBatch, TextSplits, open_text_splits
from ...storage.file_io import atomic_write_json
from ...storage.file_reads import READ_CHUNK_BYTES
from ...storage.ragged import RaggedIds, RaggedWriter, ids_dtype
from ...tokenization.characters import (
    CharCounts,
    CharTable,
    char_lookup,
    char_tokenizer_from_counts,
)
from ...tokenization.fingerprint import tokenizer_fingerprint
from .recipe import TextDataSection

logger = logging.getLogger(__name__)

TASK_KEY = "causal_lm"
"""The task part of a prepared folder's name."""
TOKENIZER_FOLDER = "tokenizer"
FACTS_FILE = "corpus.json"
"""The facts of a prepared corpus (see the module docstring)."""
PIECE_CHARS = 1 << 20
"""The longest text a subword tokenizer encodes in one piece (a long document is cut)."""
ENCODE_BATCH_CHARS = 8 << 20
"""Characters a subword tokenizer encodes per call (its Rust threads share the pieces)."""


@dataclass
class LMCorpus:
    """A prepared corpus: the tokenizer, the ids of every split (memory-mapped), the facts
    (:data:`FACTS_FILE`) and how this run came by the folder."""

    tokenizer: Any
    ids: dict[str, RaggedIds]
    facts: dict
    prepared: Prepared

    def tokens(self, split: str) -> np.ndarray:
        """The ids of ``split``: its documents one after the other, each after the separator
        (the memory-mapped values; nothing is copied)."""
        return self.ids[split].values


def document_separator(tokenizer, pretrained: bool) -> int:
    """The token put before every document of a corpus: ``<bos>`` for the char tokenizer (as
    the char-RNN was always trained), ``eos`` for a pretrained model (GPT-2's
    ``<|endoftext|>``, what it saw between documents), each falling back on the other."""
    first, second = ("eos", "bos") if pretrained else ("bos", "eos")
    token = getattr(tokenizer, f"{first}_token_id")
    token = getattr(tokenizer, f"{second}_token_id") if token is None else token
    require(token is not None, "tokenizer", "has neither a bos nor an eos token")
    return token


def open_splits(data: TextDataSection, chunk_bytes: int = READ_CHUNK_BYTES) -> TextSplits:
    """The recipe's text splits, streamed (:func:`hfattn.data.text.open_text_splits`)."""
    return open_text_splits(
        data.source,
        text_column=data.text_column,
        validation_fraction=data.validation_fraction,
        test_fraction=data.test_fraction,
        max_held_out_chars=data.max_held_out_chars,
        chunk_bytes=chunk_bytes,
    )


def corpus_settings(
    data: TextDataSection, splits: TextSplits, tokenizer: dict, separator: int | str
) -> dict:
    """What the prepared ids depend on, the key of their folder: the source's identity (and a
    dataset's fingerprints), the text column, the held-out fractions and their bound
    (``max_held_out_chars``), the tokenizer settings and the separator."""
    return {
        "source": source_identity(data.source),
        "dataset": splits.fingerprint,
        "text_column": data.text_column,
        "validation_fraction": data.validation_fraction,
        "test_fraction": data.test_fraction,
        "max_held_out_chars": data.max_held_out_chars,
        "tokenizer": tokenizer,
        "separator": separator,
    }


def prepare_char_corpus(
    data: TextDataSection, min_frequency: int = 1, *, chunk_bytes: int = READ_CHUNK_BYTES
) -> LMCorpus:
    """The corpus of ``data`` under a char tokenizer of ``min_frequency``, prepared (the
    tokenizer built from the training split's character counts, every split encoded by a
    lookup table) or found in the cache. The tokenizer's ``unknown_char_count`` is the
    held-out characters outside the vocabulary plus the training characters left out, as
    :func:`~hfattn.tokenization.characters.build_char_tokenizer` counts them."""
    from transformers import AutoTokenizer

    splits = open_splits(data, chunk_bytes)
    settings = corpus_settings(
        data, splits, {"type": "char", "min_frequency": min_frequency}, "<bos>"
    )

    def build(folder: Path) -> dict:
        train = _count_chars(splits, ("train",), "counting characters")
        held_out = _count_chars(splits, ("validation", "test"), "counting held-out characters")
        tokenizer = char_tokenizer_from_counts(
            train.as_dict(), held_out=held_out.as_dict(), min_frequency=min_frequency
        )
        separator = document_separator(tokenizer, False)
        return _write_corpus(
            folder, splits, tokenizer, separator, unknown_chars=tokenizer.unknown_char_count
        )

    prepared = prepare(TASK_KEY, settings, build, what=f"the char corpus of {data.source}")
    tokenizer = AutoTokenizer.from_pretrained(prepared.folder / TOKENIZER_FOLDER)
    corpus = _open(prepared, tokenizer, data)
    tokenizer.unknown_char_count = corpus.facts["unknown_chars"]
    return corpus


def prepare_tokenized_corpus(
    data: TextDataSection,
    tokenizer,
    tokenizer_settings: dict,
    separator: int,
    *,
    chunk_bytes: int = READ_CHUNK_BYTES,
) -> LMCorpus:
    """The corpus of ``data`` encoded with ``tokenizer`` (whose ids every later use of the
    corpus needs: a pretrained model's own), each document after ``separator``, prepared or
    found in the cache; ``tokenizer_settings`` name it in the key (a pretrained model's name
    and revision), to which its :func:`~hfattn.tokenization.fingerprint.tokenizer_fingerprint`
    is added."""
    splits = open_splits(data, chunk_bytes)
    described = {**tokenizer_settings, "fingerprint": tokenizer_fingerprint(tokenizer)}
    settings = corpus_settings(data, splits, described, separator)

    def build(folder: Path) -> dict:
        return _write_corpus(folder, splits, tokenizer, separator)

    what = f"the corpus of {data.source} tokenized for {tokenizer_settings.get('name', 'a model')}"
    return _open(prepare(TASK_KEY, settings, build, what=what), tokenizer, data)


def _open(prepared: Prepared, tokenizer, data: TextDataSection) -> LMCorpus:
    """The corpus of a prepared folder, mapped, once one line has stated its splits' sizes."""
    facts = json.loads((prepared.folder / FACTS_FILE).read_text())
    tokens = {split: f"in {count:,} tokens" for split, count in facts["tokens"].items()}
    log_split_sizes(facts["characters"], "characters", cap=data.max_held_out_chars,
                    cap_field="data.max_held_out_chars", details=tokens)  # fmt: skip
    ids = {split: RaggedIds.open(prepared.folder, split) for split in SPLIT_NAMES}
    return LMCorpus(tokenizer, ids, facts, prepared)


def _bar(splits: TextSplits, names: tuple[str, ...], desc: str):
    totals = [splits.num_chars(name) for name in names]
    total = None if None in totals else sum(totals)
    return progress_bar(total=total, desc=desc, unit="char")


def _count_chars(splits: TextSplits, names: tuple[str, ...], desc: str) -> CharCounts:
    counts = CharCounts()
    with _bar(splits, names, desc) as bar:
        for name in names:
            for batch in splits.batches(name):
                for text in batch.texts:
                    counts.add(text)
                    bar.update(len(text))
    return counts


def _write_corpus(folder: Path, splits: TextSplits, tokenizer, separator: int, **extra) -> dict:
    """Save ``tokenizer`` and write the ids of every split into ``folder``; the facts (with
    ``extra``, also written to :data:`FACTS_FILE`)."""
    tokenizer.save_pretrained(folder / TOKENIZER_FOLDER)
    table = char_lookup(tokenizer)
    dtype = ids_dtype(len(tokenizer))
    facts: dict = {"separator": separator, "vocab_size": len(tokenizer), "tokens": {},
                   "documents": {}, "characters": {}, **extra}  # fmt: skip
    with _bar(splits, SPLIT_NAMES, "encoding") as bar:
        for split in SPLIT_NAMES:
            encode = _table_encoder(table) if table is not None else _SubwordEncoder(tokenizer)
            chars = 0
            with RaggedWriter(folder, split, dtype) as writer:
                for batch in splits.batches(split):
                    _write_batch(writer, batch, encode(batch), separator)
                    size = sum(map(len, batch.texts))
                    chars += size
                    bar.update(size)
                ragged = writer.close()
            facts["tokens"][split] = ragged.num_values
            facts["documents"][split] = len(ragged)
            facts["characters"][split] = chars
    atomic_write_json(folder / FACTS_FILE, facts)
    return facts


def _write_batch(writer: RaggedWriter, batch: TextBatch, ids: list[np.ndarray], separator: int):
    """Append the ids of ``batch``'s texts: the first to the last row when it continues it,
    every other one as a new row after ``separator``."""
    if batch.continued:
        writer.extend_row(ids[0])
        ids = ids[1:]
    if ids:
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        values = np.concatenate([np.zeros(0, dtype=writer.dtype), *ids])
        values = np.insert(values, np.cumsum(lengths) - lengths, separator)
        writer.add_flat(values, lengths + 1)


def _table_encoder(table: CharTable) -> Callable[[TextBatch], list[np.ndarray]]:
    """Encode a batch's texts by the code-point lookup ``table`` (all texts in one gather)."""

    def encode(batch: TextBatch) -> list[np.ndarray]:
        ids = table.encode("".join(batch.texts))
        return np.split(ids, np.cumsum([len(t) for t in batch.texts])[:-1])

    return encode


class _SubwordEncoder:
    """Encodes batches with the tokenizer itself, a document read in chunks carried over
    (its text after the last safe cut waits for the next chunk: see the module docstring)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.carry = ""

    def __call__(self, batch: TextBatch) -> list[np.ndarray]:
        texts = list(batch.texts)
        if batch.continued:
            texts[0] = self.carry + texts[0]
        self.carry = ""
        if batch.open_end:
            cut = safe_cut(texts[-1], len(texts[-1]) - 1)
            texts[-1], self.carry = texts[-1][:cut], texts[-1][cut:]
        pieces = [list(_pieces(text)) for text in texts]
        flat = [piece for text_pieces in pieces for piece in text_pieces]
        encoded = iter(self._encode(flat))
        empty = np.zeros(0, dtype=np.int64)
        return [
            np.concatenate([empty, *(np.asarray(next(encoded), np.int64) for _ in text_pieces)])
            for text_pieces in pieces
        ]

    def _encode(self, pieces: list[str]) -> Iterator[list[int]]:
        """The ids of every piece, encoded :data:`ENCODE_BATCH_CHARS` at a time."""
        group: list[str] = []
        size = 0
        for piece in [*pieces, None]:
            if group and (piece is None or size + len(piece) > ENCODE_BATCH_CHARS):
                yield from self.tokenizer(group, add_special_tokens=False, verbose=False)[
                    "input_ids"
                ]
                group, size = [], 0
            if piece is not None:
                group.append(piece)
                size += len(piece)


def safe_cut(text: str, limit: int) -> int:
    """The last position ``p ≤ limit`` (``p > 0``) where ``text[p]`` is a newline, else a
    space, that follows a non-space character: where ``text`` can be cut in two and each part
    encoded alone (see the module docstring); 0 when there is none."""
    for mark in ("\n", " "):
        p = text.rfind(mark, 0, limit + 1)
        while p > 0 and text[p - 1].isspace():
            p = text.rfind(mark, 0, p)
        if p > 0:
            return p
    return 0


def _pieces(text: str) -> Iterator[str]:
    """``text`` in pieces of at most :data:`PIECE_CHARS` where a safe cut allows."""
    while len(text) > PIECE_CHARS:
        cut = safe_cut(text, PIECE_CHARS)
        if cut == 0:
            break
        yield text[:cut]
        text = text[cut:]
    yield text


__all__ = [
    "ENCODE_BATCH_CHARS",
    "FACTS_FILE",
    "PIECE_CHARS",
    "TASK_KEY",
    "TOKENIZER_FOLDER",
    "LMCorpus",
    "corpus_settings",
    "document_separator",
    "open_splits",
    "prepare_char_corpus",
    "prepare_tokenized_corpus",
    "safe_cut",
]
