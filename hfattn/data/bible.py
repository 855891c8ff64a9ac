"""The Bible in English and Spanish, aligned by verse: a real parallel corpus from Debian.

English: the World English Bible (``sword-text-web``, SWORD module ``engWEB2015eb``, public
domain). Spanish: the Reina-Valera 1909 (``sword-text-sparv``, module ``spaRV1909eb``, public
domain). Both are SWORD modules under ``/usr/share/sword``, read with the ``pysword`` package::

    apt-get install sword-text-web sword-text-sparv

Verses are aligned by (book, chapter, verse) as each module numbers them (the WEB uses the
NRSVA versification and the RV1909 the KJV one: they agree on almost every verse of the 66
shared books; the WEB's deuterocanonical books have no Spanish side and are dropped). OSIS
markup is removed: footnotes (``<note>``) and headings (``<title>``) with their content,
every other tag keeping its text; whitespace is collapsed. A pair where either side is empty
is dropped. The Reina-Valera's all-caps first word of each chapter (``EN el principio``) is
written in normal case (``En el principio``).

The split is by whole books and fixed (:data:`SPLITS`):

- test: Ruth, Jonah, Mark, Philippians, James (an OT narrative, a prophet, a gospel and two
  epistles);
- validation: Esther, Daniel, Joel, Galatians, Colossians, 1 Peter, 1 John (the same mix:
  OT narrative, narrative/prophecy, a prophet and four epistles);
- train: every other book.

``bible+kjv`` is the same corpus with a second English side for training: every training verse
of the Reina-Valera 1909 also paired with the King James Version (``sword-text-kjv``, module
``engKJV2006eb``: the 1769 text, public domain; its ``¶`` paragraph marks dropped), so the
training split holds each Spanish verse twice, from two Englishes. The held-out splits are
``bible``'s (WEB sources), so the two sources score on the same verses.

Reading the modules takes a while (each verse is a lookup in a zlib-compressed book), so the
aligned corpus is converted once into a ``datasets`` dataset under
``$HF_HOME/hfattn/bible-en-es-<versions>`` (written to a temporary folder, then renamed) and
later calls load it with ``load_from_disk`` in about a second.
"""

from __future__ import annotations

import functools
import html
import logging
import re
import time
from pathlib import Path

from ..common.extras import Extra
from ..storage.file_io import atomic_dir
from .cache import hfattn_cache_dir
from .licenses import PUBLIC_DOMAIN

logger = logging.getLogger(__name__)

SWORD_PATH = Path("/usr/share/sword")
"""Where Debian's ``sword-text-*`` packages install their modules."""

MODULES = {"en": "engWEB2015eb", "es": "spaRV1909eb"}
"""SWORD module per language: World English Bible, Reina-Valera 1909."""

DEBIAN_PACKAGES = {"en": "sword-text-web", "es": "sword-text-sparv"}
"""Debian package per language."""

TRAINING_ENGLISH = {"kjv": ("engKJV2006eb", "sword-text-kjv")}
"""Further English translations that can join the training split: name → (SWORD module, Debian
package)."""

SOURCES: dict[str, tuple[str, ...]] = {"bible": (), "bible+kjv": ("kjv",)}
"""The embedded Bible sources: name → the :data:`TRAINING_ENGLISH` translations whose verses are
paired with the training split's Spanish verses besides the WEB's."""

EXTRA = Extra("bible", "pysword")
"""The extra that reads the SWORD modules: every source of :data:`SOURCES` needs it (the recipe
check asks for it before any data is read: :mod:`hfattn.tasks.translation.recipe`)."""

DATA_LICENSES = dict.fromkeys(SOURCES, PUBLIC_DOMAIN)
"""Every translation is in the public domain (the WEB is not copyrighted by its publisher, the
RV1909 and the KJV by age); see :mod:`hfattn.data.licenses`."""

SPLITS: dict[str, tuple[str, ...]] = {
    "test": ("Ruth", "Jonah", "Mark", "Philippians", "James"),
    "validation": (
        "Esther",
        "Daniel",
        "Joel",
        "Galatians",
        "Colossians",
        "I Peter",
        "I John",
    ),
}
"""Held-out books (pysword's English book names); every other shared book is in ``train``."""

LANGUAGES = ("en", "es")

CONVERTER_VERSION = 1
"""Bumped when the conversion (cleaning, alignment, columns) changes: it names the cache."""

_NOTE = re.compile(r"<note\b[^>]*>.*?</note>|<title\b[^>]*>.*?</title>", re.DOTALL)
_TAG = re.compile(r"<[^>]+>")
_REMOVED = "\x00"


class BibleNotInstalledError(RuntimeError):
    """The SWORD modules (Debian packages) or the ``pysword`` package are missing."""


def clean_verse(raw: str) -> str:
    """Plain text of one OSIS verse: notes and headings dropped with their content, other tags
    dropped keeping their text, entities decoded, ``¶`` paragraph marks dropped, whitespace
    collapsed. A removed note between two words becomes a space (``God<note>…</note><w>created``
    → ``God created``)."""
    text = _TAG.sub("", _NOTE.sub(_REMOVED, raw))
    text = re.sub(rf"(?<=\w){_REMOVED}+(?=\w)", " ", text).replace(_REMOVED, "")
    text = html.unescape(text).replace("¶", " ")
    return " ".join(text.split())


_CAPS_INITIAL = re.compile(r"^(\W*)([^\W\d_])([^\W\d_]+)\b")


def fix_chapter_initial(text: str) -> str:
    """Undo the Reina-Valera's typographic all-caps first word of a chapter (``EN el
    principio`` → ``En el principio``); text whose first word is not all caps is unchanged."""
    match = _CAPS_INITIAL.match(text)
    if not match or not (match[2] + match[3]).isupper():
        return text
    return match[1] + match[2] + match[3].lower() + text[match.end() :]


def required_modules(source: str = "bible") -> dict[str, tuple[str, str]]:
    """The SWORD modules a Bible source reads: ``{side: (module, Debian package)}``, the WEB
    (``en``) and the RV1909 (``es``), then each training English of :data:`SOURCES`."""
    required = {lang: (MODULES[lang], DEBIAN_PACKAGES[lang]) for lang in LANGUAGES}
    required.update({name: TRAINING_ENGLISH[name] for name in SOURCES[source]})
    return required


def install_hint(source: str = "bible") -> str:
    """The ``apt-get install`` command for every module of ``source``."""
    return "apt-get install " + " ".join(pkg for _, pkg in required_modules(source).values())


def module_versions(sword_path: Path = SWORD_PATH, source: str = "bible") -> dict[str, str]:
    """``{side: Version=... of the module's .conf}`` for :func:`required_modules`; raises
    :class:`BibleNotInstalledError` naming the apt command when a module is missing."""
    versions = {}
    mods_d = Path(sword_path) / "mods.d"
    for side, (module, package) in required_modules(source).items():
        confs = [p for p in mods_d.glob("*.conf") if p.stem.lower() == module.lower()]
        if not confs:
            raise BibleNotInstalledError(
                f"the {module} SWORD module ({package}) is not installed in "
                f"{sword_path}: run `{install_hint(source)}`"
            )
        match = re.search(r"^Version=(\S+)", confs[0].read_text("utf-8", "replace"), re.MULTILINE)
        versions[side] = match[1] if match else "unknown"
    return versions


def cache_path(sword_path: Path = SWORD_PATH, source: str = "bible") -> Path:
    """The converted dataset's folder, named after the module versions and the converter."""
    v = module_versions(sword_path, source)
    extra = "".join(f"-{name}{v[name]}" for name in SOURCES[source])
    name = f"bible-en-es-web{v['en']}-sparv{v['es']}{extra}-v{CONVERTER_VERSION}"
    return hfattn_cache_dir() / name


def _open_bibles(sword_path: Path, source: str):
    try:
        from pysword.modules import SwordModules
    except ImportError:  # an extra, which the recipe check asks for before any data is read
        raise EXTRA.error(f"data.source: {source!r}") from None
    found = SwordModules(str(sword_path))
    modules = found.parse_modules()
    bibles = {}
    for side, (module, _) in required_modules(source).items():
        if module not in modules:
            raise BibleNotInstalledError(
                f"SWORD module {module} not found in {sword_path}: run `{install_hint(source)}`"
            )
        bible = found.get_bible_from_module(module)
        # Each verse lookup decompresses the whole book (BlockType=BOOK): keep the last few
        # decompressed blocks, which turns ~80 s of reading into a few seconds.
        if hasattr(bible, "_decompressed_text"):
            bible._decompressed_text = functools.lru_cache(maxsize=4)(bible._decompressed_text)
        bibles[side] = bible
    return bibles


def _module_verses(bible) -> dict[tuple[str, int, int], tuple[str, str]]:
    """``{(osis book, chapter, verse): (English book name, clean text)}`` of one module."""
    out = {}
    books = bible.get_structure().get_books()
    for testament in ("ot", "nt"):
        for book in books.get(testament, []):
            for chapter, n_verses in enumerate(book.chapter_lengths, 1):
                for verse in range(1, n_verses + 1):
                    raw = bible.get(
                        books=[book.osis_name], chapters=[chapter], verses=[verse], clean=False
                    )
                    out[(book.osis_name, chapter, verse)] = (book.name, clean_verse(raw))
    return out


def read_verses(sword_path: Path = SWORD_PATH, source: str = "bible") -> list[dict]:
    """Every aligned verse as ``{"book", "chapter", "verse", "en", "es"}``, in canonical order
    (books of the Spanish module's order), empty verses dropped; then, for ``bible+kjv``, each
    training verse of the Spanish module again with the King James Version's English."""
    module_versions(sword_path, source)  # clear error first
    texts = {side: _module_verses(b) for side, b in _open_bibles(sword_path, source).items()}
    spanish = {
        key: (book_name, fix_chapter_initial(text) if key[2] == 1 else text)
        for key, (book_name, text) in texts.pop("es").items()
    }
    rows = []
    for side, english in texts.items():  # the WEB first, then each training English
        for key, (book_name, es_text) in spanish.items():
            if key not in english or (side != "en" and book_split(book_name) != "train"):
                continue
            en_text = english[key][1]
            if en_text and es_text:
                row = {"book": book_name, "chapter": key[1], "verse": key[2]}
                rows.append({**row, "en": en_text, "es": es_text})
    return rows


def book_split(book: str) -> str:
    """The split (``train``/``validation``/``test``) of a book (pysword's English name)."""
    for split, books in SPLITS.items():
        if book in books:
            return split
    return "train"


def convert_bible(target: Path, sword_path: Path = SWORD_PATH, source: str = "bible") -> None:
    """Read, align and split the Bible source ``source`` and ``save_to_disk`` it as a
    ``DatasetDict`` at ``target`` (atomically)."""
    import datasets

    start = time.perf_counter()
    rows = read_verses(sword_path, source)
    by_split: dict[str, list[dict]] = {"train": [], "validation": [], "test": []}
    for row in rows:
        by_split[book_split(row["book"])].append(row)
    features = datasets.Features(
        {
            "translation": {lang: datasets.Value("string") for lang in LANGUAGES},
            "book": datasets.Value("string"),
            "chapter": datasets.Value("int32"),
            "verse": datasets.Value("int32"),
        }
    )

    def build(tmp: Path) -> None:
        dd = datasets.DatasetDict(
            {
                split: datasets.Dataset.from_dict(
                    {
                        "translation": [{lang: r[lang] for lang in LANGUAGES} for r in split_rows],
                        "book": [r["book"] for r in split_rows],
                        "chapter": [r["chapter"] for r in split_rows],
                        "verse": [r["verse"] for r in split_rows],
                    },
                    features=features,
                )
                for split, split_rows in by_split.items()
            }
        )
        dd.save_to_disk(str(tmp))

    with atomic_dir(target, keep_existing=True) as tmp:  # another process may finish first
        build(tmp)
    logger.info(
        "%s: %s pairs converted in %.1f s into %s",
        source,
        {s: len(r) for s, r in by_split.items()},
        time.perf_counter() - start,
        target,
    )


def load_bible(sword_path: str | Path = SWORD_PATH, source: str = "bible"):
    """The aligned Bible source ``source`` (a key of :data:`SOURCES`) as a ``DatasetDict``
    (``train``/``validation``/``test``; columns ``translation`` = ``{"en", "es"}``, ``book``,
    ``chapter``, ``verse``), converted on the first call and loaded from the cache afterwards.

    Raises :class:`BibleNotInstalledError` (naming ``apt-get install sword-text-web
    sword-text-sparv``, and ``sword-text-kjv`` for ``bible+kjv``) when a module is not
    installed.
    """
    import datasets

    sword_path = Path(sword_path)
    target = cache_path(sword_path, source)
    if not (target / "dataset_dict.json").is_file():
        logger.info("converting the Bible source %s (once) into %s", source, target)
        convert_bible(target, sword_path, source)
    return datasets.load_from_disk(str(target))


__all__ = [
    "DATA_LICENSES",
    "DEBIAN_PACKAGES",
    "MODULES",
    "SOURCES",
    "SPLITS",
    "TRAINING_ENGLISH",
    "BibleNotInstalledError",
    "book_split",
    "cache_path",
    "clean_verse",
    "fix_chapter_initial",
    "convert_bible",
    "install_hint",
    "load_bible",
    "module_versions",
    "read_verses",
    "required_modules",
]
