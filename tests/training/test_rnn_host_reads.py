"""The Bahdanau/Luong training step on the CUDA code path reads nothing on the host.

A :class:`~hfattn.models.rnn_layers.RecurrentLayer` told its rows are right-padded runs the
fused kernel over the padded width with device-side indices instead of packing with host
lengths (checked against the packed path: outputs, final states, gradients); where a host read
stalls the device (:func:`hfattn.models.rnn_layers.reads_stall`) the encoder also skips its
right-padding check. That branch is selected on the CPU
(:func:`~hfattn.models.rnn_layers.assume_reads_stall`) and checked against the host-read counter
of ``benchmarks/lib/host_reads.py`` (loss, gradients).
"""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from benchmarks.lib.host_reads import (
    bahdanau_host_reads_per_step,
    count_host_reads,
    right_padded_batch,
    tiny_model,
    training_step,
)
from hfattn.models.rnn_layers import assume_reads_stall, reads_stall, recurrent_layers

TOL = {torch.float32: 1e-6, torch.float64: 1e-12}
"""Absolute and relative tolerance per dtype (float32: the kernels' summation orders differ)."""
LENGTHS = (5, 2, 7, 0, 7, 1)
"""Rows of different lengths, two of the full width (7) and an empty one."""


def _mask(lengths=LENGTHS) -> torch.Tensor:
    lengths = torch.tensor(lengths)
    return (torch.arange(int(lengths.max()))[None] < lengths[:, None]).long()


def _run_stack(layers, inputs, states, mask, right_padded=True):
    """The layers stacked (layer l reads layer l − 1's outputs), as the Bahdanau encoder does;
    returns the top outputs and every layer's final state."""
    x, finals = inputs, []
    for layer, state in zip(layers, states, strict=True):
        x, *final = layer(x, *state, mask=mask, right_padded=right_padded)
        finals.extend(final)
    return x, finals


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("cell", ["gru", "lstm", "rnn"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_right_padded_path_equals_the_packed_path(cell, bidirectional, dtype):
    """Two stacked layers over rows of different lengths (full, empty, one token), told the
    rows are right-padded (the fused kernel over the padded width, on every device) and not
    told (the mask read: a packed sequence): outputs, final states and the gradients of a
    random projection of both, w.r.t. the inputs, the initial states and the weights."""
    torch.manual_seed(0)
    num_layers, hidden, directions = 2, 5, 2 if bidirectional else 1
    layers = recurrent_layers(cell, 3, hidden, num_layers, bidirectional=bidirectional)
    layers.to(dtype)
    mask = _mask()
    inputs = torch.randn(mask.shape[0], mask.shape[1], 3, dtype=dtype, requires_grad=True)
    states = [
        tuple(
            torch.randn(directions, mask.shape[0], hidden, dtype=dtype, requires_grad=True)
            for _ in range(2 if cell == "lstm" else 1)
        )
        for _ in range(num_layers)
    ]
    leaves = [inputs, *(s for state in states for s in state), *layers.parameters()]
    runs = []
    for right_padded in (False, True):
        outputs, finals = _run_stack(layers, inputs, states, mask, right_padded)
        g = torch.Generator().manual_seed(1)
        loss = (outputs * torch.randn(outputs.shape, generator=g, dtype=dtype)).sum() + sum(
            (f * torch.randn(f.shape, generator=g, dtype=dtype)).sum() for f in finals
        )
        runs.append((outputs, finals, torch.autograd.grad(loss, leaves)))
    (out_packed, finals_packed, grads_packed), (out_fused, finals_fused, grads_fused) = runs
    tol = TOL[dtype]
    torch.testing.assert_close(out_fused, out_packed, rtol=tol, atol=tol)
    assert (out_fused[mask == 0] == 0).all()
    for a, b in zip(finals_fused, finals_packed, strict=True):
        torch.testing.assert_close(a, b, rtol=tol, atol=tol)
    # The empty row (index 3) keeps its initial state, as packing gives it.
    for final, initial in zip(finals_fused, (s for state in states for s in state), strict=True):
        assert torch.equal(final[:, 3], initial[:, 3])
    for a, b in zip(grads_fused, grads_packed, strict=True):
        torch.testing.assert_close(a, b, rtol=tol, atol=tol)


def test_reads_stall_is_the_device_unless_assumed():
    assert not reads_stall(torch.device("cpu")) and not reads_stall("cpu")
    assert reads_stall(torch.device("cuda")) and reads_stall("meta")
    with assume_reads_stall():
        assert reads_stall("cpu")
    assert not reads_stall("cpu")


@pytest.mark.parametrize("preset", ["bahdanau", "luong-general"])
def test_stall_branch_model_loss_and_gradients_equal_the_cpu_branch(preset):
    """RNNsearch (BiGRU encoder, additive attention; Bahdanau et al. 2015) and Luong et al.
    (2015) (2-layer LSTM, general score, input feeding, concat bridge), shrunk: the same loss
    and gradients on both branches, dropout included (the branches draw the same masks)."""
    model = tiny_model(preset).train()
    batch = right_padded_batch(
        model.config.vocab_size, lengths=(7, 3, 5, 1, 7), target_lengths=(4, 6, 2, 5, 1)
    )
    results = []
    for stall in (False, True):
        torch.manual_seed(3)
        with assume_reads_stall() if stall else torch.enable_grad():
            loss = model(**batch).loss
        grads = torch.autograd.grad(loss, list(model.parameters()))
        results.append((loss, grads))
    (loss_cpu, grads_cpu), (loss_stall, grads_stall) = results
    tol = TOL[torch.float32]
    torch.testing.assert_close(loss_stall, loss_cpu, rtol=tol, atol=tol)
    names = [name for name, _ in model.named_parameters()]
    for name, a, b in zip(names, grads_stall, grads_cpu, strict=True):
        torch.testing.assert_close(a, b, rtol=tol, atol=tol, msg=name)


def test_a_training_step_reads_the_host_zero_times_on_the_stall_branch():
    details: dict = {}
    assert bahdanau_host_reads_per_step(stall=True, details=details) == {
        "bahdanau": 0,
        "luong-general": 0,
    }, details
    # The CPU branch reads once, the encoder's right-padding check (its recurrent layers, told
    # the rows are right-padded, read no lengths on either branch): the counter sees it.
    cpu = bahdanau_host_reads_per_step(stall=False)
    assert cpu == {"bahdanau": 1, "luong-general": 1}, cpu


def test_the_counter_counts_host_reads():
    t = torch.tensor([0.5, -1.0, 2.0])
    details: Counter = Counter()
    assert count_host_reads(lambda: t.item() if t.numel() == 1 else t[0].item(), details) == 1
    assert details == Counter({"aten._local_scalar_dense.default": 1})
    assert count_host_reads(lambda: bool(t.any())) == 1
    assert count_host_reads(lambda: t.cpu()) == 1
    assert count_host_reads(lambda: t.tolist()) == 1
    assert count_host_reads(lambda: t[t > 0]) == 1
    assert count_host_reads(lambda: torch.nonzero(t)) == 1
    assert count_host_reads(lambda: [bool(t.any()), int(t.argmax())]) == 2
    assert count_host_reads(lambda: torch.where(t > 0, t, 0.0).sum() * 2) == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("preset", ["bahdanau", "luong-general"])
def test_a_cuda_training_step_does_not_synchronise(preset):
    """On a real GPU, CUDA's own sync detector (``set_sync_debug_mode("error")``) raises at
    any device→host synchronisation of the second training step, kernel-internal ones (which
    the dispatch counter cannot see) included."""
    model = tiny_model(preset).cuda()
    batch = {k: v.cuda() for k, v in right_padded_batch(model.config.vocab_size).items()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    training_step(model, batch, optimizer)  # optimizer state, cuDNN plans
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        loss = training_step(model, batch, optimizer)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert torch.isfinite(loss).item()
