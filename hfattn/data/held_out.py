"""The size of the held-out splits hfattn carves out of a source that has none, and the line
that states every split's size.

A carved ``validation`` or ``test`` split takes its fraction's share of the source, bounded by
the task's cap (``data.max_held_out_pairs``, ``data.max_held_out_chars``,
``data.max_held_out_rows``; ``None``: no bound): :func:`capped` applies the bound, each loader
its own rounding of the share (:func:`split_counts` for the pair loaders,
:func:`hfattn.data.text.fraction_cuts` for a text, :mod:`hfattn.data.classification` for
labelled rows). A source's own held-out splits are kept whole. :func:`log_split_sizes` says
every split's size in one line once a task's data is ready, prepared now or mapped from the
prepared-data cache. Light: no third-party import.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

logger = logging.getLogger(__name__)

HELD_OUT = ("validation", "test")
"""The splits a loader carves where the source has none."""


def capped(rows: int, cap: int | None) -> int:
    """``rows`` bounded by ``cap`` (``None``: no bound)."""
    return rows if cap is None else min(rows, cap)


def split_counts(
    size: int,
    validation_fraction: float,
    test_fraction: float,
    max_held_out: int | None = None,
) -> dict[str, int]:
    """``{"train", "validation", "test"}`` sizes for ``size`` pairs: each held-out split gets
    ``round(size * fraction)`` (at least 1 when the fraction is positive and ``size >= 3``),
    at most ``max_held_out`` (``None``: no bound); ``train`` the rest."""
    n_val = round(size * validation_fraction)
    n_test = round(size * test_fraction)
    if size >= 3:
        n_val = max(n_val, 1 if validation_fraction > 0 else 0)
        n_test = max(n_test, 1 if test_fraction > 0 else 0)
    n_val, n_test = capped(n_val, max_held_out), capped(n_test, max_held_out)
    return {"train": size - n_val - n_test, "validation": n_val, "test": n_test}


def split_sizes_line(
    sizes: Mapping[str, int],
    unit: str,
    *,
    cap: int | None = None,
    cap_field: str = "",
    details: Mapping[str, str] | None = None,
) -> str:
    """One line that states every split's size: ``data: train 994,000 pairs, validation 3,000,
    test 3,000 (validation and test at data.max_held_out_pairs)``. ``unit`` follows the first
    split's count; ``details`` adds a phrase after a split's count (``"in 1,002 tokens"``);
    the parenthesis names the held-out splits whose size is the ``cap`` of ``cap_field``."""
    details = details or {}
    parts = []
    for i, (split, size) in enumerate(sizes.items()):
        part = f"{split} {size:,}" + (f" {unit}" if i == 0 else "")
        parts.append(f"{part} {details[split]}" if split in details else part)
    line = "data: " + ", ".join(parts)
    at_cap = [s for s in HELD_OUT if cap is not None and sizes.get(s) == cap]
    if at_cap:
        line += f" ({' and '.join(at_cap)} at {cap_field})"
    return line


def log_split_sizes(sizes: Mapping[str, int], unit: str, **line_options) -> None:
    """Log :func:`split_sizes_line` of ``sizes`` in ``unit`` with its ``line_options``
    (``cap``, ``cap_field``, ``details``) at INFO: what every task says once its data is
    ready."""
    logger.info("%s", split_sizes_line(sizes, unit, **line_options))


__all__ = ["HELD_OUT", "capped", "log_split_sizes", "split_counts", "split_sizes_line"]
