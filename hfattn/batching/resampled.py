"""Training batches whose ids are drawn anew every epoch: :class:`ResampledBatches`.

Subword regularization (BPE-dropout, Provilkov et al. 2020) cuts the training texts into
different pieces each epoch, so the split's ids cannot be prepared once. :class:`ResampledBatches`
asks for epoch :math:`e`'s ids (``ids(e)``, a function of the seed and :math:`e`, so a
resumed run meets the same ones) when the engine starts that epoch, and batches them with the
batcher ``build`` makes of them (:class:`~hfattn.batching.seq2seq.PairBatches`, or
:class:`~hfattn.batching.token_buckets.BucketedBatches` with its bucket shapes fixed), whose
order is that epoch's. Everything the engine asks of a batcher (:class:`~hfattn.batching.
protocol.Batches`) is answered for every epoch: the shapes are those fixed for all, the
fewest rows those the longest ids an epoch can bring allow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch

from ..storage.ragged import RaggedIds
from .protocol import Batches


class ResampledBatches:
    """The :class:`~hfattn.batching.protocol.Batches` of ids drawn anew every epoch (subword
    regularization: Provilkov et al. 2020, "BPE-Dropout: Simple and Effective Subword
    Regularization"; see the module docstring): epoch :math:`e` is
    ``build(*ids(e)).epoch(e)``. ``min_rows``: the fewest rows any epoch's batch can have
    (default: epoch 0's)."""

    stateful = False

    def __init__(
        self,
        ids: Callable[[int], tuple[RaggedIds, RaggedIds]],
        build: Callable[[RaggedIds, RaggedIds], Batches],
        min_rows: int | None = None,
    ):
        self.ids, self.build = ids, build
        self._epoch, self._batches = 0, build(*ids(0))
        self._length = len(self._batches)
        self.batch_size = self._batches.batch_size
        self.min_rows = self._batches.min_rows if min_rows is None else min_rows
        self.shapes = self._batches.shapes
        self._device: torch.device | None = None
        self._multiple: int | None = None

    @property
    def device(self) -> torch.device:
        """Where the current epoch's batcher builds its batches."""
        return self._batches.device

    def __len__(self) -> int:
        """Batches in epoch 0 (later epochs' ids differ, and their batches by a few)."""
        return self._length

    def epoch(self, epoch: int, start: int = 0) -> Iterator[Any]:
        """Batches ``start, start+1, …`` of ``epoch``, from that epoch's ids (drawn when the
        epoch differs from the last one asked for)."""
        if epoch != self._epoch:
            batches = self.build(*self.ids(epoch))
            if self._multiple:
                batches.round_widths(self._multiple)
            self._batches = batches if self._device is None else batches.to(self._device)
            self._epoch = epoch
        return self._batches.epoch(epoch, start)

    def to(self, device) -> ResampledBatches:
        """Keep every epoch's batches on ``device`` where its batcher can."""
        self._device = torch.device(device)
        self._batches = self._batches.to(self._device)
        return self

    def round_widths(self, multiple: int) -> None:
        """Pad every later batch's widths up to a multiple of ``multiple``, in every epoch."""
        self._multiple = multiple
        self._batches.round_widths(multiple)


__all__ = ["ResampledBatches"]
