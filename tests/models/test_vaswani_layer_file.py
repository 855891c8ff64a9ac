"""A Vaswani layer reads in ``modeling_vaswani.py`` alone, as a Marian layer does in
``modeling_marian.py``: its imports are torch, transformers, the config, positions and masks;
the attention (``VaswaniAttention``) and the residuals and norms are written out there; the
general score / distribution machinery (``attention.MultiHeadAttention``) is built only for a
config that asks for another score or distribution.

The plain attention gives the outputs, attention maps, hidden states, gradients and generated
tokens of the general machinery's scaled-dot + softmax path for the same weights; the
parameter names (checkpoints, the CTranslate2 export) are those of the general path; every
``# Copied from`` block is the text of its source; a saved folder loads where hfattn is not
installed, for the default attention and for a non-default one.
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import json
import re
import textwrap
from pathlib import Path

import pytest
import torch
from transformers import GradientCheckpointingLayer

from hfattn import VaswaniForConditionalGeneration
from hfattn.models import modeling_vaswani
from hfattn.models.attention import MultiHeadAttention
from tests.helpers.tiny_vaswani import padded, tiny

MODEL_FILE = Path(modeling_vaswani.__file__)
SOURCE_LENGTHS, TARGET_LENGTHS = (7, 4, 6), (5, 3, 5)
# What a model file may import (DESIGN.md, "A model file shows a whole layer").
ALLOWED_PACKAGES = {"__future__", "collections", "math", "torch", "transformers"}
ALLOWED_SIBLINGS = {"configuration_vaswani", "positional", "masking"}


def attention_modules(model) -> dict[str, torch.nn.Module]:
    """``{name: module}`` of every attention of the model's layers."""
    return {
        name: module
        for name, module in model.named_modules()
        if name.endswith(("self_attn", "encoder_attn"))
    }


def general_twin(model: VaswaniForConditionalGeneration) -> VaswaniForConditionalGeneration:
    """A copy of ``model`` whose every attention is the general ``MultiHeadAttention`` (scaled
    dot + softmax, built from the same config) holding the same weights."""
    twin = copy.deepcopy(model)
    for name, plain in attention_modules(twin).items():
        general = MultiHeadAttention.from_config(
            twin.config, is_causal=plain.is_causal, layer_idx=plain.layer_idx
        )
        general.load_state_dict(plain.state_dict(), strict=True)
        parent, _, attr = name.rpartition(".")
        setattr(twin.get_submodule(parent), attr, general)
    assert all(type(m) is MultiHeadAttention for m in attention_modules(twin).values())
    return twin.eval()


# --------------------------------------------------------------------------- the file


def test_the_model_file_imports_torch_transformers_config_positions_and_masks_only():
    tree = ast.parse(MODEL_FILE.read_text())
    top, lazy = [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            where = top if node in tree.body else lazy
            if isinstance(node, ast.Import):
                where += [(0, alias.name) for alias in node.names]
            else:
                where.append((node.level, node.module))
    packages = {name.split(".")[0] for level, name in top if level == 0}
    siblings = {name for level, name in top if level == 1}
    assert packages <= ALLOWED_PACKAGES, packages - ALLOWED_PACKAGES
    assert siblings <= ALLOWED_SIBLINGS, siblings - ALLOWED_SIBLINGS
    assert all(level in (0, 1) for level, _ in top)
    # The general machinery is imported inside the one function that builds it.
    assert lazy == [(1, "attention")]
    builder = inspect.getsource(modeling_vaswani.build_attention)
    assert "from .attention import MultiHeadAttention" in builder


def test_the_layers_write_out_attention_residuals_and_norms_without_mixins():
    model = tiny()
    for layer_class in (modeling_vaswani.VaswaniEncoderLayer, modeling_vaswani.VaswaniDecoderLayer):
        bases = [c for c in layer_class.__mro__[1:] if c.__module__.startswith("hfattn")]
        assert bases == [], bases  # nothing between the layer and transformers' classes
        assert issubclass(layer_class, GradientCheckpointingLayer)
    for name, module in attention_modules(model).items():
        assert type(module) is modeling_vaswani.VaswaniAttention, name
        assert type(module).__module__ == modeling_vaswani.__name__


@pytest.mark.parametrize(
    ("changes", "score", "distribution"),
    [
        ({"attention_score": "additive"}, "additive", "softmax"),
        ({"attention_distribution": "sparsemax"}, "scaled_dot", "sparsemax"),
        ({"attention_distribution": "entmax15"}, "scaled_dot", "entmax15"),
        ({"attention_score": "dot"}, "dot", "softmax"),
        ({"attention_score_params": {"scale": 0.3}}, "scaled_dot", "softmax"),
    ],
)
def test_a_non_default_score_or_distribution_gets_the_general_machinery(
    changes, score, distribution
):
    model = tiny(**changes)
    modules = attention_modules(model)
    assert len(modules) == 2 + 2 * 2  # one per encoder layer, two per decoder layer
    for name, module in modules.items():
        assert type(module) is MultiHeadAttention, name
        assert (module.score.name, module.distribution) == (score, distribution)
    if "attention_score_params" in changes:
        assert modules["model.encoder.layers.0.self_attn"].scaling == 0.3
    for kw in ({}, {"attention_distribution": "softmax"}, {"attention_score_params": {}}):
        plain = attention_modules(tiny(**kw))
        assert all(type(m) is modeling_vaswani.VaswaniAttention for m in plain.values()), kw


def expected_keys(encoder_layers: int, decoder_layers: int, extra: dict[str, list[str]]) -> list:
    """The parameter names of a post-LN model with shared, tied embeddings and sinusoidal
    positions, written out from the layout (``extra``: names added after a prefix)."""
    linears = lambda name: [f"{name}.weight", f"{name}.bias"]  # noqa: E731
    attention = [k for p in ("q_proj", "k_proj", "v_proj", "o_proj") for k in linears(p)]

    def block(prefix: str) -> list[str]:
        return [f"{prefix}.{k}" for k in attention + extra.get("attention", [])]

    keys = ["model.encoder.embed_tokens.weight"]
    for i in range(encoder_layers):
        layer = f"model.encoder.layers.{i}"
        keys += block(f"{layer}.self_attn") + linears(f"{layer}.self_attn_layer_norm")
        keys += linears(f"{layer}.feed_forward.fc1") + linears(f"{layer}.feed_forward.fc2")
        keys += linears(f"{layer}.final_layer_norm")
    keys.append("model.decoder.embed_tokens.weight")
    for i in range(decoder_layers):
        layer = f"model.decoder.layers.{i}"
        keys += block(f"{layer}.self_attn") + linears(f"{layer}.self_attn_layer_norm")
        keys += block(f"{layer}.encoder_attn") + linears(f"{layer}.encoder_attn_layer_norm")
        keys += linears(f"{layer}.feed_forward.fc1") + linears(f"{layer}.feed_forward.fc2")
        keys += linears(f"{layer}.final_layer_norm")
    return keys + linears("lm_head")


@pytest.mark.parametrize(
    ("changes", "extra"),
    [
        ({}, {}),
        (
            {"attention_score": "additive"},
            {
                "attention": ["score.query_proj.weight", "score.key_proj.weight"]
                + ["score.key_proj.bias", "score.v.weight"]
            },
        ),
    ],
)
def test_the_parameter_names_are_those_of_the_checkpoints(changes, extra):
    model = tiny(**changes)
    assert list(model.state_dict()) == expected_keys(2, 2, extra)
    # ... and one path's checkpoint loads into the other.
    twin = general_twin(tiny())
    assert list(twin.state_dict()) == list(tiny().state_dict())


def copied_blocks() -> list[tuple[str, str]]:
    """``(source path, copied text)`` for every ``# Copied from hfattn.models.X.Y`` comment of
    the model file: the function or method right below the comment."""
    lines = MODEL_FILE.read_text().splitlines()
    tree = ast.parse(MODEL_FILE.read_text())
    defs = {
        node.lineno - len(node.decorator_list): node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.ClassDef)
    }
    blocks = []
    for number, line in enumerate(lines, start=1):
        found = re.match(r"\s*# Copied from (hfattn\.models\.\S+)(?:  # noqa: E501)?$", line)
        if found:
            node = defs[number + 1]
            blocks.append((found.group(1), "\n".join(lines[node.lineno - 1 : node.end_lineno])))
    return blocks


def test_every_copied_from_block_is_the_text_of_its_source():
    blocks = copied_blocks()
    assert {path for path, _ in blocks} >= {
        "hfattn.models.attention.eager_attention_forward",
        "hfattn.models.seq2seq_utils.shift_tokens_right",
        "hfattn.models.seq2seq_utils.token_cross_entropy",
    }
    for path, text in blocks:
        module_name, _, qualified = path.removeprefix("hfattn.models.").partition(".")
        source = importlib.import_module(f"hfattn.models.{module_name}")
        for part in qualified.split("."):
            source = getattr(source, part)
        assert textwrap.dedent(text) == textwrap.dedent(inspect.getsource(source)).rstrip(), path


# --------------------------------------------------------------------------- same outputs


def assert_same(plain, general, what: str) -> None:
    torch.testing.assert_close(plain, general, rtol=0, atol=1e-6, msg=what)


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
@pytest.mark.parametrize(
    ("changes", "target_mask"),
    [
        ({}, False),
        ({}, True),
        ({"norm_position": "pre", "head_dim": 8}, True),
        ({"chollet_cross_attention_mask": True}, True),
        ({"init_method": "t-fixup", "position_embedding": "learned"}, False),
    ],
)
def test_the_plain_attention_gives_the_outputs_of_the_general_machinery(
    implementation, changes, target_mask
):
    model = tiny(implementation, **changes)
    twin = general_twin(model)
    source, source_mask = padded(SOURCE_LENGTHS, seed=1)
    target, tgt_mask = padded(TARGET_LENGTHS, seed=2)
    batch = dict(
        input_ids=source,
        attention_mask=source_mask,
        labels=target.masked_fill(tgt_mask == 0, -100),
        output_attentions=True,
        output_hidden_states=True,
    )
    if target_mask:
        batch["decoder_attention_mask"] = tgt_mask
    with torch.no_grad():
        plain, general = model(**batch), twin(**batch)
    assert_same(plain.logits, general.logits, "logits")
    assert_same(plain.loss, general.loss, "loss")
    for field in (
        "encoder_attentions",
        "decoder_attentions",
        "cross_attentions",
        "encoder_hidden_states",
        "decoder_hidden_states",
    ):
        for i, (a, b) in enumerate(
            zip(getattr(plain, field), getattr(general, field), strict=True)
        ):
            assert_same(a, b, f"{field}[{i}]")
    del batch["output_attentions"], batch["output_hidden_states"]  # the kernel's own path
    with torch.no_grad():
        assert_same(model(**batch).logits, twin(**batch).logits, "logits without maps")


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_the_plain_attention_gives_the_gradients_of_the_general_machinery(implementation):
    model = tiny(implementation, attention_dropout=0.1, activation_dropout=0.1)
    twin = general_twin(model)
    source, source_mask = padded((7, 0, 6), seed=1)  # a source of padding only, too
    target, tgt_mask = padded(TARGET_LENGTHS, seed=2)
    batch = dict(
        input_ids=source, attention_mask=source_mask, labels=target.masked_fill(tgt_mask == 0, -100)
    )
    losses, grads = [], []
    for m in (model, twin):
        m.train()
        torch.manual_seed(123)  # the same dropout masks
        loss = m(**batch).loss
        loss.backward()
        losses.append(loss.detach())
        grads.append({n: p.grad for n, p in m.named_parameters() if p.grad is not None})
    assert torch.isfinite(losses[0])
    assert_same(losses[0], losses[1], "loss")
    assert grads[0].keys() == grads[1].keys() and len(grads[0]) > 40
    for name, grad in grads[0].items():
        assert_same(grad, grads[1][name], name)


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("num_beams", [1, 3])
def test_cached_generation_gives_the_tokens_of_the_general_machinery(implementation, num_beams):
    model = tiny(implementation)
    twin = general_twin(model)
    source, source_mask = padded(SOURCE_LENGTHS, seed=1)
    settings = dict(max_new_tokens=6, num_beams=num_beams, do_sample=False)
    with torch.no_grad():
        plain = model.generate(input_ids=source, attention_mask=source_mask, **settings)
        general = twin.generate(input_ids=source, attention_mask=source_mask, **settings)
    assert plain.shape[1] > 2 and torch.equal(plain, general)


# --------------------------------------------------------------------------- remote code

LOAD_BOTH = """
import importlib.util, json, sys, torch, transformers
assert importlib.util.find_spec("hfattn") is None, "hfattn must not be importable here"
results = {}
for name, folder in json.loads(sys.argv[1]).items():
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=True)
    model = model.eval()
    ids = torch.tensor([[5, 6, 7, 8, 3]])
    with torch.no_grad():
        logits = model(input_ids=ids, decoder_input_ids=torch.tensor([[2, 9, 10]])).logits
    kinds = sorted({type(m).__name__ for n, m in model.named_modules() if n.endswith("attn")})
    results[name] = {"module": type(model).__module__, "logits": logits.tolist(), "kinds": kinds}
print(json.dumps(results))
"""


@pytest.mark.slow
def test_saved_folders_load_without_hfattn_for_the_plain_and_the_general_attention(
    fresh_python, tmp_path
):
    from tests.helpers.fresh_env import run_offline_without_hfattn

    folders, expected = {}, {}
    for name, changes in (("plain", {}), ("additive", {"attention_score": "additive"})):
        model = tiny(**changes)
        folder = tmp_path / name
        model.save_pretrained(folder)
        folders[name] = str(folder)
        with torch.no_grad():
            expected[name] = model(
                input_ids=torch.tensor([[5, 6, 7, 8, 3]]),
                decoder_input_ids=torch.tensor([[2, 9, 10]]),
            ).logits
        saved = {p.name for p in folder.glob("*.py")}
        assert {"modeling_vaswani.py", "configuration_vaswani.py", "masking.py"} <= saved
        assert "positional.py" in saved and "attention.py" in saved  # the lazy import's file
    results = run_offline_without_hfattn(fresh_python, LOAD_BOTH, json.dumps(folders), cwd=tmp_path)
    for name, want in expected.items():
        assert results[name]["module"].startswith("transformers_modules"), name
        torch.testing.assert_close(torch.tensor(results[name]["logits"]), want, rtol=0, atol=1e-6)
    assert results["plain"]["kinds"] == ["VaswaniAttention"]
    assert results["additive"]["kinds"] == ["MultiHeadAttention"]
