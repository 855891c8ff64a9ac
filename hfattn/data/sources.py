"""What a recipe's ``data.source`` may name, checked in one place for every task before anything
is loaded: an embedded dataset, an existing local file or folder, or a Hub dataset id.

:func:`check_source` refuses at once (no trip to the Hub, no data read) a source that is none of
them: a missing path, a name that is not a valid Hub dataset id, any Hub id while the Hub is
offline (``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE``) and the dataset is not in the local
cache (the rules of :mod:`hfattn.storage.location`), and a name close to an embedded one (a typo:
``genr`` for ``genre``), which the message suggests
(:func:`hfattn.common.field_checks.did_you_mean`). Each data module calls it with its embedded
names (:mod:`hfattn.data.text`,
:mod:`hfattn.data.translation`, :mod:`hfattn.data.classification`); ``hfattn train`` calls it
through them before the task is imported. Light: no ``datasets``, no torch.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..common.field_checks import did_you_mean
from ..storage.location import hub_offline, in_local_cache, is_repo_id, looks_like_path


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
        FileNotFoundError: ``source`` is meant as a path
        (:func:`hfattn.storage.location.looks_like_path`) and does not
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
    reason = did_you_mean(source, names)  # a typo of an embedded name first
    if not reason:
        if not is_repo_id(source, bare=bare_hub_ids):
            form = "owner/name or name" if bare_hub_ids else "owner/name"
            reason = f"; a Hub dataset id is {form} (letters, digits, '-', '_', '.')"
        elif hub_offline(datasets=True) and not in_local_cache(source, "dataset"):
            reason = (
                "; the Hub is offline (HF_HUB_OFFLINE / HF_DATASETS_OFFLINE) and it is not cached"
            )
        else:
            return
    raise ValueError(
        f"data.source: {source!r} is not an embedded dataset ({', '.join(names)}), an existing "
        f"file, or a Hub dataset id{reason}"
    )


__all__ = ["check_source"]
