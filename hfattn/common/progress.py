"""The progress bar of every long phase: preparing data, bucketing, counting a tokenizer's
sample, decoding a split. A phase shows its bar only once it has run
:data:`PROGRESS_DELAY_S` (a phase that ends sooner prints nothing), and only in the first
process of a launch."""

from __future__ import annotations

from collections.abc import Iterable

from .launch import process_rank

PROGRESS_DELAY_S = 2.0
"""A phase shows its bar (:func:`progress_bar`) once it has taken this long."""


def progress_bar(
    iterable: Iterable | None = None,
    *,
    total: int | None = None,
    desc: str,
    unit: str,
    shown: bool = True,
    leave: bool = True,
):
    """The ``tqdm`` bar of a long phase over ``iterable`` (or updated by hand up to
    ``total``), counting ``unit`` s with their rate: shown once the phase has run
    :data:`PROGRESS_DELAY_S`, by the first process only (and never when not ``shown``);
    erased once done unless ``leave``."""
    from tqdm.auto import tqdm  # on use: tqdm.auto looks for a notebook

    return tqdm(iterable, total=total, desc=desc, unit=unit, delay=PROGRESS_DELAY_S,
                leave=leave, disable=not shown or process_rank() != 0)  # fmt: skip


__all__ = ["PROGRESS_DELAY_S", "progress_bar"]
