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

DATA_LICENSES = {"bible": PUBLIC_DOMAIN}
"""Both translations are in the public domain (the WEB is not copyrighted by its publisher,
the RV1909 by age); see :mod:`hfattn.data.licenses`."""

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

INSTALL_HINT = "apt-get install sword-text-web sword-text-sparv"

_NOTE = re.compile(r"<note\b[^>]*>.*?</note>|<title\b[^>]*>.*?</title>", re.DOTALL)
_TAG = re.compile(r"<[^>]+>")
_REMOVED = "\x00"


class BibleNotInstalledError(RuntimeError):
    """The SWORD modules (Debian packages) or the ``pysword`` package are missing."""


def clean_verse(raw: str) -> str:
    """Plain text of one OSIS verse: notes and headings dropped with their content, other tags
    dropped keeping their text, entities decoded, whitespace collapsed. A removed note between
    two words becomes a space (``God<note>…</note><w>created`` → ``God created``)."""
    text = _TAG.sub("", _NOTE.sub(_REMOVED, raw))
    text = re.sub(rf"(?<=\w){_REMOVED}+(?=\w)", " ", text).replace(_REMOVED, "")
    text = html.unescape(text)
    return " ".join(text.split())


_CAPS_INITIAL = re.compile(r"^(\W*)([^\W\d_])([^\W\d_]+)\b")


def fix_chapter_initial(text: str) -> str:
    """Undo the Reina-Valera's typographic all-caps first word of a chapter (``EN el
    principio`` → ``En el principio``); text whose first word is not all caps is unchanged."""
    match = _CAPS_INITIAL.match(text)
    if not match or not (match[2] + match[3]).isupper():
        return text
    return match[1] + match[2] + match[3].lower() + text[match.end() :]


def module_versions(sword_path: Path = SWORD_PATH) -> dict[str, str]:
    """``{language: Version=... of the module's .conf}``; raises :class:`BibleNotInstalledError`
    naming the apt command when a module is missing."""
    versions = {}
    for lang, module in MODULES.items():
        mods_d = Path(sword_path) / "mods.d"
        confs = [p for p in mods_d.glob("*.conf") if p.stem.lower() == module.lower()]
        if not confs:
            raise BibleNotInstalledError(
                f"the {module} SWORD module ({DEBIAN_PACKAGES[lang]}) is not installed in "
                f"{sword_path}: run `{INSTALL_HINT}`"
            )
        match = re.search(r"^Version=(\S+)", confs[0].read_text("utf-8", "replace"), re.MULTILINE)
        versions[lang] = match[1] if match else "unknown"
    return versions


def cache_path(sword_path: Path = SWORD_PATH) -> Path:
    """The converted dataset's folder, named after the module versions and the converter."""
    v = module_versions(sword_path)
    return hfattn_cache_dir() / f"bible-en-es-web{v['en']}-sparv{v['es']}-v{CONVERTER_VERSION}"


def _open_bibles(sword_path: Path):
    try:
        from pysword.modules import SwordModules
    except ImportError as e:  # an extra
        raise BibleNotInstalledError(
            "the Bible source needs pysword: pip install 'hfattn[bible]'"
        ) from e
    found = SwordModules(str(sword_path))
    modules = found.parse_modules()
    bibles = {}
    for lang, module in MODULES.items():
        if module not in modules:
            raise BibleNotInstalledError(
                f"SWORD module {module} not found in {sword_path}: run `{INSTALL_HINT}`"
            )
        bible = found.get_bible_from_module(module)
        # Each verse lookup decompresses the whole book (BlockType=BOOK): keep the last few
        # decompressed blocks, which turns ~80 s of reading into a few seconds.
        if hasattr(bible, "_decompressed_text"):
            bible._decompressed_text = functools.lru_cache(maxsize=4)(bible._decompressed_text)
        bibles[lang] = bible
    return bibles


def read_verses(sword_path: Path = SWORD_PATH) -> list[dict]:
    """Every aligned verse as ``{"book", "chapter", "verse", "en", "es"}``, in canonical order
    (books of the Spanish module's order), empty verses dropped."""
    module_versions(sword_path)  # clear error first
    bibles = _open_bibles(sword_path)

    def verses(bible) -> dict[tuple[str, int, int], tuple[str, str]]:
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

    en, es = verses(bibles["en"]), verses(bibles["es"])
    rows = []
    for key, (book_name, es_text) in es.items():
        if key not in en:
            continue
        en_text = en[key][1]
        if key[2] == 1:
            es_text = fix_chapter_initial(es_text)
        if en_text and es_text:
            rows.append(
                {
                    "book": book_name,
                    "chapter": key[1],
                    "verse": key[2],
                    "en": en_text,
                    "es": es_text,
                }
            )
    return rows


def book_split(book: str) -> str:
    """The split (``train``/``validation``/``test``) of a book (pysword's English name)."""
    for split, books in SPLITS.items():
        if book in books:
            return split
    return "train"


def convert_bible(target: Path, sword_path: Path = SWORD_PATH) -> None:
    """Read, align and split the Bible and ``save_to_disk`` it as a ``DatasetDict`` at
    ``target`` (atomically)."""
    import datasets

    start = time.perf_counter()
    rows = read_verses(sword_path)
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
        "Bible en-es: %s pairs converted in %.1f s into %s",
        {s: len(r) for s, r in by_split.items()},
        time.perf_counter() - start,
        target,
    )


def load_bible(sword_path: str | Path = SWORD_PATH):
    """The aligned Bible as a ``DatasetDict`` (``train``/``validation``/``test``; columns
    ``translation`` = ``{"en", "es"}``, ``book``, ``chapter``, ``verse``), converted on the
    first call and loaded from the cache afterwards.

    Raises :class:`BibleNotInstalledError` (naming ``apt-get install sword-text-web
    sword-text-sparv``) when the modules are not installed.
    """
    import datasets

    sword_path = Path(sword_path)
    target = cache_path(sword_path)
    if not (target / "dataset_dict.json").is_file():
        logger.info("converting the Bible (once) into %s", target)
        convert_bible(target, sword_path)
    return datasets.load_from_disk(str(target))


__all__ = [
    "DATA_LICENSES",
    "DEBIAN_PACKAGES",
    "INSTALL_HINT",
    "MODULES",
    "SPLITS",
    "BibleNotInstalledError",
    "book_split",
    "cache_path",
    "clean_verse",
    "fix_chapter_initial",
    "convert_bible",
    "load_bible",
    "module_versions",
    "read_verses",
]
