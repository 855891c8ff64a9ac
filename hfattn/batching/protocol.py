"""The contract between a batcher and the training loop: :class:`Batches`.

The engine (:mod:`hfattn.training.engine`, :mod:`hfattn.training.session`) asks a batcher only
what this protocol names; it never probes one for optional attributes. :class:`HostBatches`
holds the answers of the batchers that build every batch on the host (padded from lists or
cut from a corpus at each step).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol, runtime_checkable

import torch


@runtime_checkable
class Batches(Protocol):
    """What the training loop needs of the training batches of a run.

    Attributes:
        stateful: row ``i`` of a batch continues row ``i`` of the previous one, so the
            recurrent state is carried between them (truncated BPTT); reset every epoch.
        batch_size: the rows of a global batch (with batches cut by size, the most).
        min_rows: the fewest rows a batch has (the engine splits every batch over its
            processes, so there must be at least one row each).
        shapes: the padded shapes every batch has one of (length buckets), or ``None``
            when the widths vary from batch to batch.
        device: where :meth:`epoch` builds the batches (the CPU, or the accelerator that
            holds the padded split).
    """

    stateful: bool
    batch_size: int
    min_rows: int
    shapes: Sequence[tuple[int, ...]] | None
    device: torch.device

    def __len__(self) -> int:
        """Batches in an epoch (in epoch 0 where later epochs differ by a few)."""

    def epoch(self, epoch: int, start: int = 0) -> Iterator[Any]:
        """Batches ``start, start+1, …`` of ``epoch`` (a tensor, or a dict of tensors, dim 0
        the rows), the same for the same ``epoch`` (a resume meets the same batches)."""

    def to(self, device) -> Batches:
        """Keep the batches' tensors on ``device`` when they can be (``self``)."""

    def round_widths(self, multiple: int) -> None:
        """Pad every later batch's widths up to a multiple of ``multiple`` (a compiled step
        then meets a few shapes); batches of fixed widths ignore it."""


class HostBatches:
    """The :class:`Batches` answers of a batcher that builds each batch on the host at each
    step: no fixed shapes (``shapes`` is ``None``), nothing moved to a device, and fixed widths
    (``round_widths`` does nothing; :class:`~hfattn.batching.seq2seq.PairBatches` overrides
    it). A subclass sets ``batch_size`` and ``min_rows``."""

    stateful = False
    shapes = None
    device = torch.device("cpu")
    batch_size: int
    min_rows: int

    def to(self, device) -> HostBatches:
        """``self``: the batches are built on the host, step by step."""
        return self

    def round_widths(self, multiple: int) -> None:
        """Nothing: the widths are fixed."""


__all__ = ["Batches", "HostBatches"]
