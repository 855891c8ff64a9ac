"""Translation data as ``datasets.DatasetDict`` with a ``translation`` column, as
``run_translation`` users know it: ``{"en": "I love you.", "es": "Te quiero."}`` per row.

:func:`load_translation_splits` takes, as ``source``:

- ``"bible"``: the Bible, World English Bible ↔ Reina-Valera 1909, aligned by verse, split by
  whole books (:mod:`hfattn.data.bible`; needs ``apt-get install sword-text-web
  sword-text-sparv``); extra columns ``book``, ``chapter``, ``verse``. ``"bible+kjv"``: the
  same, its training verses also paired with the King James Version's English (``apt-get
  install sword-text-kjv`` too); the same held-out splits.
- ``"dates"``, ``"numbers"``, ``"date-normalization"``: embedded generated tasks
  (:mod:`hfattn.data.pair_generators`), any ``size``, deterministic by ``seed``, each source
  sentence in one split only.
- a table file, read by ``datasets`` (:mod:`hfattn.data.tables`): ``.jsonl`` / ``.json`` /
  ``.csv`` / ``.parquet``, and a ``.tsv`` whose first line names ``source_lang`` (and
  ``target_lang`` when set) among its tab-separated fields (a header such as ``en<TAB>fr``).
  A CSV / TSV cell is text as written: ``NA`` or ``null`` is a sentence, an empty cell an empty
  side; a TSV knows no quoting (``"`` is text).
- any other file: ``spa.txt`` (Anki / Tatoeba: ``source<TAB>target[<TAB>attribution]`` lines,
  no header; ``.txt``, a ``.zip`` holding one, or a ``.tsv`` without a language header), or an
  ``http(s)://`` URL of one (downloaded once into ``$HF_HOME/hfattn/downloads``)
  (:mod:`hfattn.data.tatoeba`). Its languages are not named in the file: ``target_lang``
  defaults to ``es``.
- a Hub dataset id (``owner/name``) or a local dataset folder (``save_to_disk`` output or
  data files).

A table file, a folder and a Hub dataset hold their pairs in one of two layouts: a column of
``{language: text}`` dicts named ``translation_column`` (default ``translation``), or two flat
text columns named by the languages (``en``, ``fr``: ``source_lang`` and ``target_lang``),
which the loader turns into the ``translation`` column. Without ``target_lang``, the target is
the one language beside ``source_lang`` (the dict keys, or the columns of a flat table); where
there are more, ``target_lang`` must be set. Only the two languages are kept in the
``translation`` column; other columns stay.

Every split is cleaned and checked the same way:

- a pair whose source or target is missing (``null``), empty or blank is dropped, with one
  warning that counts them per split (``spa.txt``: one warning for its malformed lines);
- where hfattn carves the held-out splits itself (the generators, ``spa.txt``, table files,
  folders and Hub datasets missing ``validation`` / ``test``), each takes its fraction's share
  of the pairs, at most ``max_held_out_pairs`` (:mod:`hfattn.data.held_out`);
- there, each exact duplicate pair (after ``preprocessing``) lies in one split only
  (:mod:`hfattn.data.pair_splits`; one line counts the copies moved, and those dropped rather
  than swell a held-out split past ``max_held_out_pairs``); where the source has its own splits
  they are kept whole, and a warning counts the held-out pairs that are also in ``train``.

This module owns the embedded sources, ``spa.txt`` and the choice of reader;
:mod:`hfattn.data.pair_datasets` reads the table files, folders and Hub datasets (and the pairs
of a split in batches: :func:`pair_batches`, exported here).

``preprocessing`` (``"chollet"`` or ``"geron"``, see :mod:`hfattn.data.tatoeba`) rewrites the
text of every source; its split policy applies where the source has no splits of its own
(``spa.txt``).

Nothing is written into a local source folder (``datasets`` would put its cache files beside
the data: the selections and rewrites of a folder's splits stay in memory).
"""

from __future__ import annotations

import logging
from pathlib import Path

from .bible import LANGUAGES, load_bible
from .bible import SOURCES as BIBLE_SOURCES
from .held_out import split_counts
from .pair_datasets import (
    SPLIT_NAMES,
    check_languages,
    load_dataset_source,
    pair_batches,
    reads_as_table,
    target_of,
    translation_batches,
)
from .pair_generators import DEFAULT_SIZE, GENERATORS, generate_pairs
from .sources import check_source
from .tables import TABLE_FORMATS
from .tatoeba import PAIR_TRANSFORMS, PREPROCESSINGS, download, read_spa_txt, split_spa_pairs

logger = logging.getLogger(__name__)

EMBEDDED = (*BIBLE_SOURCES, *GENERATORS)
"""Sources known by bare name."""

LOADER_VERSION = 2
"""The version of what :func:`load_translation_splits` makes of a source (2: empty pairs
dropped, duplicate pairs in one split, flat columns); part of the key of the prepared pairs
(:func:`hfattn.tasks.translation.prepared.data_settings`)."""

SPA_TXT_TARGET = "es"
"""The target language of a ``spa.txt``-style file when ``target_lang`` is not set (the file
does not name its languages; ``spa.txt`` is English–Spanish)."""


def _check_fractions(validation_fraction: float, test_fraction: float) -> None:
    for name, value in (
        ("validation_fraction", validation_fraction),
        ("test_fraction", test_fraction),
    ):
        if not 0.0 <= value < 1.0:
            raise ValueError(f"data.{name} must be in [0, 1), got {value}")
    if validation_fraction + test_fraction >= 1.0:
        raise ValueError(
            "data.validation_fraction + data.test_fraction must be < 1, got "
            f"{validation_fraction + test_fraction}"
        )


def _pairs_to_dataset(pairs: list[dict[str, str]], source_lang: str, target_lang: str):
    import datasets

    features = datasets.Features(
        {"translation": {lang: datasets.Value("string") for lang in (source_lang, target_lang)}}
    )
    rows = [{source_lang: p[source_lang], target_lang: p[target_lang]} for p in pairs]
    return datasets.Dataset.from_dict({"translation": rows}, features=features)


def _to_dataset_dict(splits: dict[str, list[dict[str, str]]], source_lang: str, target_lang: str):
    import datasets

    return datasets.DatasetDict(
        {s: _pairs_to_dataset(splits[s], source_lang, target_lang) for s in SPLIT_NAMES}
    )


def _apply_preprocessing(
    dd, preprocessing: str | None, source_lang: str, target_lang: str, in_memory: bool = False
):
    if preprocessing is None:
        return dd
    transform = PAIR_TRANSFORMS[preprocessing]

    def rewrite(batch):
        return {
            "translation": [
                {**t, **transform(t, source_lang, target_lang)} for t in batch["translation"]
            ]
        }

    return dd.map(
        rewrite, batched=True, desc=f"{preprocessing} preprocessing", keep_in_memory=in_memory
    )


def _limit_train(dd, size: int | None, seed: int):
    if size is None or size >= len(dd["train"]):
        return dd
    import numpy as np

    rng = np.random.default_rng(seed)
    keep = np.sort(rng.choice(len(dd["train"]), size=size, replace=False))
    dd["train"] = dd["train"].select(keep, keep_in_memory=True)  # indices only
    return dd


def _load_generated(name, *, size, seed, source_lang, target_lang, fractions, max_held_out):
    languages = GENERATORS[name][1]
    check_languages(languages, source_lang, target_lang, name)
    pairs = generate_pairs(name, DEFAULT_SIZE if size is None else size, seed=seed)
    counts = split_counts(len(pairs), *fractions, max_held_out)
    # generate_pairs draws in random order: contiguous slices are random splits
    start_val = counts["train"]
    start_test = start_val + counts["validation"]
    splits = {
        "train": pairs[:start_val],
        "validation": pairs[start_val:start_test],
        "test": pairs[start_test:],
    }
    return _to_dataset_dict(splits, source_lang, target_lang)


def _load_spa_file(
    path, *, size, seed, source_lang, target_lang, preprocessing, fractions, max_held_out,
    **options,
):  # fmt: skip
    pairs = read_spa_txt(path, source_lang=source_lang, target_lang=target_lang)
    if not pairs:
        raise ValueError(
            f"data.source: no {source_lang}<TAB>{target_lang} pairs in {path}, read as spa.txt "
            f"(a table file needs one of the suffixes {', '.join(TABLE_FORMATS)}; a .tsv table "
            "a first line naming the languages, such as en<TAB>fr)"
        )
    if size is not None:
        pairs = pairs[:size]
    splits = split_spa_pairs(
        pairs,
        preprocessing=preprocessing,
        source_lang=source_lang,
        target_lang=target_lang,
        seed=seed,
        validation_fraction=fractions[0],
        test_fraction=fractions[1],
        max_held_out_pairs=max_held_out,
        what=f"the pairs of {path}",
        **options,
    )
    return _to_dataset_dict(splits, source_lang, target_lang)


def check_pair_source(source: str) -> None:
    """Refuse at once a ``data.source`` that is not an embedded source, a ``spa.txt`` path or
    URL, a dataset folder, or an ``owner/name`` Hub dataset id that can be loaded
    (:func:`hfattn.data.sources.check_source`)."""
    check_source(source, EMBEDDED, urls=True)


def load_translation_splits(
    source: str,
    *,
    source_lang: str = "en",
    target_lang: str | None = None,
    size: int | None = None,
    seed: int = 0,
    preprocessing: str | None = None,
    validation_fraction: float = 0.15,
    test_fraction: float = 0.15,
    max_held_out_pairs: int | None = None,
    translation_column: str = "translation",
    group_by_source: bool = False,
    train_size: int | None = None,
):
    """Load translation pairs as a ``DatasetDict`` with ``train`` / ``validation`` / ``test``
    and a ``translation`` column of ``{source_lang: ..., target_lang: ...}`` dicts.

    Args:
        source: ``"bible"``, ``"dates"``, ``"numbers"``, ``"date-normalization"``, a table file
            (``.jsonl``, ``.json``, ``.csv``, ``.parquet``, a ``.tsv`` with a language header),
            a path or ``http(s)://`` URL of ``spa.txt`` (any other file), or a Hub dataset id /
            local dataset folder (see the module docstring). A source that is none of these
            fails at once, before anything is read (:func:`check_pair_source`).
        source_lang, target_lang: the language keys of the pairs (the dict keys, or the flat
            column names). ``target_lang=None`` means the source's own: the generators' and
            the Bible's, the one language beside ``source_lang`` in a table or dataset (an
            error where there are more), ``"es"`` for ``spa.txt``.
        size: generators: the total number of pairs (default 20,000); ``spa.txt``: read only
            the first ``size`` pairs of the file; Bible and datasets: keep a seeded random
            ``size`` pairs of ``train`` (held-out splits are never cut).
        seed: drives generation, shuffling and the carving of missing splits.
        preprocessing: ``None``, ``"chollet"`` or ``"geron"`` (:mod:`hfattn.data.tatoeba`).
        validation_fraction, test_fraction: held-out shares where the source has no fixed
            split (generators, ``spa.txt``, table files, datasets missing splits).
        max_held_out_pairs: the most pairs of each held-out split carved that way (``None``:
            no bound); the copies of a duplicate pair that would swell one past it are
            dropped. A source's own held-out splits are kept whole.
        translation_column: the column of ``{language: text}`` dicts in a table or dataset
            (absent: flat columns named by the languages are read instead).
        group_by_source: ``spa.txt`` only: keep all translations of a source sentence in one
            split.
        train_size: ``spa.txt`` with ``"geron"``: pairs in ``train`` (default 100,000).

    Raises:
        ValueError: naming the ``data.`` field: a missing layout or language, an unset
            ``target_lang`` where the source has several, bad fractions, bound or
            preprocessing.
        FileNotFoundError: a ``source`` meant as a path that does not exist.
    """
    _check_fractions(validation_fraction, test_fraction)
    if max_held_out_pairs is not None and max_held_out_pairs < 1:
        raise ValueError(f"data.max_held_out_pairs must be >= 1, got {max_held_out_pairs}")
    fractions = (validation_fraction, test_fraction)
    if preprocessing is not None and preprocessing not in PREPROCESSINGS:
        raise ValueError(
            f"data.preprocessing must be one of {', '.join(PREPROCESSINGS)} or None; "
            f"got {preprocessing!r}"
        )
    if size is not None and size < 1:
        raise ValueError(f"data.size must be >= 1, got {size}")
    check_pair_source(source)

    if source in GENERATORS:
        target_lang = target_lang or GENERATORS[source][1][1]
        dd = _load_generated(
            source,
            size=size,
            seed=seed,
            source_lang=source_lang,
            target_lang=target_lang,
            fractions=fractions,
            max_held_out=max_held_out_pairs,
        )
        return _apply_preprocessing(dd, preprocessing, source_lang, target_lang)

    if source in BIBLE_SOURCES:
        target_lang = target_of(LANGUAGES, source_lang, target_lang, source)
        dd = _limit_train(load_bible(source=source), size, seed)
        return _apply_preprocessing(dd, preprocessing, source_lang, target_lang)

    if source.startswith(("http://", "https://")):
        source = str(download(source))
    path = Path(source).expanduser()
    if path.is_file() and not reads_as_table(path, source_lang, target_lang):
        options = {"group_by_source": group_by_source, "train_size": train_size}
        return _load_spa_file(
            path,
            size=size,
            seed=seed,
            source_lang=source_lang,
            target_lang=target_lang or SPA_TXT_TARGET,
            preprocessing=preprocessing,
            fractions=fractions,
            max_held_out=max_held_out_pairs,
            **options,
        )
    dd, target_lang, in_memory = load_dataset_source(
        source,
        translation_column=translation_column,
        source_lang=source_lang,
        target_lang=target_lang,
        seed=seed,
        fractions=fractions,
        max_held_out=max_held_out_pairs,
        preprocessing=preprocessing,
    )
    dd = _limit_train(dd, size, seed)
    return _apply_preprocessing(dd, preprocessing, source_lang, target_lang, in_memory)


__all__ = [
    "EMBEDDED",
    "LOADER_VERSION",
    "SPLIT_NAMES",
    "check_pair_source",
    "load_translation_splits",
    "pair_batches",
    "split_counts",
    "translation_batches",
]
