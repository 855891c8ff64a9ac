"""Table files as data sources: a ``.csv`` / ``.tsv`` / ``.json`` / ``.jsonl`` / ``.parquet``
file read by ``datasets`` (``load_dataset("csv" | "json" | "parquet", data_files=...)``) into a
``DatasetDict`` with one ``train`` split, for every task that takes a local file
(:mod:`hfattn.data.text`, :mod:`hfattn.data.classification`, :mod:`hfattn.data.translation`).
Light: ``datasets`` is imported on use.
"""

from __future__ import annotations

from pathlib import Path

TABLE_FORMATS = {
    ".csv": "csv", ".tsv": "csv", ".json": "json", ".jsonl": "json", ".parquet": "parquet",
}  # fmt: skip
"""Local file suffix → ``datasets`` builder (``.tsv`` is read with a tab delimiter)."""


def is_table_file(path: str | Path) -> bool:
    """Whether ``path`` is an existing file whose suffix is one of :data:`TABLE_FORMATS`."""
    path = Path(path).expanduser()
    return path.is_file() and path.suffix.lower() in TABLE_FORMATS


def load_table_file(path: str | Path, **options):
    """The table file ``path`` as a ``DatasetDict`` with a ``train`` split (its suffix picks the
    builder, :data:`TABLE_FORMATS`; a ``.tsv`` is read with ``delimiter="\\t"``); ``options``
    go to the builder (``keep_default_na=False`` for a CSV, say)."""
    import datasets

    path = Path(path).expanduser()
    suffix = path.suffix.lower()
    if suffix == ".tsv":
        options = {"delimiter": "\t", **options}
    return datasets.load_dataset(TABLE_FORMATS[suffix], data_files=str(path), **options)


__all__ = ["TABLE_FORMATS", "is_table_file", "load_table_file"]
