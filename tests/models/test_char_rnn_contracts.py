"""CharRNNForCausalLM beyond the shared contract suite (``test_model_contracts_*.py``):

1. ``output_hidden_states`` in ``generate`` and with left padding.
2. The recurrent state is a ``Cache`` (``RecurrentCache``) that counts the tokens it has seen,
   reorders for beams, and continues a generation (from ids or ``inputs_embeds``) exactly.
3. The loss is normalised by ``num_items_in_batch`` (exact gradient accumulation).
"""

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from transformers import DynamicCache
from transformers.cache_utils import Cache

from hfattn import CharRNNConfig, CharRNNForCausalLM
from hfattn.models.modeling_char_rnn import detach_state, state_tensors, to_cache
from hfattn.models.recurrent_cache import RecurrentCache
from hfattn.tasks.causal_lm.job import causal_lm_loss

VOCAB, EMBED, HIDDEN, LAYERS = 24, 8, 16, 3
CELLS = {"gru": nn.GRU, "lstm": nn.LSTM, "rnn": nn.RNN}


def tiny(cell="gru", **kw):
    torch.manual_seed(0)
    cfg = dict(vocab_size=VOCAB, embedding_dim=EMBED, hidden_size=HIDDEN, num_layers=LAYERS)
    return CharRNNForCausalLM(CharRNNConfig(cell=cell, **{**cfg, **kw})).eval()


def stacked_reference(model) -> nn.RNNBase:
    """One stacked torch cell holding the model's per-layer weights."""
    cfg = model.config
    ref = CELLS[cfg.cell](cfg.embedding_dim, cfg.hidden_size, cfg.num_layers, batch_first=True)
    with torch.no_grad():
        for k, layer in enumerate(model.layers):
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                getattr(ref, f"{name}_l{k}").copy_(getattr(layer, f"{name}_l0"))
    return ref.eval()


def test_hidden_states_skip_left_padding():
    model = tiny("lstm")
    x = torch.randint(4, VOCAB, (1, 5))
    padded = torch.cat([torch.zeros(1, 3, dtype=torch.long), x], 1)
    mask = torch.cat([torch.zeros(1, 3), torch.ones(1, 5)], 1).long()
    plain = model(x, output_hidden_states=True).hidden_states
    masked = model(padded, attention_mask=mask, output_hidden_states=True).hidden_states
    for a, b in zip(plain[1:], masked[1:], strict=True):
        torch.testing.assert_close(b[:, 3:], a)
        assert torch.all(b[:, :3] == 0)


def test_generate_returns_hidden_states_of_every_step():
    model = tiny()
    prompt = torch.randint(4, VOCAB, (2, 5))
    out = model.generate(
        prompt,
        max_new_tokens=6,
        do_sample=False,
        output_hidden_states=True,
        return_dict_in_generate=True,
    )
    assert len(out.hidden_states) == 6
    assert all(len(step) == LAYERS + 1 for step in out.hidden_states)
    assert out.hidden_states[0][-1].shape == (2, 5, HIDDEN)  # prefill: the whole prompt
    assert all(step[-1].shape == (2, 1, HIDDEN) for step in out.hidden_states[1:])
    # step t's hidden states are those of the full sequence at its position
    full = model(out.sequences, output_hidden_states=True).hidden_states
    for t, step in enumerate(out.hidden_states[1:], start=1):
        for layer in range(LAYERS + 1):
            torch.testing.assert_close(step[layer][:, 0], full[layer][:, 4 + t])


# ---- 2. the state is a Cache ---------------------------------------------------------------
@pytest.mark.parametrize("cell", ["gru", "lstm", "rnn"])
def test_state_is_a_cache_that_counts_tokens(cell):
    model = tiny(cell)
    x = torch.randint(4, VOCAB, (2, 7))
    cache = model(x[:, :4], use_cache=True).cache
    assert isinstance(cache, RecurrentCache) and isinstance(cache, Cache)
    assert cache.get_seq_length() == 4 and cache.batch_size == 2
    assert sorted(cache) == (["c", "h"] if cell == "lstm" else ["h"])
    assert cache["h"].shape == (LAYERS, 2, HIDDEN)
    # forward updates the cache in place (as DynamicCache) and returns it
    rest = model(x[:, 4:], cache=cache)
    assert rest.cache is cache and cache.get_seq_length() == 7
    torch.testing.assert_close(torch.cat([model(x[:, :4]).logits, rest.logits], 1), model(x).logits)
    # the state equals the stacked cell's final state
    ref = stacked_reference(model)(model.embeddings(x))[1]
    torch.testing.assert_close(state_tensors(cache), ref)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_forward_accepts_plain_tensor_states(cell):
    """Stateful training and old callers pass ``h`` / ``(h, c)`` tensors."""
    model = tiny(cell)
    x = torch.randint(4, VOCAB, (2, 8))
    first = model(x[:, :5], use_cache=True).cache
    plain = state_tensors(first)
    assert isinstance(plain, tuple if cell == "lstm" else torch.Tensor)
    from_plain = model(x[:, 5:], cache=plain)
    from_cache = model(x[:, 5:], cache=first)
    torch.testing.assert_close(from_plain.logits, from_cache.logits)
    torch.testing.assert_close(state_tensors(from_plain.cache), state_tensors(first))
    with pytest.raises(TypeError, match="cache must be a RecurrentCache"):
        model(x, cache=DynamicCache())


def test_detach_and_conversions():
    model = tiny("lstm").train()
    x = torch.randint(4, VOCAB, (2, 6))
    cache = model(x, use_cache=True).cache
    assert cache["h"].requires_grad
    detached = detach_state(cache)
    assert isinstance(detached, RecurrentCache) and detached.get_seq_length() == 6
    assert not detached["h"].requires_grad and not detached["c"].requires_grad
    h, c = detach_state(state_tensors(cache))
    assert not h.requires_grad and torch.equal(h, cache["h"]) and torch.equal(c, cache["c"])
    assert detach_state(None) is None and state_tensors(None) is None
    wrapped = to_cache((h, c), seen_tokens=6)
    assert wrapped.get_seq_length() == 6 and torch.equal(wrapped["c"], c)
    assert wrapped.batch_dim("h") == 1


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_causal_lm_loss_returns_detached_tensors_for_checkpoints(cell):
    model = tiny(cell).train()
    window = torch.randint(4, VOCAB, (2, 9))
    loss, state, logits, labels = causal_lm_loss(model, window, None, stateful=True)
    tensors = state if isinstance(state, tuple) else (state,)
    assert len(tensors) == (2 if cell == "lstm" else 1)
    assert all(isinstance(t, torch.Tensor) and not t.requires_grad for t in tensors)
    expected = F.cross_entropy(
        model(window[:, :-1]).logits.reshape(-1, VOCAB), window[:, 1:].reshape(-1)
    )
    torch.testing.assert_close(loss, expected)
    assert logits.shape == (2, 8, VOCAB) and torch.equal(labels, window[:, 1:])
    # the carried state continues the stream
    again = causal_lm_loss(model, window, state, stateful=True).state
    model.eval()
    ref = model(torch.cat([window[:, :-1], window[:, :-1]], 1), use_cache=True).cache
    torch.testing.assert_close(again, state_tensors(ref))


def test_reorder_cache_picks_beam_rows():
    model = tiny("lstm")
    cache = model(torch.randint(4, VOCAB, (3, 4)), use_cache=True).cache
    h, c = cache["h"].clone(), cache["c"].clone()
    cache.reorder_cache(torch.tensor([2, 2, 0]))
    assert torch.equal(cache["h"], h[:, [2, 2, 0]]) and torch.equal(cache["c"], c[:, [2, 2, 0]])


@pytest.mark.parametrize("cell", ["gru", "lstm", "rnn"])
@pytest.mark.parametrize("sample", [False, True])
def test_generation_continues_from_the_returned_cache(cell, sample):
    model = tiny(cell)
    prompt = torch.randint(4, VOCAB, (2, 5))
    kw = {"do_sample": True, "top_k": 6, "temperature": 0.8} if sample else {"do_sample": False}
    # a random model may emit the special ids: pad would be masked when the text is passed
    # back as a prompt (the resumed call would read another prompt), eos would end it early
    config = model.config
    kw["suppress_tokens"] = [config.pad_token_id, config.bos_token_id, config.eos_token_id]
    torch.manual_seed(3)
    whole = model.generate(prompt, max_new_tokens=12, **kw)
    torch.manual_seed(3)
    first = model.generate(prompt, max_new_tokens=5, return_dict_in_generate=True, **kw)
    cache = first.cache
    assert isinstance(cache, RecurrentCache)
    # the last generated token has not been read yet
    assert cache.get_seq_length() == first.sequences.shape[1] - 1 == 9
    steps = []
    model.layers[0].register_forward_hook(lambda m, a, o: steps.append(a[0].shape[1]))
    resumed = model.generate(first.sequences, cache=cache, max_new_tokens=7, **kw)
    assert torch.equal(resumed, whole)
    assert steps == [1] * 7  # the prompt is not read again
    assert cache.get_seq_length() == whole.shape[1] - 1


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_generation_continues_from_inputs_embeds(cell):
    model = tiny(cell)
    prompt = torch.randint(4, VOCAB, (2, 5))
    whole = model.generate(prompt, max_new_tokens=12, do_sample=False)
    embeds = model.embeddings(prompt)
    first = model.generate(
        inputs_embeds=embeds, max_new_tokens=5, do_sample=False, return_dict_in_generate=True
    )
    assert torch.equal(first.sequences, whole[:, 5:10])  # only the new tokens
    assert first.cache.get_seq_length() == 9
    more = torch.cat([embeds, model.embeddings(first.sequences)], 1)
    rest = model.generate(inputs_embeds=more, cache=first.cache, max_new_tokens=7, do_sample=False)
    assert torch.equal(rest, whole[:, 10:])


def test_beam_search_returns_a_cache_per_beam():
    model = tiny()
    prompt = torch.randint(4, VOCAB, (2, 4))
    out = model.generate(
        prompt, max_new_tokens=5, num_beams=3, do_sample=False, return_dict_in_generate=True
    )
    assert isinstance(out.cache, RecurrentCache)
    assert out.cache["h"].shape == (LAYERS, 6, HIDDEN)


def test_base_model_prefix_names_the_model_itself():
    model = tiny()
    assert model.base_model is model
    assert model.base_model_prefix == "" or hasattr(model, model.base_model_prefix)


def test_num_items_in_batch_normalises_the_summed_loss():
    model = tiny()
    x = torch.randint(4, VOCAB, (2, 7))
    summed = F.cross_entropy(
        model(x).logits[:, :-1].reshape(-1, VOCAB), x[:, 1:].reshape(-1), reduction="sum"
    )
    out = model(x, labels=x, num_items_in_batch=torch.tensor(40))
    torch.testing.assert_close(out.loss, summed / 40)
