"""Masks, batch-matrix attention, multi-head attention (eager vs sdpa vs a naive reference,
KV cache) and positional encodings."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from transformers.cache_utils import DynamicCache

from hfattn.models.attention import (
    Attention,
    MultiHeadAttention,
    attend,
    causal_mask,
    combine_masks,
    make_attention_mask,
    padding_mask,
    to_keep_mask,
)
from hfattn.models.positional import (
    LearnedPositionalEmbedding,
    SinusoidalPositionalEmbedding,
    build_positional_encoding,
    relative_position_rotation,
    sinusoidal_position_encoding,
)

# --- masks ------------------------------------------------------------------------------


def test_padding_mask_keeps_real_tokens():
    keep = padding_mask(torch.tensor([[1, 1, 0], [1, 0, 0]]))
    assert keep.shape == (2, 1, 1, 3) and keep.dtype == torch.bool
    assert keep[:, 0, 0].tolist() == [[True, True, False], [True, False, False]]
    assert padding_mask(torch.tensor([[1, 0]]), ndim=3).shape == (1, 1, 2)


def test_causal_mask_is_aligned_to_the_end_of_the_keys():
    assert causal_mask(3)[0, 0].tolist() == [
        [True, False, False],
        [True, True, False],
        [True, True, True],
    ]
    # 2 new queries after 3 cached keys: query 0 is at position 3
    assert causal_mask(2, 5, ndim=2).tolist() == [
        [True, True, True, True, False],
        [True, True, True, True, True],
    ]
    with pytest.raises(ValueError, match="key_length >= query_length"):
        causal_mask(4, 2)


def test_combined_padding_and_causal_mask():
    both = make_attention_mask(3, attention_mask=torch.tensor([[1, 1, 0]]), causal=True)
    assert both[0, 0].tolist() == [
        [True, False, False],
        [True, True, False],
        [True, True, False],
    ]
    assert make_attention_mask(3) is None
    assert combine_masks(None, None) is None


def test_float_masks_follow_the_additive_convention():
    additive = torch.tensor([0.0, -1e6, float("-inf"), torch.finfo(torch.float32).min])
    assert to_keep_mask(additive).tolist() == [True, False, False, False]


# --- batch-matrix attention ------------------------------------------------------------


def test_attend_with_many_leading_dims_equals_per_slice():
    generator = torch.Generator().manual_seed(0)
    q = torch.randn(2, 3, 4, 5, 8, dtype=torch.float64, generator=generator)
    k = torch.randn(2, 3, 4, 7, 8, dtype=torch.float64, generator=generator)
    v = torch.randn(2, 3, 4, 7, 6, dtype=torch.float64, generator=generator)
    context, weights = attend(q, k, v, "scaled_dot")
    assert context.shape == (2, 3, 4, 5, 6) and weights.shape == (2, 3, 4, 5, 7)
    for index in [(0, 0, 0), (1, 2, 3)]:
        energies = q[index] @ k[index].T / math.sqrt(8)
        expected = torch.softmax(energies, -1) @ v[index]
        torch.testing.assert_close(context[index], expected)


def test_attention_module_padding_and_empty_rows():
    module = Attention(4, score="additive", hidden_size=6).double()
    q = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, 5, 4, dtype=torch.float64)
    keep = torch.ones(2, 3, 5, dtype=torch.bool)
    keep[0, :, 3:] = False  # padded keys
    keep[1, 1] = False  # a query with nothing to see
    context, weights = module(q, k, mask=keep)  # values default to the keys
    assert (weights[0, :, 3:] == 0).all()
    assert (context[1, 1] == 0).all() and (weights[1, 1] == 0).all()
    unpadded, _ = module(q[:1], k[:1, :3])
    torch.testing.assert_close(context[0], unpadded[0])
    context.sum().backward()
    assert torch.isfinite(q.grad).all()
    precomputed = module.precompute_keys(k)
    again, _ = module(q, value=k, mask=keep, precomputed_keys=precomputed)
    torch.testing.assert_close(again, context)


# --- multi-head attention --------------------------------------------------------------


def naive_multi_head(module: MultiHeadAttention, x, kv, keep):
    """Vaswani's equations with explicit loops over heads and queries (``keep [B, Tq, Tk]``
    for all heads, or ``[B, h, Tq, Tk]`` per head)."""
    h, dk, dv = module.num_heads, module.key_dim, module.value_dim
    q_all, k_all, v_all = module.q_proj(x), module.k_proj(kv), module.v_proj(kv)
    heads = []
    for i in range(h):
        q = q_all[..., i * dk : (i + 1) * dk]
        k = k_all[..., i * dk : (i + 1) * dk]
        v = v_all[..., i * dv : (i + 1) * dv]
        energies = q @ k.transpose(-1, -2) / math.sqrt(dk)
        if keep is not None:
            energies = energies.masked_fill(
                ~(keep[:, i] if keep.dim() == 4 else keep), float("-inf")
            )
        weights = torch.softmax(energies, dim=-1)
        heads.append(torch.nan_to_num(weights) @ v)
    return module.o_proj(torch.cat(heads, dim=-1))


@pytest.mark.parametrize("cross", [False, True])
def test_mha_eager_sdpa_and_naive_reference_agree(cross):
    torch.manual_seed(0)
    module = MultiHeadAttention(
        16, 4, key_dim=6, value_dim=5, kv_input_size=12 if cross else None, is_causal=not cross
    ).double()
    x = torch.randn(2, 7, 16, dtype=torch.float64)
    kv = torch.randn(2, 9, 12, dtype=torch.float64) if cross else x
    pad = (
        torch.tensor([[1] * 9, [1] * 6 + [0] * 3])
        if cross
        else torch.tensor([[1] * 7, [1] * 5 + [0] * 2])
    )
    keep = padding_mask(pad, ndim=3)
    if not cross:
        keep = keep & torch.tril(torch.ones(7, 7, dtype=torch.bool))
    outputs = {}
    for implementation in ("eager", "sdpa"):
        module._attn_implementation = implementation
        outputs[implementation], weights = module(
            x, key_value_states=kv if cross else None, attention_mask=pad
        )
        assert (weights is None) == (implementation == "sdpa")
    expected = naive_multi_head(module, x, kv, keep)
    torch.testing.assert_close(outputs["eager"], expected)
    torch.testing.assert_close(outputs["sdpa"], expected)


def test_mha_follows_the_config_implementation_and_returns_weights_on_request():
    config = SimpleNamespace(
        d_model=8, num_attention_heads=2, attention_score="scaled_dot", _attn_implementation="sdpa"
    )
    module = MultiHeadAttention.from_config(config, is_causal=True, layer_idx=0)
    x = torch.randn(1, 5, 8)
    out_sdpa, none = module(x)
    assert none is None
    out_weights, weights = module(x, output_attentions=True)
    config._attn_implementation = "eager"
    out_eager, eager_weights = module(x)
    torch.testing.assert_close(out_sdpa, out_eager, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(weights, eager_weights)
    assert weights.shape == (1, 2, 5, 5)
    assert torch.equal(weights[0, :, 0, 1:], torch.zeros(2, 4))  # causal
    torch.testing.assert_close(weights.sum(-1), torch.ones(1, 2, 5))


def test_mha_fully_masked_query_gives_zero_context_not_nan():
    module = MultiHeadAttention(8, 2).double()
    x = torch.randn(1, 3, 8, dtype=torch.float64, requires_grad=True)
    keep = torch.ones(1, 3, 3, dtype=torch.bool)
    keep[0, 2] = False
    for implementation in ("eager", "sdpa"):
        module._attn_implementation = implementation
        out, _ = module(x, attention_mask=keep)
        torch.testing.assert_close(out[0, 2], module.o_proj.bias)  # zero context -> bias only
        out.sum().backward()
        assert torch.isfinite(x.grad).all()


@pytest.mark.parametrize("per_head", [False, True])
def test_mha_empty_rows_match_the_naive_reference_with_gradients(per_head):
    """Queries that see no key (in every head, or in one head only) give the output and
    gradients of a zero context, whichever kernel runs."""
    torch.manual_seed(3)
    module = MultiHeadAttention(8, 2).double()
    x = torch.randn(2, 4, 8, dtype=torch.float64)
    keep = torch.rand(2, 2 if per_head else 1, 4, 4) > 0.3
    keep[..., 0] = True
    keep[0, 0, 1] = False  # query 1 of the first sequence: no key (in head 0 only if per_head)
    keep[1, -1, 3] = False
    expected = naive_multi_head(module, x, x, keep if per_head else keep[:, 0])
    expected_grads = torch.autograd.grad(expected.square().sum(), list(module.parameters()))
    for implementation in ("eager", "sdpa"):
        module._attn_implementation = implementation
        out, _ = module(x, attention_mask=keep)
        torch.testing.assert_close(out, expected)
        grads = torch.autograd.grad(out.square().sum(), list(module.parameters()))
        for grad, reference in zip(grads, expected_grads, strict=True):
            torch.testing.assert_close(grad, reference)


def test_mha_generic_score_matches_per_head_formula():
    torch.manual_seed(1)
    module = MultiHeadAttention(12, 3, score="euclidean").double()
    assert not module.uses_attention_interface
    x = torch.randn(2, 4, 12, dtype=torch.float64)
    out, weights = module(x)
    q, k, v = module.q_proj(x), module.k_proj(x), module.v_proj(x)
    heads = []
    for i in range(3):
        part = slice(4 * i, 4 * (i + 1))
        distance = torch.cdist(q[..., part], k[..., part])
        heads.append(torch.softmax(-distance, -1) @ v[..., part])
    torch.testing.assert_close(out, module.o_proj(torch.cat(heads, -1)))
    assert weights.shape == (2, 3, 4, 4)


def test_mha_sparsemax_uses_generic_path_and_respects_causality():
    module = MultiHeadAttention(8, 2, distribution="sparsemax", is_causal=True)
    assert not module.uses_attention_interface
    _, weights = module(torch.randn(2, 6, 8))
    assert torch.equal(weights.triu(1), torch.zeros_like(weights))
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, 6))


@pytest.mark.parametrize("score", ["scaled_dot", "additive"])
def test_mha_kv_cache_step_by_step_equals_full_causal_pass(score):
    torch.manual_seed(2)
    module = MultiHeadAttention(8, 2, score=score, is_causal=True, layer_idx=0).double().eval()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    full, _ = module(x)
    cache = DynamicCache()
    steps = [module(x[:, t : t + 1], cache=cache)[0] for t in range(5)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full)


def test_chollet_key_dim_per_head_parameter_count():
    # Keras MultiHeadAttention(num_heads=8, key_dim=256) on d_model=256 inputs
    module = MultiHeadAttention(256, 8, key_dim=256)
    assert module.q_proj.out_features == 8 * 256
    assert sum(p.numel() for p in module.parameters()) == 3 * (256 * 2048 + 2048) + (
        2048 * 256 + 256
    )


def test_mha_bad_sizes_and_masks_raise():
    with pytest.raises(ValueError, match="hidden_size=10, num_heads=3"):
        MultiHeadAttention(10, 3)
    module = MultiHeadAttention(8, 2)
    with pytest.raises(ValueError, match=r"attention_mask must be.*\(1, 1, 1, 1, 3\)"):
        module(torch.randn(1, 3, 8), attention_mask=torch.ones(1, 1, 1, 1, 3))


# --- positional encodings --------------------------------------------------------------


def test_sinusoidal_table_matches_formula():
    table = sinusoidal_position_encoding(50, 16, base=100.0, dtype=torch.float64)
    for t in (0, 7, 49):
        for i in range(8):
            angle = t / 100.0 ** (2 * i / 16)
            assert table[t, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-12)
            assert table[t, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-12)
    assert table[0, 0::2].abs().max() == 0 and torch.equal(
        table[0, 1::2], torch.ones(8, dtype=torch.float64)
    )


@pytest.mark.parametrize("delta", [1, 5, 37])
def test_relative_position_property(delta):
    table = sinusoidal_position_encoding(200, 64, dtype=torch.float64)
    rotation = relative_position_rotation(delta, 64)
    shifted = table[: 200 - delta] @ rotation.T  # R(delta) PE(t), for every t at once
    torch.testing.assert_close(shifted, table[delta:], rtol=0, atol=1e-10)
    torch.testing.assert_close(rotation @ rotation.T, torch.eye(64, dtype=torch.float64))


def test_positional_modules():
    sinusoidal = SinusoidalPositionalEmbedding(30, 8, base=10000.0)
    ids = torch.tensor([[0, 1, 2], [5, 6, 7]])
    torch.testing.assert_close(sinusoidal(ids), sinusoidal_position_encoding(30, 8)[ids])
    assert "weight" not in sinusoidal.state_dict()  # recomputed, never saved
    torch.testing.assert_close(sinusoidal.compute_table(), sinusoidal.weight)
    learned = build_positional_encoding("learned", 20, 4)
    assert isinstance(learned, LearnedPositionalEmbedding) and learned(ids).shape == (2, 3, 4)
    assert learned.weight.requires_grad
    with pytest.raises(ValueError, match="num_positions=20; got position 25"):
        learned(torch.tensor([25]))
    with pytest.raises(ValueError, match="even dim; got dim=7"):
        sinusoidal_position_encoding(4, 7)
    with pytest.raises(
        ValueError, match="unknown positional encoding 'rotary'.*sinusoidal, learned"
    ):
        build_positional_encoding("rotary", 4, 4)


# --- remote-code hygiene ---------------------------------------------------------------


@pytest.mark.parametrize("module_file", ["attention.py", "positional.py"])
def test_modeling_helpers_import_only_torch_transformers_stdlib_and_siblings(module_file):
    import ast
    import sys
    from pathlib import Path

    from transformers.dynamic_module_utils import get_relative_import_files

    import hfattn.models

    folder = Path(hfattn.models.__file__).parent
    files = [folder / module_file, *map(Path, get_relative_import_files(folder / module_file))]
    allowed = {"torch", "transformers", "__future__"} | set(sys.stdlib_module_names)
    for path in files:
        assert path.parent == folder  # siblings only: they are copied flat
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                roots = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                roots = {node.module.split(".")[0]}
            else:
                continue
            assert roots <= allowed, f"{path.name} imports {roots - allowed}"
