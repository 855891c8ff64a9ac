"""Text corpora for language modelling: the embedded plays, a local text / csv / json file or
a Hub dataset, read as a stream whatever their size.

:func:`open_text_splits` returns :class:`TextSplits`: for each of ``train``, ``validation`` and
``test``, the documents of the split, read in :class:`TextBatch` es (memory bounded by a batch,
not by the corpus):

- the embedded plays are split by whole plays (:data:`hfattn.data.shakespeare.SPLITS`: the
  held-out splits are plays the model never saw), one document per play;
- a single text file is cut into contiguous parts (its tail held out,
  :func:`fraction_cuts`), each one document read from the file a chunk at a time
  (:func:`~hfattn.storage.file_reads.iter_utf8_text`);
- a table file or a Hub dataset (Arrow files that ``datasets`` memory-maps) gives the rows of
  its own three splits as documents, or else its ``train`` rows joined by newlines, cut like a
  text file.

A held-out part carved this way takes its fraction's share of the characters, at most
``max_held_out_chars`` (``data.max_held_out_chars``; :func:`hfattn.data.held_out.capped`);
a source's own held-out splits are kept whole.

The fractions count characters, not bytes: the cuts of a text file are found by counting the
characters (UTF-8 lead bytes) of the file vectorised, a block at a time, so each part is
exactly the slice of the decoded text that ``text[:n_train]`` gave when the whole file was read
into one string, for any UTF-8 text (for ASCII text, characters and bytes are the same).
:func:`load_text_splits` gives the documents as whole strings (small corpora, tests).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..storage.file_reads import READ_CHUNK_BYTES, iter_utf8_text
from .held_out import capped
from .shakespeare import iter_shakespeare
from .sources import check_source
from .tables import TABLE_FORMATS, load_table_file

EMBEDDED: dict[str, Callable[[str], Iterable[str]]] = {"shakespeare": iter_shakespeare}
"""Embedded corpora by name (no network needed): the documents of a split, one at a time."""

SPLIT_NAMES = ("train", "validation", "test")


COUNT_BLOCK_BYTES = 1 << 20
"""Bytes of a text file counted at a time when its cuts are located (:class:`FileSplits`;
fewer when it reads smaller chunks)."""
ROWS_PER_BATCH = 1000
"""Rows of a table or dataset read at a time."""


@dataclass
class TextBatch:
    """A few documents of a split, or pieces of one long document: ``texts[0]`` continues the
    last text of the batch before when ``continued``, and the last text goes on in the next
    batch when ``open_end`` (a document read a chunk at a time)."""

    texts: list[str]
    continued: bool = False
    open_end: bool = False


def fraction_cuts(
    n: int, validation_fraction: float, test_fraction: float, max_held_out: int | None = None
) -> tuple[int, int]:
    """``(n_train, n_train + n_validation)``: where a text of ``n`` characters is cut into
    contiguous train / validation / test parts (in that order),
    ``n_test = min(⌊n·test_fraction⌋, max_held_out)``,
    ``n_validation = min(⌊n·validation_fraction⌋, max_held_out)`` (``None``: no bound)."""
    n_test = capped(int(n * test_fraction), max_held_out)
    n_val = capped(int(n * validation_fraction), max_held_out)
    return n - n_val - n_test, n - n_test


def pieces_as_batches(pieces: Iterable[str]) -> Iterator[TextBatch]:
    """The pieces of one document as batches (``continued`` / ``open_end`` set); no piece at
    all is one empty document."""
    previous, first = None, True
    for piece in pieces:
        if previous is not None:
            yield TextBatch([previous], continued=not first, open_end=True)
            first = False
        previous = piece
    yield TextBatch(["" if previous is None else previous], continued=not first)


class TextSplits:
    """The documents of a corpus' ``train`` / ``validation`` / ``test`` splits, streamed."""

    fingerprint: dict | None = None
    """What identifies the content beyond the source's name (a dataset's fingerprints)."""

    def batches(self, split: str) -> Iterator[TextBatch]:
        """The documents of ``split``, a batch at a time (the same on every call)."""
        raise NotImplementedError

    def num_chars(self, split: str) -> int | None:
        """Characters of ``split`` when known without reading it (progress bars)."""
        return None

    def documents(self, split: str) -> list[str]:
        """Every document of ``split`` as one string (small corpora only)."""
        docs: list[str] = []
        for batch in self.batches(split):
            texts = list(batch.texts)
            if batch.continued:
                docs[-1] += texts.pop(0)
            docs += texts
        return docs


class DocumentSplits(TextSplits):
    """Splits whose documents come from ``documents(split)`` (the embedded plays)."""

    def __init__(self, documents: Callable[[str], Iterable[str]]):
        self._documents = documents

    def batches(self, split: str) -> Iterator[TextBatch]:
        for document in self._documents(split):
            yield TextBatch([document])


class FileSplits(TextSplits):
    """A UTF-8 text file cut into three contiguous documents by character fraction, each
    held-out part at most ``max_held_out`` characters (see the module docstring), read
    ``chunk_bytes`` at a time."""

    def __init__(
        self,
        path: Path,
        validation_fraction: float,
        test_fraction: float,
        chunk_bytes: int = READ_CHUNK_BYTES,
        max_held_out: int | None = None,
    ):
        self.path, self.chunk_bytes = path, chunk_bytes
        self.block = min(chunk_bytes, COUNT_BLOCK_BYTES)
        self.held_out = validation_fraction, test_fraction, max_held_out
        self._bounds: dict[str, tuple[int, int]] | None = None
        self._chars: dict[str, int] = {}

    def bounds(self, split: str) -> tuple[int, int]:
        """``(start, stop)`` bytes of ``split`` in the file (character boundaries)."""
        if self._bounds is None:
            cumulative = [0, *itertools.accumulate(self._block_char_counts())]
            cuts = fraction_cuts(cumulative[-1], *self.held_out)
            size = self.path.stat().st_size
            edges = [0, *(self._byte_of_char(k, cumulative, size) for k in cuts), size]
            self._bounds = dict(zip(SPLIT_NAMES, zip(edges[:-1], edges[1:], strict=True),
                                    strict=True))  # fmt: skip
            chars = [0, *cuts, cumulative[-1]]
            self._chars = {s: b - a for s, a, b in zip(SPLIT_NAMES, chars, chars[1:], strict=False)}
        return self._bounds[split]

    def num_chars(self, split: str) -> int:
        self.bounds(split)
        return self._chars[split]

    def batches(self, split: str) -> Iterator[TextBatch]:
        start, stop = self.bounds(split)
        pieces = iter_utf8_text(self.path, start, stop, chunk_bytes=self.chunk_bytes)
        yield from pieces_as_batches(pieces)

    def _block_char_counts(self) -> list[int]:
        """Characters of every block of the file."""
        with open(self.path, "rb") as handle:
            blocks = iter(lambda: handle.read(self.block), b"")
            return [int(_lead_bytes(block).sum()) for block in blocks]

    def _byte_of_char(self, k: int, cumulative: list[int], size: int) -> int:
        """The byte where character ``k`` starts (``size`` past the last one)."""
        if k >= cumulative[-1]:
            return size
        block = bisect.bisect_right(cumulative, k) - 1
        with open(self.path, "rb") as handle:
            handle.seek(block * self.block)
            leads = _lead_bytes(handle.read(self.block)).nonzero()[0]
        return block * self.block + int(leads[k - cumulative[block]])


def _lead_bytes(data: bytes):
    """Whether each byte of UTF-8 ``data`` starts a character (is not ``0b10xxxxxx``), as a
    numpy array (vectorised)."""
    import numpy as np  # not at import: recipe parsing imports this module

    return (np.frombuffer(data, dtype=np.uint8) & 0xC0) != 0x80


class DatasetSplits(TextSplits):
    """The ``text_column`` of a ``datasets.DatasetDict``: its own three splits, rows as
    documents, or else its ``train`` rows joined by newlines and cut by fraction (one document
    per part, read :data:`ROWS_PER_BATCH` rows at a time; ``held_out``: the validation and
    test fractions and the most characters of a held-out part, :func:`fraction_cuts`)."""

    def __init__(
        self, dataset, name: str, text_column: str, held_out: tuple[float, float, int | None]
    ):
        if text_column not in dataset["train"].column_names:
            raise ValueError(
                f"data.text_column: {text_column!r} is not a column of {name} "
                f"(columns: {', '.join(dataset['train'].column_names)})"
            )
        self.column = text_column
        self.own_splits = all(split in dataset for split in SPLIT_NAMES)
        used = SPLIT_NAMES if self.own_splits else ("train",)
        self.tables = {split: dataset[split].select_columns([text_column]) for split in used}
        self.fingerprint = {split: table._fingerprint for split, table in self.tables.items()}
        self.held_out = held_out
        self._piece_chars: list[int] | None = None

    def _rows(self, table, first: int) -> list[str]:
        return table[first : first + ROWS_PER_BATCH][self.column]

    def _batch_chars(self, table) -> tuple[list[int], list[int]]:
        """``(characters, rows)`` of every batch of :data:`ROWS_PER_BATCH` rows of ``table``,
        counted by Arrow without making Python strings."""
        import pyarrow.compute as pc

        arrow = table.with_format("arrow")
        chars, rows = [], []
        for first in range(0, len(table), ROWS_PER_BATCH):
            column = arrow[first : first + ROWS_PER_BATCH][self.column]
            chars.append(pc.sum(pc.utf8_length(column)).as_py() or 0)
            rows.append(len(column))
        return chars, rows

    def num_chars(self, split: str) -> int:
        if self.own_splits:
            return sum(self._batch_chars(self.tables[split])[0])
        start, stop = self._char_bounds(split)
        return stop - start

    def _char_bounds(self, split: str) -> tuple[int, int]:
        if self._piece_chars is None:  # batch j's rows joined, after a "\n" when j > 0
            chars, rows = self._batch_chars(self.tables["train"])
            pieces = enumerate(zip(chars, rows, strict=True))
            self._piece_chars = [c + r - 1 + (j > 0) for j, (c, r) in pieces]
        n = sum(self._piece_chars)
        edges = [0, *fraction_cuts(n, *self.held_out), n]
        index = SPLIT_NAMES.index(split)
        return edges[index], edges[index + 1]

    def batches(self, split: str) -> Iterator[TextBatch]:
        if self.own_splits:
            table = self.tables[split]
            for first in range(0, len(table), ROWS_PER_BATCH):
                yield TextBatch(self._rows(table, first))
            return
        yield from pieces_as_batches(self._joined_pieces(*self._char_bounds(split)))

    def _joined_pieces(self, start: int, stop: int) -> Iterator[str]:
        """Characters ``start`` to ``stop`` of the train rows joined by newlines, a batch of
        rows at a time (batches wholly outside are not read)."""
        offset = 0
        for j, chars in enumerate(self._piece_chars):
            if offset < stop and offset + chars > start:
                text = ("\n" if j else "") + "\n".join(
                    self._rows(self.tables["train"], j * ROWS_PER_BATCH)
                )
                yield text[max(start - offset, 0) : stop - offset]
            offset += chars


def check_text_source(source: str) -> None:
    """Refuse at once a ``data.source`` that is not an embedded corpus, an existing file or
    folder, or an ``owner/name`` Hub dataset id that can be loaded
    (:func:`hfattn.data.sources.check_source`)."""
    check_source(source, EMBEDDED)


def open_text_splits(
    source: str,
    *,
    text_column: str = "text",
    validation_fraction: float = 0.05,
    test_fraction: float = 0.05,
    max_held_out_chars: int | None = None,
    chunk_bytes: int = READ_CHUNK_BYTES,
) -> TextSplits:
    """Open a corpus by name, path or Hub id, to be read split by split (nothing of a text
    file is read yet).

    Args:
        source: ``"shakespeare"`` (embedded), a path to a UTF-8 text file (e.g. the classic
            tiny-shakespeare ``input.txt``), a local ``.csv`` / ``.tsv`` / ``.json`` /
            ``.jsonl`` / ``.parquet`` file (:mod:`hfattn.data.tables`), or a Hub dataset id or
            local dataset folder (loaded with ``datasets.load_dataset``; its ``train`` /
            ``validation`` / ``test`` splits are used when present). A source that is none of
            these fails at once, before anything is read (:func:`check_text_source`).
        text_column: the column holding the text in a table file or a Hub dataset.
        validation_fraction, test_fraction: the tail fractions held out when the source has
            no splits of its own (a file, or a Hub dataset with only ``train``).
        max_held_out_chars: the most characters of each part held out that way (``None``: no
            bound); a source's own splits are kept whole.
        chunk_bytes: bytes of a text file decoded at a time.
    """
    if source in EMBEDDED:
        return DocumentSplits(EMBEDDED[source])
    check_text_source(source)
    held_out = (validation_fraction, test_fraction, max_held_out_chars)
    path = Path(source).expanduser()
    if path.is_file() and path.suffix.lower() not in TABLE_FORMATS:
        return FileSplits(path, validation_fraction, test_fraction, chunk_bytes, max_held_out_chars)
    import datasets

    if path.is_file():  # a table file (TABLE_FORMATS): its text_column holds the text
        return DatasetSplits(load_table_file(path), str(path), text_column, held_out)
    return DatasetSplits(datasets.load_dataset(source), source, text_column, held_out)


def load_text_splits(source: str, **options) -> dict[str, list[str]]:
    """``{"train": [...], "validation": [...], "test": [...]}``, each a list of documents
    (whole strings) of :func:`open_text_splits` ``(source, **options)``: for small corpora and
    tests; the tasks stream the splits instead."""
    splits = open_text_splits(source, **options)
    return {split: splits.documents(split) for split in SPLIT_NAMES}


__all__ = [
    "EMBEDDED",
    "ROWS_PER_BATCH",
    "SPLIT_NAMES",
    "TABLE_FORMATS",
    "DatasetSplits",
    "DocumentSplits",
    "FileSplits",
    "TextBatch",
    "TextSplits",
    "check_text_source",
    "fraction_cuts",
    "load_text_splits",
    "open_text_splits",
    "pieces_as_batches",
]
