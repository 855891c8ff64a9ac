"""Held-out splits carved out of one list of pairs so that each exact duplicate pair lies in one
split only: a pair copied in ``train`` and in ``test`` is scored as if unseen, which makes the
held-out figures optimistic (38 of 180 test pairs of a ``spa.txt`` run were in ``train``).

Rows are dealt in a shuffled order into consecutive cuts (``test``, then ``validation``, the rest
``train``, say); each row then goes to the split of its pair's first copy in that order
(:func:`deal_by_pair`), so every copy of a pair falls in one split and, without duplicates, the
splits are the plain cuts. A pair is keyed by the hash of its two texts (:func:`pair_keys`), and
the dealing is numpy on those keys: no Python loop over the pairs beyond the hashing. A held-out
split bounded by ``data.max_held_out_pairs`` takes no more copies than its bound allows: the
copies that would swell it past the bound are dropped from the data instead (``limits``). One
line says how many rows moved and how many were dropped. Light: numpy, imported on use (recipe
parsing imports this module).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

logger = logging.getLogger(__name__)


def pair_keys(sources: Iterable[str], targets: Iterable[str], count: int = -1) -> np.ndarray:
    """One ``int64`` key per pair: the hash of ``(source, target)``, equal for exact copies
    (Python's string hash: stable within a process, which is all the dealing needs).
    ``count`` is the number of pairs when known."""
    import numpy as np

    return np.fromiter(map(hash, zip(sources, targets, strict=True)), dtype=np.int64, count=count)


def deal_by_pair(
    keys: np.ndarray,
    order: np.ndarray,
    cuts: Sequence[tuple[str, int]],
    *,
    what: str = "pairs",
    limits: Mapping[str, int] | None = None,
) -> dict[str, np.ndarray]:
    """Deal the rows (``keys[i]``: the key of row ``i``) in ``order`` into ``cuts``, each exact
    duplicate pair in one split.

    Args:
        keys: :func:`pair_keys` of the rows, in row order.
        order: the rows in the order they are dealt (a permutation of ``range(len(keys))``).
        cuts: ``(split, rows)`` in dealing order: the first ``rows`` positions go to the first
            split, and so on; the last split takes whatever positions remain.
        what: what the rows are, for the one line that says how many moved
            (``"the pairs of data/spa.txt"``).
        limits: ``{split: rows}``, the most rows a split holds (``data.max_held_out_pairs`` for
            the held-out splits): the copies that would move into a split past its limit are
            dropped, the first in dealing order kept.

    Returns:
        ``{split: row indices}`` in dealing order. A row goes to the split of the first
        position its pair takes, so a split's size differs from its cut by the copies moved;
        a dropped row is in no split.
    """
    import numpy as np

    n = len(keys)
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    bounds = np.cumsum([rows for _, rows in cuts[:-1]])
    _, group = np.unique(keys, return_inverse=True)
    first = np.full(int(group.max()) + 1 if n else 0, n, dtype=np.int64)
    np.minimum.at(first, group, position)
    plain = np.searchsorted(bounds, np.arange(n), side="right")  # in dealing order
    dealt = np.searchsorted(bounds, first[group[order]], side="right")
    dropped = 0
    for i, (name, _) in enumerate(cuts):
        limit = (limits or {}).get(name)
        if limit is None:
            continue
        room = max(limit - int(np.count_nonzero((dealt == i) & (plain == i))), 0)
        incoming = np.flatnonzero((dealt == i) & (plain != i))
        dealt[incoming[room:]] = -1
        dropped += max(len(incoming) - room, 0)
    moved = int(np.count_nonzero(dealt != plain)) - dropped
    if moved or dropped:
        logger.info(
            "%s: %d copies of a pair moved into the split of its first copy%s (each exact "
            "duplicate pair lies in one split only)",
            what,
            moved,
            f" and {dropped} dropped, their split full at data.max_held_out_pairs"
            if dropped
            else "",
        )
    return {name: order[dealt == i] for i, (name, _) in enumerate(cuts)}


__all__ = ["deal_by_pair", "pair_keys"]
