"""Batches for causal language modelling: stateless (shuffled windows), packed (shuffled
blocks that tile the corpus, as GPT-2 is fine-tuned) and stateful (contiguous streams).

A corpus is one id tensor: every document preceded by a separator token (:func:`encode_corpus`).
All batchers produce ``[batch, seq_len + 1]`` windows: inputs are ``w[:, :-1]`` and targets
``w[:, 1:]``, so consecutive stateful windows share no input token and the carried state is
exactly the state after the previous window's last input.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch

from .protocol import HostBatches


def encode_corpus(
    tokenizer, documents: Sequence[str], separator: int | None = None
) -> torch.LongTensor:
    """Concatenate ``[separator] + ids(document)`` for every document into one 1-D id tensor.

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


def count_characters(tokenizer, ids: torch.LongTensor) -> int:
    """Number of characters of text that ``ids`` spell.

    Every special token (a document separator, ``<unk>``) counts as one character; every run
    of ordinary tokens between them counts as the length of its decoded text. With a
    character tokenizer this is ``len(ids)``; with a subword tokenizer (GPT-2's byte-level
    BPE) it is the length of the text the tokens cover, so that
    ``bits/char = Σ nats / count_characters / ln 2`` compares models across tokenizers.
    """
    ids = torch.as_tensor(ids).reshape(-1)
    special = torch.isin(ids, torch.tensor(sorted(tokenizer.all_special_ids), dtype=ids.dtype))
    cuts = [-1, *torch.nonzero(special).flatten().tolist(), len(ids)]
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
    is fixed (no shuffling).
    """

    stateful = True

    def __init__(self, ids: torch.LongTensor, batch_size: int, seq_len: int):
        stream_len = (len(ids) - 1) // batch_size
        if stream_len < 1:
            raise ValueError(f"corpus of {len(ids)} tokens is too short for {batch_size} streams")
        # one extra token per stream so the last window still has its target
        self.streams = torch.stack(
            [ids[i * stream_len : (i + 1) * stream_len + 1] for i in range(batch_size)]
        )
        self.seq_len = seq_len
        self.batch_size = self.min_rows = batch_size

    def __len__(self) -> int:
        """Windows a stream holds (the last one may be shorter)."""
        return -(-(self.streams.shape[1] - 1) // self.seq_len)  # the last window may be shorter

    def target_ids(self) -> torch.LongTensor:
        """Every token predicted over an epoch, in corpus order: ``ids[1 : 1 + B·stream_len]``
        (the first token and the last ``< batch_size`` tokens are never targets)."""
        return self.streams[:, 1:].reshape(-1)

    def epoch(self, epoch: int, start: int = 0) -> Iterator[torch.LongTensor]:
        """Windows ``start, start+1, …`` of an epoch (the same every epoch)."""
        for k in range(start, len(self)):
            yield self.streams[:, k * self.seq_len : (k + 1) * self.seq_len + 1]


class WindowBatches(HostBatches):
    """Stateless batching: windows of ``seq_len + 1`` tokens starting every ``shift`` tokens,
    shuffled with ``seed + epoch`` (Géron's ``window(100, shift=1)`` is ``shift=1``)."""

    def __init__(
        self,
        ids: torch.LongTensor,
        batch_size: int,
        seq_len: int,
        shift: int | None = None,
        seed: int = 0,
    ):
        self.ids = ids
        self.batch_size = self.min_rows = batch_size
        self.seq_len = seq_len
        self.seed = seed
        self.starts = torch.arange(0, len(ids) - seq_len - 1, shift or seq_len)
        if len(self.starts) < batch_size:
            raise ValueError(
                f"corpus of {len(ids)} tokens gives {len(self.starts)} windows, fewer than "
                f"batch_size={batch_size}"
            )

    def __len__(self) -> int:
        return len(self.starts) // self.batch_size

    def epoch(self, epoch: int, start: int = 0) -> Iterator[torch.LongTensor]:
        """Shuffled batches of an epoch, from batch ``start`` (deterministic in ``epoch``)."""
        generator = torch.Generator().manual_seed(self.seed + epoch)
        order = self.starts[torch.randperm(len(self.starts), generator=generator)]
        offsets = torch.arange(self.seq_len + 1)
        for k in range(start, len(self)):
            rows = order[k * self.batch_size : (k + 1) * self.batch_size]
            yield self.ids[rows[:, None] + offsets]


class PackedBlocks(WindowBatches):
    """Block packing (``training.mode: packed``, as in Hugging Face's ``run_clm``): the corpus
    (documents joined by the separator token) is cut into consecutive blocks of
    ``block_size`` input tokens, shuffled with ``seed + epoch``.

    Block ``k`` holds ``ids[k·n : (k+1)·n + 1]`` (``n = block_size``): its inputs are
    ``ids[k·n : (k+1)·n]`` and its targets the same shifted by one, so every token after the
    first is a target once per epoch. The tail shorter than a block is dropped, and so are the
    ``< batch_size`` blocks that would not fill a last batch (different ones every epoch).
    """

    def __init__(self, ids: torch.LongTensor, batch_size: int, block_size: int, seed: int = 0):
        super().__init__(ids, batch_size, block_size, shift=block_size, seed=seed)


__all__ = ["PackedBlocks", "StreamBatches", "WindowBatches", "count_characters", "encode_corpus"]
