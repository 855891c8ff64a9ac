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
- where hfattn carves the held-out splits itself (``spa.txt``, table files, folders and Hub
  datasets missing ``validation`` / ``test``), each exact duplicate pair (after
  ``preprocessing``) lies in one split only (:mod:`hfattn.data.pair_splits`; one line counts
  the copies moved); where the source has its own splits they are kept, and a warning counts
  the held-out pairs that are also in ``train``.

``preprocessing`` (``"chollet"`` or ``"geron"``, see :mod:`hfattn.data.tatoeba`) rewrites the
text of every source; its split policy applies where the source has no splits of its own
(``spa.txt``).

Nothing is written into a local source folder (``datasets`` would put its cache files beside
the data: the selections and rewrites of a folder's splits stay in memory).
"""

from __future__ import annotations

import csv
import logging
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from .bible import LANGUAGES, load_bible
from .bible import SOURCES as BIBLE_SOURCES
from .pair_generators import DEFAULT_SIZE, GENERATORS, generate_pairs
from .pair_splits import deal_by_pair, pair_keys
from .sources import check_source
from .tables import TABLE_FORMATS, load_table_file
from .tatoeba import PAIR_TRANSFORMS, PREPROCESSINGS, download, read_spa_txt, split_spa_pairs

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)

SPLIT_NAMES = ("train", "validation", "test")

EMBEDDED = (*BIBLE_SOURCES, *GENERATORS)
"""Sources known by bare name."""

LOADER_VERSION = 2
"""The version of what :func:`load_translation_splits` makes of a source (2: empty pairs
dropped, duplicate pairs in one split, flat columns); part of the key of the prepared pairs
(:func:`hfattn.tasks.translation.prepared.data_settings`)."""

READ_BATCH = 10_000
"""Pairs read at a time when a split is checked or hashed."""

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


def _check_langs(languages, source_lang: str, target_lang: str, source: str) -> None:
    for field, lang in (("source_lang", source_lang), ("target_lang", target_lang)):
        if lang not in languages:
            raise ValueError(
                f"data.{field}: {lang!r} is not a language of {source!r} "
                f"(languages: {', '.join(sorted(languages))})"
            )
    if source_lang == target_lang:
        raise ValueError(f"data.source_lang and data.target_lang are both {source_lang!r}")


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


def split_counts(size: int, validation_fraction: float, test_fraction: float) -> dict[str, int]:
    """``{"train", "validation", "test"}`` sizes for ``size`` pairs: the held-out splits get
    ``round(size * fraction)`` (at least 1 when the fraction is positive and ``size >= 3``),
    ``train`` the rest."""
    n_val = round(size * validation_fraction)
    n_test = round(size * test_fraction)
    if size >= 3:
        n_val = max(n_val, 1 if validation_fraction > 0 else 0)
        n_test = max(n_test, 1 if test_fraction > 0 else 0)
    return {"train": size - n_val - n_test, "validation": n_val, "test": n_test}


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


def _load_generated(name, *, size, seed, source_lang, target_lang, fractions):
    languages = GENERATORS[name][1]
    _check_langs(languages, source_lang, target_lang, name)
    pairs = generate_pairs(name, DEFAULT_SIZE if size is None else size, seed=seed)
    counts = split_counts(len(pairs), *fractions)
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
    path, *, size, seed, source_lang, target_lang, preprocessing, fractions, **options
):
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
        what=f"the pairs of {path}",
        **options,
    )
    return _to_dataset_dict(splits, source_lang, target_lang)


def translation_batches(dataset, batch_size: int | None = None) -> Iterator:
    """The ``translation`` column of ``dataset`` as Arrow arrays (structs of the languages) of
    ``batch_size`` rows (default: one array), read from its Arrow table: only a batch is in
    memory at a time."""
    table = dataset.with_format("arrow")
    size = batch_size or max(1, len(dataset))
    for begin in range(0, len(dataset), size):
        yield table[begin : begin + size].column("translation")


def pair_batches(
    dataset, source_lang: str, target_lang: str, batch_size: int | None = None
) -> Iterator[tuple[list[str], list[str]]]:
    """``(sources, targets)`` of ``dataset`` (a ``translation`` column) in batches of
    ``batch_size`` pairs (default: one batch), read from its Arrow table: only a batch of
    strings is in memory at a time."""
    import pyarrow.compute as pc

    for column in translation_batches(dataset, batch_size):
        yield (pc.struct_field(column, source_lang).to_pylist(),
               pc.struct_field(column, target_lang).to_pylist())  # fmt: skip


def _reads_as_table(path: Path, source_lang: str, target_lang: str | None) -> bool:
    """Whether the file ``path`` is a table (:data:`~hfattn.data.tables.TABLE_FORMATS`) rather
    than ``spa.txt``: a ``.tsv`` only when its first line names the languages."""
    suffix = path.suffix.lower()
    if suffix != ".tsv":
        return suffix in TABLE_FORMATS
    with path.open(encoding="utf-8", errors="replace") as file:
        names = {name.strip() for name in file.readline().split("\t")}
    return source_lang in names and (target_lang is None or target_lang in names)


def _table_options(path: Path) -> dict:
    """The reading options of a CSV / TSV file: cells are text as written (``NA`` is a
    sentence, an empty cell an empty side); a TSV has no quoting."""
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".tsv"):
        return {}
    return {"keep_default_na": False, **({"quoting": csv.QUOTE_NONE} if suffix == ".tsv" else {})}


def _load_raw(source: str, path: Path) -> tuple[dict, bool]:
    """``({split: Dataset}, in_memory)`` of a table file, a dataset folder or a Hub id;
    ``in_memory``: the data lies in the user's folder (``save_to_disk``), where ``datasets``
    would write its cache files."""
    import datasets

    saved = (path / "dataset_dict.json").is_file() or (path / "state.json").is_file()
    if path.is_file():
        loaded = load_table_file(path, **_table_options(path))
    elif saved:
        loaded = datasets.load_from_disk(str(path))
    else:
        loaded = datasets.load_dataset(str(path) if path.is_dir() else source)
    if isinstance(loaded, datasets.Dataset):
        loaded = datasets.DatasetDict({"train": loaded})
    if "train" not in loaded:
        raise ValueError(f"data.source: {source} has no train split (splits: {list(loaded)})")
    return {s: loaded[s] for s in SPLIT_NAMES if s in loaded}, saved


def _dict_languages(feature) -> list[str] | None:
    """The keys of a column of ``{language: text}`` dicts (a struct, or ``datasets``'
    ``Translation``), or ``None`` for any other column."""
    import datasets

    if isinstance(feature, datasets.Translation):
        return list(feature.languages)
    if isinstance(feature, dict):
        return list(feature)
    return None


LAYOUTS = (
    "a column of {language: text} dicts named by data.translation_column, or flat text columns "
    "named by data.source_lang and data.target_lang"
)
"""The layouts of the pairs in a table or dataset, as the errors name them."""
TEXT_TYPES = ("string", "large_string")
"""The ``datasets`` dtypes of a flat language column."""


def _pair_columns(features, translation_column: str, source_lang: str, source: str):
    """``(dict column, languages)``: the column of ``{language: text}`` dicts and its keys, or
    ``(None, text columns)`` for flat language columns (``source_lang`` and the string
    columns: an ``id`` of integers is no language)."""
    if translation_column in features:
        feature = features[translation_column]
        languages = _dict_languages(feature)
        if languages is None:
            kind = getattr(feature, "dtype", type(feature).__name__)
            raise ValueError(
                f"data.translation_column: the column {translation_column!r} of {source} holds "
                f"{kind} values, not {{language: text}} dicts; a translation source needs "
                f"{LAYOUTS}"
            )
        return translation_column, languages
    if source_lang in features:  # flat: the text columns are the languages
        texts = [name for name, f in features.items() if getattr(f, "dtype", "") in TEXT_TYPES]
        return None, [source_lang, *(name for name in texts if name != source_lang)]
    raise ValueError(
        f"data.translation_column: {source} has no column {translation_column!r} and no column "
        f"{source_lang!r} (data.source_lang) (columns: {', '.join(features)}); a translation "
        f"source needs {LAYOUTS}"
    )


def _target_of(languages, source_lang: str, target_lang: str | None, source: str) -> str:
    """``target_lang``, checked against the ``languages`` of ``source``, or (``None``) the one
    language beside ``source_lang``."""
    others = [lang for lang in languages if lang != source_lang]
    if target_lang is None and source_lang in languages:
        if len(others) != 1:
            raise ValueError(
                f"data.target_lang must be set: {source} has the languages (or columns) "
                f"{', '.join(sorted(languages))} beside data.source_lang {source_lang!r}"
            )
        target_lang = others[0]
    _check_langs(languages, source_lang, target_lang, source)
    return target_lang


def _as_translation(dataset, column: str | None, languages, source_lang, target_lang, in_memory):
    """``dataset`` with a ``translation`` column of ``{source_lang, target_lang}`` string dicts,
    made from the dict ``column`` (its other languages dropped) or, ``None``, from the flat
    language columns (removed); other columns stay."""
    import pyarrow as pa
    import pyarrow.compute as pc

    pair = (source_lang, target_lang)
    if column is not None and sorted(languages) == sorted(pair):
        return dataset if column == "translation" else dataset.rename_column(column, "translation")

    replaced = [column] if column is not None else list(pair)
    if column is None and "translation" in dataset.column_names:  # not dicts: replaced too
        replaced.append("translation")

    def to_struct(table):  # the batch's table, whole: the other columns are carried over
        if column is None:
            sides = [table.column(lang) for lang in pair]
        else:
            sides = [pc.struct_field(table.column(column), lang) for lang in pair]
        arrays = [pc.cast(side, pa.string()).combine_chunks() for side in sides]
        struct = pa.StructArray.from_arrays(arrays, names=list(pair))
        return table.drop_columns(replaced).append_column("translation", struct)

    mapped = dataset.with_format("arrow").map(
        to_struct, batched=True, batch_size=READ_BATCH, keep_in_memory=in_memory,
        desc="translation column",
    )  # fmt: skip
    return mapped.with_format(None)


def _non_empty(dataset, source_lang: str, target_lang: str):
    """A boolean numpy mask: the pairs of ``dataset`` whose both sides are non-blank strings
    (Arrow compute, a batch at a time)."""
    import numpy as np
    import pyarrow.compute as pc

    masks = [np.ones(0, dtype=bool)]
    for column in translation_batches(dataset, READ_BATCH):
        keep = None
        for lang in (source_lang, target_lang):
            text = pc.utf8_trim_whitespace(pc.struct_field(column, lang))
            side = pc.fill_null(pc.greater(pc.utf8_length(text), 0), False)
            keep = side if keep is None else pc.and_(keep, side)
        masks.append(keep.to_numpy(zero_copy_only=False))
    return np.concatenate(masks)


def _drop_empty(dd: dict, source: str, source_lang: str, target_lang: str) -> dict:
    """``dd`` without the pairs with a missing, empty or blank side, in one warning that
    counts them per split."""
    import numpy as np

    dropped = {}
    for split, dataset in dd.items():
        keep = _non_empty(dataset, source_lang, target_lang)
        if not keep.all():
            dropped[split] = int(np.count_nonzero(~keep))
            dd[split] = dataset.select(np.flatnonzero(keep), keep_in_memory=True)  # indices
    if dropped:
        logger.warning(
            "data.source %s: %d pair(s) with a missing, empty or blank %s or %s side skipped (%s)",
            source,
            sum(dropped.values()),
            source_lang,
            target_lang,
            ", ".join(f"{split}: {count}" for split, count in dropped.items()),
        )
    return dd


def _keys_of(dataset, source_lang: str, target_lang: str, transform) -> np.ndarray:
    """:func:`~hfattn.data.pair_splits.pair_keys` of ``dataset``'s pairs, as ``transform``
    (a preprocessing's pair rewrite, or ``None``) makes them."""
    import numpy as np

    keys = [np.zeros(0, dtype=np.int64)]
    for sources, targets in pair_batches(dataset, source_lang, target_lang, READ_BATCH):
        if transform is not None:
            pairs = [transform({source_lang: s, target_lang: t})
                     for s, t in zip(sources, targets, strict=True)]  # fmt: skip
            sources, targets = [p[source_lang] for p in pairs], [p[target_lang] for p in pairs]
        keys.append(pair_keys(sources, targets, len(sources)))
    return np.concatenate(keys)


def _in_train(dataset, train, source_lang: str, target_lang: str) -> int:
    """How many pairs of ``dataset`` (a held-out split, read at once) are exact copies of a
    pair of ``train`` (Arrow ``is_in`` of the joined texts, ``train`` a batch at a time)."""
    import numpy as np
    import pyarrow.compute as pc

    def joined(column):
        sides = [pc.struct_field(column, lang) for lang in (source_lang, target_lang)]
        return pc.binary_join_element_wise(*sides, "\x00")

    held = joined(next(translation_batches(dataset)))
    found = np.zeros(len(held), dtype=bool)
    for column in translation_batches(train, READ_BATCH):
        hits = pc.is_in(held, value_set=joined(column).combine_chunks())
        found |= hits.to_numpy(zero_copy_only=False)
    return int(np.count_nonzero(found))


def _carve_missing(dd: dict, source: str, source_lang, target_lang, *, seed, fractions, transform):
    """``dd`` with its missing ``test`` / ``validation`` carved out of ``train`` (shares of the
    original ``train``, seeded), each exact duplicate pair in one split
    (:func:`~hfattn.data.pair_splits.deal_by_pair`); the source's own held-out splits are kept,
    with a warning counting their pairs that are also in ``train``."""
    import numpy as np

    validation_fraction, test_fraction = fractions
    train = dd["train"]
    n = len(train)
    missing = [(split, fraction) for split, fraction in (("test", test_fraction),
               ("validation", validation_fraction)) if split not in dd]  # fmt: skip
    if missing:
        cuts = [(split, max(1, round(n * f)) if f > 0 and n >= 3 else 0) for split, f in missing]
        keys = _keys_of(train, source_lang, target_lang, transform)
        order = np.random.default_rng(seed).permutation(n)
        rows = deal_by_pair(keys, order, [*cuts, ("train", 0)], what=f"the pairs of {source}")
        for split, indices in rows.items():
            dd[split] = train.select(indices, keep_in_memory=True)  # indices only
    for split in ("validation", "test"):
        if split in dict(missing) or not len(dd[split]):
            continue
        overlap = _in_train(dd[split], dd["train"], source_lang, target_lang)
        if overlap:
            logger.warning(
                "data.source %s: %d of the %d %s pairs are also in train (the source's own "
                "split, kept as it is): its scores are optimistic",
                source, overlap, len(dd[split]), split,
            )  # fmt: skip
    return dd


def _load_dataset_source(
    source: str, *, translation_column: str, source_lang, target_lang, seed, fractions,
    preprocessing,
):  # fmt: skip
    """``(DatasetDict, target_lang)`` of a table file, a dataset folder or a Hub dataset (see
    the module docstring)."""
    import datasets

    raw, in_memory = _load_raw(source, Path(source).expanduser())
    column, languages = _pair_columns(raw["train"].features, translation_column, source_lang,
                                      source)  # fmt: skip
    target_lang = _target_of(languages, source_lang, target_lang, source)
    dd = {split: _as_translation(dataset, column, languages, source_lang, target_lang, in_memory)
          for split, dataset in raw.items()}  # fmt: skip
    dd = _drop_empty(dd, source, source_lang, target_lang)
    if not len(dd["train"]):
        raise ValueError(f"data.source: {source} has no {source_lang}-{target_lang} pair in train")
    transform = None
    if preprocessing is not None:
        transform = partial(PAIR_TRANSFORMS[preprocessing], source_lang=source_lang,
                            target_lang=target_lang)  # fmt: skip
    dd = _carve_missing(dd, source, source_lang, target_lang, seed=seed, fractions=fractions,
                        transform=transform)  # fmt: skip
    return datasets.DatasetDict({s: dd[s] for s in SPLIT_NAMES}), target_lang, in_memory


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
        translation_column: the column of ``{language: text}`` dicts in a table or dataset
            (absent: flat columns named by the languages are read instead).
        group_by_source: ``spa.txt`` only: keep all translations of a source sentence in one
            split.
        train_size: ``spa.txt`` with ``"geron"``: pairs in ``train`` (default 100,000).

    Raises:
        ValueError: naming the ``data.`` field: a missing layout or language, an unset
            ``target_lang`` where the source has several, bad fractions or preprocessing.
        FileNotFoundError: a ``source`` meant as a path that does not exist.
    """
    _check_fractions(validation_fraction, test_fraction)
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
        )
        return _apply_preprocessing(dd, preprocessing, source_lang, target_lang)

    if source in BIBLE_SOURCES:
        target_lang = _target_of(LANGUAGES, source_lang, target_lang, source)
        dd = _limit_train(load_bible(source=source), size, seed)
        return _apply_preprocessing(dd, preprocessing, source_lang, target_lang)

    if source.startswith(("http://", "https://")):
        source = str(download(source))
    path = Path(source).expanduser()
    if path.is_file() and not _reads_as_table(path, source_lang, target_lang):
        options = {"group_by_source": group_by_source, "train_size": train_size}
        return _load_spa_file(
            path,
            size=size,
            seed=seed,
            source_lang=source_lang,
            target_lang=target_lang or SPA_TXT_TARGET,
            preprocessing=preprocessing,
            fractions=fractions,
            **options,
        )
    dd, target_lang, in_memory = _load_dataset_source(
        source,
        translation_column=translation_column,
        source_lang=source_lang,
        target_lang=target_lang,
        seed=seed,
        fractions=fractions,
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
