"""Toy seq2seq tasks shared by the encoder-decoder tests (vocabulary of 16 ids, <eos> = 3)."""

from __future__ import annotations

import torch

VOCAB, EOS = 16, 3


def copy_reverse_batch(g: torch.Generator, size: int = 32, length: int = 5):
    """``size`` random sources of ``length`` ids in ``[4, VOCAB)`` and, as labels, each source
    reversed and followed by ``<eos>``."""
    src = torch.randint(4, VOCAB, (size, length), generator=g)
    labels = torch.cat([src.flip(1), torch.full((size, 1), EOS)], 1)
    return src, labels
