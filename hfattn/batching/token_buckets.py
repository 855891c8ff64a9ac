r"""Batches of a token budget in a few fixed shapes, gathered from tensors padded once.

fairseq's ``--max-tokens`` (Ott et al. 2019) with length buckets, built for an accelerator as
nanoGPT's ``get_batch`` is: the training split is tokenized and padded **once** into one
tensor per bucket, and a batch is an index gather from it (on the device when the split fits
there), so a step costs the host next to nothing and a compiled step meets only as many shapes
as there are buckets.

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
once it has taken :data:`PROGRESS_DELAY_S`.

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
from tqdm.auto import tqdm

from ..common.field_checks import require
from ..common.launch import process_rank
from .seq2seq import IGNORE_INDEX, pad_rows

logger = logging.getLogger(__name__)

ROW_MULTIPLE = 8
"""Rows of a bucket's batch are a multiple of this (tensor-core tiles; process shares)."""
DEVICE_SHARE = 0.25
"""The split's tensors move to the device when they take at most this share of its free
memory (the Bible's 29k training pairs take about 50 MB); else they stay in pinned host memory
and each batch is gathered there and copied without waiting."""
PROGRESS_DELAY_S = 2.0
"""The choice of the bucket widths shows a progress bar once it has taken this many seconds."""


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
    targets = np.zeros_like(sources) if target_lengths is None else np.asarray(target_lengths)
    histogram = np.zeros((sources.max() + 1, targets.max() + 1), dtype=np.int64)
    np.add.at(histogram, (sources, targets), 1)
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
    bar = tqdm(total=len(widths) - 1, desc="length buckets", unit="bucket", leave=False,
               delay=PROGRESS_DELAY_S, disable=process_rank() != 0)  # fmt: skip
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
    fits = [
        k
        for k, (s, t) in enumerate(widths)
        if ((sources <= s) & (targets <= t)).any() and widths.index(widths[k]) == k
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


class BucketedBatches:
    """Batches of about ``token_budget`` tokens in at most ``num_buckets`` shapes, gathered
    from tensors padded once (see the module docstring): ``input_ids`` / ``attention_mask``
    (right padding) and ``labels`` (``-100`` padding; one class id per row when ``targets``
    are class ids). Each yielded batch is a :class:`TokenBatch`."""

    stateful = False

    def __init__(
        self,
        sources: Sequence[Sequence[int]],
        targets: Sequence[Sequence[int]] | Sequence[int],
        *,
        token_budget: int,
        pad_token_id: int,
        num_buckets: int = 8,
        seed: int = 0,
        row_multiple: int = ROW_MULTIPLE,
    ):
        if len(sources) != len(targets):
            raise ValueError(f"{len(sources)} sources but {len(targets)} targets")
        if not len(sources):
            raise ValueError("no training examples to batch")
        self.classes = not isinstance(targets[0], Sequence)
        source_lengths = np.array([len(s) for s in sources])
        target_lengths = (
            np.zeros_like(source_lengths) if self.classes else np.array([len(t) for t in targets])
        )
        counted = source_lengths if self.classes else target_lengths
        check_budget(token_budget, int(counted.max()), self.classes)
        num_buckets = fillable_buckets(num_buckets, counted, self.classes)
        self.widths = choose_buckets(
            source_lengths, None if self.classes else target_lengths, num_buckets
        )
        bucket = bucket_of(source_lengths, target_lengths, self.widths)
        self.token_budget, self.seed = token_budget, seed
        self.members, self.rows, self.tensors, self.tokens = [], [], [], []
        for k, (source_width, target_width) in enumerate(self.widths):
            members = np.flatnonzero(bucket == k)
            mean = counted[members].mean()
            rows = max(row_multiple, round(token_budget / (row_multiple * mean)) * row_multiple)
            self.members.append(members)
            self.rows.append(min(rows, len(members)))
            ids, mask = pad_rows([sources[i] for i in members], source_width, pad_token_id)
            tensors = {"input_ids": ids, "attention_mask": mask}
            if self.classes:
                tensors["labels"] = torch.tensor([targets[i] for i in members], dtype=torch.long)
            else:
                labels = [targets[i] for i in members]
                tensors["labels"] = pad_rows(labels, target_width, IGNORE_INDEX)[0]
            self.tensors.append(tensors)
            self.tokens.append(counted[members])
        self.batch_size = self.min_rows = min(self.rows)
        """The fewest rows of a batch (the engine splits every batch over its processes)."""
        self.device = torch.device("cpu")
        self._epochs: list[list[tuple[int, np.ndarray]]] = []
        self._carried = [np.zeros(0, dtype=np.int64) for _ in self.widths]

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
        """Move the padded split to ``device`` when it fits (:data:`DEVICE_SHARE` of the free
        memory); on a CUDA device a split that does not fit is pinned on the host instead."""
        device = torch.device(device)
        if device.type != "cuda":
            return self
        size = sum(t.numel() * t.element_size() for b in self.tensors for t in b.values())
        free, _ = torch.cuda.mem_get_info(device)
        if size <= DEVICE_SHARE * free:
            self.tensors = [{n: t.to(device) for n, t in b.items()} for b in self.tensors]
            self.device = device
        else:
            self.tensors = [{n: t.pin_memory() for n, t in b.items()} for b in self.tensors]
        return self

    def epoch(self, epoch: int, start: int = 0) -> Iterator[TokenBatch]:
        """Batches ``start, start+1, …`` of ``epoch``, each an index gather from the padded
        split (on the device that holds it)."""
        for k, positions in self.order(epoch)[start:]:
            index = torch.from_numpy(positions).to(self.device, non_blocking=True)
            batch = TokenBatch(
                (name, tensor.index_select(0, index)) for name, tensor in self.tensors[k].items()
            )
            batch.num_tokens = int(self.tokens[k][positions].sum())
            yield batch


__all__ = [
    "DEVICE_SHARE",
    "PROGRESS_DELAY_S",
    "ROW_MULTIPLE",
    "BucketedBatches",
    "TokenBatch",
    "bucket_of",
    "check_budget",
    "choose_buckets",
    "fillable_buckets",
]
