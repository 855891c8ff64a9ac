"""The contracts every ``transformers`` model keeps, checked on every family of
``model_testers.TESTERS`` (skipped, with the reason, where one lacks a contract): the
outputs (``return_dict``, the hidden-state and attention flags and shapes, gradients through
the returned tensors, ``inputs_embeds``) and batching (a padded row gets its outputs alone).
"""

from __future__ import annotations

import pytest
import torch

from tests.helpers.model_testers import (
    BAHDANAU_LUONG_ONE_PASS,
    LENGTHS,
    TESTERS,
    ModelTester,
    assert_same_outputs,
    by_tester,
    forward,
    generate,
    generation_inputs,
    without_labels,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def real_positions(tensor: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
    """Per row, the time steps of ``tensor [B, T, ...]`` where ``mask`` is 1."""
    return [tensor[row][mask[row].bool()] for row in range(tensor.shape[0])]


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
