"""Where a model or a data set named by the user lies: a local path or a Hub repo id, told apart
in one place for every command and every recipe field, before anything slow is loaded.

A name is meant as a local path (:func:`looks_like_path`) when it exists or is spelt like one;
otherwise it is a Hub id when ``huggingface_hub``'s own validator accepts it (:func:`is_repo_id`).
:func:`local_model_path` applies the rule to a model's name (a command's ``MODEL`` argument, a
recipe's ``model.pretrained``): the local path, or ``None`` for a Hub id.
A Hub id can be loaded without the network only when it was downloaded before
(:func:`in_local_cache`), which matters when the Hub is offline (:func:`hub_offline`). The
callers turn the answers into their own one-line errors (``model folder not found: runs/x``
for a model, ``data.source: ...`` for a data set). :func:`absolute_source` is the one rule
that stores a local ``data.source`` as an absolute path. Light: no torch, no ``datasets``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from .model_folder import ADAPTER_CONFIG_FILE, CONFIG_FILE

DATA_FILE_SUFFIXES = (
    ".txt", ".csv", ".tsv", ".json", ".jsonl", ".parquet", ".arrow", ".zip", ".gz", ".xz",
    ".bz2", ".tar", ".tgz",
)  # fmt: skip
"""Suffixes that mark a name as a local file (``data/input.txt``), never a Hub id."""
TRUE_VALUES = ("1", "ON", "YES", "TRUE")
"""The values of an environment flag that mean "on" (as ``huggingface_hub`` and ``datasets``
read them)."""


def looks_like_path(name: str) -> bool:
    """Whether ``name`` is meant as a local path, so that a missing one is an error at once
    rather than a Hub lookup: it exists, starts with ``.``, ``/`` or ``~``, holds a backslash
    (or the system's separator), has more than one ``/``, ends in a data file suffix
    (:data:`DATA_FILE_SUFFIXES`), or is ``dir/name`` where ``dir`` is a local folder
    (``runs/x`` next to a ``runs/`` folder; ``owner/name`` is a Hub id only when no folder
    ``owner`` is there)."""
    return (
        name.startswith((".", "/", "~"))
        or "\\" in name
        or os.sep in name.replace("/", "")
        or name.count("/") > 1
        or Path(name).suffix.lower() in DATA_FILE_SUFFIXES
        or Path(name).exists()
        or ("/" in name and Path(name.split("/", 1)[0]).is_dir())
    )


def absolute_source(source: str, embedded: Iterable[str] = ()) -> str:
    """``source`` (a recipe's ``data.source``) as the absolute path of the local file or folder
    it names, so that a recipe stored in a run folder loads the same data from any working
    folder; an ``embedded`` dataset name, a URL, a Hub id or a path that does not exist is
    returned as it is."""
    if source in embedded or "://" in source:
        return source
    path = Path(source).expanduser()
    return str(path.resolve()) if path.exists() else source


def is_repo_id(name: str, *, bare: bool = True) -> bool:
    """Whether ``name`` is a valid Hub repo id (``huggingface_hub``'s ``validate_repo_id``:
    letters, digits, ``-``, ``_``, ``.``): ``owner/name``, or also a bare ``name`` (a canonical
    repo such as ``gpt2`` or ``imdb``) when ``bare``."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if "/" not in name and not bare:
        return False
    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def looks_like_hub_id(name: str) -> bool:
    """Whether ``name`` names a Hub repo rather than a local path: it is not meant as a path
    (:func:`looks_like_path`) and is a valid repo id (:func:`is_repo_id`)."""
    return bool(name) and not looks_like_path(name) and is_repo_id(name)


def local_model_path(name: str) -> Path | None:
    """The local path (``~`` expanded) of the model ``name`` when something exists there (a folder,
    or a file: the caller checks what it holds), or ``None`` when ``name`` is a Hub repo id to
    fetch. Light and quick: no torch, no network.

    Raises:
        FileNotFoundError: nothing exists at ``name`` and it is empty, meant as a local path
            (:func:`looks_like_path`) or no valid repo id (:func:`is_repo_id`).
    """
    path = Path(name).expanduser()
    if name.strip() and path.exists():
        return path
    if not name.strip() or looks_like_path(name) or not is_repo_id(name):
        raise FileNotFoundError(f"model folder not found: {name}")
    return None


def hub_offline(*, datasets: bool = False) -> bool:
    """Whether the Hub may not be reached: ``HF_HUB_OFFLINE`` as ``huggingface_hub`` reads it;
    with ``datasets``, ``HF_DATASETS_OFFLINE`` first when it is set (as ``datasets`` decides
    it)."""
    from huggingface_hub import constants

    value = os.environ.get("HF_DATASETS_OFFLINE") if datasets else None
    if value is not None:
        return value.strip().upper() in TRUE_VALUES
    return bool(constants.HF_HUB_OFFLINE)


def in_local_cache(repo_id: str, repo_type: str = "model") -> bool:
    """Whether the Hub repo ``repo_id`` was downloaded before, so that it loads offline: for a
    ``"model"``, its config or adapter config is in the Hub cache; for a ``"dataset"``, its
    folder is in the Hub cache or in the ``datasets`` cache (``HF_DATASETS_CACHE``)."""
    from huggingface_hub import constants, try_to_load_from_cache

    if repo_type == "model":
        return any(
            isinstance(try_to_load_from_cache(repo_id, name), str)
            for name in (CONFIG_FILE, ADAPTER_CONFIG_FILE)
        )
    from huggingface_hub.file_download import repo_folder_name

    hub_copy = Path(constants.HF_HUB_CACHE) / repo_folder_name(repo_id=repo_id, repo_type=repo_type)
    datasets_cache = os.environ.get("HF_DATASETS_CACHE") or Path(constants.HF_HOME) / "datasets"
    prepared = Path(datasets_cache) / repo_id.replace("/", "___")
    return hub_copy.is_dir() or prepared.is_dir()


__all__ = [
    "DATA_FILE_SUFFIXES",
    "TRUE_VALUES",
    "absolute_source",
    "hub_offline",
    "in_local_cache",
    "is_repo_id",
    "local_model_path",
    "looks_like_hub_id",
    "looks_like_path",
]
