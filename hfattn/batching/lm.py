"""Batches for causal language modelling: stateless (shuffled windows), packed (shuffled
blocks that tile the corpus, as GPT-2 is fine-tuned) and stateful (contiguous streams).

A corpus is one 1-D array of ids: every document preceded by a separator token. Training and
evaluation read a prepared split's memory-mapped values (the layout :func:`encode_corpus`
gives a small corpus in memory); a batch gathers its own windows from it with numpy
(:func:`gather_windows`), so the corpus is never copied whole.
All batchers produce ``[batch, seq_len + 1]`` windows: inputs are ``w[:, :-1]`` and targets
``w[:, 1:]``, so consecutive stateful windows share no input token and the carried state is
exactly the state after the previous window's last input.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch

from .protocol import HostBatches


def encode_corpus(
    tokenizer, documents: Sequence[str], separator: int | None = None
) -> torch.LongTensor:
    """Concatenate ``[separator] + ids(document)`` for every document into one 1-D id tensor
    (a small corpus in memory: what a prepared split's rows hold, one after the other).

    ``separator`` defaults to the tokenizer's ``<bos>`` (the char-RNN corpora); a pretrained
    causal LM passes its ``eos`` (GPT-2's ``<|endoftext|>``), the token it saw between
    documents in pre-training. Documents longer than the tokenizer's ``model_max_length`` are
    expected (they are cut into windows afterwards), so that warning is silenced.
    """
    separator = tokenizer.bos_token_id if separator is None else separator
    if separator is None:
        raise ValueError("encode_corpus: the tokenizer has no bos token; pass separator=")
    encoded = tokenizer(list(documents), add_special_tokens=False, verbose=False)["input_ids"]
    ids: list[int] = []
    for doc in encoded:
        ids.append(separator)
        ids.extend(doc)
    return torch.tensor(ids, dtype=torch.long)


def id_array(ids) -> np.ndarray:
    """``ids`` as a 1-D numpy array, without a copy: a prepared split's memory-mapped values
    as they are, a (CPU) tensor's numpy view, a list converted."""
    if isinstance(ids, torch.Tensor):
        return ids.detach().cpu().numpy().reshape(-1)
    return np.asarray(ids).reshape(-1)


def gather_windows(ids: np.ndarray, starts: np.ndarray, width: int) -> torch.LongTensor:
    """The ``[len(starts), width]`` windows ``ids[s : s + width]`` of every start ``s``, as
    ``int64``: one numpy gather that reads only those tokens from a memory-mapped corpus."""
    rows = np.asarray(starts, dtype=np.int64)[:, None] + np.arange(width)
    return torch.from_numpy(np.asarray(ids[rows], dtype=np.int64))


def count_characters(tokenizer, ids) -> int:
    """Number of characters of text that ``ids`` spell.

    Every special token (a document separator, ``<unk>``) counts as one character; every run
    of ordinary tokens between them counts as the length of its decoded text. With a
    character tokenizer this is ``len(ids)``; with a subword tokenizer (GPT-2's byte-level
    BPE) it is the length of the text the tokens cover, so that
    ``bits/char = Σ nats / count_characters / ln 2`` compares models across tokenizers.
    ``ids`` may be a memory-mapped array: only the runs are read, one at a time.
    """
    ids = id_array(ids)
    special = np.isin(ids, np.asarray(sorted(tokenizer.all_special_ids), dtype=np.int64))
    cuts = [-1, *np.flatnonzero(special).tolist(), len(ids)]
    total = int(special.sum())
    for start, end in zip(cuts[:-1], cuts[1:], strict=True):
        if end > start + 1:
            text = tokenizer.decode(
                ids[start + 1 : end].tolist(), clean_up_tokenization_spaces=False
            )
            total += len(text)
    return total


class StreamBatches(HostBatches):
    """Stateful batching (Géron's stateful RNN, Karpathy's char-rnn).

    The corpus is cut into ``batch_size`` contiguous streams of equal length; batch ``k`` holds
    the ``k``-th consecutive window of every stream, so row ``i`` of batch ``k+1`` continues
    row ``i`` of batch ``k`` and the recurrent state can be carried between them. The order
    is fixed (no shuffling). Stream ``i`` is ``ids[i·S : (i+1)·S + 1]`` (``S`` =
    ``(len(ids) - 1) // batch_size``, one extra token so the last window still has its
    target); each window is gathered from ``ids`` by the streams' starts, so a memory-mapped
    corpus is never copied.
    """

    stateful = True

    def __init__(self, ids, batch_size: int, seq_len: int):
        self.ids = id_array(ids)
        self.stream_len = (len(self.ids) - 1) // batch_size
        if self.stream_len < 1:
            raise ValueError(
                f"corpus of {len(self.ids)} tokens is too short for {batch_size} streams"
            )
        self.starts = np.arange(batch_size, dtype=np.int64) * self.stream_len
        self.seq_len = seq_len
        self.batch_size = self.min_rows = batch_size

    def __len__(self) -> int:
        """Windows a stream holds (the last one may be shorter)."""
        return -(-self.stream_len // self.seq_len)

    def target_ids(self) -> np.ndarray:
        """Every token predicted over an epoch, in corpus order: ``ids[1 : 1 + B·S]`` (the
        first token and the last ``< batch_size`` tokens are never targets); a view."""
        return self.ids[1 : 1 + self.batch_size * self.stream_len]

    def epoch(self, epoch: int, start: int = 0) -> Iterator[torch.LongTensor]:
        """Windows ``start, start+1, …`` of an epoch (the same every epoch)."""
        for k in range(start, len(self)):
            first = k * self.seq_len
            width = min(self.seq_len, self.stream_len - first) + 1
            yield gather_windows(self.ids, self.starts + first, width)


class WindowBatches(HostBatches):
    """Stateless batching: windows of ``seq_len + 1`` tokens starting every ``shift`` tokens,
    shuffled with ``seed + epoch`` (Géron's ``window(100, shift=1)`` is ``shift=1``). Window
    ``j`` starts at ``j·shift``; a batch gathers its windows from ``ids`` (a memory-mapped
    corpus is read, never copied)."""

    def __init__(self, ids, batch_size: int, seq_len: int, shift: int | None = None, seed: int = 0):
        self.ids = id_array(ids)
        self.batch_size = self.min_rows = batch_size
        self.seq_len = seq_len
        self.seed = seed
        self.shift = shift or seq_len
        self.num_windows = len(range(0, len(self.ids) - seq_len - 1, self.shift))
        if self.num_windows < batch_size:
            raise ValueError(
                f"corpus of {len(self.ids)} tokens gives {self.num_windows} windows, fewer "
                f"than batch_size={batch_size}"
            )

    def __len__(self) -> int:
        return self.num_windows // self.batch_size

    def epoch(self, epoch: int, start: int = 0) -> Iterator[torch.LongTensor]:
        """Shuffled batches of an epoch, from batch ``start`` (deterministic in ``epoch``)."""
        generator = torch.Generator().manual_seed(self.seed + epoch)
        order = torch.randperm(self.num_windows, generator=generator).numpy() * self.shift
        for k in range(start, len(self)):
            rows = order[k * self.batch_size : (k + 1) * self.batch_size]
            yield gather_windows(self.ids, rows, self.seq_len + 1)


class PackedBlocks(WindowBatches):
    """Block packing (``training.mode: packed``, as in Hugging Face's ``run_clm``): the corpus
    (documents joined by the separator token) is cut into consecutive blocks of
    ``block_size`` input tokens, shuffled with ``seed + epoch``.

    Block ``k`` holds ``ids[k·n : (k+1)·n + 1]`` (``n = block_size``): its inputs are
    ``ids[k·n : (k+1)·n]`` and its targets the same shifted by one, so every token after the
    first is a target once per epoch. The tail shorter than a block is dropped, and so are the
    ``< batch_size`` blocks that would not fill a last batch (different ones every epoch).
    """

    def __init__(self, ids, batch_size: int, block_size: int, seed: int = 0):
        super().__init__(ids, batch_size, block_size, shift=block_size, seed=seed)


__all__ = [
    "PackedBlocks",
    "StreamBatches",
    "WindowBatches",
    "count_characters",
    "encode_corpus",
    "gather_windows",
    "id_array",
]
