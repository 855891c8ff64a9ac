"""BahdanauForConditionalGeneration: encoder packing, attention variants against independent
reference implementations, one pass vs step loop, per-layer stacks, the RecurrentCache,
generate(), training, configs. The contracts every family keeps (saving, dtypes, output
flags, export, checkpointing, PEFT, Trainer, remote code) are in ``test_model_contracts.py``."""

import math

import pytest
import torch
from torch.nn import functional as F
from transformers import AutoModelForSeq2SeqLM

from hfattn import BahdanauConfig, BahdanauForConditionalGeneration, RecurrentCache
from hfattn.models import BahdanauModel
from hfattn.models.distributions import DISTRIBUTIONS
from hfattn.models.scores import SCORES
from tests.helpers.model_testers import label_smoothed_loss
from tests.helpers.seq2seq_tasks import copy_reverse_batch

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


# --------------------------------------------------------------------------- encoder


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_encoder_output_of_a_sentence_does_not_depend_on_padding(cell):
    model = tiny(cell=cell, encoder_layers=2, decoder_layers=2)
    encoder = model.get_encoder()
    ids, mask = batch((7, 4, 6))
    together = encoder(input_ids=ids, attention_mask=mask)
    for i, n in enumerate((7, 4, 6)):
        alone = encoder(input_ids=ids[i : i + 1, :n])
        torch.testing.assert_close(together.last_hidden_state[i, :n], alone.last_hidden_state[0])
        assert torch.all(together.last_hidden_state[i, n:] == 0)
        torch.testing.assert_close(
            together.decoder_initial_hidden[i], alone.decoder_initial_hidden[0]
        )
        if cell == "lstm":
            torch.testing.assert_close(
                together.decoder_initial_cell[i], alone.decoder_initial_cell[0]
            )


def test_concat_bridge_is_forward_last_and_backward_first_state():
    model = tiny()  # BiLSTM(8) → LSTM(16), Géron's concat bridge
    ids, mask = batch((5, 3))
    out = model.get_encoder()(input_ids=ids, attention_mask=mask)
    h = out.last_hidden_state
    for i, n in enumerate((5, 3)):
        expected = torch.cat([h[i, n - 1, :8], h[i, 0, 8:]])  # [h→_T; h←_1]
        torch.testing.assert_close(out.decoder_initial_hidden[i, 0], expected)
    assert out.decoder_initial_hidden.shape == (2, 1, 16)  # batch-first for generate()


# --------------------------------------------------------------------------- references


def lstm_cell(x, h, c, rnn, layer=0):
    """LSTM equations: [i f g o] = W_ih x + b_ih + W_hh h + b_hh; c' = f c + i g; h' = o tanh c'."""
    gates = (
        x @ getattr(rnn, f"weight_ih_l{layer}").T
        + getattr(rnn, f"bias_ih_l{layer}")
        + h @ getattr(rnn, f"weight_hh_l{layer}").T
        + getattr(rnn, f"bias_hh_l{layer}")
    )
    i, f, g, o = gates.chunk(4, -1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def gru_cell(x, h, rnn, layer=0):
    """GRU equations: r, z = σ(W_i x + b_i + W_h h + b_h); n = tanh(W_in x + b_in + r (W_hn h +
    b_hn));
    h' = (1 − z) n + z h."""
    xi = x @ getattr(rnn, f"weight_ih_l{layer}").T + getattr(rnn, f"bias_ih_l{layer}")
    hh = h @ getattr(rnn, f"weight_hh_l{layer}").T + getattr(rnn, f"bias_hh_l{layer}")
    xr, xz, xn = xi.chunk(3, -1)
    hr, hz, hn = hh.chunk(3, -1)
    r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
    n = torch.tanh(xn + r * hn)
    return (1 - z) * n + z * h


def masked_softmax(e, mask):
    return torch.softmax(e.masked_fill(mask == 0, float("-inf")), -1)


@torch.no_grad()
def test_bahdanau_decoder_matches_the_equations():
    """s_t = GRU([E y_{t-1}; c_t], s_{t-1}), c_t = Σ α_j h_j, α = softmax(vᵀ tanh(W_q s_{t-1} +
    W_k h_j + b)), s_0 = tanh(W_s [h→_T; h←_1]), logits = W_o [s_t; c_t] + b_o."""
    model = tiny(cell="gru", bridge="projection", decoder_hidden_size=12)
    ids, mask = batch((6, 3))
    y = torch.randint(4, VOCAB, (2, 5))
    logits = model(input_ids=ids, attention_mask=mask, decoder_input_ids=y).logits

    enc, dec = model.model.encoder, model.model.decoder
    annotations = enc(input_ids=ids, attention_mask=mask).last_hidden_state
    lengths = mask.sum(1)
    last_fwd = annotations[torch.arange(2), lengths - 1, :8]
    s = torch.tanh(enc.bridge_hidden(torch.cat([last_fwd, annotations[:, 0, 8:]], -1)))
    score = dec.attention.score
    projected_keys = annotations @ score.key_proj.weight.T + score.key_proj.bias
    expected = []
    for t in range(y.shape[1]):
        e = torch.tanh((s @ score.query_proj.weight.T)[:, None] + projected_keys) @ score.v.weight.T
        alpha = masked_softmax(e.squeeze(-1), mask)
        context = (alpha[..., None] * annotations).sum(1)
        s = gru_cell(torch.cat([dec.embed_tokens.weight[y[:, t]], context], -1), s, dec.layers[0])
        expected.append(model.lm_head(torch.cat([s, context], -1)))
    torch.testing.assert_close(logits, torch.stack(expected, 1), rtol=1e-5, atol=1e-5)


@torch.no_grad()
def test_luong_input_feeding_decoder_matches_the_equations():
    """h_t = LSTM([E y_{t-1}; h̃_{t-1}], h_{t-1}), α = softmax(h_tᵀ W h̄_j) (general),
    h̃_t = tanh(W_c [c_t; h_t]), logits = W_o h̃_t + b_o, h̃_0 = 0, (h_0, c_0) = concat bridge."""
    model = tiny(attention="luong", input_feeding=True)
    ids, mask = batch((6, 3))
    y = torch.randint(4, VOCAB, (2, 5))
    logits = model(input_ids=ids, attention_mask=mask, decoder_input_ids=y).logits

    enc, dec = model.model.encoder, model.model.decoder
    out = enc(input_ids=ids, attention_mask=mask)
    annotations = out.last_hidden_state
    h, c = out.decoder_initial_hidden[:, 0], out.decoder_initial_cell[:, 0]
    feed = torch.zeros(2, 16)
    W = dec.attention.score.weight.weight  # general: a(h, k) = hᵀ W k
    expected = []
    for t in range(y.shape[1]):
        h, c = lstm_cell(
            torch.cat([dec.embed_tokens.weight[y[:, t]], feed], -1), h, c, dec.layers[0]
        )
        alpha = masked_softmax(torch.einsum("bh,bsh->bs", h, annotations @ W.T), mask)
        context = (alpha[..., None] * annotations).sum(1)
        feed = torch.tanh(torch.cat([context, h], -1) @ dec.combine.weight.T)
        expected.append(model.lm_head(feed))
    torch.testing.assert_close(logits, torch.stack(expected, 1), rtol=1e-5, atol=1e-5)


@torch.no_grad()
@pytest.mark.parametrize("variant", ["luong", "none", "two-layers", "residual"])
def test_one_pass_teacher_forcing_equals_the_step_loop(variant):
    model = tiny(**VARIANTS[variant])
    assert model.model.decoder.one_pass
    ids, mask = batch()
    y = torch.randint(4, VOCAB, (3, 6))
    kwargs = dict(input_ids=ids, attention_mask=mask, decoder_input_ids=y, output_attentions=True)
    one = model(**kwargs)
    loop = model(**kwargs, step_by_step=True)
    torch.testing.assert_close(one.logits, loop.logits, rtol=1e-5, atol=1e-6)
    if variant != "none":
        torch.testing.assert_close(one.cross_attentions[0], loop.cross_attentions[0])
    for name in ("h", "c"):
        torch.testing.assert_close(one.cache[name], loop.cache[name])


# --------------------------------------------------------------------------- loss


def test_loss_is_token_cross_entropy_of_shifted_labels_and_uses_num_items_in_batch():
    model = tiny()
    ids, mask = batch()
    labels = torch.randint(4, VOCAB, (3, 5))
    labels[1, 3:] = -100
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    decoder_input_ids = torch.cat([torch.full((3, 1), BOS), labels[:, :-1]], 1)
    decoder_input_ids[decoder_input_ids == -100] = PAD
    same = model(input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_input_ids)
    torch.testing.assert_close(out.logits, same.logits)
    expected = F.cross_entropy(out.logits.reshape(-1, VOCAB), labels.reshape(-1))  # mean of 13
    torch.testing.assert_close(out.loss, expected)
    summed = model(input_ids=ids, attention_mask=mask, labels=labels, num_items_in_batch=26).loss
    torch.testing.assert_close(summed, expected * 13 / 26)


def test_label_smoothing_mixes_the_uniform_distribution_into_the_target():
    model = tiny(label_smoothing=0.2)
    ids, mask = batch()
    labels = torch.randint(4, VOCAB, (3, 5))
    labels[1, 3:] = -100
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    expected, keep, nll = label_smoothed_loss(out.logits, labels, 0.2)
    torch.testing.assert_close(out.loss, expected)
    assert abs(out.loss - nll[keep].mean()) > 1e-3  # the smoothing term is in the loss
    with pytest.raises(ValueError, match=r"^label_smoothing must be in \[0, 1\), got 1.0$"):
        tiny_config(label_smoothing=1.0)


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


# --------------------------------------------------------------------------- cache & generate


def test_recurrent_cache_batch_operations():
    h = torch.arange(12.0).view(3, 2, 2)  # batch-first
    c = torch.arange(12.0).view(2, 3, 2)  # batch on dim 1
    cache = RecurrentCache({"h": h.requires_grad_(), "c": c}, seen_tokens=4, batch_dims={"c": 1})
    assert cache.get_seq_length() == 4 and cache.batch_size == 3 and "h" in cache
    detached = cache.detach()
    assert not detached["h"].requires_grad and cache["h"].requires_grad
    cache.reorder_cache(torch.tensor([2, 2, 0]))
    assert torch.equal(cache["h"], h[[2, 2, 0]]) and torch.equal(cache["c"], c[:, [2, 2, 0]])
    cache.batch_repeat_interleave(2)
    assert cache.batch_size == 6 and torch.equal(cache["c"][:, 1], c[:, 2])
    cache.batch_select_indices(torch.tensor([0, 5]))
    assert torch.equal(cache["h"], h[[2, 0]])
    cache.update_states(2, h=torch.zeros(2, 2, 2), c=None)
    assert cache.get_seq_length() == 6 and "c" not in cache
    with pytest.raises(NotImplementedError, match="cannot be cropped"):
        cache.crop(3)
    cache.reset()
    assert cache.is_empty and cache.get_seq_length() == 0


@torch.no_grad()
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_cached_generation_equals_uncached(variant):
    model = tiny(**VARIANTS[variant])
    ids, mask = batch()
    for kwargs in (
        {"do_sample": False},
        {"num_beams": 3, "length_penalty": 0.7, "no_repeat_ngram_size": 2},
        {"do_sample": True, "top_k": 5, "num_return_sequences": 2},
    ):
        results = []
        for use_cache in (True, False):
            torch.manual_seed(7)
            results.append(
                model.generate(
                    input_ids=ids,
                    attention_mask=mask,
                    max_new_tokens=8,
                    use_cache=use_cache,
                    **kwargs,
                )
            )
        assert torch.equal(results[0], results[1]), kwargs


@torch.no_grad()
def test_the_cache_counts_tokens_and_continues_the_sequence():
    model = tiny(attention="luong", input_feeding=True)
    ids, mask = batch()
    y = torch.randint(4, VOCAB, (3, 6))
    full = model(input_ids=ids, attention_mask=mask, decoder_input_ids=y)
    first = model(input_ids=ids, attention_mask=mask, decoder_input_ids=y[:, :4], use_cache=True)
    cache = first.cache
    assert isinstance(cache, RecurrentCache) and cache.get_seq_length() == 4
    assert set(cache) == {"h", "c", "feed", "keys"}
    rest = model(input_ids=ids, attention_mask=mask, decoder_input_ids=y[:, 4:], cache=cache)
    torch.testing.assert_close(torch.cat([first.logits, rest.logits], 1), full.logits)
    assert cache.get_seq_length() == 6


def sequence_log_prob(model, ids, mask, sequence):
    """Σ_t log p(y_t | y_<t, x) of a generated sequence (start token first), up to its first EOS."""
    tokens = sequence[1:]
    logp = model(
        input_ids=ids, attention_mask=mask, decoder_input_ids=sequence[None, :-1]
    ).logits.log_softmax(-1)[0]
    total = 0.0
    for t, token in enumerate(tokens.tolist()):
        total += logp[t, token].item()
        if token == EOS:
            break
    return total


@torch.no_grad()
def test_beam_search_finds_a_sequence_greedy_cannot_beat():
    model = tiny(perturb=0.8, cell="gru")
    ids, mask = batch((7, 4, 6, 5, 3, 7), seed=3)
    common = dict(input_ids=ids, attention_mask=mask, max_new_tokens=6, length_penalty=0.0)
    greedy = model.generate(**common, do_sample=False)
    beam = model.generate(
        **common, num_beams=5, early_stopping=True, output_scores=True, return_dict_in_generate=True
    )
    strictly_better = 0
    for i in range(ids.shape[0]):
        row_ids, row_mask = ids[i : i + 1], mask[i : i + 1]
        g = sequence_log_prob(model, row_ids, row_mask, greedy[i])
        b = sequence_log_prob(model, row_ids, row_mask, beam.sequences[i])
        # with length_penalty 0 the beam score is the plain sum of log-probabilities
        assert math.isclose(beam.sequences_scores[i].item(), b, rel_tol=1e-4, abs_tol=1e-4)
        assert b >= g - 1e-4
        strictly_better += b > g + 1e-4
    assert strictly_better >= 1  # on these inputs beam search does find better sequences


@torch.no_grad()
def test_generate_returns_the_alignment_of_every_generated_token():
    model = tiny()
    ids, mask = batch((7, 4))
    out = model.generate(
        input_ids=ids,
        attention_mask=mask,
        max_new_tokens=5,
        min_new_tokens=5,
        output_attentions=True,
        return_dict_in_generate=True,
    )
    assert len(out.cross_attentions) == 5
    steps = torch.cat([step[0] for step in out.cross_attentions], 2)  # [batch, 1, 5, src]
    assert steps.shape == (2, 1, 5, 7)
    torch.testing.assert_close(steps.sum(-1), torch.ones(2, 1, 5))
    assert torch.all(steps[1, ..., 4:] == 0)
    # the alignment of a teacher-forced pass over the output is the same
    forced = model(
        input_ids=ids,
        attention_mask=mask,
        decoder_input_ids=out.sequences[:, :-1],
        output_attentions=True,
    )
    torch.testing.assert_close(forced.cross_attentions[0], steps)


# --------------------------------------------------------------------------- saving


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


# --------------------------------------------------------------------------- transformers contracts


def contract_inputs() -> dict:
    """A right-padded source batch and teacher-forced targets."""
    ids, mask = batch()
    y = torch.randint(4, VOCAB, (3, 5), generator=torch.Generator().manual_seed(3))
    return {"input_ids": ids, "attention_mask": mask, "decoder_input_ids": y}


@torch.no_grad()
def test_the_base_model_and_the_stacks_honour_return_dict():
    torch.manual_seed(0)
    model = BahdanauModel(tiny_config()).eval()
    inputs = contract_inputs()
    as_dict = model(**inputs, output_hidden_states=True)
    as_tuple = model(**inputs, output_hidden_states=True, return_dict=False)
    assert isinstance(as_tuple, tuple) and len(as_tuple) == len(as_dict.to_tuple())
    torch.testing.assert_close(as_tuple[0], as_dict.last_hidden_state)
    encoded = model.encoder(
        input_ids=inputs["input_ids"],
        attention_mask=inputs["attention_mask"],
        output_hidden_states=True,
        return_dict=False,
    )
    assert isinstance(encoded, tuple)
    # a tuple from the encoder (hidden states included) is accepted back as encoder_outputs
    reused = model(
        encoder_outputs=encoded,
        attention_mask=inputs["attention_mask"],
        decoder_input_ids=inputs["decoder_input_ids"],
    )
    torch.testing.assert_close(reused.last_hidden_state, as_dict.last_hidden_state)
    model.config.return_dict = False
    assert isinstance(model(**inputs), tuple)
    assert isinstance(model.encoder(input_ids=inputs["input_ids"]), tuple)


@torch.no_grad()
@pytest.mark.parametrize("variant", ["bahdanau", "luong", "none", "luong-feeding"])
def test_hidden_states_are_the_embeddings_then_every_layer(variant):
    model = tiny(**{**VARIANTS[variant], "encoder_layers": 2, "decoder_layers": 2})
    inputs = contract_inputs()
    ids, mask, y = inputs["input_ids"], inputs["attention_mask"], inputs["decoder_input_ids"]
    out = model.model(**inputs, output_hidden_states=True)
    encoder, decoder = model.model.encoder, model.model.decoder
    source, *encoder_layers = out.encoder_hidden_states
    torch.testing.assert_close(source, encoder.embed_tokens(ids))
    assert [h.shape for h in encoder_layers] == [(3, 7, 16)] * 2
    second, *_ = encoder.layers[1](encoder_layers[0], mask=mask)  # layer 2 reads layer 1
    torch.testing.assert_close(encoder_layers[1], second)
    torch.testing.assert_close(encoder_layers[1], out.encoder_last_hidden_state)
    target, *decoder_layers = out.decoder_hidden_states
    torch.testing.assert_close(target, decoder.embed_tokens(y))
    hidden = decoder.config.decoder_hidden_size
    assert [h.shape for h in decoder_layers] == [(3, 5, hidden)] * 2
    for layer, states in enumerate(decoder_layers):  # the last step is the cached state
        torch.testing.assert_close(states[:, -1], out.cache["h"][:, layer])
    readout = out.last_hidden_state
    if variant in ("none", "bahdanau"):  # o_t = s_t, or [s_t; c_t]
        torch.testing.assert_close(decoder_layers[-1], readout[..., :hidden])
    loop = model.model(**inputs, output_hidden_states=True, step_by_step=True)
    for a, b in zip(out.decoder_hidden_states, loop.decoder_hidden_states, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@torch.no_grad()
def test_the_per_layer_encoder_computes_one_stacked_bidirectional_lstm():
    model = tiny(encoder_layers=2, decoder_layers=2)
    encoder = model.get_encoder()
    stacked = torch.nn.LSTM(8, 8, num_layers=2, bidirectional=True, batch_first=True)
    for k, layer in enumerate(encoder.layers):
        for name, param in layer.named_parameters():
            getattr(stacked, name.replace("_l0", f"_l{k}")).copy_(param)
    ids, _ = batch((6,))
    expected, (h, c) = stacked(encoder.embed_tokens(ids))
    out = encoder(input_ids=ids)
    torch.testing.assert_close(out.last_hidden_state, expected)
    torch.testing.assert_close(out.decoder_initial_cell, encoder._by_layer(c))


# --------------------------------------------------------------------------- remote code


# --------------------------------------------------------------------------- residual


@torch.no_grad()
def test_a_residual_layer_adds_its_input_to_its_output():
    """``x_2 = RNN_2(x_1) + x_1``: the same weights with and without the connections differ at
    the top of a 2-layer encoder by exactly the first layer's output."""
    model = tiny(encoder_layers=2, decoder_layers=2, residual_connections=True)
    ids, mask = batch()
    encoder = model.get_encoder()
    added = encoder(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    model.config.residual_connections = False
    plain = encoder(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    torch.testing.assert_close(added.hidden_states[1], plain.hidden_states[1])
    keep = mask.bool()
    difference = added.hidden_states[2] - plain.hidden_states[2]
    torch.testing.assert_close(difference[keep], plain.hidden_states[1][keep])


@torch.no_grad()
def test_residual_connections_keep_the_signal_of_a_deep_stack_at_initialisation():
    """A 4-layer LSTM stack of 256 units, tied embeddings, as initialised: without residual
    connections each layer shrinks the activations (the top holds under a tenth of the first
    layer's), with them the top holds at least as much as the first layer."""
    spreads = {}
    for residual in (False, True):
        torch.manual_seed(0)
        config = BahdanauConfig(vocab_size=500, embedding_dim=256, encoder_hidden_size=256,
                                encoder_layers=4, bidirectional=False, decoder_layers=4,
                                attention="luong", tie_word_embeddings=True,
                                residual_connections=residual)  # fmt: skip
        encoder = BahdanauForConditionalGeneration(config).eval().get_encoder()
        ids = torch.randint(4, 500, (8, 20), generator=torch.Generator().manual_seed(1))
        states = encoder(input_ids=ids, attention_mask=torch.ones_like(ids),
                         output_hidden_states=True).hidden_states  # fmt: skip
        spreads[residual] = states[-1].std() / states[1].std()
    assert spreads[False] < 0.1 and spreads[True] >= 1.0
