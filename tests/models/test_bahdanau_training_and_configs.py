"""BahdanauForConditionalGeneration trains and is configured: every attention score and
distribution of the catalogue trains, a tiny model learns to reverse sequences; configs come
from ``AutoModelForSeq2SeqLM`` and the presets, and a bad one names the field and the allowed
values.

The contracts every family keeps (saving, dtypes, output flags, export, checkpointing, PEFT,
Trainer, remote code) are in ``test_model_contracts_*.py``."""

import pytest
import torch
from transformers import AutoModelForSeq2SeqLM

from hfattn import BahdanauConfig, BahdanauForConditionalGeneration
from hfattn.models.distributions import DISTRIBUTIONS
from hfattn.models.scores import SCORES
from tests.helpers.seq2seq_tasks import copy_reverse_batch
from tests.helpers.tiny_bahdanau import VOCAB, batch, tiny, tiny_config

# --------------------------------------------------------------------------- attention catalogue


@pytest.mark.parametrize("score", sorted(SCORES))
def test_every_score_trains_with_softmax(score):
    model = tiny(perturb=0.0, score=score, distribution="softmax").train()
    ids, mask = batch((5, 3))
    labels = torch.randint(4, VOCAB, (2, 4))
    out = model(input_ids=ids, attention_mask=mask, labels=labels, output_attentions=True)
    assert torch.isfinite(out.loss)
    out.loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
    weights = out.cross_attentions[0][:, 0]  # [batch, tgt, src]
    assert torch.all(weights[1, :, 3:] == 0)  # padding gets no weight
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4))


@pytest.mark.parametrize("distribution", [d for d in DISTRIBUTIONS if d != "normalize"])
def test_every_distribution_trains_with_the_default_score(distribution):
    model = tiny(distribution=distribution).train()
    ids, mask = batch((5, 3))
    labels = torch.randint(4, VOCAB, (2, 4))
    out = model(input_ids=ids, attention_mask=mask, labels=labels, output_attentions=True)
    out.loss.backward()
    assert torch.isfinite(out.loss)
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
    assert model.model.decoder.attention.score.key_proj.weight.grad.abs().sum() > 0
    weights = out.cross_attentions[0][:, 0]
    assert torch.all(weights[1, :, 3:] == 0) and torch.all(weights >= 0)
    if distribution != "sigmoid":  # the sigmoid gates each key independently
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4))


# --------------------------------------------------------------------------- configs
def test_auto_model_from_config_and_presets():
    model = AutoModelForSeq2SeqLM.from_config(tiny_config(attention="luong", score="dot"))
    assert isinstance(model, BahdanauForConditionalGeneration)
    geron = BahdanauConfig.from_preset("geron", vocab_size=50)
    assert (geron.encoder_hidden_size, geron.decoder_hidden_size, geron.bridge) == (
        256,
        512,
        "concat",
    )
    assert geron.is_encoder_decoder and geron.attention_score == "additive"
    m = BahdanauForConditionalGeneration(
        BahdanauConfig.from_preset("geron-no-attention", vocab_size=50)
    )
    assert m.model.decoder.attention is None and m.model.decoder.layers[0].mode == "LSTM"
    assert m.model.decoder.layers[0].hidden_size == 512 and m.model.encoder.layers[0].bidirectional
    assert BahdanauConfig(attention="luong").attention_score == "general"


def test_bad_configs_name_the_field_and_the_allowed_values():
    cases = [
        (dict(cell="rnn"), "cell must be one of gru, lstm"),
        (dict(score="attention"), "score must be one of dot, scaled_dot, general"),
        (dict(distribution="max"), "distribution must be one of softmax, sparsemax, entmax15"),
        (dict(attention="vaswani"), "attention must be one of None, bahdanau, luong"),
        (dict(bridge="sum"), "bridge must be one of concat, projection, zeros"),
        (dict(decoder_hidden_size=10), "bridge='concat' needs decoder_hidden_size"),
        (dict(input_feeding=True), "input_feeding needs attention='luong'"),
        (dict(embedding_dim=0), "embedding_dim must be a positive integer"),
        (dict(dropout=1.5), r"dropout must be in \[0, 1\)"),
        (dict(score="dot", bridge="zeros", decoder_hidden_size=12), "score 'dot' needs"),
    ]
    for kw, message in cases:
        with pytest.raises(ValueError, match=message):
            tiny_config(**kw)
    with pytest.raises(ValueError, match="preset must be one of geron"):
        BahdanauConfig.from_preset("nope")
    model = tiny()
    with pytest.raises(ValueError, match="right-padded"):
        model(input_ids=torch.ones(1, 3, dtype=torch.long), attention_mask=torch.tensor([[0, 1, 1]]),
              decoder_input_ids=torch.ones(1, 1, dtype=torch.long))  # fmt: skip


# --------------------------------------------------------------------------- training


def test_tiny_model_learns_to_reverse_sequences():
    torch.manual_seed(0)
    model = BahdanauForConditionalGeneration(
        tiny_config(cell="gru", encoder_hidden_size=16, embedding_dim=16)
    ).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(150):
        src, labels = copy_reverse_batch(g)
        loss = model(input_ids=src, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[0] > 2.3  # ≈ ln(16) at the start
    assert sum(losses[-10:]) / 10 < 0.25 * losses[0]
    src, labels = copy_reverse_batch(g, size=16)
    model.eval()
    with torch.no_grad():
        out = model.generate(input_ids=src, max_new_tokens=6, do_sample=False)
    accuracy = (out[:, 1:7] == labels).float().mean().item()
    assert accuracy > 0.8
