"""BahdanauForConditionalGeneration against independent reference implementations: encoder
packing (padding changes nothing, the concat bridge), the Bahdanau and Luong input-feeding
decoders against their equations, one pass vs the step loop, the loss (shifted labels,
``num_items_in_batch``, label smoothing).

The contracts every family keeps (saving, dtypes, output flags, export, checkpointing, PEFT,
Trainer, remote code) are in ``test_model_contracts_*.py``."""

import pytest
import torch
from torch.nn import functional as F

from tests.helpers.model_testers import label_smoothed_loss
from tests.helpers.tiny_bahdanau import BOS, PAD, VARIANTS, VOCAB, batch, tiny, tiny_config

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
