"""Embedded translation tasks: sentence pairs generated on the fly, exact and of any size.

- ``"dates"``: a date written in English and in Spanish with the CLDR formats of ``babel``
  (:func:`babel.dates.format_date`), in the four CLDR widths (full, long, medium, short),
  e.g. ``"Monday, April 22, 2019"`` → ``"lunes, 22 de abril de 2019"``, ``"4/22/19"`` →
  ``"22/4/19"``. Days from 1900-01-01 to 2099-12-31. Real translation: words are reordered,
  month and day names translated.
- ``"numbers"``: an integer from 0 to 999,999 in words with ``num2words``, e.g.
  ``"three hundred and forty-five"`` → ``"trescientos cuarenta y cinco"`` (``num2words``'
  ``"veintiuno mil"`` is corrected to ``"veintiún mil"``).
- ``"date-normalization"``: Géron's *Hands-On ML* chapter 16 exercise: an English date in one
  of :data:`DATE_NORMALIZATION_FORMATS` (``"April 22, 2019"``, ``"22 Apr 2019"``,
  ``"4/22/2019"``, …) → its ISO form ``"2019-04-22"``; days from 1000-01-01 to 9999-12-31 as in
  the book. Its pairs use the keys ``"en"`` and ``"iso"``.

:func:`generate_pairs` draws pairs with a seeded ``random.Random`` and keeps only the first
pair of each source sentence, so a source sentence occurs once (e.g. ``"4/22/19"`` is the same
for 1919 and 2019): cut into splits, no held-out source is ever in ``train``.
"""

from __future__ import annotations

import datetime as dt
import random
import re
from collections.abc import Callable

from .licenses import HFATTN_GENERATED, UNICODE_3

DATE_WIDTHS = ("full", "long", "medium", "short")
"""The CLDR date widths used by ``"dates"``."""

DATES_RANGE = (dt.date(1900, 1, 1), dt.date(2099, 12, 31))
"""The days drawn by ``"dates"``."""

NUMBERS_RANGE = (0, 999_999)
"""The integers drawn by ``"numbers"`` (inclusive)."""

DATE_NORMALIZATION_RANGE = (dt.date(1000, 1, 1), dt.date(9999, 12, 31))
"""The days drawn by ``"date-normalization"`` (Géron's range)."""

_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _ordinal(n: int) -> str:
    suffix = "th" if 11 <= n % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


DATE_NORMALIZATION_FORMATS: dict[str, Callable[[dt.date], str]] = {
    "month-day-year": lambda d: f"{_MONTHS[d.month - 1]} {d.day}, {d.year}",
    "abbr-month-day-year": lambda d: f"{_MONTHS[d.month - 1][:3]} {d.day}, {d.year}",
    "day-month-year": lambda d: f"{d.day} {_MONTHS[d.month - 1]} {d.year}",
    "day-abbr-month-year": lambda d: f"{d.day} {_MONTHS[d.month - 1][:3]} {d.year}",
    "weekday-month-day-year": lambda d: (
        f"{_WEEKDAYS[d.weekday()]}, {_MONTHS[d.month - 1]} {d.day}, {d.year}"
    ),
    "month-ordinal-year": lambda d: f"{_MONTHS[d.month - 1]} {_ordinal(d.day)}, {d.year}",
    "us-numeric": lambda d: f"{d.month}/{d.day}/{d.year}",
}
"""English source formats of ``"date-normalization"`` (the first is the book's)."""


def _random_day(rng: random.Random, first: dt.date, last: dt.date) -> dt.date:
    return first + dt.timedelta(days=rng.randrange((last - first).days + 1))


def date_pair(day: dt.date, width: str = "full") -> dict[str, str]:
    """``{"en": ..., "es": ...}``: ``day`` in the CLDR ``width`` of both locales.

    The translation is a function of the English text: where two widths write the same
    English ("May 6, 1985" is both the long and the medium form, since May needs no
    abbreviation), the Spanish of the wider one is used ("6 de mayo de 1985", never
    "6 may 1985"), so no source has two references.
    """
    from babel.dates import format_date

    if width not in DATE_WIDTHS:
        raise ValueError(f"width must be one of {', '.join(DATE_WIDTHS)}; got {width!r}")
    english = format_date(day, width, locale="en")
    for wider in DATE_WIDTHS[: DATE_WIDTHS.index(width)]:
        if format_date(day, wider, locale="en") == english:
            width = wider
            break
    return {"en": english, "es": format_date(day, width, locale="es")}


def spanish_number_words(n: int) -> str:
    """``n`` in Spanish words: ``num2words`` with its apocope slip fixed (it writes
    ``"veintiuno mil"``, ``"ciento uno mil"``; Spanish says ``"veintiún mil"``, ``"ciento un
    mil"``)."""
    from num2words import num2words

    words = num2words(n, lang="es")
    words = re.sub(r"\bveintiuno mil\b", "veintiún mil", words)
    return re.sub(r"\buno mil\b", "un mil", words)


def number_pair(n: int) -> dict[str, str]:
    """``{"en": ..., "es": ...}``: ``n`` in words (``num2words``, Spanish apocope fixed by
    :func:`spanish_number_words`)."""
    from num2words import num2words

    return {"en": num2words(n, lang="en"), "es": spanish_number_words(n)}


def date_normalization_pair(day: dt.date, fmt: str = "month-day-year") -> dict[str, str]:
    """``{"en": day in the English format fmt, "iso": "YYYY-MM-DD"}``."""
    if fmt not in DATE_NORMALIZATION_FORMATS:
        raise ValueError(
            f"format must be one of {', '.join(DATE_NORMALIZATION_FORMATS)}; got {fmt!r}"
        )
    return {"en": DATE_NORMALIZATION_FORMATS[fmt](day), "iso": day.isoformat()}


def _sample_date(rng: random.Random) -> dict[str, str]:
    return date_pair(_random_day(rng, *DATES_RANGE), rng.choice(DATE_WIDTHS))


def _sample_number(rng: random.Random) -> dict[str, str]:
    return number_pair(rng.randint(*NUMBERS_RANGE))


def _sample_date_normalization(rng: random.Random) -> dict[str, str]:
    day = _random_day(rng, *DATE_NORMALIZATION_RANGE)
    return date_normalization_pair(day, rng.choice(list(DATE_NORMALIZATION_FORMATS)))


GENERATORS: dict[str, tuple[Callable[[random.Random], dict[str, str]], tuple[str, str]]] = {
    "dates": (_sample_date, ("en", "es")),
    "numbers": (_sample_number, ("en", "es")),
    "date-normalization": (_sample_date_normalization, ("en", "iso")),
}
"""``{name: (sampler, (source language, target language))}`` of the embedded tasks."""

DATA_LICENSES = {
    "dates": UNICODE_3,
    "numbers": HFATTN_GENERATED,
    "date-normalization": HFATTN_GENERATED,
}
"""``dates`` spells its days with CLDR's month and day names and date patterns (Unicode License
v3); ``numbers`` (words by ``num2words``) and ``date-normalization`` (formats written here) are
hfattn's own output (see :mod:`hfattn.data.licenses`)."""

_N_DATES = (DATES_RANGE[1] - DATES_RANGE[0]).days + 1
_N_NORM_DAYS = (DATE_NORMALIZATION_RANGE[1] - DATE_NORMALIZATION_RANGE[0]).days + 1

MAX_SIZES = {
    # the short width writes two-digit years: 1919 and 2019 share "4/22/19"
    "dates": _N_DATES * (len(DATE_WIDTHS) - 1) + _N_DATES // 2,
    "numbers": NUMBERS_RANGE[1] - NUMBERS_RANGE[0] + 1,
    "date-normalization": _N_NORM_DAYS * len(DATE_NORMALIZATION_FORMATS),
}
"""Upper bounds on the distinct source sentences of each task; asking for more (or close to
it: draws are random) fails."""

DEFAULT_SIZE = 20_000
"""Pairs generated when no size is given."""


def generate_pairs(name: str, size: int = DEFAULT_SIZE, *, seed: int = 0) -> list[dict[str, str]]:
    """``size`` pairs of the task ``name`` (a key of :data:`GENERATORS`), deterministic for a
    ``seed``, each source sentence at most once (the first drawn wins).

    Raises ``ValueError`` for an unknown name, a size below 1, or a size the task cannot reach
    with distinct source sentences.
    """
    if name not in GENERATORS:
        raise ValueError(f"unknown generator {name!r}; embedded: {', '.join(GENERATORS)}")
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    sample, (source_lang, _) = GENERATORS[name]
    if size > MAX_SIZES[name]:
        raise ValueError(
            f"size={size} is too large for {name!r}: at most {MAX_SIZES[name]:,} distinct "
            "source sentences"
        )
    rng = random.Random(f"{name}:{seed}")
    pairs: list[dict[str, str]] = []
    seen: set[str] = set()
    attempts = 0
    max_attempts = 20 * size + 10_000
    while len(pairs) < size:
        attempts += 1
        if attempts > max_attempts:
            raise ValueError(
                f"size={size} is too large for {name!r}: only {len(pairs)} distinct source "
                f"sentences found in {max_attempts} draws"
            )
        pair = sample(rng)
        if pair[source_lang] not in seen:
            seen.add(pair[source_lang])
            pairs.append(pair)
    return pairs


__all__ = [
    "DATA_LICENSES",
    "DATES_RANGE",
    "DATE_NORMALIZATION_FORMATS",
    "DATE_NORMALIZATION_RANGE",
    "DATE_WIDTHS",
    "DEFAULT_SIZE",
    "GENERATORS",
    "MAX_SIZES",
    "NUMBERS_RANGE",
    "date_normalization_pair",
    "date_pair",
    "generate_pairs",
    "number_pair",
    "spanish_number_words",
]
