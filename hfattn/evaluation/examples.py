"""Which examples of a held-out split a scoring reads (``evaluation.max_examples`` /
``evaluation.final_max_examples``): the first ``N`` or a random sample of ``N`` drawn with a
seed (:func:`scored_rows`), and what ``eval_results.json`` records of them
(:func:`example_counts`). Every score of a split (the loss, the decoded metrics) is computed on
the same rows, as the ``max_eval_samples`` of Hugging Face's example scripts truncate the
evaluation set for every metric."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def scored_rows(size: int, cap: int | None, *, seed: int | None = None) -> Sequence[int]:
    """The rows of a split of ``size`` examples that a scoring capped at ``cap`` examples reads
    (``None``: every one): the first ``cap`` (a ``range``), or with ``seed`` a random sample of
    ``cap`` rows drawn with it, in split order (a sorted array). A cap at or above ``size``
    reads every row (``range(size)``)."""
    if cap is None or cap >= size:
        return range(size)
    if seed is None:
        return range(cap)
    return np.sort(np.random.default_rng(seed).choice(size, size=cap, replace=False))


def example_counts(rows: Sequence[int], size: int) -> dict:
    """``num_examples`` (the rows scored) and, for a sample of the split's ``size`` rows
    (:func:`scored_rows` with a seed), ``sampled_from`` (``size``)."""
    counts = {"num_examples": len(rows)}
    if not isinstance(rows, range):
        counts["sampled_from"] = size
    return counts


__all__ = ["example_counts", "scored_rows"]
