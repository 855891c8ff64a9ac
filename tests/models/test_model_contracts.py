"""The contracts every ``transformers`` model keeps, checked on every hfattn family.

Each test runs once per tester of ``model_testers.TESTERS`` (char-RNN GRU/LSTM, Bahdanau with
and without attention, Vaswani post-LN/sinusoidal and pre-LN/learned, the RNN classifier).
A family that legitimately lacks a contract says why in its tester's ``lacks`` and the test
is skipped with that reason.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch
import transformers
from huggingface_hub.errors import StrictDataclassFieldValidationError
from transformers import AutoConfig

from tests.helpers.model_testers import (
    BAHDANAU_LUONG_ONE_PASS,
    EOS,
    LENGTHS,
    PAD,
    TESTERS,
    VOCAB,
    ModelTester,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

by_tester = pytest.mark.parametrize("tester", TESTERS, ids=str)


def skip_if_lacking(tester: ModelTester, contract: str) -> None:
    if contract in tester.lacks:
        pytest.skip(f"{tester.name}: {tester.lacks[contract]}")


def forward(model, batch: dict, **kwargs):
    with torch.no_grad():
        return model(**batch, **kwargs)


def real_positions(tensor: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
    """Per row, the time steps of ``tensor [B, T, ...]`` where ``mask`` is 1."""
    return [tensor[row][mask[row].bool()] for row in range(tensor.shape[0])]


def assert_same_outputs(tester: ModelTester, a, b, atol: float = 1e-5) -> None:
    torch.testing.assert_close(a.logits, b.logits, atol=atol, rtol=1e-4 if atol else 0)


# --------------------------------------------------------------------------- configuration


@by_tester
def test_config_round_trips_through_dict_json_and_folder(tester, tmp_path):
    config = tester.config(output_hidden_states=True)
    assert tester.config_class.from_dict(config.to_dict()).to_dict() == config.to_dict()
    config.save_pretrained(tmp_path)
    loaded = AutoConfig.from_pretrained(tmp_path)
    assert type(loaded) is tester.config_class
    assert loaded.to_json_string() == config.to_json_string()
    assert loaded.output_hidden_states is True


@by_tester
def test_config_refuses_bad_values_and_wrong_types_naming_the_field(tester):
    bad, fragment = tester.bad_config
    with pytest.raises(ValueError, match=fragment):
        tester.config(**bad)
    with pytest.raises(StrictDataclassFieldValidationError, match="vocab_size"):
        tester.config(vocab_size="twenty")


# --------------------------------------------------------------------------- save / load


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """``{tester name: (model, folder)}``: each tester's tiny model saved once."""
    folders = {}
    for tester in TESTERS:
        model = tester.model()
        folder = tmp_path_factory.mktemp(tester.name)
        model.save_pretrained(folder)
        folders[tester.name] = (model, folder)
    return folders


@by_tester
def test_save_writes_safetensors_and_load_reports_nothing_missing(tester, saved):
    model, folder = saved[tester.name]
    assert (folder / "model.safetensors").exists()
    assert not list(folder.glob("*.bin")) and not list(folder.glob("*.pt"))
    auto = getattr(transformers, tester.auto_class)
    for loader in (tester.model_class, auto):
        loaded, info = loader.from_pretrained(folder, output_loading_info=True)
        assert type(loaded) is tester.model_class
        assert {k: v for k, v in info.items() if v} == {}, info
        batch = tester.inputs()
        assert_same_outputs(tester, forward(loaded, batch), forward(model, batch), atol=0)


@by_tester
def test_sharded_checkpoint_loads_identically(tester, saved, tmp_path):
    model, _ = saved[tester.name]
    model.save_pretrained(tmp_path, max_shard_size="2KB")
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1
    loaded = tester.model_class.from_pretrained(tmp_path, device_map="cpu")
    assert {p.device.type for p in loaded.parameters()} == {"cpu"}
    batch = tester.inputs()
    assert_same_outputs(tester, forward(loaded, batch), forward(model, batch), atol=0)


def half_tolerance(dtype: torch.dtype) -> float:
    return 0.08 if dtype == torch.bfloat16 else 0.02


@by_tester
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
def test_loading_in_a_dtype_runs_forward_and_generate_in_it(tester, saved, dtype):
    model, folder = saved[tester.name]
    loaded = tester.model_class.from_pretrained(folder, dtype=dtype).eval()
    assert {p.dtype for p in loaded.parameters()} == {dtype}
    assert {b.dtype for b in loaded.buffers() if b.is_floating_point()} <= {dtype}
    batch = tester.inputs()
    out = forward(loaded, batch)
    assert out.logits.dtype == dtype
    reference = forward(model, batch).logits
    tol = half_tolerance(dtype) if dtype != torch.float32 else 1e-6
    torch.testing.assert_close(out.logits.float(), reference, atol=tol, rtol=tol)
    if tester.generates:
        generated = loaded.generate(**generation_inputs(tester), max_new_tokens=3)
        assert generated.shape[0] == len(LENGTHS)


@by_tester
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_forward_makes_every_tensor_on_its_inputs_device(tester, dtype):
    """The model built and run on the meta device (shapes and dtypes, no data): a tensor made
    on a fixed device (the CPU) instead of its inputs' would fail to mix with them here, as it
    would on a GPU; the outputs and the loss keep the device, the dtype and the CPU shapes."""
    skip_if_lacking(tester, "meta_device")
    with torch.device("meta"):
        model = tester.model_class(tester.config()).to(dtype).eval()
    batch = tester.inputs(labels=True)
    reference = forward(tester.model_class(tester.config()).eval(), batch)
    out = forward(model, {k: v.to("meta") for k, v in batch.items()})
    assert (out.logits.device.type, out.logits.dtype) == ("meta", dtype)
    assert out.logits.shape == reference.logits.shape
    assert out.loss.device.type == "meta" and out.loss.shape == reference.loss.shape


@by_tester
def test_a_checkpoint_saved_in_bf16_loads_in_bf16_by_default(tester, saved, tmp_path):
    model, folder = saved[tester.name]
    tester.model_class.from_pretrained(folder, dtype=torch.bfloat16).save_pretrained(tmp_path)
    loaded = tester.model_class.from_pretrained(tmp_path).eval()  # dtype="auto"
    assert {p.dtype for p in loaded.parameters()} == {torch.bfloat16}
    batch = tester.inputs()
    tol = half_tolerance(torch.bfloat16)
    torch.testing.assert_close(
        forward(loaded, batch).logits.float(), forward(model, batch).logits, atol=tol, rtol=tol
    )


@by_tester
def test_tied_weights_stay_tied_after_loading(tester, tmp_path):
    skip_if_lacking(tester, "tied_weights")
    model = tester.model(tie_word_embeddings=True)
    model.save_pretrained(tmp_path)
    loaded = tester.model_class.from_pretrained(tmp_path)
    out_weight = loaded.get_output_embeddings().weight
    in_weight = loaded.get_decoder().embed_tokens.weight if tester.kind == "seq2seq" else None
    in_weight = loaded.get_input_embeddings().weight if in_weight is None else in_weight
    assert out_weight.data_ptr() == in_weight.data_ptr()
    torch.testing.assert_close(out_weight, model.get_output_embeddings().weight)


@by_tester
def test_resize_token_embeddings_keeps_old_rows_and_ties(tester):
    model = tester.model(
        **({} if "tied_weights" in tester.lacks else {"tie_word_embeddings": True})
    )
    old = model.get_input_embeddings().weight.detach().clone()
    model.resize_token_embeddings(VOCAB + 5)
    assert model.config.vocab_size == VOCAB + 5
    new = model.get_input_embeddings().weight
    assert new.shape[0] == VOCAB + 5 and torch.equal(new[:VOCAB], old)
    if "tied_weights" not in tester.lacks:
        assert model.get_output_embeddings().weight.shape[0] == VOCAB + 5
        assert model.get_output_embeddings().weight.data_ptr() == new.data_ptr()
    batch = tester.inputs()
    batch["input_ids"][0, 0] = VOCAB + 4
    out = forward(model, batch)
    if tester.kind != "classification":
        assert out.logits.shape[-1] == VOCAB + 5


# --------------------------------------------------------------------------- outputs


def model_variants(tester: ModelTester):
    return [(cls, tester.model(cls)) for cls in tester.model_classes]


@by_tester
def test_return_dict_false_gives_the_tuple_of_the_output_fields(tester):
    batch = tester.inputs(labels=True)
    for cls, model in model_variants(tester):
        kwargs = dict(batch) if cls is tester.model_class else without_labels(batch)
        as_dict = forward(model, kwargs)
        as_tuple = forward(model, kwargs, return_dict=False)
        assert isinstance(as_tuple, tuple), cls.__name__
        expected = as_dict.to_tuple()
        assert len(as_tuple) == len(expected)
        torch.testing.assert_close(as_tuple[0], expected[0])
        model.config.return_dict = False
        assert isinstance(forward(model, kwargs), tuple), f"{cls.__name__}: config.return_dict"
        if cls is tester.model_class and tester.generates:  # generate asks for dicts itself
            assert generate(model, generation_inputs(tester), num_beams=2).shape[0] == 3


def without_labels(batch: dict) -> dict:
    return {k: v for k, v in batch.items() if k != "labels"}


def check_output_shapes(tester: ModelTester, out, batch: dict) -> None:
    """Every documented hidden-state and attention field has its number of tensors and
    their ``[batch, length, features]`` / ``[batch, heads, query, key]`` shapes."""
    lengths = tester.stack_lengths(batch)
    size = batch["input_ids"].shape[0]
    for name, (count, features) in tester.hidden_states.items():
        states = getattr(out, name)
        assert states is not None and len(states) == count, name
        length = lengths["target" if name.startswith("decoder") else "source"]
        for i, state in enumerate(states):
            feature = features[i] if len(features) == count else features[0]
            assert state.shape == (size, length, feature), (name, i, state.shape)
    for name, (count, heads, query, key) in tester.attentions.items():
        maps = getattr(out, name)
        assert maps is not None and len(maps) == count, name
        shape = (size, heads) + ((lengths[query],) if query else ()) + (lengths[key],)
        for weights in maps:
            assert weights.shape == shape, (name, weights.shape, shape)


@by_tester
def test_output_flags_from_the_argument_or_else_the_config(tester):
    batch = tester.inputs()
    model = tester.model(attn_implementation="eager")
    flags = dict(output_hidden_states=True, output_attentions=bool(tester.attentions))
    by_argument = forward(model, batch, **flags)
    check_output_shapes(tester, by_argument, batch)

    configured = tester.model(attn_implementation="eager", **flags)
    by_config = forward(configured, batch)
    check_output_shapes(tester, by_config, batch)
    for name in [*tester.hidden_states, *tester.attentions]:
        for a, b in zip(getattr(by_argument, name), getattr(by_config, name), strict=True):
            torch.testing.assert_close(a, b)

    overridden = forward(configured, batch, output_hidden_states=False, output_attentions=False)
    for name in [*tester.hidden_states, *tester.attentions]:
        assert getattr(overridden, name) is None, name


@pytest.mark.parametrize("tester", [*TESTERS, BAHDANAU_LUONG_ONE_PASS], ids=str)
def test_returned_states_and_attention_maps_carry_the_loss_gradient(tester):
    """transformers' ``test_retain_grad_hidden_states_attentions``, with the loss as Marian
    passes it: the first hidden state of every stack and every attention map returned are the
    tensors of the autograd graph (the weights that multiplied the values, after dropout), so
    ``retain_grad()`` on them gets a gradient. In training mode, with a padded batch."""
    flags = dict(output_hidden_states=True, output_attentions=bool(tester.attentions))
    model = tester.model(**flags).train()
    out = model(**tester.inputs(labels=True))
    returned = {name: getattr(out, name)[:1] for name in tester.hidden_states}
    if "attention_gradients" not in tester.lacks:
        returned.update({name: getattr(out, name) for name in tester.attentions})
    for tensors in returned.values():
        for tensor in tensors:
            tensor.retain_grad()
    out.loss.backward()
    for name, tensors in returned.items():
        for i, tensor in enumerate(tensors):
            assert tensor.grad is not None, f"{name}[{i}]"
            assert tensor.grad.abs().sum() > 0, f"{name}[{i}]"
    if "attention_gradients" in tester.lacks:
        pytest.skip(f"attention maps: {tester.lacks['attention_gradients']}")


@by_tester
def test_inputs_embeds_give_the_outputs_of_the_ids(tester):
    model = tester.model()
    batch = tester.inputs()
    expected = forward(model, batch)
    embedded = dict(batch, inputs_embeds=model.get_input_embeddings()(batch.pop("input_ids")))
    if tester.kind == "seq2seq":
        decoder_ids = embedded.pop("decoder_input_ids")
        embedded["decoder_inputs_embeds"] = model.get_decoder().embed_tokens(decoder_ids)
    assert_same_outputs(tester, forward(model, embedded), expected)


# --------------------------------------------------------------------------- batching


def alone(batch: dict, row: int, mask: torch.Tensor) -> dict:
    """Row ``row`` of ``batch`` without its padding."""
    keep = mask[row].bool()
    single = {k: v[row : row + 1] for k, v in batch.items()}
    single["input_ids"] = single["input_ids"][:, keep]
    single["attention_mask"] = single["attention_mask"][:, keep]
    return single


@by_tester
@pytest.mark.parametrize("side", ["right", "left"])
def test_a_padded_row_gets_the_outputs_it_gets_alone(tester, side):
    if side not in tester.padding_sides:
        pytest.skip(f"{tester.name}: {tester.lacks['left_padding']}")
    model = tester.model()
    batch = tester.inputs(side=side)
    mask = batch["attention_mask"]
    logits = forward(model, batch).logits
    for row in range(len(LENGTHS)):
        single = forward(model, alone(batch, row, mask)).logits
        if tester.kind == "causal-lm":
            torch.testing.assert_close(
                real_positions(logits, mask)[row], single[0], atol=1e-5, rtol=1e-4
            )
        else:
            torch.testing.assert_close(logits[row], single[0], atol=1e-5, rtol=1e-4)


@by_tester
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_eager_and_sdpa_agree(tester, saved, dtype):
    skip_if_lacking(tester, "sdpa")
    _, folder = saved[tester.name]
    batch = tester.inputs()
    outputs = {}
    for implementation in ("eager", "sdpa"):
        model = tester.model_class.from_pretrained(
            folder, dtype=dtype, attn_implementation=implementation
        ).eval()
        assert model.config._attn_implementation == implementation
        outputs[implementation] = forward(model, batch).logits.float()
    tol = 1e-5 if dtype == torch.float32 else half_tolerance(dtype)
    torch.testing.assert_close(outputs["sdpa"], outputs["eager"], atol=tol, rtol=tol)


# --------------------------------------------------------------------------- generation


def generation_inputs(tester: ModelTester) -> dict:
    """Prompts (causal LM: left-padded) or right-padded sources for ``generate``."""
    side = "left" if tester.kind == "causal-lm" else "right"
    ids, mask = tester.token_ids(side=side)
    return {"input_ids": ids, "attention_mask": mask}


def generate(model, inputs: dict, seed: int = 0, **kwargs) -> torch.Tensor:
    torch.manual_seed(seed)
    defaults = dict(max_new_tokens=6, min_new_tokens=6, pad_token_id=PAD, eos_token_id=EOS)
    with torch.no_grad():
        return model.generate(**inputs, **{**defaults, **kwargs})


DECODINGS = {
    "greedy": dict(do_sample=False),
    "sample": dict(do_sample=True, top_k=8, temperature=1.3),
    "beam": dict(do_sample=False, num_beams=3),
}


@by_tester
@pytest.mark.parametrize("decoding", DECODINGS)
def test_generate_with_and_without_cache_agree(tester, decoding):
    skip_if_lacking(tester, "generate")
    model = tester.model()
    inputs = generation_inputs(tester)
    cached = generate(model, inputs, use_cache=True, **DECODINGS[decoding])
    uncached = generate(model, inputs, use_cache=False, **DECODINGS[decoding])
    assert torch.equal(cached, uncached)
    prompt = 0 if tester.kind == "seq2seq" else inputs["input_ids"].shape[1]
    assert cached.shape[1] == prompt + 6 + (tester.kind == "seq2seq")


@by_tester
def test_generate_continues_from_a_returned_cache(tester):
    skip_if_lacking(tester, "generate")
    model = tester.model()
    inputs = generation_inputs(tester)
    whole = generate(model, inputs, max_new_tokens=8, min_new_tokens=8)
    first = generate(model, inputs, return_dict_in_generate=True, max_new_tokens=4)
    if tester.kind == "seq2seq":  # the mask spans the whole target, as for Bart
        done = torch.ones_like(first.sequences)
        rest_inputs = dict(inputs, decoder_input_ids=first.sequences, decoder_attention_mask=done)
    else:
        grown = torch.ones(first.sequences.shape[0], 4, dtype=torch.long)
        mask = torch.cat([inputs["attention_mask"], grown], dim=1)
        rest_inputs = dict(input_ids=first.sequences, attention_mask=mask)
    rest = generate(model, rest_inputs, cache=first.cache)
    assert torch.equal(rest[:, : whole.shape[1]], whole)


@by_tester
def test_a_static_cache_is_honoured_or_refused_in_one_line(tester):
    """transformers reads ``_can_compile_fullgraph`` as "generates with
    ``cache_implementation="static"`` and a compiled decoding step" (its static-cache tests
    run only on such models). A family that claims it generates the default cache's tokens
    with a static cache (the compiled step: ``test_vaswani.py``); a family that lacks a static
    cache does not claim it and refuses the request in one line, before any forward runs."""
    skip_if_lacking(tester, "generate")
    model = tester.model()
    inputs = generation_inputs(tester)
    if "static_cache" not in tester.lacks:
        assert tester.model_class._can_compile_fullgraph
        static = generate(model, inputs, cache_implementation="static")
        assert torch.equal(static, generate(model, inputs))
        return
    assert not tester.model_class._can_compile_fullgraph
    calls = []
    model.register_forward_pre_hook(lambda *args: calls.append(args))
    with pytest.raises(ValueError) as refused:
        generate(model, inputs, cache_implementation="static")
    message = str(refused.value)
    assert "\n" not in message and not calls
    name = tester.model_class.__name__
    assert message.startswith(f"cache_implementation='static' is not supported by {name}")
    assert message.endswith("leave cache_implementation unset")


@by_tester
@torch.no_grad()
def test_forward_takes_the_cache_under_its_old_name_too(tester):
    """transformers 5.24 renamed ``past_key_values`` to ``cache``; the old keyword still
    reaches the model (as in Bart), instead of vanishing into ``**kwargs``."""
    skip_if_lacking(tester, "generate")
    model = tester.model()
    batch = without_labels(tester.inputs())
    first = forward(model, batch, use_cache=True)
    if tester.kind == "seq2seq":
        inputs = {**batch, "decoder_input_ids": batch["decoder_input_ids"][:, -1:]}
    else:
        inputs = {"input_ids": batch["input_ids"][:, -1:]}
    new = forward(model, inputs, cache=copy.deepcopy(first.cache))
    old = forward(model, inputs, past_key_values=copy.deepcopy(first.cache))
    uncached = forward(model, inputs)
    torch.testing.assert_close(old.logits, new.logits)
    assert not torch.allclose(new.logits, uncached.logits)


# --------------------------------------------------------------------------- compile / export


def export_inputs(tester: ModelTester) -> dict:
    batch = tester.inputs()
    if tester.kind != "classification":
        batch["use_cache"] = False
    return batch


@by_tester
def test_torch_compile_matches_eager(tester):
    """Every family's forward compiles in one graph (``fullgraph=True``: a graph break
    raises), which gives the eager outputs. TorchDynamo decides graphs and breaks before any
    backend, so the ``eager`` backend runs its graph as captured; AOTAutograd's forward and
    backward are checked for the families that train compiled (``tests/training/``).
    ``_can_compile_fullgraph`` says more (generation with a static cache and a compiled
    decoding step): see ``test_a_static_cache_is_honoured_or_refused_in_one_line``."""
    model = tester.model()
    batch = export_inputs(tester)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    assert_same_outputs(tester, forward(compiled, batch), forward(model, batch))


@by_tester
def test_torch_export_matches_eager(tester):
    model = tester.model()
    batch = export_inputs(tester)
    program = torch.export.export(model, args=(), kwargs=batch, strict=False)
    exported = program.module()(**batch)
    logits = exported["logits"] if isinstance(exported, dict) else exported.logits
    torch.testing.assert_close(logits, forward(model, batch).logits, atol=1e-5, rtol=1e-4)


# --------------------------------------------------------------------------- training


def loss_and_gradients(model, batch: dict) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad()
    loss = model(**batch).loss
    loss.backward()
    return loss.detach(), {
        n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None
    }


@by_tester
@pytest.mark.parametrize("reentrant", [False, True], ids=["non-reentrant", "reentrant"])
def test_gradient_checkpointing_gives_the_same_gradients(tester, reentrant):
    skip_if_lacking(tester, "gradient_checkpointing")
    model = tester.model().train()
    assert model.supports_gradient_checkpointing, f"{tester.name} does not claim checkpointing"
    batch = tester.inputs(labels=True)
    loss, grads = loss_and_gradients(model, batch)
    if reentrant:  # the v5 name, and the deprecated alias users of v4 reach for
        model.activation_checkpointing_enable({"use_reentrant": True})
    else:
        with pytest.warns(FutureWarning, match="deprecated"):
            model.gradient_checkpointing_enable({"use_reentrant": False})
    assert model.is_activation_checkpointing
    if reentrant:
        model.enable_input_require_grads()
    loss_ckpt, grads_ckpt = loss_and_gradients(model, batch)
    torch.testing.assert_close(loss_ckpt, loss)
    assert grads_ckpt.keys() == grads.keys()
    for name in grads:
        torch.testing.assert_close(grads_ckpt[name], grads[name], atol=1e-6, rtol=1e-5)


@by_tester
def test_trainer_with_accumulation_and_checkpointing_steps_like_one_big_batch(tester, tmp_path):
    """Batch 4 in one step against 2 × 2 accumulated (with activation checkpointing where
    the family has it, as ``TrainingArguments(activation_checkpointing=True)`` asks)."""
    from datasets import Dataset
    from transformers import Trainer, TrainingArguments, default_data_collator

    batch = tester.inputs(lengths=(6, 6, 6, 6), labels=True)
    batch.pop("attention_mask")
    rows = Dataset.from_dict({k: v.tolist() for k, v in batch.items()})
    weights = []
    checkpointing = "gradient_checkpointing" not in tester.lacks
    for per_device, accumulation in ((4, 1), (2, 2)):
        model = tester.model().train()
        args = TrainingArguments(
            output_dir=str(tmp_path / f"b{per_device}"),
            per_device_train_batch_size=per_device,
            gradient_accumulation_steps=accumulation,
            activation_checkpointing=checkpointing and accumulation > 1,
            max_steps=1,
            learning_rate=0.05,
            optim="sgd",
            lr_scheduler_type="constant",
            report_to=[],
            use_cpu=True,
            save_strategy="no",
            disable_tqdm=True,
        )
        Trainer(model, args, train_dataset=rows, data_collator=default_data_collator).train()
        assert model.is_activation_checkpointing == (checkpointing and accumulation > 1)
        weights.append({n: p.detach().clone() for n, p in model.named_parameters()})
    start = dict(tester.model().named_parameters())
    assert any(not torch.equal(weights[0][n], start[n]) for n in start)
    for name in weights[0]:
        torch.testing.assert_close(weights[1][name], weights[0][name], atol=1e-6, rtol=1e-5)


@by_tester
def test_lora_wraps_trains_saves_and_reloads(tester, tmp_path):
    from peft import LoraConfig, PeftModel, get_peft_model

    batch = tester.inputs(labels=True)
    base_output = forward(tester.model(), batch).logits
    lora = get_peft_model(tester.model(), LoraConfig(r=2, target_modules=tester.lora_targets))
    torch.testing.assert_close(forward(lora, batch).logits, base_output)  # B starts at zero
    trainable = [n for n, p in lora.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    optimizer = torch.optim.SGD([p for p in lora.parameters() if p.requires_grad], lr=0.5)
    lora.train()
    lora(**batch).loss.backward()
    optimizer.step()
    lora.eval()
    tuned = forward(lora, batch).logits
    assert not torch.allclose(tuned, base_output)
    lora.save_pretrained(tmp_path)
    assert (tmp_path / "adapter_model.safetensors").exists()
    reloaded = PeftModel.from_pretrained(tester.model(), tmp_path).eval()
    torch.testing.assert_close(forward(reloaded, batch).logits, tuned)
    merged = reloaded.merge_and_unload()
    assert type(merged) is tester.model_class
    torch.testing.assert_close(forward(merged, batch).logits, tuned, atol=1e-5, rtol=1e-4)


# --------------------------------------------------------------------------- remote code

LOAD_ALL = """
import importlib.util, json, sys, torch, transformers
assert importlib.util.find_spec("hfattn") is None, "hfattn must not be importable here"
results = {}
for name, spec in json.loads(open(sys.argv[1]).read()).items():
    auto = getattr(transformers, spec["auto_class"])
    model = auto.from_pretrained(spec["folder"], trust_remote_code=True).eval()
    batch = {k: torch.tensor(v) for k, v in spec["inputs"].items()}
    with torch.no_grad():
        logits = model(**batch).logits
        sources = {k: v for k, v in batch.items() if k != "decoder_input_ids"}
        generated = None
        if spec["generates"]:
            generated = [model.generate(**sources, max_new_tokens=4, num_beams=beams).tolist()
                         for beams in (1, 3)]
    results[name] = {"module": type(model).__module__, "logits": logits.tolist(),
                     "generated": generated}
print(json.dumps(results))
"""


@pytest.mark.slow
def test_every_family_loads_and_runs_in_a_python_without_hfattn(saved, fresh_python, tmp_path):
    from tests.helpers.fresh_env import run_offline_without_hfattn

    specs, expected = {}, {}
    for tester in TESTERS:
        model, folder = saved[tester.name]
        config = json.loads((Path(folder) / "config.json").read_text())
        assert tester.auto_class in config["auto_map"]
        batch = generation_inputs(tester)
        if tester.kind == "seq2seq":
            batch["decoder_input_ids"] = tester.inputs()["decoder_input_ids"]
        specs[tester.name] = {
            "auto_class": tester.auto_class,
            "folder": str(folder),
            "inputs": {k: v.tolist() for k, v in batch.items()},
            "generates": tester.generates,
        }
        with torch.no_grad():
            logits = model(**batch).logits
            sources = {k: v for k, v in batch.items() if k != "decoder_input_ids"}
            generated = None
            if tester.generates:
                generated = [
                    model.generate(**sources, max_new_tokens=4, num_beams=beams).tolist()
                    for beams in (1, 3)
                ]
        expected[tester.name] = (logits, generated)
    spec_file = tmp_path / "specs.json"
    spec_file.write_text(json.dumps(specs))
    results = run_offline_without_hfattn(fresh_python, LOAD_ALL, str(spec_file), cwd=tmp_path)
    for name, (logits, generated) in expected.items():
        assert results[name]["module"].startswith("transformers_modules"), name
        torch.testing.assert_close(
            torch.tensor(results[name]["logits"]), logits, atol=1e-5, rtol=1e-4
        )
        if generated is not None:
            assert results[name]["generated"] == generated, name
