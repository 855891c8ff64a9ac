"""What a recipe's ``data.source`` may name, checked in one place for every task before anything
is loaded: an embedded dataset, an existing local file or folder, or a Hub dataset id.

:func:`check_source` refuses at once (no trip to the Hub, no data read) a source that is none of
them: a missing path, a name that is not a valid Hub dataset id, any Hub id while the Hub is
offline (``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE``) and the dataset is not in the local
cache, and a name close to an embedded one (a typo: ``genr`` for ``genre``), which the message
suggests. Each data module calls it with its embedded names (:mod:`hfattn.data.text`,
:mod:`hfattn.data.translation`, :mod:`hfattn.data.classification`); ``hfattn train`` calls it
through them before the task is imported. Light: no ``datasets``, no torch.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from pathlib import Path

FILE_SUFFIXES = (
    ".txt", ".csv", ".tsv", ".json", ".jsonl", ".parquet", ".arrow", ".zip", ".gz", ".xz",
    ".bz2", ".tar", ".tgz",
)  # fmt: skip
"""Suffixes that mark a source as a local file (``data/input.txt``), never a Hub id."""
TRUE_VALUES = ("1", "ON", "YES", "TRUE")


def looks_like_path(source: str) -> bool:
    """Whether ``source`` is meant as a local path: it starts with ``.``, ``/`` or ``~``, has
    more than one ``/``, or ends in a data file suffix (:data:`FILE_SUFFIXES`)."""
    return (
        source.startswith((".", "/", "~"))
        or source.count("/") > 1
        or Path(source).suffix.lower() in FILE_SUFFIXES
    )


def is_hub_dataset_id(source: str, *, bare: bool) -> bool:
    """Whether ``source`` is a valid Hub dataset id: ``owner/name``, or also a bare ``name``
    (a canonical dataset such as ``imdb``) when ``bare``."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if "/" not in source and not bare:
        return False
    try:
        validate_repo_id(source)
    except HFValidationError:
        return False
    return True


def hub_offline() -> bool:
    """Whether ``datasets`` may not reach the Hub: ``HF_DATASETS_OFFLINE`` when set, else
    ``HF_HUB_OFFLINE`` (as ``datasets`` decides it)."""
    from huggingface_hub import constants

    value = os.environ.get("HF_DATASETS_OFFLINE")
    if value is not None:
        return value.strip().upper() in TRUE_VALUES
    return bool(constants.HF_HUB_OFFLINE)


def in_local_cache(dataset_id: str) -> bool:
    """Whether the Hub dataset ``dataset_id`` was downloaded before (the Hub cache, or the
    ``datasets`` cache), so that it loads offline."""
    from huggingface_hub import constants

    hub_copy = Path(constants.HF_HUB_CACHE) / f"datasets--{dataset_id.replace('/', '--')}"
    datasets_cache = os.environ.get("HF_DATASETS_CACHE") or Path(constants.HF_HOME) / "datasets"
    prepared = Path(datasets_cache) / dataset_id.replace("/", "___")
    return hub_copy.is_dir() or prepared.is_dir()


def check_source(
    source: str, embedded: Iterable[str], *, bare_hub_ids: bool = False, urls: bool = False
) -> None:
    """Refuse a ``data.source`` that is not one of ``embedded``, an existing file or folder,
    an ``http(s)://`` URL (when ``urls``) or a Hub dataset id that can be loaded, before
    anything is read.

    Args:
        source: the recipe's ``data.source``.
        embedded: the loader's embedded dataset names.
        bare_hub_ids: a bare ``name`` counts as a Hub id (canonical datasets such as ``imdb``);
            otherwise a Hub id is ``owner/name``.
        urls: the loader also downloads ``http(s)://`` URLs.

    Raises:
        FileNotFoundError: ``source`` is meant as a path (:func:`looks_like_path`) and does not
            exist.
        ValueError: ``data.source: 'genr' is not an embedded dataset (genre, reber,
            reviews-es), an existing file, or a Hub dataset id; did you mean 'genre'?``
    """
    names = list(embedded)
    if source in names or (urls and source.startswith(("http://", "https://"))):
        return
    if Path(source).expanduser().exists():
        return
    if looks_like_path(source):
        raise FileNotFoundError(f"data.source: no such file or folder {source!r}")
    close = difflib.get_close_matches(source, names, n=1)
    if close:
        reason = f"did you mean {close[0]!r}?"
    elif not is_hub_dataset_id(source, bare=bare_hub_ids):
        form = "owner/name or name" if bare_hub_ids else "owner/name"
        reason = f"a Hub dataset id is {form} (letters, digits, '-', '_', '.')"
    elif hub_offline() and not in_local_cache(source):
        reason = "the Hub is offline (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE) and it is not cached"
    else:
        return
    raise ValueError(
        f"data.source: {source!r} is not an embedded dataset ({', '.join(names)}), an existing "
        f"file, or a Hub dataset id; {reason}"
    )


__all__ = ["check_source", "hub_offline", "in_local_cache", "is_hub_dataset_id", "looks_like_path"]
