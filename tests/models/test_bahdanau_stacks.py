"""BahdanauForConditionalGeneration's per-layer stacks: ``return_dict`` of the base model and
the stacks, hidden states (the embeddings, then every layer), the per-layer encoder as one
stacked bidirectional LSTM, residual connections.

The contracts every family keeps (saving, dtypes, output flags, export, checkpointing, PEFT,
Trainer, remote code) are in ``test_model_contracts_*.py``."""

import pytest
import torch

from hfattn import BahdanauConfig, BahdanauForConditionalGeneration
from hfattn.models import BahdanauModel
from tests.helpers.tiny_bahdanau import VARIANTS, VOCAB, batch, tiny, tiny_config


# --------------------------------------------------------------------------- per-layer stacks
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
