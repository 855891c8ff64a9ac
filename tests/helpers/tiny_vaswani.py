"""Tiny Vaswani Transformers and padded batches for the model tests (``tests/models/``)."""

from __future__ import annotations

import torch

from hfattn import VaswaniConfig, VaswaniForConditionalGeneration

VOCAB, EOS, PAD = 16, 3, 0
"""The tiny models' vocabulary size, end-of-sequence and padding ids."""


def tiny_config(**kw) -> VaswaniConfig:
    """A 2+2-layer, 16-wide, 4-head configuration without dropout; ``kw`` overrides."""
    base = dict(
        vocab_size=VOCAB,
        encoder_layers=2,
        decoder_layers=2,
        d_model=16,
        num_heads=4,
        ffn_dim=32,
        dropout=0.0,
        max_position_embeddings=32,
    )
    return VaswaniConfig(**{**base, **kw})


def tiny(implementation: str = "sdpa", **kw) -> VaswaniForConditionalGeneration:
    """A seeded :func:`tiny_config` model (padding id :data:`PAD`) in eval mode, on the given
    attention implementation."""
    torch.manual_seed(0)
    model = VaswaniForConditionalGeneration(tiny_config(pad_token_id=PAD, **kw)).eval()
    model.set_attn_implementation(implementation)
    return model


def padded(lengths, seed) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids of the given lengths and their ``[B, T]`` mask (1 = token)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.full((len(lengths), max(lengths)), PAD)
    for row, n in enumerate(lengths):
        ids[row, :n] = torch.randint(4, VOCAB, (n,), generator=g)
    return ids, (ids != PAD).long()
