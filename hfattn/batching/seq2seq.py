r"""Batches of (source, target) id sequences for encoder-decoder training, and of (token ids,
label) for classification (:class:`LabelBatches`).

:class:`PairBatches` shuffles the pairs every epoch (deterministically in ``seed + epoch``),
groups them by length within pools of ``pool_batches`` batches so that a batch pads little
(the usual "bucketing" of NMT toolkits), and yields dicts of padded tensors:
``input_ids`` / ``attention_mask`` (right padding with ``pad_token_id``) and ``labels``
(padding ``-100``, ignored by the loss). The last incomplete batch of an epoch is dropped, so
every batch has ``batch_size`` rows and splits evenly across processes.

With ``max_tokens`` the batches are cut by size instead (the ``--max-tokens`` of NMT toolkits
such as fairseq): each takes the next pairs of its length-sorted pool while its padded size

.. math:: n \cdot \bigl(\max_{i \le n} |x_i| + \max_{i \le n} |y_i|\bigr) \le
   \mathrm{max\_tokens}, \qquad n \le \mathrm{batch\_size},

so a batch of short sentences holds more rows than one of long sentences and every step
costs about the same. The pairs a pool leaves over start the next pool; the epoch's last
batch, which may be partial, is dropped.

``pad_to_multiple_of`` (as in transformers' ``DataCollatorWithPadding``) rounds every padded
width up to a multiple of it; the engine sets it when the step is compiled
(:data:`hfattn.training.compiling.COMPILE_PAD_MULTIPLE`), so that a run meets a few shapes.
The extra positions are padding like the rest: masked in the attention, ignored by the loss.

The batchers read the pairs as :class:`~hfattn.storage.ragged.RaggedIds` (the memory-mapped
ids of prepared data; lists of ids are converted, :func:`ragged_ids`), and the class ids of
classification as a 1-D array: the orders are computed from the arrays of lengths, and each
batch gathers and pads only its own rows (:func:`pad_ragged`).

``group_by_length`` names the length a pool is sorted by: ``source`` (the encoder's padded
width), or ``target`` (the target length, ties broken by the source's), which is the one to
pick when the decoder's padded positions set the step's cost: an RNN encoder reads packed
sequences, whose padding costs nothing, while the output layer scores every padded target
position against the whole vocabulary.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch

from ..storage.ragged import RaggedIds
from .protocol import HostBatches

IGNORE_INDEX = -100
GROUP_BY_LENGTH = ("source", "target")
"""The lengths :class:`PairBatches` can sort its pools by."""


def padded_width(lengths, pad_to_multiple_of: int | None = None) -> int:
    """The longest of ``lengths``, rounded up to a multiple of ``pad_to_multiple_of``."""
    width = int(max(lengths))
    if pad_to_multiple_of:
        width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
    return width


def pad_rows(
    rows: Sequence[Sequence[int]], width: int, fill: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``rows`` right-padded with ``fill`` to ``[len(rows), width]`` in one vectorised write,
    and the mask of their tokens (1 = token, 0 = padding)."""
    lengths = torch.tensor([len(r) for r in rows], dtype=torch.long)
    keep = torch.arange(width)[None, :] < lengths[:, None]
    out = torch.full((len(rows), width), fill, dtype=torch.long)
    out[keep] = torch.tensor([i for r in rows for i in r], dtype=torch.long)
    return out, keep.long()


def pad_sources(
    sources: Sequence[Sequence[int]], pad_token_id: int, pad_to_multiple_of: int | None = None
) -> dict[str, torch.Tensor]:
    """Right-pad ``sources`` with ``pad_token_id`` (to :func:`padded_width`): ``input_ids``
    and ``attention_mask``."""
    width = padded_width(map(len, sources), pad_to_multiple_of)
    input_ids, attention_mask = pad_rows(sources, width, pad_token_id)
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def pad_pairs(
    sources: Sequence[Sequence[int]],
    targets: Sequence[Sequence[int]],
    pad_token_id: int,
    pad_to_multiple_of: int | None = None,
) -> dict[str, torch.Tensor]:
    """Right-pad ``sources`` (pad id, with an attention mask) and ``targets`` (``-100``), each
    to :func:`padded_width`."""
    label_width = padded_width(map(len, targets), pad_to_multiple_of)
    labels, _ = pad_rows(targets, label_width, IGNORE_INDEX)
    return {**pad_sources(sources, pad_token_id, pad_to_multiple_of), "labels": labels}


def ragged_ids(rows: RaggedIds | Sequence[Sequence[int]]) -> RaggedIds:
    """``rows`` as a :class:`~hfattn.storage.ragged.RaggedIds` (itself when it is one; lists of
    ids, small data, are copied into one)."""
    return rows if isinstance(rows, RaggedIds) else RaggedIds.from_rows(rows)


def batch_targets(targets) -> tuple[RaggedIds | np.ndarray, bool]:
    """``(targets, classes)``: the rows of target ids as :func:`ragged_ids`, or class ids (a
    1-D array, or a sequence of ints) as an ``int64`` array with ``classes`` true."""
    if isinstance(targets, RaggedIds):
        return targets, False
    if isinstance(targets, np.ndarray) and targets.ndim == 1 and targets.dtype != object:
        return targets.astype(np.int64, copy=False), True
    if len(targets) and isinstance(targets[0], (Sequence, np.ndarray)):
        return RaggedIds.from_rows(targets), False
    return np.asarray(targets, dtype=np.int64), True


def pad_ragged(
    ids: RaggedIds,
    rows: np.ndarray,
    fill: int,
    pad_to_multiple_of: int | None = None,
    width: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows ``rows`` of ``ids`` right-padded with ``fill`` to ``width`` (default: the longest
    row's, :func:`padded_width`) and the mask of their tokens, gathered from ``ids`` alone
    (:meth:`~hfattn.storage.ragged.RaggedIds.padded`)."""
    rows = np.asarray(rows, dtype=np.int64)
    if width is None:
        width = padded_width(ids.lengths[rows], pad_to_multiple_of)
    values, mask = ids.padded(rows, width, fill)
    return torch.from_numpy(values), torch.from_numpy(mask)


def pad_ragged_pairs(
    sources: RaggedIds,
    targets: RaggedIds,
    rows: np.ndarray,
    pad_token_id: int,
    pad_to_multiple_of: int | None = None,
) -> dict[str, torch.Tensor]:
    """Pairs ``rows`` padded as :func:`pad_pairs` pads them, gathered from the ragged
    ``sources`` and ``targets`` (:func:`pad_ragged`)."""
    input_ids, attention_mask = pad_ragged(sources, rows, pad_token_id, pad_to_multiple_of)
    labels, _ = pad_ragged(targets, rows, IGNORE_INDEX, pad_to_multiple_of)
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


class PairBatches(HostBatches):
    """Length-grouped, shuffled, padded batches of id pairs (see the module docstring):
    ``sources`` and ``targets`` are :class:`~hfattn.storage.ragged.RaggedIds` (or lists of
    ids, :func:`ragged_ids`)."""

    def __init__(
        self,
        sources: RaggedIds | Sequence[Sequence[int]],
        targets: RaggedIds | Sequence[Sequence[int]] | np.ndarray,
        batch_size: int,
        *,
        pad_token_id: int,
        seed: int = 0,
        pool_batches: int = 50,
        max_tokens: int | None = None,
        group_by_length: str = "source",
    ):
        if group_by_length not in GROUP_BY_LENGTH:
            raise ValueError(
                f"group_by_length must be one of {', '.join(GROUP_BY_LENGTH)}, "
                f"got {group_by_length!r}"
            )
        if len(sources) != len(targets):
            raise ValueError(f"{len(sources)} sources but {len(targets)} targets")
        if max_tokens is None and len(sources) < batch_size:
            raise ValueError(
                f"{len(sources)} training pairs are fewer than training.batch_size={batch_size}"
            )
        self.sources = ragged_ids(sources)
        self.targets, classes = batch_targets(targets)
        self.source_lengths = self.sources.lengths
        self.target_lengths = (
            np.zeros_like(self.source_lengths) if classes else self.targets.lengths
        )
        self.batch_size = batch_size
        self.pad_token_id = pad_token_id
        self.seed = seed
        self.pool = batch_size * pool_batches
        self.max_tokens = max_tokens
        self.group_by_length = group_by_length
        self.pad_to_multiple_of = None
        """Round the padded widths up to a multiple of this (``None``: the longest row's)."""
        self.min_rows = batch_size
        """The fewest rows a batch of :meth:`order` has (``batch_size``; with ``max_tokens``,
        as many pairs of the longest lengths as fit: a batch closes only when the next pair
        would not fit)."""
        self._num_batches = None
        if max_tokens is not None:
            widest = int(self.source_lengths.max() + self.target_lengths.max())
            if max_tokens < widest:
                raise ValueError(
                    f"training.max_tokens={max_tokens} is smaller than the longest source plus "
                    f"the longest target ({widest} tokens): raise it to at least {widest}"
                )
            self.min_rows = min(batch_size, max_tokens // widest)
            if len(self) == 0:
                raise ValueError(
                    f"{len(self.sources)} training pairs do not fill one batch of "
                    f"training.max_tokens={max_tokens}"
                )

    def round_widths(self, multiple: int) -> None:
        """Pad the widths of later batches up to a multiple of ``multiple``."""
        self.pad_to_multiple_of = multiple

    def __len__(self) -> int:
        """Batches an epoch: ``⌊pairs / batch_size⌋``, or with ``max_tokens`` those of epoch 0
        (later epochs cut by size may differ by a few)."""
        if self.max_tokens is None:
            return len(self.sources) // self.batch_size
        if self._num_batches is None:
            self._num_batches = len(self.order(0))
        return self._num_batches

    def order(self, epoch: int) -> list[np.ndarray]:
        """The batches of ``epoch`` as arrays of pair indices."""
        generator = torch.Generator().manual_seed(self.seed + epoch)
        shuffled = torch.randperm(len(self.sources), generator=generator).numpy()
        if self.max_tokens is None:
            shuffled = shuffled[: len(self) * self.batch_size]
        batches, carried = [], shuffled[:0]
        for begin in range(0, len(shuffled), self.pool):
            pool = np.concatenate([carried, shuffled[begin : begin + self.pool]])
            pool = pool[self._sorted(pool)]
            if self.max_tokens is None:
                batches += [
                    pool[k : k + self.batch_size] for k in range(0, len(pool), self.batch_size)
                ]
            else:
                cut = self._cut_by_size(pool)
                batches += cut[:-1]
                carried = cut[-1]
        permutation = torch.randperm(len(batches), generator=generator).tolist()
        return [batches[k] for k in permutation]

    def _sorted(self, pool: np.ndarray) -> np.ndarray:
        """The stable order of ``pool`` by length (``group_by_length``; ``target``: ties broken
        by the source length)."""
        if self.group_by_length == "target":
            return np.lexsort((self.source_lengths[pool], self.target_lengths[pool]))
        return np.argsort(self.source_lengths[pool], kind="stable")

    def _cut_by_size(self, pool: np.ndarray) -> list[np.ndarray]:
        """``pool`` (sorted by length) cut into consecutive batches of at most
        ``max_tokens`` padded tokens and ``batch_size`` rows; the last one may be partial."""
        sources, targets = self.source_lengths[pool], self.target_lengths[pool]
        batches, begin = [], 0
        while begin < len(pool):
            end = min(begin + self.batch_size, len(pool))
            widths = np.maximum.accumulate(sources[begin:end])
            widths += np.maximum.accumulate(targets[begin:end])
            over = np.flatnonzero(np.arange(1, end - begin + 1) * widths > self.max_tokens)
            rows = max(1, int(over[0])) if len(over) else end - begin
            batches.append(pool[begin : begin + rows])
            begin += rows
        return batches

    def epoch(self, epoch: int, start: int = 0) -> Iterator[dict[str, torch.Tensor]]:
        """Padded batches ``start, start+1, …`` of ``epoch``."""
        for rows in self.order(epoch)[start:]:
            yield pad_ragged_pairs(
                self.sources, self.targets, rows, self.pad_token_id, self.pad_to_multiple_of
            )


class LabelBatches(PairBatches):
    """Shuffled, length-grouped batches of ``(token ids, label)`` for sequence classification:
    dicts of ``input_ids`` / ``attention_mask`` (right-padded) and ``labels`` (one class id per
    row, from ``targets``: a 1-D array or a list of ints). The ordering is
    :meth:`PairBatches.order`'s (pools of ``pool_batches`` batches sorted by length)."""

    def epoch(self, epoch: int, start: int = 0) -> Iterator[dict[str, torch.Tensor]]:
        """Padded batches ``start, start+1, …`` of ``epoch``."""
        for rows in self.order(epoch)[start:]:
            ids, mask = pad_ragged(self.sources, rows, self.pad_token_id, self.pad_to_multiple_of)
            labels = torch.from_numpy(self.targets[rows])
            yield {"input_ids": ids, "attention_mask": mask, "labels": labels}


__all__ = [
    "IGNORE_INDEX",
    "LabelBatches",
    "PairBatches",
    "batch_targets",
    "pad_pairs",
    "pad_ragged",
    "pad_ragged_pairs",
    "pad_rows",
    "pad_sources",
    "padded_width",
    "ragged_ids",
]
