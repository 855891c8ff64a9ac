"""Muon on the hidden matrices, AdamW on the rest (``training.optimizer: muon``)."""

import copy
import math

import pytest
import torch
from torch import nn

from hfattn.models import CharRNNConfig, CharRNNForCausalLM
from hfattn.training.muon import (
    MUON_MOMENTUM,
    MUON_RMS_MATCH,
    MuonAdamW,
    muon_param_groups,
    orthogonalize,
)
from hfattn.training.optim import build_optimizer


@pytest.mark.parametrize("shape", [(48, 16), (16, 48), (32, 32)])
def test_orthogonalize_flattens_the_spectrum_and_keeps_the_singular_vectors(shape):
    generator = torch.Generator().manual_seed(0)
    # singular values spread over four orders of magnitude
    u, _, vh = torch.linalg.svd(torch.randn(shape, generator=generator), full_matrices=False)
    s = torch.logspace(0, -4, min(shape))
    update = u @ torch.diag(s) @ vh
    out = orthogonalize(update)
    assert out.shape == update.shape
    values = torch.linalg.svdvals(out)
    # the iteration leaves values in about [0.7, 1.2]; the smallest inputs (1e-4 of the largest)
    # grow by about 3.4^5 ~ 460 in five steps, so they reach ~0.05 without converging
    assert values.max() < 1.25 and (values[: min(shape) // 2] > 0.6).all()
    # the same singular vectors: out = U diag(s') V^T with s' > 0 (an odd polynomial of the update)
    inner = u.T @ out @ vh.T
    off_diagonal = inner - torch.diag(torch.diagonal(inner))
    assert off_diagonal.abs().max() < 1e-4 and (torch.diagonal(inner) > 0).all()
    # scale-free: a multiple of the update gives the same matrix
    torch.testing.assert_close(orthogonalize(1000.0 * update), out, rtol=1e-4, atol=1e-5)


def test_orthogonalize_of_a_well_conditioned_matrix_is_near_its_polar_factor():
    generator = torch.Generator().manual_seed(1)
    u, _, vh = torch.linalg.svd(torch.randn(24, 40, generator=generator), full_matrices=False)
    update = u @ torch.diag(torch.linspace(1.0, 0.5, 24)) @ vh
    values = torch.linalg.svdvals(orthogonalize(update))
    assert 0.68 < values.min() and values.max() < 1.2


def _tiny_char_rnn(tied=False):
    config = CharRNNConfig(
        vocab_size=20, embedding_dim=8, hidden_size=12, num_layers=2, tie_word_embeddings=tied
    )
    torch.manual_seed(0)
    return CharRNNForCausalLM(config)


def test_param_groups_send_the_recurrent_matrices_to_muon_and_the_rest_to_adamw():
    model = _tiny_char_rnn()
    groups = muon_param_groups(model)
    assert [g["use_muon"] for g in groups] == [True, False]
    names = {id(p): n for n, p in model.named_parameters()}
    hidden = sorted(names[id(p)] for p in groups[0]["params"])
    assert (
        hidden
        == sorted(n for n, p in model.named_parameters() if "weight_ih" in n or "weight_hh" in n)
        and len(hidden) == 4
    )
    rest = {names[id(p)] for p in groups[1]["params"]}
    assert "embeddings.weight" in rest and "lm_head.weight" in rest and "lm_head.bias" in rest
    assert len(hidden) + len(rest) == len(list(model.parameters()))


def test_tied_output_layer_stays_with_adamw_and_its_projection_takes_muon():
    model = _tiny_char_rnn(tied=True)
    groups = muon_param_groups(model)
    muon = {id(p) for p in groups[0]["params"]}
    assert id(model.get_input_embeddings().weight) not in muon
    assert id(model.output_projection.weight) in muon


def test_frozen_parameters_are_left_out():
    model = _tiny_char_rnn()
    model.layers[0].requires_grad_(False)
    kept = {id(p) for g in muon_param_groups(model) for p in g["params"]}
    assert not any(id(p) in kept for p in model.layers[0].parameters())


def _gradients(params, step):
    generator = torch.Generator().manual_seed(100 + step)
    for param in params:
        param.grad = torch.randn(param.shape, generator=generator)


def test_the_adamw_groups_follow_torch_adamw_step_for_step():
    torch.manual_seed(0)
    ours = nn.Sequential(nn.Linear(6, 5), nn.Linear(5, 3))
    theirs = copy.deepcopy(ours)
    kwargs = dict(lr=3e-2, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)
    mine = MuonAdamW(ours.parameters(), **kwargs)  # no use_muon group: all AdamW
    reference = torch.optim.AdamW(theirs.parameters(), **kwargs)
    for step in range(6):
        _gradients(ours.parameters(), step)
        _gradients(theirs.parameters(), step)
        mine.step()
        reference.step()
    for a, b in zip(ours.parameters(), theirs.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-6)


def test_the_muon_update_is_the_scaled_orthogonalized_nesterov_momentum():
    torch.manual_seed(0)
    weight = nn.Parameter(torch.randn(12, 30))
    start = weight.detach().clone()
    lr, decay = 0.02, 0.1
    optimizer = MuonAdamW([{"params": [weight], "use_muon": True}], lr=lr, weight_decay=decay)
    grads = [torch.randn(12, 30) for _ in range(2)]
    expected, buffer = start, torch.zeros(12, 30)
    for grad in grads:
        weight.grad = grad.clone()
        optimizer.step()
        buffer = MUON_MOMENTUM * buffer + grad
        nesterov = grad + MUON_MOMENTUM * buffer
        scale = MUON_RMS_MATCH * math.sqrt(30)
        expected = expected * (1 - lr * decay) - lr * scale * orthogonalize(nesterov)
    torch.testing.assert_close(weight.detach(), expected, rtol=0, atol=1e-6)
    # the update's RMS is that of a typical AdamW update, 0.2 lr, whatever the gradient's size
    weight.grad = 1e3 * torch.randn(12, 30)
    before = weight.detach().clone()
    optimizer.param_groups[0]["weight_decay"] = 0.0
    optimizer.step()
    rms = (weight.detach() - before).pow(2).mean().sqrt()
    assert 0.1 * lr < rms < 0.3 * lr


def test_a_reloaded_state_continues_identically():
    model = _tiny_char_rnn()
    twin = copy.deepcopy(model)
    straight = build_optimizer("muon", model, lr=1e-2)
    for step in range(5):
        _gradients(model.parameters(), step)
        straight.step()
    first = build_optimizer("muon", twin, lr=1e-2)
    for step in range(3):
        _gradients(twin.parameters(), step)
        first.step()
    second = build_optimizer("muon", twin, lr=1e-2)
    second.load_state_dict(copy.deepcopy(first.state_dict()))
    for step in range(3, 5):
        _gradients(twin.parameters(), step)
        second.step()
    for a, b in zip(model.parameters(), twin.parameters(), strict=True):
        assert torch.equal(a, b)


def test_muon_lowers_the_loss_of_a_char_rnn():
    model = _tiny_char_rnn()
    optimizer = build_optimizer("muon", model, lr=1e-2)
    generator = torch.Generator().manual_seed(0)
    text = torch.arange(20).repeat(2)[None].expand(4, -1).clone()  # a cycle: learnable
    text += torch.randint(0, 2, (4, 1), generator=generator)
    text %= 20
    losses = []
    # 70 steps: the loss ends at 0.10-0.20 of the first over 5 seeds; with the recurrent
    # matrices left out of the update (lr 0 for Muon's group) it is still above 0.4 of it
    for _ in range(70):
        loss = model(input_ids=text, labels=text).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.3 * losses[0]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ns_steps": 0}, "ns_steps must be >= 1; got 0"),
        ({"momentum": 1.0}, "betas and momentum must be in [0, 1)"),
        ({"lr": -1.0}, "lr, eps, weight_decay must be >= 0"),
    ],
)
def test_bad_settings_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace(")", r"\)")):
        MuonAdamW([nn.Parameter(torch.zeros(2, 2))], **kwargs)


def test_a_muon_group_takes_matrices_only():
    with pytest.raises(ValueError, match=r"not 2-D: \[\(3,\)\]"):
        MuonAdamW([{"params": [nn.Parameter(torch.zeros(3))], "use_muon": True}])


def test_a_transformer_sends_its_projections_to_muon_and_embeddings_norms_head_to_adamw():
    from hfattn.models import VaswaniConfig, VaswaniForConditionalGeneration

    config = VaswaniConfig(vocab_size=16, encoder_layers=1, decoder_layers=1, d_model=16,
                           num_heads=2, ffn_dim=32, max_position_embeddings=32)  # fmt: skip
    model = VaswaniForConditionalGeneration(config)
    groups = muon_param_groups(model)
    names = {id(p): n for n, p in model.named_parameters()}
    muon = [names[id(p)] for p in groups[0]["params"]]
    adamw = [names[id(p)] for p in groups[1]["params"]]
    assert muon and all(n.endswith("weight") for n in muon)
    assert not any("embed" in n or "norm" in n for n in muon)
    head = model.get_output_embeddings().weight
    assert id(head) not in {id(p) for p in groups[0]["params"]}
    assert any("norm" in n for n in adamw) and all(
        p.ndim != 2 or "embed" in names[id(p)] or p is head for p in groups[1]["params"]
    )
    # every 2-D weight of an attention or feed-forward layer is in the Muon group
    linears = [
        m.weight for m in model.modules() if isinstance(m, nn.Linear) and m.weight is not head
    ]
    assert {id(w) for w in linears} == {id(p) for p in groups[0]["params"]}


def test_a_bf16_run_orthogonalizes_in_bfloat16_and_keeps_float32_weights():
    """In bf16 the Newton-Schulz iteration runs in bfloat16 (as Jordan et al.'s Muon): the same
    direction within bfloat16's precision, the parameters and their state stay float32."""
    generator = torch.Generator().manual_seed(2)
    update = torch.randn(48, 16, generator=generator)
    low = orthogonalize(update, dtype=torch.bfloat16)
    assert low.dtype == torch.bfloat16
    reference = orthogonalize(update)
    assert (low.float() - reference).norm() / reference.norm() < 0.05
    model = _tiny_char_rnn()
    runs = {}
    for precision in ("no", "bf16"):
        optimizer = build_optimizer("muon", model, lr=0.01, mixed_precision=precision)
        muon_group = next(g for g in optimizer.param_groups if g["use_muon"])
        runs[precision] = muon_group["ns_dtype"]
        weight = muon_group["params"][0]
        before = weight.detach().clone()
        weight.grad = torch.randn_like(weight)
        optimizer.step()
        assert weight.dtype == torch.float32 and not torch.equal(weight.detach(), before)
        assert optimizer.state[weight]["momentum_buffer"].dtype == torch.float32
    assert runs == {"no": None, "bf16": torch.bfloat16}
