"""Batches for character language modelling, stateless (random windows) and stateful
(contiguous streams).

Both produce ``[batch, seq_len + 1]`` windows: inputs are ``w[:, :-1]`` and targets
``w[:, 1:]``, so consecutive stateful windows share no input token and the carried state is
exactly the state after the previous window's last input.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch


def encode_corpus(tokenizer, documents: Sequence[str]) -> torch.LongTensor:
    """Concatenate ``[<bos>] + ids(document)`` for every document into one 1-D id tensor."""
    encoded = tokenizer(list(documents), add_special_tokens=False)["input_ids"]
    ids: list[int] = []
    for doc in encoded:
        ids.append(tokenizer.bos_token_id)
        ids.extend(doc)
    return torch.tensor(ids, dtype=torch.long)


class StreamBatches:
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
        self.batch_size = batch_size

    def __len__(self) -> int:
        return -(-(self.streams.shape[1] - 1) // self.seq_len)  # the last window may be shorter

    def epoch(self, epoch: int, start: int = 0) -> Iterator[torch.LongTensor]:
        """Windows ``start, start+1, …`` of an epoch (the same every epoch)."""
        for k in range(start, len(self)):
            yield self.streams[:, k * self.seq_len : (k + 1) * self.seq_len + 1]


class WindowBatches:
    """Stateless batching: windows of ``seq_len + 1`` tokens starting every ``shift`` tokens,
    shuffled with ``seed + epoch`` (Géron's ``window(100, shift=1)`` is ``shift=1``)."""

    stateful = False

    def __init__(
        self,
        ids: torch.LongTensor,
        batch_size: int,
        seq_len: int,
        shift: int | None = None,
        seed: int = 0,
    ):
        self.ids = ids
        self.batch_size = batch_size
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


__all__ = ["StreamBatches", "WindowBatches", "encode_corpus"]
