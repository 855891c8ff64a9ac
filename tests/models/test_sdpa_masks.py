"""The masks the ``sdpa`` kernel gets: boolean keep masks or none at all, never additive floats.

``torch.nn.functional.scaled_dot_product_attention`` is wrapped by a spy that records the
``attn_mask`` and ``is_causal`` of every call. The rule (``MultiHeadAttention``): a mask that
hides nothing is dropped; a causal self-attention without a given mask runs the fused causal
path (``is_causal=True``, no mask); anything else is a ``torch.bool`` mask ``[B|1, 1, 1|Tq, Tk]``.
The outputs, the loss and the gradients are those of the additive float masks the kernel got
before (the spy can hand it those instead), and of the ``eager`` kernel.
"""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from hfattn.models import masking
from hfattn.models.masking import causal_mask, to_additive_mask
from tests.helpers.tiny_vaswani import padded, tiny

SOURCE_LENGTHS = (7, 4, 6)
TARGET_LENGTHS = (5, 3, 4)


def seq2seq_batch(source_lengths=SOURCE_LENGTHS, target_lengths=TARGET_LENGTHS) -> dict:
    """Padded sources, right-padded targets (labels -100 on the padding, no decoder mask)."""
    ids, mask = padded(source_lengths, seed=1)
    targets, target_mask = padded(target_lengths, seed=2)
    return dict(
        input_ids=ids, attention_mask=mask, labels=targets.masked_fill(target_mask == 0, -100)
    )


class SdpaSpy:
    """Records ``(attn_mask, is_causal, Tq, Tk)`` of every SDPA call. With ``additive=True`` it
    hands the kernel what it got before this change: the keep mask as an additive float mask
    (``finfo.min`` where hidden) and the causal pattern written out as one."""

    def __init__(self, additive: bool = False):
        self.real = F.scaled_dot_product_attention
        self.additive = additive
        self.calls: list[tuple[torch.Tensor | None, bool, int, int]] = []

    def __call__(self, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, **kw):
        self.calls.append((attn_mask, is_causal, query.shape[-2], key.shape[-2]))
        if self.additive:
            keep = attn_mask
            if is_causal:
                keep = causal_mask(query.shape[-2], key.shape[-2], device=query.device)
                keep = keep if attn_mask is None else keep & attn_mask
            if keep is not None:
                attn_mask, is_causal = to_additive_mask(keep, query.dtype), False
        return self.real(
            query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, **kw
        )


@pytest.fixture
def spy(monkeypatch):
    recorder = SdpaSpy()
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", recorder)
    return recorder


def described(calls) -> list[tuple]:
    """``(dtype or None, mask shape or None, is_causal, Tq, Tk)`` per call."""
    return [
        (
            None if mask is None else mask.dtype,
            None if mask is None else tuple(mask.shape),
            is_causal,
            tq,
            tk,
        )
        for mask, is_causal, tq, tk in calls
    ]


# --------------------------------------------------------------------------- the masks


def test_a_padded_batch_gives_sdpa_boolean_masks_and_the_decoder_its_causal_path(spy):
    batch = seq2seq_batch()
    with torch.no_grad():
        tiny()(**batch)
    encoder_self = (torch.bool, (3, 1, 1, 7), False, 7, 7)
    decoder_self = (None, None, True, 5, 5)  # right-padded targets: the causal mask suffices
    cross = (torch.bool, (3, 1, 1, 7), False, 5, 7)
    assert described(spy.calls) == [encoder_self] * 2 + [decoder_self, cross] * 2
    keep = spy.calls[0][0]
    assert torch.equal(keep[:, 0, 0], batch["attention_mask"].bool())


def test_a_batch_without_padding_gives_sdpa_no_mask(spy):
    batch = seq2seq_batch(source_lengths=(6, 6, 6))
    with torch.no_grad():
        tiny()(**batch, decoder_attention_mask=torch.ones(3, 5, dtype=torch.long))
    encoder_self = (None, None, False, 6, 6)
    decoder_self = (None, None, True, 5, 5)  # an all-ones target mask: the causal path
    cross = (None, None, False, 5, 6)
    assert described(spy.calls) == [encoder_self] * 2 + [decoder_self, cross] * 2


def test_a_padded_target_mask_and_chollets_cross_mask_are_boolean(spy):
    batch = seq2seq_batch()
    _, target_mask = padded(TARGET_LENGTHS, seed=2)
    with torch.no_grad():
        tiny(chollet_cross_attention_mask=True)(**batch, decoder_attention_mask=target_mask)
    decoder_calls = described(spy.calls)[2:]
    # Chollet's decoder: no target padding in self-attention (the causal path), and the
    # target's causal-and-padding mask laid over the source in cross-attention.
    assert decoder_calls == [(None, None, True, 5, 5), (torch.bool, (3, 1, 5, 7), False, 5, 7)] * 2
    spy.calls.clear()
    with torch.no_grad():
        tiny()(**batch, decoder_attention_mask=target_mask)
    decoder_self = (torch.bool, (3, 1, 5, 5), False, 5, 5)  # padding AND causal
    assert described(spy.calls)[2::2] == [decoder_self] * 2


def test_a_mask_that_cannot_be_read_for_free_is_kept_as_a_boolean_mask(spy, monkeypatch):
    """On an accelerator or in a compiled graph the mask's values are not read: an unpadded
    batch then keeps its (all-True) boolean mask, which gives the same outputs."""
    batch = seq2seq_batch(source_lengths=(6, 6, 6))
    with torch.no_grad():
        free = tiny()(**batch).logits
    monkeypatch.setattr(masking, "mask_values_are_free", lambda mask: False)
    spy.calls.clear()
    with torch.no_grad():
        kept = tiny()(**batch).logits
    assert described(spy.calls)[0] == (torch.bool, (3, 1, 1, 6), False, 6, 6)
    torch.testing.assert_close(kept, free, rtol=0, atol=1e-6)


@pytest.mark.parametrize("num_beams", [1, 3])
def test_cached_generation_steps_get_boolean_masks_or_none(spy, num_beams):
    batch = seq2seq_batch()
    del batch["labels"]
    with torch.no_grad():
        tiny().generate(**batch, max_new_tokens=4, num_beams=num_beams, do_sample=False)
    steps = [call for call in spy.calls if call[2] == 1]
    assert len(steps) == 4 * 2 * 2  # a self- and a cross-attention per layer and step
    for mask, is_causal, _, key_length in steps:
        assert not is_causal
        assert mask is None or (mask.dtype == torch.bool and mask.shape[-1] == key_length)
    assert any(mask is None for mask, *_ in steps)  # the self-attention of a step: no mask
    assert all(mask is not None for mask, *_ in steps[1::2])  # cross: the padded source


# --------------------------------------------------------------------------- same function


def loss_and_grads(model, batch, autocast: bool = False):
    model.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        out = model(**batch)
    out.loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return out, grads


def run(implementation, batch, monkeypatch=None, additive=False, autocast=False, **kw):
    """Loss and gradients with the given kernel; ``additive``: the sdpa kernel is handed the
    additive float masks it got before this change."""
    if additive:
        monkeypatch.setattr(
            torch.nn.functional, "scaled_dot_product_attention", SdpaSpy(additive=True)
        )
    try:
        return loss_and_grads(tiny(implementation, **kw), batch, autocast)
    finally:
        if additive:
            monkeypatch.undo()


@pytest.mark.parametrize("chollet", [False, True])
@pytest.mark.parametrize("target_mask", [False, True])
def test_boolean_masks_give_the_loss_and_gradients_of_the_additive_ones(
    monkeypatch, chollet, target_mask
):
    batch = seq2seq_batch()
    if target_mask:
        batch["decoder_attention_mask"] = padded(TARGET_LENGTHS, seed=2)[1]
    kw = dict(chollet_cross_attention_mask=chollet)
    new, new_grads = run("sdpa", batch, **kw)
    old, old_grads = run("sdpa", batch, monkeypatch, additive=True, **kw)
    eager, eager_grads = run("eager", batch, **kw)
    for other, other_grads in ((old, old_grads), (eager, eager_grads)):
        assert abs(new.loss.item() - other.loss.item()) <= 1e-6
        torch.testing.assert_close(new.logits, other.logits, rtol=0, atol=1e-5)
        assert new_grads.keys() == other_grads.keys()
        for name, grad in new_grads.items():
            torch.testing.assert_close(grad, other_grads[name], rtol=1e-4, atol=1e-6, msg=name)


def test_boolean_masks_under_bf16_autocast_give_the_additive_masks_loss(monkeypatch):
    batch = seq2seq_batch()
    new, new_grads = run("sdpa", batch, autocast=True)
    old, old_grads = run("sdpa", batch, monkeypatch, additive=True, autocast=True)
    eager, _ = run("eager", batch, autocast=True)
    fp32, _ = run("sdpa", batch)
    assert new.logits.dtype == torch.bfloat16
    # The same bf16 kernel with the same mask semantics: equal to bf16 rounding.
    assert abs(new.loss.item() - old.loss.item()) <= 1e-2
    for name, grad in new_grads.items():
        torch.testing.assert_close(grad, old_grads[name], rtol=5e-2, atol=5e-3, msg=name)
    # The eager kernel and float32 within bf16's precision (8 bits of mantissa).
    assert abs(new.loss.item() - eager.loss.item()) <= 2e-2
    assert abs(new.loss.item() - fp32.loss.item()) <= 2e-2


def test_a_source_of_padding_only_gives_the_bias_and_finite_gradients(monkeypatch):
    """A query that sees no key (an all-padding source row) outputs ``o_proj``'s bias, with
    no NaN in the outputs or the gradients, whatever the kernel."""
    batch = seq2seq_batch(source_lengths=(7, 0, 6))
    model = tiny()
    for layer in model.model.decoder.layers:  # non-zero biases, so that the bias shows
        torch.nn.init.normal_(layer.encoder_attn.o_proj.bias)
    seen = {}
    hook = model.model.decoder.layers[0].encoder_attn.register_forward_hook(
        lambda module, args, out: seen.update(out=out[0])
    )
    out, grads = loss_and_grads(model, batch)
    hook.remove()
    bias = model.model.decoder.layers[0].encoder_attn.o_proj.bias
    assert torch.equal(seen["out"][1], bias.expand_as(seen["out"][1]))
    assert torch.isfinite(out.logits).all() and torch.isfinite(out.loss)
    assert all(torch.isfinite(grad).all() for grad in grads.values())
    eager, eager_grads = run("eager", batch)
    # the same fresh weights as `model` before its biases were set: compare two sdpa runs
    plain, plain_grads = run("sdpa", batch)
    assert abs(plain.loss.item() - eager.loss.item()) <= 1e-6
    for name, grad in plain_grads.items():
        torch.testing.assert_close(grad, eager_grads[name], rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("num_beams", [1, 3])
def test_generation_gives_the_tokens_of_the_eager_kernel_and_of_additive_masks(
    monkeypatch, num_beams
):
    batch = seq2seq_batch()
    del batch["labels"]
    settings = dict(max_new_tokens=6, num_beams=num_beams, do_sample=False)
    with torch.no_grad():
        new = tiny().generate(**batch, **settings)
        eager = tiny("eager").generate(**batch, **settings)
        monkeypatch.setattr(
            torch.nn.functional, "scaled_dot_product_attention", SdpaSpy(additive=True)
        )
        old = tiny().generate(**batch, **settings)
    assert torch.equal(new, eager)
    assert torch.equal(new, old)
