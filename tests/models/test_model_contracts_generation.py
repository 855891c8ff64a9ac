"""The contracts every ``transformers`` model keeps, checked on every family of
``model_testers.TESTERS`` (skipped, with the reason, where one lacks a contract):
``generate`` with and without the cache, continued from a returned cache, with a static cache
(honoured or refused), and the cache under its old keyword.
"""

from __future__ import annotations

import copy

import pytest
import torch

from tests.helpers.model_testers import (
    by_tester,
    forward,
    generate,
    generation_inputs,
    skip_if_lacking,
    without_labels,
)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


# --------------------------------------------------------------------------- generation
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
