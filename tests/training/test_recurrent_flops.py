"""The training FLOPs of the RNN encoder-decoders: the encoder per source token, the decoder
and the output layer per target token, the attention per (target, source) pair."""

from __future__ import annotations

import pytest
import torch

from hfattn.models import BahdanauConfig, BahdanauForConditionalGeneration
from hfattn.training.throughput import FlopCounter


def _model(**attention) -> BahdanauForConditionalGeneration:
    config = BahdanauConfig(vocab_size=40, embedding_dim=8, encoder_hidden_size=6,
                            bidirectional=True, decoder_hidden_size=10, cell="gru",
                            tie_word_embeddings=True, bridge="projection", **attention)  # fmt: skip
    return BahdanauForConditionalGeneration(config)


def _by_name(model, start: str, leave_out: tuple[str, ...] = ()) -> int:
    return sum(p.numel() for name, p in model.named_parameters()
               if name.startswith(start) and not any(part in name for part in leave_out))  # fmt: skip


@pytest.mark.parametrize(
    ("attention", "key_module", "key_width"),
    [({"attention": "luong", "score": "general"}, "score.weight", 10),
     ({"attention": "bahdanau", "score": "additive"}, "score.key_proj", 10)],
)  # fmt: skip
def test_encoder_per_source_decoder_and_output_per_target_attention_per_pair(
    attention, key_module, key_width
):
    model = _model(**attention)
    batch, source, target = 3, 7, 5
    encoder = _by_name(model, "model.encoder.", ("embed_tokens",))
    key = _by_name(model, f"model.decoder.attention.{key_module}")
    decoder = _by_name(model, "model.decoder.", ("embed_tokens", key_module))
    output = 40 * 8 + sum(p.numel() for n, p in model.named_parameters()
                          if n.startswith(("output_projection", "lm_head")))  # fmt: skip
    value_width = 2 * 6  # a bidirectional encoder's outputs
    expected = 6 * batch * ((encoder + key) * source + (decoder + output) * target) + (
        6 * batch * target * source * (key_width + value_width)
    )
    ids = {"input_ids": torch.ones(batch, source, dtype=torch.long),
           "labels": torch.ones(batch, target, dtype=torch.long)}  # fmt: skip
    assert FlopCounter(model)(ids) == expected


def test_without_attention_there_is_no_pair_term():
    model = _model(attention=None)
    count = FlopCounter(model)
    one = {
        "input_ids": torch.ones(2, 4, dtype=torch.long),
        "labels": torch.ones(2, 3, dtype=torch.long),
    }
    longer = {
        "input_ids": torch.ones(2, 8, dtype=torch.long),
        "labels": torch.ones(2, 3, dtype=torch.long),
    }
    encoder = _by_name(model, "model.encoder.", ("embed_tokens",))
    assert count(longer) - count(one) == 6 * 2 * encoder * 4  # linear in the source length
