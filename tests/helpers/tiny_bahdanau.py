"""Tiny Bahdanau encoder-decoders and padded batches for the Bahdanau tests
(``tests/models/test_bahdanau_*.py``)."""

from __future__ import annotations

import torch

from hfattn import BahdanauConfig, BahdanauForConditionalGeneration

VOCAB = 16
PAD, BOS, EOS = 0, 2, 3


def tiny_config(**kw) -> BahdanauConfig:
    base = dict(vocab_size=VOCAB, embedding_dim=8, encoder_hidden_size=8, cell="lstm")
    return BahdanauConfig(**{**base, **kw})


def tiny(perturb: float = 0.3, **kw) -> BahdanauForConditionalGeneration:
    """A tiny model whose parameters (biases included) are all non-trivial."""
    torch.manual_seed(0)
    model = BahdanauForConditionalGeneration(tiny_config(**kw)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(perturb * torch.randn_like(p))
    return model


def batch(lengths=(7, 4, 6), seed=1):
    """Right-padded sources of the given lengths and their attention mask."""
    g = torch.Generator().manual_seed(seed)
    width = max(lengths)
    ids = torch.full((len(lengths), width), PAD)
    mask = torch.zeros(len(lengths), width, dtype=torch.long)
    for i, n in enumerate(lengths):
        ids[i, :n] = torch.randint(4, VOCAB, (n,), generator=g)
        mask[i, :n] = 1
    return ids, mask


VARIANTS = {
    "bahdanau": {},
    "bahdanau-gru-projection": dict(cell="gru", bridge="projection", decoder_hidden_size=12),
    "luong": dict(attention="luong"),
    "luong-feeding": dict(attention="luong", input_feeding=True, cell="gru"),
    "none": dict(attention=None),
    "two-layers": dict(encoder_layers=2, decoder_layers=2, attention="luong", score="dot"),
    "residual": dict(
        encoder_layers=3,
        decoder_layers=3,
        attention="luong",
        score="dot",
        residual_connections=True,
    ),  # fmt: skip
}
