"""Tiny Vaswani Transformers that reverse sequences of letters, for the tests of the CTranslate2
export (``tests/export/test_ctranslate2_*.py``): the config variants the export's spec can
express, the reversal data, and a model trained on it or with random weights."""

from __future__ import annotations

import torch

from hfattn import VaswaniConfig, VaswaniForConditionalGeneration
from hfattn.batching.seq2seq import pad_pairs

PAD, UNK, BOS, EOS = 0, 1, 2, 3
LETTERS = "abcdefghijkl"
VOCAB = 4 + len(LETTERS)
BASE = dict(
    vocab_size=VOCAB,
    encoder_layers=2,
    decoder_layers=2,
    d_model=32,
    num_heads=4,
    ffn_dim=64,
    dropout=0.0,
    max_position_embeddings=32,
)
VARIANTS = {
    "post-ln-sinusoidal-relu-tied": {},
    "pre-ln-gelu-untied": {
        "norm_position": "pre",
        "activation": "gelu",
        "share_encoder_decoder_embeddings": False,
        "tie_word_embeddings": False,
    },
    "learned-positions-unscaled": {"position_embedding": "learned", "scale_embedding": False},
    "head-dim-16": {"head_dim": 16},  # 4 heads × 16 ≠ d_model 32
    "dot-no-bias-gelu-tanh": {
        "attention_score": "dot",
        "attention_bias": False,
        "activation": "gelu_new",
    },
}
"""Every option the spec expresses, each in at least one variant: post/pre-LN, sinusoidal /
learned positions, ReLU / GELU (erf and tanh), shared and tied / separate embeddings, with and
without the √d scaling, head_dim ≠ d_model / heads, dot and scaled dot, with and without
biases."""


def reversal_pairs(generator: torch.Generator, size: int) -> tuple[list, list]:
    """Sources of 3-8 letters (+ ``<eos>``) and, as targets, each reversed (+ ``<eos>``)."""
    sources, targets = [], []
    for length in torch.randint(3, 9, (size,), generator=generator).tolist():
        letters = torch.randint(4, VOCAB, (length,), generator=generator).tolist()
        sources.append([*letters, EOS])
        targets.append([*letters[::-1], EOS])
    return sources, targets


def make_model(overrides: dict, steps: int = 0, seed: int = 0) -> VaswaniForConditionalGeneration:
    """A tiny Vaswani model in eval mode: trained for ``steps`` Adam steps on reversal, or
    with random weights (biases included) when ``steps`` is 0."""
    torch.manual_seed(seed)
    model = VaswaniForConditionalGeneration(VaswaniConfig(**{**BASE, **overrides}))
    if steps:
        # foreach: one kernel per update for all tensors, the same steps in less CPU
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, foreach=True)
        generator = torch.Generator().manual_seed(seed)
        for _ in range(steps):
            batch = pad_pairs(*reversal_pairs(generator, 32), PAD)
            loss = model(**batch).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    else:
        with torch.no_grad():
            for name, param in model.named_parameters():
                if "embed" not in name:
                    param.add_(0.3 * torch.randn_like(param))
    return model.eval()
