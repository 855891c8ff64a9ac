"""Text corpora for language modelling: the embedded plays, a local text / csv / json file or
a Hub dataset.

:func:`load_text_splits` returns ``{"train": [...], "validation": [...], "test": [...]}``, each
a list of documents (strings). The embedded plays are split by whole plays
(:data:`hfattn.data.shakespeare.SPLITS`: the held-out splits are plays the model never saw);
a single text is split by fraction into contiguous parts (its tail is held out).
"""

from __future__ import annotations

from pathlib import Path

from ..storage.file_io import read_utf8_text
from .shakespeare import load_shakespeare
from .sources import check_source

EMBEDDED = {"shakespeare": load_shakespeare}
"""Embedded corpora by name (no network needed)."""

SPLIT_NAMES = ("train", "validation", "test")

TABLE_FORMATS = {".csv": "csv", ".tsv": "csv", ".json": "json", ".jsonl": "json"}
"""Local file suffixes read as tables by ``datasets`` (their ``text_column`` holds the text);
any other file is plain UTF-8 text."""


def split_by_fraction(
    text: str, validation_fraction: float, test_fraction: float
) -> dict[str, list[str]]:
    """Cut one text into contiguous train / validation / test parts (in that order)."""
    n = len(text)
    n_test = int(n * test_fraction)
    n_val = int(n * validation_fraction)
    n_train = n - n_val - n_test
    return {
        "train": [text[:n_train]],
        "validation": [text[n_train : n_train + n_val]],
        "test": [text[n_train + n_val :]],
    }


def check_text_source(source: str) -> None:
    """Refuse at once a ``data.source`` that is not an embedded corpus, an existing file or
    folder, or an ``owner/name`` Hub dataset id that can be loaded
    (:func:`hfattn.data.sources.check_source`)."""
    check_source(source, EMBEDDED)


def load_text_splits(
    source: str,
    *,
    text_column: str = "text",
    validation_fraction: float = 0.05,
    test_fraction: float = 0.05,
) -> dict[str, list[str]]:
    """Load a corpus by name, path or Hub id.

    Args:
        source: ``"shakespeare"`` (embedded), a path to a UTF-8 text file (e.g. the classic
            tiny-shakespeare ``input.txt``), a local ``.csv`` / ``.tsv`` / ``.json`` /
            ``.jsonl`` file, or a Hub dataset id or local dataset folder (loaded with
            ``datasets.load_dataset``; its ``train`` / ``validation`` / ``test`` splits are
            used when present). A source that is none of these fails at once, before
            anything is read (:func:`check_text_source`).
        text_column: the column holding the text in a table file or a Hub dataset.
        validation_fraction, test_fraction: the tail fractions held out when the source has
            no splits of its own (a file, or a Hub dataset with only ``train``).
    """
    if source in EMBEDDED:
        return {split: EMBEDDED[source](split) for split in SPLIT_NAMES}
    check_text_source(source)
    path = Path(source).expanduser()
    if path.is_file() and path.suffix.lower() in TABLE_FORMATS:
        import datasets

        dataset = datasets.load_dataset(
            TABLE_FORMATS[path.suffix.lower()],
            data_files=str(path),
            **({"delimiter": "\t"} if path.suffix.lower() == ".tsv" else {}),
        )
        return _dataset_splits(dataset, str(path), text_column, validation_fraction, test_fraction)
    if path.is_file():
        return split_by_fraction(read_utf8_text(path), validation_fraction, test_fraction)
    return _load_hub_text(source, text_column, validation_fraction, test_fraction)


def _load_hub_text(
    dataset_id: str, text_column: str, validation_fraction: float, test_fraction: float
) -> dict[str, list[str]]:
    import datasets

    dataset = datasets.load_dataset(dataset_id)
    return _dataset_splits(dataset, dataset_id, text_column, validation_fraction, test_fraction)


def _dataset_splits(
    dataset, dataset_id: str, text_column: str, validation_fraction: float, test_fraction: float
) -> dict[str, list[str]]:
    """The text splits of a ``datasets.DatasetDict``: its own three splits, or its ``train``
    rows joined by newlines and split by fraction."""
    if text_column not in dataset["train"].column_names:
        raise ValueError(
            f"data.text_column: {text_column!r} is not a column of {dataset_id} "
            f"(columns: {', '.join(dataset['train'].column_names)})"
        )
    if all(split in dataset for split in SPLIT_NAMES):
        return {split: list(dataset[split][text_column]) for split in SPLIT_NAMES}
    return split_by_fraction(
        "\n".join(dataset["train"][text_column]), validation_fraction, test_fraction
    )


__all__ = [
    "EMBEDDED",
    "TABLE_FORMATS",
    "check_text_source",
    "load_text_splits",
    "split_by_fraction",
]
