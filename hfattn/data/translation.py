"""Translation data as ``datasets.DatasetDict`` with a ``translation`` column, as
``run_translation`` users know it: ``{"en": "I love you.", "es": "Te quiero."}`` per row.

:func:`load_translation_splits` takes, as ``source``:

- ``"bible"``: the Bible, World English Bible ↔ Reina-Valera 1909, aligned by verse, split by
  whole books (:mod:`hfattn.data.bible`; needs ``apt-get install sword-text-web
  sword-text-sparv``); extra columns ``book``, ``chapter``, ``verse``.
- ``"dates"``, ``"numbers"``, ``"date-normalization"``: embedded generated tasks
  (:mod:`hfattn.data.pair_generators`), any ``size``, deterministic by ``seed``, each source
  sentence in one split only.
- a path to ``spa.txt`` (Anki / Tatoeba, tab-separated, or a ``.zip`` holding it) or an
  ``http(s)://`` URL of one (downloaded once into ``$HF_HOME/hfattn/downloads``)
  (:mod:`hfattn.data.tatoeba`).
- a Hub dataset id (``owner/name``) or a local dataset folder (``save_to_disk`` output or
  data files) with a ``translation`` column; missing splits are carved out of ``train``.

``preprocessing`` (``"chollet"`` or ``"geron"``, see :mod:`hfattn.data.tatoeba`) rewrites the
text of every source; its split policy applies where the source has no splits of its own
(``spa.txt``).
"""

from __future__ import annotations

from pathlib import Path

from .bible import LANGUAGES, load_bible
from .pair_generators import DEFAULT_SIZE, GENERATORS, generate_pairs
from .sources import check_source
from .tatoeba import PAIR_TRANSFORMS, PREPROCESSINGS, download, read_spa_txt, split_spa_pairs

SPLIT_NAMES = ("train", "validation", "test")

EMBEDDED = ("bible", *GENERATORS)
"""Sources known by bare name."""


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


def _apply_preprocessing(dd, preprocessing: str | None, source_lang: str, target_lang: str):
    if preprocessing is None:
        return dd
    transform = PAIR_TRANSFORMS[preprocessing]

    def rewrite(batch):
        return {
            "translation": [
                {**t, **transform(t, source_lang, target_lang)} for t in batch["translation"]
            ]
        }

    return dd.map(rewrite, batched=True, desc=f"{preprocessing} preprocessing")


def _limit_train(dd, size: int | None, seed: int):
    if size is None or size >= len(dd["train"]):
        return dd
    import numpy as np

    rng = np.random.default_rng(seed)
    keep = np.sort(rng.choice(len(dd["train"]), size=size, replace=False))
    dd["train"] = dd["train"].select(keep.tolist())
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
        raise ValueError(f"data.source: no English<TAB>Spanish pairs in {path}")
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
        **options,
    )
    return _to_dataset_dict(splits, source_lang, target_lang)


def _load_dataset_source(source: str, *, translation_column: str, seed: int, fractions):
    import datasets

    path = Path(source).expanduser()
    if (path / "dataset_dict.json").is_file() or (path / "state.json").is_file():
        loaded = datasets.load_from_disk(str(path))
    else:
        loaded = datasets.load_dataset(str(path) if path.is_dir() else source)
    if isinstance(loaded, datasets.Dataset):
        loaded = datasets.DatasetDict({"train": loaded})
    if "train" not in loaded:
        raise ValueError(f"data.source: {source} has no train split (splits: {list(loaded)})")
    if translation_column not in loaded["train"].column_names:
        raise ValueError(
            f"data.translation_column: {translation_column!r} is not a column of {source} "
            f"(columns: {', '.join(loaded['train'].column_names)})"
        )
    dd = datasets.DatasetDict({s: loaded[s] for s in SPLIT_NAMES if s in loaded})
    if translation_column != "translation":
        dd = dd.rename_column(translation_column, "translation")
    validation_fraction, test_fraction = fractions
    # carve the missing held-out splits out of train, with a fixed seed
    n = len(dd["train"])  # both carved splits are fractions of the original train
    for split, fraction in (("test", test_fraction), ("validation", validation_fraction)):
        if split in dd:
            continue
        n_held = max(1, round(n * fraction)) if fraction > 0 and n >= 3 else 0
        if n_held == 0:
            dd[split] = dd["train"].select([])
            continue
        parts = dd["train"].train_test_split(test_size=n_held, seed=seed, shuffle=True)
        dd["train"], dd[split] = parts["train"], parts["test"]
    return datasets.DatasetDict({s: dd[s] for s in SPLIT_NAMES})


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
        source: ``"bible"``, ``"dates"``, ``"numbers"``, ``"date-normalization"``, a path or
            ``http(s)://`` URL of ``spa.txt``, or a Hub dataset id / local dataset folder with
            a ``translation`` column (see the module docstring). A source that is none of
            these fails at once, before anything is read (:func:`check_pair_source`).
        source_lang, target_lang: the language keys of the pairs. ``target_lang=None`` means
            the source's own: ``"es"``, or ``"iso"`` for ``"date-normalization"``.
        size: generators: the total number of pairs (default 20,000); ``spa.txt``: read only
            the first ``size`` pairs of the file; Bible and datasets: keep a seeded random
            ``size`` pairs of ``train`` (held-out splits are never cut).
        seed: drives generation, shuffling and the carving of missing splits.
        preprocessing: ``None``, ``"chollet"`` or ``"geron"`` (:mod:`hfattn.data.tatoeba`).
        validation_fraction, test_fraction: held-out shares where the source has no fixed
            split (generators, ``spa.txt``, datasets missing splits).
        translation_column: the column holding the pairs in a dataset source.
        group_by_source: ``spa.txt`` only: keep all translations of a source sentence in one
            split.
        train_size: ``spa.txt`` with ``"geron"``: pairs in ``train`` (default 100,000).
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

    target_lang = target_lang or "es"
    if source == "bible":
        _check_langs(LANGUAGES, source_lang, target_lang, source)
        dd = _limit_train(load_bible(), size, seed)
        return _apply_preprocessing(dd, preprocessing, source_lang, target_lang)

    if source.startswith(("http://", "https://")):
        source = str(download(source))
    path = Path(source).expanduser()
    if path.is_file():
        options = {"group_by_source": group_by_source, "train_size": train_size}
        return _load_spa_file(
            path,
            size=size,
            seed=seed,
            source_lang=source_lang,
            target_lang=target_lang,
            preprocessing=preprocessing,
            fractions=fractions,
            **options,
        )
    dd = _load_dataset_source(
        source, translation_column=translation_column, seed=seed, fractions=fractions
    )
    languages = set(dd["train"][0]["translation"]) if len(dd["train"]) else set()
    _check_langs(languages, source_lang, target_lang, source)
    dd = _limit_train(dd, size, seed)
    return _apply_preprocessing(dd, preprocessing, source_lang, target_lang)


__all__ = [
    "EMBEDDED",
    "SPLIT_NAMES",
    "check_pair_source",
    "load_translation_splits",
    "split_counts",
]
