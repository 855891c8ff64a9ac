"""Translation pairs read from a table file, a dataset folder or a Hub dataset (the sources of
:func:`hfattn.data.translation.load_translation_splits` that ``datasets`` reads), as a
``translation`` column of ``{source_lang: text, target_lang: text}`` dicts:

- the pairs' layout is found (:func:`pair_columns`: a column of ``{language: text}`` dicts, or
  flat text columns named by the languages) and turned into the ``translation`` column;
- a pair with a missing, empty or blank side is dropped, in one warning per source;
- a missing ``validation`` / ``test`` is carved out of ``train`` (:func:`carve_missing`): each
  takes its fraction's share of ``train``, at most ``data.max_held_out_pairs`` pairs
  (:func:`hfattn.data.held_out.capped`), each exact duplicate pair in one split only
  (:func:`hfattn.data.pair_splits.deal_by_pair`); the source's own held-out splits are kept
  whole, with a warning counting their pairs that are also in ``train``.

The pairs stay in their Arrow tables and are read :data:`READ_BATCH` at a time
(:func:`pair_batches`). Light: ``datasets``, ``pyarrow`` and numpy are imported on use
(recipe parsing imports this module).
"""

from __future__ import annotations

import csv
import logging
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from .held_out import HELD_OUT, capped
from .pair_splits import deal_by_pair, pair_keys
from .tables import TABLE_FORMATS, load_table_file
from .tatoeba import PAIR_TRANSFORMS

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)

SPLIT_NAMES = ("train", "validation", "test")

READ_BATCH = 10_000
"""Pairs read at a time when a split is checked or hashed."""


def check_languages(languages, source_lang: str, target_lang: str, source: str) -> None:
    for field, lang in (("source_lang", source_lang), ("target_lang", target_lang)):
        if lang not in languages:
            raise ValueError(
                f"data.{field}: {lang!r} is not a language of {source!r} "
                f"(languages: {', '.join(sorted(languages))})"
            )
    if source_lang == target_lang:
        raise ValueError(f"data.source_lang and data.target_lang are both {source_lang!r}")


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


def reads_as_table(path: Path, source_lang: str, target_lang: str | None) -> bool:
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


def pair_columns(features, translation_column: str, source_lang: str, source: str):
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


def target_of(languages, source_lang: str, target_lang: str | None, source: str) -> str:
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
    check_languages(languages, source_lang, target_lang, source)
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


def carve_missing(
    dd: dict, source: str, source_lang, target_lang, *, seed, fractions, max_held_out, transform
):  # fmt: skip
    """``dd`` with its missing ``test`` / ``validation`` carved out of ``train`` (``fractions``:
    shares of the original ``train``, at least one pair from 3 on, at most ``max_held_out``
    pairs each; seeded), each exact duplicate pair in one split
    (:func:`~hfattn.data.pair_splits.deal_by_pair`: the copies that would swell a carved split
    past ``max_held_out`` are dropped); the source's own held-out splits are kept whole, with
    a warning counting their pairs that are also in ``train``."""
    import numpy as np

    train = dd["train"]
    n = len(train)
    shares = dict(zip(HELD_OUT, fractions, strict=True))
    missing = [split for split in ("test", "validation") if split not in dd]
    if missing:
        share = {s: max(1, round(n * f)) if f > 0 and n >= 3 else 0 for s, f in shares.items()}
        cuts = [(split, capped(share[split], max_held_out)) for split in missing]
        limits = {split: max_held_out for split in missing if max_held_out is not None}
        keys = _keys_of(train, source_lang, target_lang, transform)
        order = np.random.default_rng(seed).permutation(n)
        rows = deal_by_pair(keys, order, [*cuts, ("train", 0)], what=f"the pairs of {source}",
                            limits=limits)  # fmt: skip
        for split, indices in rows.items():
            dd[split] = train.select(indices, keep_in_memory=True)  # indices only
    for split in HELD_OUT:
        if split in missing or not len(dd[split]):
            continue
        overlap = _in_train(dd[split], dd["train"], source_lang, target_lang)
        if overlap:
            logger.warning(
                "data.source %s: %d of the %d %s pairs are also in train (the source's own "
                "split, kept as it is): its scores are optimistic",
                source, overlap, len(dd[split]), split,
            )  # fmt: skip
    return dd


def load_dataset_source(
    source: str, *, translation_column: str, source_lang, target_lang, seed, fractions,
    max_held_out, preprocessing,
):  # fmt: skip
    """``(DatasetDict, target_lang, in_memory)`` of a table file, a dataset folder or a Hub
    dataset (see the module docstring); ``in_memory``: its data lies in the user's folder,
    where ``datasets`` would write its cache files."""
    import datasets

    raw, in_memory = _load_raw(source, Path(source).expanduser())
    column, languages = pair_columns(raw["train"].features, translation_column, source_lang,
                                     source)  # fmt: skip
    target_lang = target_of(languages, source_lang, target_lang, source)
    dd = {split: _as_translation(dataset, column, languages, source_lang, target_lang, in_memory)
          for split, dataset in raw.items()}  # fmt: skip
    dd = _drop_empty(dd, source, source_lang, target_lang)
    if not len(dd["train"]):
        raise ValueError(f"data.source: {source} has no {source_lang}-{target_lang} pair in train")
    transform = None
    if preprocessing is not None:
        transform = partial(PAIR_TRANSFORMS[preprocessing], source_lang=source_lang,
                            target_lang=target_lang)  # fmt: skip
    dd = carve_missing(dd, source, source_lang, target_lang, seed=seed, fractions=fractions,
                       max_held_out=max_held_out, transform=transform)  # fmt: skip
    return datasets.DatasetDict({s: dd[s] for s in SPLIT_NAMES}), target_lang, in_memory


__all__ = [
    "LAYOUTS",
    "READ_BATCH",
    "SPLIT_NAMES",
    "TEXT_TYPES",
    "carve_missing",
    "check_languages",
    "load_dataset_source",
    "pair_batches",
    "pair_columns",
    "reads_as_table",
    "target_of",
    "translation_batches",
]
