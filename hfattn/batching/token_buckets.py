r"""Batches of a token budget in a few fixed shapes, gathered from the ragged ids of the split.

fairseq's ``--max-tokens`` (Ott et al. 2019) with length buckets, built for an accelerator as
nanoGPT's ``get_batch`` is: the training split is read as flat ids and offsets
(:class:`~hfattn.storage.ragged.RaggedIds`, memory-mapped prepared data), each bucket keeps the
indices of its pairs, and a batch gathers and pads only its own rows to its bucket's widths:
on the device when the split's ids fit there (:meth:`BucketedBatches.to`, the same gather in
torch, :class:`DeviceRagged`), else on the host into pinned memory. A step costs the host next
to nothing and a compiled step meets only as many shapes as there are buckets.

**Buckets.** Each bucket :math:`k` has a fixed padded shape: a source width :math:`S_k` and a
target width :math:`T_k` (:func:`choose_buckets`). A pair :math:`(s, t)` of lengths goes to
the first bucket it fits, :math:`\min\{k : s \le S_k \wedge t \le T_k\}`. The widths minimise
the padded positions of the whole split,

.. math:: \sum_i \bigl(S_{k(i)} - s_i\bigr) + \bigl(T_{k(i)} - t_i\bigr),

by coordinate descent from the target-length quantiles (each width in turn moved to its best
value between its neighbours, until no move helps); the last bucket is the widest pair.
Classification has no target: its buckets are source widths only. More buckets than the
split has distinct lengths (target lengths; source lengths for classification) are cut to that
many, with a warning (:func:`fillable_buckets`): the descent would take minutes to split them
further. It takes seconds on a split with many lengths and many buckets; a bar shows its passes
once it has taken :data:`~hfattn.common.progress.PROGRESS_DELAY_S`.

**Rows.** Bucket :math:`k` cuts batches of

.. math:: r_k = \max\Bigl(m, m \cdot \mathrm{round}\Bigl(\frac{B}{m\,\bar t_k}\Bigr)\Bigr)

rows, :math:`B` the token budget (at least the longest example's length, else refused),
:math:`\bar t_k` the mean target length of the bucket's pairs (its mean source length for
classification) and :math:`m` = ``row_multiple`` (8), at most the bucket's pairs: a step trains
on about :math:`B` target tokens whatever its bucket, the count of Vaswani et al. (2017, §5.1:
"approximately 25000 source tokens and 25000 target tokens" a batch).
Its padded shape is ``[r_k, S_k]`` and ``[r_k, T_k]``.

**Epochs.** Epoch :math:`e` shuffles each bucket's pairs (seeded with ``seed + e``), puts the
pairs its bucket left over in epoch :math:`e - 1` in front, cuts full batches of :math:`r_k`
rows and carries what is left (fewer than :math:`r_k` pairs) to epoch :math:`e + 1`; the
batches of all buckets are then shuffled together. Every batch is full, nothing is dropped
(each epoch's pass over a pair is trained in that epoch or the next), and the order of any
epoch is a function of the seed (a resumed run meets the same batches).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence

import numpy as np
import torch

from ..common.field_checks import require
from ..common.progress import progress_bar
from ..storage.ragged import RaggedIds
from .seq2seq import IGNORE_INDEX, batch_targets, pad_ragged, ragged_ids

logger = logging.getLogger(__name__)

ROW_MULTIPLE = 8
"""Rows of a bucket's batch are a multiple of this (tensor-core tiles; process shares)."""
DEVICE_SHARE = 0.25
"""The split's ids and offsets move to the device when they take at most this share of its
free memory (the Bible's 29k training pairs take 7.5 MB, 1.45M pairs 374 MB); else each batch
is gathered on the host into pinned memory and copied without waiting."""
COPY_CHUNK = 1 << 24
"""Ids copied to the device this many at a time (host memory bounded by a chunk)."""


class TokenBatch(dict):
    """A batch (``input_ids``, ``attention_mask``, ``labels``) with ``num_tokens``, the tokens
    it trains on counted on the host (target tokens; input tokens for a classifier), so that
    nothing reads the device to count them."""

    num_tokens: int = 0


def _padding_cost(histogram: np.ndarray, widths: list[tuple[int, int]]) -> float:
    """Padded positions of the pairs counted in ``histogram[s, t]`` when each goes to the first
    of ``widths`` ``(S_k, T_k)`` it fits; ``inf`` when some pair fits none."""
    sources = np.arange(histogram.shape[0])[:, None]
    targets = np.arange(histogram.shape[1])[None, :]
    bucket = bucket_of(sources, targets, widths)
    if (histogram[bucket < 0] > 0).any():
        return float("inf")
    table = np.array(widths)
    padded = table[bucket, 0] - sources + table[bucket, 1] - targets
    return float((histogram * padded)[bucket >= 0].sum())


def choose_buckets(
    source_lengths: Sequence[int], target_lengths: Sequence[int] | None, num_buckets: int
) -> list[tuple[int, int]]:
    """The bucket widths ``[(S_k, T_k), …]`` (``T_k = 0`` without targets) that pad the pairs
    least (see the module docstring), narrowest first; buckets no pair falls in are left out."""
    sources = np.asarray(source_lengths, dtype=np.int64)
    targets = (
        np.zeros_like(sources)
        if target_lengths is None
        else np.asarray(target_lengths, dtype=np.int64)
    )
    shape = (int(sources.max()) + 1, int(targets.max()) + 1)
    cells = np.bincount(sources * shape[1] + targets, minlength=shape[0] * shape[1])
    histogram = cells.reshape(shape)
    key = targets if target_lengths is not None else sources
    cuts = np.quantile(key, np.linspace(0, 1, num_buckets + 1)[1:], method="higher")
    widths = []
    for cut in cuts:
        inside = key <= cut
        widths.append([int(sources[inside].max()), int(targets[inside].max())])
    widths[-1] = [int(sources.max()), int(targets.max())]
    best = _padding_cost(histogram, widths)
    axes = (0, 1) if target_lengths is not None else (0,)
    improved, passes = True, 0
    bar = progress_bar(total=len(widths) - 1, desc="length buckets", unit="bucket", leave=False)
    with bar:
        while improved:
            improved, passes = False, passes + 1
            if passes > 1:  # another pass over the buckets (refresh=False: the delay holds)
                bar.total += len(widths) - 1
                bar.set_postfix_str(f"pass {passes}", refresh=False)
            for k in range(len(widths) - 1):  # the last bucket stays the widest pair
                for axis in axes:
                    low = widths[k - 1][axis] if k else 0
                    for value in range(max(low, 1), widths[k + 1][axis] + 1):
                        trial = [list(w) for w in widths]
                        trial[k][axis] = value
                        cost = _padding_cost(histogram, trial)
                        if cost < best:
                            best, widths, improved = cost, trial, True
                bar.update()
    seen_sources, seen_targets = np.nonzero(histogram)  # the lengths of some pair
    fits = [
        k
        for k, (s, t) in enumerate(widths)
        if ((seen_sources <= s) & (seen_targets <= t)).any() and widths.index(widths[k]) == k
    ]
    return [tuple(widths[k]) for k in fits]


def bucket_of(
    source_lengths: np.ndarray, target_lengths: np.ndarray, widths: list[tuple[int, int]]
) -> np.ndarray:
    """The bucket of each pair: the first of ``widths`` that fits its source and target (``-1``:
    none does); the lengths broadcast (a column of sources against a row of targets gives
    every pair of lengths)."""
    bucket = np.full(np.broadcast_shapes(source_lengths.shape, target_lengths.shape), -1)
    for k in range(len(widths) - 1, -1, -1):
        bucket[(source_lengths <= widths[k][0]) & (target_lengths <= widths[k][1])] = k
    return bucket


def check_budget(token_budget: int, longest: int, classes: bool = False) -> None:
    """Refuse a ``token_budget`` below ``longest``, the tokens counted of the longest training
    example (target tokens of a pair; input tokens of a text to classify, ``classes``): a batch
    holds whole examples.

    Raises:
        RecipeError: ``training.token_budget: 30 is below the 123 target tokens of the longest
            training pair ...``.
    """
    what = "input tokens of the longest training text"
    if not classes:
        what = "target tokens of the longest training pair"
    require(
        token_budget >= longest,
        "training.token_budget",
        f"{token_budget} is below the {longest} {what}: a batch holds whole examples, so the "
        f"budget must be at least {longest}",
    )


def fillable_buckets(num_buckets: int, lengths: np.ndarray, classes: bool = False) -> int:
    """``num_buckets``, or the number of distinct ``lengths`` (the target lengths of the
    training pairs; the input lengths of texts to classify, ``classes``) when that is fewer, with
    a warning: the quantile cuts that :func:`choose_buckets` starts from give no more buckets,
    and its descent would take minutes to split them further."""
    distinct = len(np.unique(lengths))
    if num_buckets <= distinct:
        return num_buckets
    logger.warning(
        "training.length_buckets=%d is more than the %d distinct %s lengths of the training "
        "split: %d buckets are built",
        num_buckets, distinct, "input" if classes else "target", distinct,
    )  # fmt: skip
    return distinct


class DeviceRagged:
    """A :class:`~hfattn.storage.ragged.RaggedIds` copied to a torch device (values as
    ``int32``, offsets as ``int64``) whose :meth:`padded` gathers rows there, as
    :meth:`RaggedIds.padded <hfattn.storage.ragged.RaggedIds.padded>` does on the host."""

    def __init__(self, ids: RaggedIds, device: torch.device):
        values = ids.values[ids.offsets[0] : ids.offsets[-1]]
        self.values = torch.empty(len(values), dtype=torch.int32, device=device)
        for begin in range(0, len(values), COPY_CHUNK):
            chunk = np.asarray(values[begin : begin + COPY_CHUNK], dtype=np.int32)
            self.values[begin : begin + len(chunk)] = torch.from_numpy(chunk).to(device)
        self.offsets = torch.from_numpy(ids.offsets - ids.offsets[0]).to(device)
        self.columns = torch.arange(int(ids.lengths.max(initial=0)) + 1, device=device)

    @staticmethod
    def nbytes(ids: RaggedIds) -> int:
        """Bytes the device copy of ``ids`` takes."""
        return 4 * ids.num_values + 8 * len(ids.offsets)

    def padded(
        self, rows: torch.Tensor, width: int, fill: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rows ``rows`` (a device tensor) right-padded with ``fill`` to ``width`` (``int64``)
        and the mask of their values: the value at column :math:`j` of row :math:`r` is
        ``values[offsets[r] + j]`` where :math:`j < \\ell_r`."""
        starts = self.offsets[rows]
        lengths = self.offsets[rows + 1] - starts
        columns = self.columns[:width]
        keep = columns[None, :] < lengths[:, None]
        positions = (starts[:, None] + columns[None, :]).clamp_(max=max(len(self.values) - 1, 0))
        return torch.where(keep, self.values[positions].long(), fill), keep.long()


class BucketedBatches:
    """Batches of about ``token_budget`` tokens in at most ``num_buckets`` shapes, gathered
    row by row from ``sources`` (a :class:`~hfattn.storage.ragged.RaggedIds`, or lists of ids)
    (see the module docstring): ``input_ids`` / ``attention_mask`` (right padding) and
    ``labels`` (``-100`` padding, from the ragged ``targets``; one class id per row when
    ``targets`` are class ids, a 1-D array). Each yielded batch is a :class:`TokenBatch`.
    ``layout``: the buckets' widths and rows fixed (another batcher's :attr:`layout`, its last
    bucket widened to the longest ids to come), not chosen from these lengths: the batches of
    ids drawn anew every epoch keep one set of shapes
    (:class:`~hfattn.batching.resampled.ResampledBatches`); an example that fits no bucket is
    refused."""

    stateful = False

    def __init__(
        self,
        sources: RaggedIds | Sequence[Sequence[int]],
        targets: RaggedIds | Sequence[Sequence[int]] | Sequence[int] | np.ndarray,
        *,
        token_budget: int,
        pad_token_id: int,
        num_buckets: int = 8,
        seed: int = 0,
        row_multiple: int = ROW_MULTIPLE,
        layout: tuple[Sequence[tuple[int, int]], Sequence[int]] | None = None,
    ):
        if len(sources) != len(targets):
            raise ValueError(f"{len(sources)} sources but {len(targets)} targets")
        if not len(sources):
            raise ValueError("no training examples to batch")
        self.sources = ragged_ids(sources)
        self.targets, self.classes = batch_targets(targets)
        source_lengths = self.sources.lengths
        target_lengths = np.zeros_like(source_lengths) if self.classes else self.targets.lengths
        self.counted = source_lengths if self.classes else target_lengths
        """The tokens each example trains on (``num_tokens`` of a batch is their sum)."""
        longest = int(self.counted.max())
        if layout is not None:  # the widest bucket: the longest example of any later batcher
            longest = max(longest, max(w[0 if self.classes else 1] for w in layout[0]))
        check_budget(token_budget, longest, self.classes)
        if layout is None:
            num_buckets = fillable_buckets(num_buckets, self.counted, self.classes)
            self.widths = choose_buckets(
                source_lengths, None if self.classes else target_lengths, num_buckets
            )
        else:
            self.widths = [tuple(w) for w in layout[0]]
        bucket = bucket_of(source_lengths, target_lengths, self.widths)
        if (bucket < 0).any():
            raise ValueError(f"example {int(np.argmax(bucket < 0))} fits no bucket of the layout")
        self.token_budget, self.seed, self.pad_token_id = token_budget, seed, pad_token_id
        by_bucket = np.argsort(bucket, kind="stable")
        ends = np.cumsum(np.bincount(bucket, minlength=len(self.widths)))
        self.members = np.split(by_bucket, ends[:-1])
        """The indices of each bucket's examples, in corpus order."""
        self.rows = [] if layout is None else list(layout[1])
        for members in self.members if layout is None else ():
            mean = self.counted[members].mean()
            rows = max(row_multiple, round(token_budget / (row_multiple * mean)) * row_multiple)
            self.rows.append(min(rows, len(members)))
        self.batch_size = self.min_rows = min(self.rows)
        """The fewest rows of a batch (the engine splits every batch over its processes)."""
        self.device = torch.device("cpu")
        self._on_device: tuple | None = None
        self._pinned = False
        self._epochs: list[list[tuple[int, np.ndarray]]] = []
        self._carried = [np.zeros(0, dtype=np.int64) for _ in self.widths]

    @property
    def layout(self) -> tuple[list[tuple[int, int]], list[int]]:
        """``(widths, rows)`` of the buckets: what ``layout`` fixes for another batcher."""
        return list(self.widths), list(self.rows)

    @property
    def shapes(self) -> list[tuple[int, int, int]]:
        """The padded batch shapes ``(rows, source width, target width)``, one a bucket."""
        return [(r, s, t) for r, (s, t) in zip(self.rows, self.widths, strict=True)]

    def round_widths(self, multiple: int) -> None:
        """Nothing: the widths are the buckets' (a compiled step marks them dynamic)."""

    def __len__(self) -> int:
        """Batches in epoch 0 (later epochs differ by the pairs carried over, at most one batch
        a bucket)."""
        return len(self.order(0))

    def order(self, epoch: int) -> list[tuple[int, np.ndarray]]:
        """The batches of ``epoch``: ``(bucket, positions of its rows in the bucket)``."""
        while len(self._epochs) <= epoch:
            self._epochs.append(self._next_epoch(len(self._epochs)))
        return self._epochs[epoch]

    def _next_epoch(self, epoch: int) -> list[tuple[int, np.ndarray]]:
        generator = torch.Generator().manual_seed(self.seed + epoch)
        batches = []
        for k, members in enumerate(self.members):
            shuffled = torch.randperm(len(members), generator=generator).numpy()
            queue = np.concatenate([self._carried[k], shuffled])
            full = len(queue) // self.rows[k] * self.rows[k]
            batches += [(k, queue[i : i + self.rows[k]]) for i in range(0, full, self.rows[k])]
            self._carried[k] = queue[full:]
        permutation = torch.randperm(len(batches), generator=generator).tolist()
        return [batches[i] for i in permutation]

    def to(self, device) -> BucketedBatches:
        """Move the split's ids and offsets to ``device`` when they fit (:data:`DEVICE_SHARE`
        of its free memory), where each batch is then gathered; on a CUDA device a split that
        does not fit is gathered on the host into pinned memory, for a copy without waiting."""
        device = torch.device(device)
        if device.type != "cuda":
            return self
        size = DeviceRagged.nbytes(self.sources)
        size += 8 * len(self.targets) if self.classes else DeviceRagged.nbytes(self.targets)
        free, _ = torch.cuda.mem_get_info(device)
        if size <= DEVICE_SHARE * free:
            targets = (
                torch.from_numpy(self.targets).to(device)
                if self.classes
                else DeviceRagged(self.targets, device)
            )
            self._on_device = (DeviceRagged(self.sources, device), targets)
            self.device = device
        else:
            self._pinned = True
        return self

    def epoch(self, epoch: int, start: int = 0) -> Iterator[TokenBatch]:
        """Batches ``start, start+1, …`` of ``epoch``, each gathered and padded to its bucket's
        widths from the split (on the device that holds it)."""
        for k, positions in self.order(epoch)[start:]:
            rows = self.members[k][positions]
            batch = TokenBatch(self._gather(rows, *self.widths[k]))
            batch.num_tokens = int(self.counted[rows].sum())
            yield batch

    def _gather(self, rows: np.ndarray, source_width: int, target_width: int) -> dict:
        """The padded tensors of examples ``rows`` (on the device holding the split, else on
        the host, pinned for a CUDA device)."""
        if self._on_device is not None:
            sources, targets = self._on_device
            index = torch.from_numpy(rows).to(self.device, non_blocking=True)
            ids, mask = sources.padded(index, source_width, self.pad_token_id)
            labels = (
                targets[index] if self.classes
                else targets.padded(index, target_width, IGNORE_INDEX)[0]
            )  # fmt: skip
        else:
            ids, mask = pad_ragged(self.sources, rows, self.pad_token_id, width=source_width)
            labels = (
                torch.from_numpy(self.targets[rows]) if self.classes
                else pad_ragged(self.targets, rows, IGNORE_INDEX, width=target_width)[0]
            )  # fmt: skip
        tensors = {"input_ids": ids, "attention_mask": mask, "labels": labels}
        if self._pinned:
            tensors = {name: tensor.pin_memory() for name, tensor in tensors.items()}
        return tensors


__all__ = [
    "DEVICE_SHARE",
    "ROW_MULTIPLE",
    "COPY_CHUNK",
    "BucketedBatches",
    "DeviceRagged",
    "TokenBatch",
    "bucket_of",
    "check_budget",
    "choose_buckets",
    "fillable_buckets",
]
