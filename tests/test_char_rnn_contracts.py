"""CharRNNForCausalLM keeps the contracts of a transformers causal LM (issue 13).

1. ``output_hidden_states`` returns the embeddings and every layer's outputs, in ``forward``
   and in ``generate``.
2. The recurrent state is a ``Cache`` (``RecurrentCache``) that counts the tokens it has seen,
   reorders for beams, and continues a generation (from ids or ``inputs_embeds``) exactly.
3. With ``Trainer`` and gradient accumulation the loss is normalised by
   ``num_items_in_batch``: GA=4 × batch 2 gives the loss and update of GA=1 × batch 8, with
   gradient checkpointing too.
4. ``torch.export`` and ``torch.compile(fullgraph=True)`` trace a padded batch; gradient
   checkpointing recomputes each layer and gives the same loss and gradients.

Plus: checkpoints written with one stacked cell (``rnn.weight_ih_l0``, ...) still load.
"""

import json
import warnings

import pytest
import torch
from safetensors.torch import load_file, save_file
from torch import nn
from torch.nn import functional as F
from transformers import AutoModelForCausalLM, DynamicCache
from transformers.cache_utils import Cache

from hfattn import CharRNNConfig, CharRNNForCausalLM
from hfattn.models.modeling_char_rnn import detach_state, state_tensors, to_cache
from hfattn.models.recurrent_cache import RecurrentCache
from hfattn.tasks.causal_lm import causal_lm_loss

VOCAB, EMBED, HIDDEN, LAYERS = 24, 8, 16, 3
CELLS = {"gru": nn.GRU, "lstm": nn.LSTM, "rnn": nn.RNN}


def tiny(cell="gru", **kw):
    torch.manual_seed(0)
    cfg = dict(vocab_size=VOCAB, embedding_dim=EMBED, hidden_size=HIDDEN, num_layers=LAYERS)
    return CharRNNForCausalLM(CharRNNConfig(cell=cell, **{**cfg, **kw})).eval()


def stacked_reference(model) -> nn.RNNBase:
    """The old layout: one stacked torch cell holding the model's per-layer weights."""
    cfg = model.config
    ref = CELLS[cfg.cell](cfg.embedding_dim, cfg.hidden_size, cfg.num_layers, batch_first=True)
    with torch.no_grad():
        for k, layer in enumerate(model.layers):
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"):
                getattr(ref, f"{name}_l{k}").copy_(getattr(layer, f"{name}_l0"))
    return ref.eval()


def old_state_dict(model) -> dict[str, torch.Tensor]:
    """The model's weights named as the stacked-cell version of the model saved them."""
    ref = stacked_reference(model)
    sd = {k: v for k, v in model.state_dict().items() if not k.startswith("layers.")}
    sd.update({f"rnn.{k}": v.clone() for k, v in ref.state_dict().items()})
    return sd


# ---- 1. hidden states ----------------------------------------------------------------------
@pytest.mark.parametrize("cell", ["gru", "lstm", "rnn"])
def test_hidden_states_are_embeddings_then_every_layer(cell):
    model = tiny(cell)
    x = torch.randint(4, VOCAB, (2, 9))
    out = model(x, output_hidden_states=True)
    hs = out.hidden_states
    assert len(hs) == LAYERS + 1
    assert hs[0].shape == (2, 9, EMBED) and all(h.shape == (2, 9, HIDDEN) for h in hs[1:])
    torch.testing.assert_close(hs[0], model.embeddings(x))
    # each layer is the cell applied to the previous layer's outputs, from a zero state
    for k in range(LAYERS):
        single = CELLS[cell](hs[k].shape[-1], HIDDEN, 1, batch_first=True)
        single.load_state_dict(model.layers[k].state_dict())
        torch.testing.assert_close(hs[k + 1], single(hs[k])[0])
    # the last one is the stacked cell's output, and feeds the head
    torch.testing.assert_close(hs[-1], stacked_reference(model)(hs[0])[0])
    torch.testing.assert_close(out.logits, model.lm_head(hs[-1]))
    # off by default, and the same logits either way; tuples carry them too
    assert model(x).hidden_states is None
    torch.testing.assert_close(model(x).logits, out.logits)
    as_tuple = model(x, output_hidden_states=True, use_cache=False, return_dict=False)
    assert len(as_tuple) == 2 and len(as_tuple[1]) == LAYERS + 1
    model.config.output_hidden_states = True
    assert len(model(x).hidden_states) == LAYERS + 1


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
    cache = model(x[:, :4], use_cache=True).past_key_values
    assert isinstance(cache, RecurrentCache) and isinstance(cache, Cache)
    assert cache.get_seq_length() == 4 and cache.batch_size == 2
    assert sorted(cache) == (["c", "h"] if cell == "lstm" else ["h"])
    assert cache["h"].shape == (LAYERS, 2, HIDDEN)
    # forward updates the cache in place (as DynamicCache) and returns it
    rest = model(x[:, 4:], past_key_values=cache)
    assert rest.past_key_values is cache and cache.get_seq_length() == 7
    torch.testing.assert_close(torch.cat([model(x[:, :4]).logits, rest.logits], 1), model(x).logits)
    # the state equals the stacked cell's final state
    ref = stacked_reference(model)(model.embeddings(x))[1]
    torch.testing.assert_close(state_tensors(cache), ref)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_forward_accepts_plain_tensor_states(cell):
    """Stateful training and old callers pass ``h`` / ``(h, c)`` tensors."""
    model = tiny(cell)
    x = torch.randint(4, VOCAB, (2, 8))
    first = model(x[:, :5], use_cache=True).past_key_values
    plain = state_tensors(first)
    assert isinstance(plain, tuple if cell == "lstm" else torch.Tensor)
    from_plain = model(x[:, 5:], past_key_values=plain)
    from_cache = model(x[:, 5:], past_key_values=first)
    torch.testing.assert_close(from_plain.logits, from_cache.logits)
    torch.testing.assert_close(state_tensors(from_plain.past_key_values), state_tensors(first))
    with pytest.raises(TypeError, match="past_key_values must be a RecurrentCache"):
        model(x, past_key_values=DynamicCache())


def test_detach_and_conversions():
    model = tiny("lstm").train()
    x = torch.randint(4, VOCAB, (2, 6))
    cache = model(x, use_cache=True).past_key_values
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
    loss, state = causal_lm_loss(model, window, None, stateful=True)
    tensors = state if isinstance(state, tuple) else (state,)
    assert len(tensors) == (2 if cell == "lstm" else 1)
    assert all(isinstance(t, torch.Tensor) and not t.requires_grad for t in tensors)
    expected = F.cross_entropy(
        model(window[:, :-1]).logits.reshape(-1, VOCAB), window[:, 1:].reshape(-1)
    )
    torch.testing.assert_close(loss, expected)
    # the carried state continues the stream
    _, again = causal_lm_loss(model, window, state, stateful=True)
    model.eval()
    ref = model(torch.cat([window[:, :-1], window[:, :-1]], 1), use_cache=True).past_key_values
    torch.testing.assert_close(again, state_tensors(ref))


def test_reorder_cache_picks_beam_rows():
    model = tiny("lstm")
    cache = model(torch.randint(4, VOCAB, (3, 4)), use_cache=True).past_key_values
    h, c = cache["h"].clone(), cache["c"].clone()
    cache.reorder_cache(torch.tensor([2, 2, 0]))
    assert torch.equal(cache["h"], h[:, [2, 2, 0]]) and torch.equal(cache["c"], c[:, [2, 2, 0]])


@pytest.mark.parametrize("cell", ["gru", "lstm", "rnn"])
@pytest.mark.parametrize("sample", [False, True])
def test_generation_continues_from_the_returned_cache(cell, sample):
    model = tiny(cell)
    prompt = torch.randint(4, VOCAB, (2, 5))
    kw = {"do_sample": True, "top_k": 6, "temperature": 0.8} if sample else {"do_sample": False}
    torch.manual_seed(3)
    whole = model.generate(prompt, max_new_tokens=12, **kw)
    torch.manual_seed(3)
    first = model.generate(prompt, max_new_tokens=5, return_dict_in_generate=True, **kw)
    cache = first.past_key_values
    assert isinstance(cache, RecurrentCache)
    # the last generated token has not been read yet
    assert cache.get_seq_length() == first.sequences.shape[1] - 1 == 9
    steps = []
    model.layers[0].register_forward_hook(lambda m, a, o: steps.append(a[0].shape[1]))
    resumed = model.generate(first.sequences, past_key_values=cache, max_new_tokens=7, **kw)
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
    assert first.past_key_values.get_seq_length() == 9
    more = torch.cat([embeds, model.embeddings(first.sequences)], 1)
    rest = model.generate(
        inputs_embeds=more, past_key_values=first.past_key_values, max_new_tokens=7, do_sample=False
    )
    assert torch.equal(rest, whole[:, 10:])


def test_beam_search_returns_a_cache_per_beam():
    model = tiny()
    prompt = torch.randint(4, VOCAB, (2, 4))
    out = model.generate(
        prompt, max_new_tokens=5, num_beams=3, do_sample=False, return_dict_in_generate=True
    )
    assert isinstance(out.past_key_values, RecurrentCache)
    assert out.past_key_values["h"].shape == (LAYERS, 6, HIDDEN)


# ---- old checkpoints -----------------------------------------------------------------------
@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_stacked_layout_state_dicts_load(cell):
    model = tiny(cell)
    sd = old_state_dict(model)
    assert "rnn.weight_hh_l2" in sd and not any(k.startswith("layers.") for k in sd)
    fresh = tiny(cell, initializer_range=0.5)
    torch.manual_seed(7)
    fresh.apply(fresh._init_weights)
    fresh.load_state_dict(sd)  # strict: every key is mapped
    x = torch.randint(4, VOCAB, (2, 6))
    torch.testing.assert_close(fresh(x).logits, model(x).logits)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_stacked_layout_checkpoint_folder_loads_with_from_pretrained(tmp_path, cell):
    model = tiny(cell)
    model.config.save_pretrained(tmp_path)
    save_file(old_state_dict(model), tmp_path / "model.safetensors", metadata={"format": "pt"})
    loaded, info = AutoModelForCausalLM.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    x = torch.randint(4, VOCAB, (2, 6))
    torch.testing.assert_close(loaded.eval()(x).logits, model(x).logits)


def test_save_pretrained_keeps_the_stacked_names(tmp_path):
    """Files stay in the stacked-cell format, so versions before the split read them too."""
    model = tiny("lstm")
    model.save_pretrained(tmp_path)
    names = set(load_file(tmp_path / "model.safetensors"))
    assert {f"rnn.weight_ih_l{k}" for k in range(LAYERS)} <= names
    assert not any(n.startswith("layers.") for n in names)
    assert json.loads((tmp_path / "config.json").read_text())["num_layers"] == LAYERS
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    x = torch.randint(4, VOCAB, (2, 6))
    torch.testing.assert_close(loaded(x).logits, model(x).logits)


def test_deep_models_convert_every_layer(tmp_path):
    model = tiny("gru", num_layers=20, hidden_size=4, embedding_dim=4)
    model.save_pretrained(tmp_path)
    assert "rnn.weight_ih_l19" in load_file(tmp_path / "model.safetensors")
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    torch.testing.assert_close(loaded.layers[19].weight_hh_l0, model.layers[19].weight_hh_l0)


def test_base_model_prefix_names_the_model_itself():
    model = tiny()
    assert model.base_model is model
    assert model.base_model_prefix == "" or hasattr(model, model.base_model_prefix)


# ---- 3. Trainer with gradient accumulation -------------------------------------------------
def _train_one_step(tmp_path, batch_size, accumulation, checkpointing=False):
    from datasets import Dataset
    from transformers import Trainer, TrainingArguments

    torch.manual_seed(0)
    ids = torch.randint(4, VOCAB, (8, 12))
    labels = ids.clone()
    # different numbers of ignored targets per sequence: a mean of micro-batch means is wrong
    for i in range(8):
        labels[i, 1 : 1 + i] = -100
    data = Dataset.from_dict({"input_ids": ids.tolist(), "labels": labels.tolist()})
    model = tiny().train()
    args = TrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=accumulation,
        max_steps=1,
        learning_rate=0.5,
        optim="sgd",
        lr_scheduler_type="constant",
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        seed=0,
        dataloader_num_workers=0,
        **({"gradient_checkpointing": True} if checkpointing else {}),
    )
    trainer = Trainer(model=model, args=args, train_dataset=data)
    trainer.train()
    assert model.is_activation_checkpointing == checkpointing
    logged = next(e["loss"] for e in trainer.state.log_history if "loss" in e)
    return logged, {k: v.detach().clone() for k, v in model.named_parameters()}, ids, labels


def test_trainer_gradient_accumulation_matches_one_big_batch(tmp_path):
    loss_big, params_big, ids, labels = _train_one_step(tmp_path / "a", 8, 1)
    loss_acc, params_acc, _, _ = _train_one_step(tmp_path / "b", 2, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # the v4 name of the argument
        loss_ckpt, params_ckpt, _, _ = _train_one_step(tmp_path / "c", 2, 4, checkpointing=True)
    # the loss is the mean over all 8 sequences' counted targets, computed independently
    before = tiny().train()
    logits = before(ids).logits
    nll = F.cross_entropy(
        logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1), reduction="sum"
    )
    expected = (nll / (labels[:, 1:] != -100).sum()).item()
    assert loss_big == pytest.approx(expected, rel=1e-4)
    assert loss_acc == pytest.approx(loss_big, rel=1e-4)
    assert loss_ckpt == pytest.approx(loss_big, rel=1e-4)
    for name, value in params_big.items():
        torch.testing.assert_close(params_acc[name], value, rtol=1e-5, atol=1e-6, msg=name)
        torch.testing.assert_close(params_ckpt[name], value, rtol=1e-5, atol=1e-6, msg=name)
    assert any(not torch.equal(params_big[n], p) for n, p in before.named_parameters())


def test_num_items_in_batch_normalises_the_summed_loss():
    model = tiny()
    x = torch.randint(4, VOCAB, (2, 7))
    summed = F.cross_entropy(
        model(x).logits[:, :-1].reshape(-1, VOCAB), x[:, 1:].reshape(-1), reduction="sum"
    )
    out = model(x, labels=x, num_items_in_batch=torch.tensor(40))
    torch.testing.assert_close(out.loss, summed / 40)


# ---- 4. export, compile, gradient checkpointing --------------------------------------------
def padded_prompts(side: str = "left"):
    """Three rows of 7, 4 and 6 tokens padded to 7 on ``side``."""
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(4, VOCAB, (3, 7), generator=g)
    mask = torch.ones(3, 7, dtype=torch.long)
    for row, n in enumerate((7, 4, 6)):
        pad = slice(0, 7 - n) if side == "left" else slice(n, 7)
        mask[row, pad] = 0
    return ids.masked_fill(mask == 0, 0), mask


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_torch_export_and_compile_fullgraph_match_eager(cell, side):
    model = tiny(cell)
    assert model._can_compile_fullgraph
    ids, mask = padded_prompts(side)
    inputs = {"input_ids": ids, "attention_mask": mask, "use_cache": False}
    with torch.no_grad():
        expected = model(**inputs).logits
    program = torch.export.export(model, args=(), kwargs=inputs, strict=False)
    torch.testing.assert_close(program.module()(**inputs)["logits"], expected, rtol=1e-4, atol=1e-5)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    with torch.no_grad():
        torch.testing.assert_close(compiled(**inputs).logits, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("reentrant", [False, True], ids=["non-reentrant", "reentrant"])
@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_gradient_checkpointing_gives_the_same_loss_gradients_and_state(cell, reentrant):
    model = tiny(cell).train()
    assert model.supports_gradient_checkpointing
    ids, mask = padded_prompts("right")
    start = detach_state(model(torch.randint(4, VOCAB, (3, 4))).past_key_values)
    inputs = {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}

    def run():
        model.zero_grad()
        out = model(**inputs, past_key_values=start.map(torch.clone))
        out.loss.backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters()}
        return out.loss.detach(), grads, state_tensors(out.past_key_values)

    loss, grads, state = run()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # the v4 name
        model.gradient_checkpointing_enable({"use_reentrant": reentrant})
    assert all(layer.gradient_checkpointing for layer in model.layers)
    loss_ckpt, grads_ckpt, state_ckpt = run()
    torch.testing.assert_close(loss_ckpt, loss)
    for name, grad in grads.items():
        torch.testing.assert_close(grads_ckpt[name], grad, rtol=1e-5, atol=1e-6, msg=name)
    torch.testing.assert_close(state_ckpt, state)
