"""Publishing the Vaswani Transformer like the Bahdanau models: the pushed card (metrics, the
multi-head Attention row, the remote-code files), the translation Space's layer and head
selectors (through gradio_client and called directly), ``hfattn plot attention --layer/--head``
and, slow, the pushed repo + Space run from the Hub without hfattn.

The expected attention maps are read straight from the model's ``cross_attentions`` (one
``[batch, heads, output, source]`` tensor per decoder layer) after decoding with ``generate``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from gradio_client import Client
from gradio_client.exceptions import AppError
from huggingface_hub import HfApi, ModelCard

from hfattn.cli import main as cli_main
from hfattn.hub import (
    inspect_folder,
    push_model_folder,
    render_model_card,
)
from tests.helpers.space_helpers import heatmap, launch_space
from tests.helpers.translation_publishing import (
    NEW_TOKENS,
    SENTENCES,
    expected_translations,
    push_translation_run,
)

LAYERS, HEADS = 2, 4  # tiny_runs.TINY_TRANSLATION_MODELS["vaswani"]
ATTENTION_ROW = (
    "| Attention | multi-head `scaled_dot`, 4 heads of dim 8, 2+2 layers (encoder+decoder), "
    "post-LN |"
)
REMOTE_CODE_FILES = {
    "configuration_vaswani.py",
    "modeling_vaswani.py",
    "attention.py",
    "positional.py",
    "masking.py",
}


@pytest.fixture(scope="module")
def vaswani_run(tmp_path_factory) -> Path:
    """A finished tiny Vaswani translation run (2+2 layers, 4 heads; date normalisation, long
    enough for different dates to translate differently), trained once per session (the
    CTranslate2 Space tests use it too); do not modify it."""
    from tests.helpers.shared_runs import shared_run
    from tests.helpers.tiny_runs import build_vaswani_translation_run

    return shared_run(tmp_path_factory, "vaswani_tiny", build_vaswani_translation_run)


def _load(folder):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    return AutoModelForSeq2SeqLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(
        folder
    )


@torch.no_grad()
def reference_maps(model, tokenizer, sentence: str, num_beams: int, max_new_tokens=NEW_TOKENS):
    """``(source_ids, generated, maps)``: the decoded output and its cross-attention
    [layers, heads, output, source], read from the model's own ``cross_attentions``."""
    source = tokenizer(sentence)["input_ids"]
    input_ids = torch.tensor([source])
    generated = model.generate(
        input_ids=input_ids,
        attention_mask=torch.ones_like(input_ids),
        num_beams=num_beams,
        max_new_tokens=max_new_tokens,
        do_sample=False,
    )
    out = model(input_ids=input_ids, decoder_input_ids=generated[:, :-1], output_attentions=True)
    assert len(out.cross_attentions) == LAYERS
    maps = torch.stack([layer[0] for layer in out.cross_attentions]).numpy()
    assert maps.shape == (LAYERS, HEADS, generated.shape[1] - 1, len(source))
    return source, generated[0], maps


# ---------------------------------------------------------------------------- model card
def test_push_vaswani_card_and_files(hub_server, vaswani_run, capsys):
    repo_id = "tester/vaswani-tiny"
    files, card, recorded = push_translation_run(hub_server, vaswani_run, repo_id, capsys)
    assert REMOTE_CODE_FILES <= files  # what trust_remote_code loads without hfattn
    assert (vaswani_run / "checkpoints").is_dir()
    want = {r["metric_type"]: r["value"] for r in recorded["results"]}
    assert want["bleu"] > 5.0  # it did learn something (random output scores ~0.5)
    assert {r.task_type for r in card.data.eval_results} == {"translation"}
    assert card.data.pipeline_tag == "translation"
    assert "vaswani" in card.data.tags
    assert f"| test | BLEU (sacrebleu) | {want['bleu']:.4g} |" in card.text

    rows = [line for line in card.text.splitlines() if line.startswith("| Attention |")]
    assert rows == [ATTENTION_ROW]
    assert "| Model type | `vaswani` |" in card.text
    assert "| `num_heads` | `4` |" in card.text  # the architecture table
    assert "trust_remote_code=True" in card.text
    assert "Attention Is All You Need" in card.text  # the citation


@pytest.mark.parametrize(
    ("changes", "row"),
    [
        (
            {"norm_position": "pre", "head_dim": 16, "num_heads": 8},
            "multi-head `scaled_dot`, 8 heads of dim 16, 2+2 layers (encoder+decoder), pre-LN",
        ),
        (
            {"init_method": "t-fixup", "encoder_layers": 6, "decoder_layers": 3},
            "multi-head `scaled_dot`, 4 heads of dim 8, 6+3 layers (encoder+decoder), "
            "no LayerNorm (T-Fixup)",
        ),
        (
            {"attention_score": "additive", "attention_distribution": "sparsemax"},
            "multi-head `additive` + `sparsemax`, 4 heads of dim 8, 2+2 layers "
            "(encoder+decoder), post-LN",
        ),
    ],
)
def test_card_attention_row_follows_the_config(vaswani_run, tmp_path, changes, row):
    """The row is built from config.json's fields, whatever the layer, head and norm settings."""
    import shutil

    folder = tmp_path / "run"
    shutil.copytree(vaswani_run, folder, ignore=shutil.ignore_patterns("checkpoints"))
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **changes}))
    text = render_model_card(inspect_folder(folder), "me/vaswani").text
    assert [line for line in text.splitlines() if line.startswith("| Attention |")] == [
        f"| Attention | {row} |"
    ]


# --------------------------------------------------------------------------------- Space
@pytest.fixture(scope="module")
def vaswani_space(vaswani_run, tmp_path_factory):
    """The translation Space staged for the tiny Vaswani run and launched in-process; yields
    ``(local URL, app module)``."""
    space = launch_space(vaswani_run, tmp_path_factory.mktemp("space"))
    try:
        assert "hfattn" not in (space.staged / "requirements.txt").read_text()
        yield space.url, space.app
    finally:
        space.close()


def test_vaswani_space_selects_layer_and_head(vaswani_space, vaswani_run):
    url, _ = vaswani_space
    client = Client(url, verbose=False)
    params = {
        p["parameter_name"]: p
        for p in client.view_api(return_format="dict")["named_endpoints"]["/translate"][
            "parameters"
        ]
    }
    assert params["layer"]["parameter_default"] == str(LAYERS)  # the last layer
    assert params["head"]["parameter_default"] == "mean"
    # the API advertises what it accepts: the layer numbers as strings
    layer_type = params["layer"]["python_type"]["type"]
    assert layer_type == f"Literal[{', '.join(repr(str(n)) for n in range(1, LAYERS + 1))}]"

    text = "\n".join(SENTENCES)
    want = expected_translations(vaswani_run, SENTENCES, 2)
    assert len(set(want)) == len(want)  # trained: different dates, different outputs
    default_text, default_plot = client.predict(text, 2, NEW_TOKENS, api_name="/translate")
    assert default_text.split("\n") == want
    plots = {}
    last = str(LAYERS)
    for layer, head in [(last, "mean"), ("1", "mean"), ("1", "3"), (last, "1")]:
        answer, plot = client.predict(text, 2, NEW_TOKENS, layer, head, api_name="/translate")
        assert answer == default_text, (layer, head)  # the selection only changes the plot
        plots[layer, head] = plot["plot"]
    assert plots[last, "mean"] == default_plot["plot"]  # default: last layer, mean over heads
    assert len(set(plots.values())) == len(plots)  # each selection draws another map

    with pytest.raises(AppError, match="not in the list of choices"):
        client.predict(SENTENCES[0], 2, NEW_TOKENS, str(LAYERS + 1), "mean", api_name="/translate")
    with pytest.raises(AppError, match="not in the list of choices"):
        client.predict(SENTENCES[0], 2, NEW_TOKENS, "1", str(HEADS + 1), api_name="/translate")


def test_space_heatmap_is_the_selected_map(vaswani_space, vaswani_run):
    """Called directly: the heatmap holds exactly the model's cross-attention of the chosen
    layer and head (or their mean), titled with the choice; bad choices name the field."""
    import gradio as gr

    _, app = vaswani_space
    model, tokenizer = _load(vaswani_run)
    context = app.frame.Context(model, tokenizer, app.frame.Limits(max_new_tokens=40), "local")
    selectors = app._attention_selectors(context)
    assert [c.value for c in selectors] == [str(LAYERS), "mean"]
    assert [v for _, v in selectors[0].choices] == ["1", "2"]
    assert [v for _, v in selectors[1].choices] == ["mean", "1", "2", "3", "4"]
    assert all(c.interactive for c in selectors)

    source, generated, maps = reference_maps(model, tokenizer, SENTENCES[0], 3)
    output_tokens = tokenizer.convert_ids_to_tokens(generated[1:].tolist())
    cases = [
        (None, "mean", maps[-1].mean(0), f"layer 2 of 2, mean over {HEADS} heads"),
        (1, "mean", maps[0].mean(0), f"layer 1 of 2, mean over {HEADS} heads"),
        (1, "4", maps[0, 3], f"layer 1 of 2, head 4 of {HEADS}"),
        ("2", 2, maps[1, 1], f"layer 2 of 2, head 2 of {HEADS}"),
    ]
    for layer, head, want, title in cases:
        text, plot = app.translate(context, SENTENCES[0], 3, NEW_TOKENS, layer, head)
        drawn_title, sources, outputs, weights = heatmap(plot)
        assert drawn_title == f"Cross-attention, {title}"
        assert sources == tokenizer.convert_ids_to_tokens(source)
        assert outputs == output_tokens
        np.testing.assert_allclose(weights, want, atol=1e-5, err_msg=f"{layer}, {head}")
        assert np.allclose(weights.sum(axis=1), 1.0, atol=1e-4)  # a distribution per output
    assert not np.allclose(maps[0, 0], maps[0, 1], atol=1e-3)  # heads do differ

    for layer, head, message in [
        (3, "mean", "Attention layer must be between 1 and 2, got 3"),
        (1, "5", "Attention head must be between 1 and 4, got 5"),
        (0, "mean", "Attention layer must be a layer number"),
        (1, "all", "Attention head must be 'mean' or a head number"),
    ]:
        with pytest.raises(gr.Error, match=message):
            app.translate(context, SENTENCES[0], 1, NEW_TOKENS, layer, head)


def test_space_selectors_are_a_single_choice_for_bahdanau(vaswani_space, vaswani_run):
    """An RNN encoder-decoder has one attention with one head: one fixed choice each, and the
    heatmap is the same whatever is passed for them."""
    from transformers import AutoModelForSeq2SeqLM

    from hfattn import BahdanauConfig

    _, app = vaswani_space
    _, tokenizer = _load(vaswani_run)
    config = BahdanauConfig(
        vocab_size=len(tokenizer),
        attention="bahdanau",
        embedding_dim=8,
        encoder_hidden_size=8,
        decoder_hidden_size=16,
    )
    torch.manual_seed(0)
    model = AutoModelForSeq2SeqLM.from_config(config).eval()
    context = app.frame.Context(model, tokenizer, app.frame.Limits(), "local")
    layer, head = app._attention_selectors(context)
    assert (layer.choices, layer.value, layer.interactive) == ([("1", "1")], "1", False)
    assert [v for _, v in head.choices] == ["mean", "1"] and not head.interactive
    _, default = app.translate(context, SENTENCES[0], 1, 5)
    _, explicit = app.translate(context, SENTENCES[0], 1, 5, 1, "1")
    assert heatmap(default)[0] == "Cross-attention: output token × source token"
    np.testing.assert_array_equal(heatmap(default)[3], heatmap(explicit)[3])


# ------------------------------------------------------------------------------ plot CLI
def test_plot_attention_layer_and_head(vaswani_run, tmp_path, capsys):
    from matplotlib.image import imread

    from hfattn.plotting.figures import attention_figure

    model, tokenizer = _load(vaswani_run)
    _, _, maps = reference_maps(model, tokenizer, SENTENCES[1], 1, max_new_tokens=64)
    for kwargs, want, title in [
        ({}, maps[-1].mean(0), "layer 2 of 2, mean over 4 heads"),
        ({"layer": 1, "head": 2}, maps[0, 1], "layer 1 of 2, head 2 of 4"),
    ]:
        axes = attention_figure(str(vaswani_run), SENTENCES[1], **kwargs).axes[0]
        assert axes.get_title() == f"Cross-attention, {title}"
        np.testing.assert_allclose(np.asarray(axes.images[0].get_array()), want, atol=1e-5)

    out = tmp_path / "align.png"
    args = ["plot", "attention", str(vaswani_run), SENTENCES[1], "--out", str(out)]
    assert cli_main([*args, "--layer", "1", "--head", "3"]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {out}"
    assert imread(out).shape[2] in (3, 4) and out.stat().st_size > 5_000
    assert cli_main([*args, "--head", "mean"]) == 0
    capsys.readouterr()

    assert cli_main([*args, "--layer", "3"]) == 2
    assert (
        "error: layer must be between 1 and 2 (the model has 2 cross-attention layers); got 3"
        in capsys.readouterr().err
    )
    assert cli_main([*args, "--head", "5"]) == 2
    assert "head must be between 1 and 4 (the model has 4 attention heads); got 5" in (
        capsys.readouterr().err
    )
    for bad in (["--layer", "0"], ["--head", "first"]):
        with pytest.raises(SystemExit):
            cli_main([*args, *bad])
    assert "expected 'mean' or a positive head number, got 'first'" in capsys.readouterr().err
    assert cli_main(["plot", "noam", "--layer", "1", "--out", str(tmp_path / "n.png")]) == 2
    assert "--layer and --head apply to the attention plot only" in capsys.readouterr().err


def test_plot_attention_is_unchanged_for_bahdanau(vaswani_run, tmp_path, capsys):
    """One attention, one head: the same figure and title as before, and --layer 2 is refused."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from hfattn import BahdanauConfig
    from hfattn.plotting.figures import attention_figure

    tokenizer = AutoTokenizer.from_pretrained(vaswani_run)
    config = BahdanauConfig(vocab_size=len(tokenizer), embedding_dim=8, encoder_hidden_size=8)
    torch.manual_seed(0)
    folder = tmp_path / "bahdanau"
    AutoModelForSeq2SeqLM.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    default = attention_figure(str(folder), SENTENCES[0]).axes[0]
    explicit = attention_figure(str(folder), SENTENCES[0], layer=1, head=1).axes[0]
    assert default.get_title() == explicit.get_title() == "Attention alignment"
    np.testing.assert_array_equal(default.images[0].get_array(), explicit.images[0].get_array())
    args = ["plot", "attention", str(folder), SENTENCES[0], "--out", str(tmp_path / "a.png")]
    assert cli_main([*args, "--layer", "2"]) == 2
    assert "layer must be between 1 and 1 (the model has 1 cross-attention layer); got 2" in (
        capsys.readouterr().err
    )


# ----------------------------------------------------------------------- fresh environment
@pytest.mark.slow
def test_vaswani_space_from_hub_runs_without_hfattn(
    hub_server, vaswani_run, fresh_python, tmp_path
):
    """The pushed model + Space, downloaded and started like on Spaces (``python app.py``) in
    an environment without hfattn, translate like hfattn does and draw the chosen head; the
    card's usage snippet runs there too."""
    from tests.helpers.fresh_env import run_card_snippet, space_from_hub

    repo_id = "tester/vaswani-e2e"
    push_model_folder(vaswani_run, repo_id, space=True)
    assert REMOTE_CODE_FILES <= set(hub_server.files(repo_id))
    with space_from_hub(hub_server, repo_id, fresh_python, tmp_path) as (_, url):
        client = Client(url, verbose=False)
        text, plot = client.predict(
            "\n".join(SENTENCES), 3, NEW_TOKENS, "1", "2", api_name="/translate"
        )
        _, default_plot = client.predict(SENTENCES[0], 3, NEW_TOKENS, api_name="/translate")
    assert text.split("\n") == expected_translations(vaswani_run, SENTENCES, 3)
    assert not np.allclose(heatmap(plot)[3], heatmap(default_plot)[3])  # layer 1, head 2 vs 2, mean

    card = ModelCard.load(HfApi(endpoint=hub_server.url).hf_hub_download(repo_id, "README.md"))
    env = {"HF_ENDPOINT": hub_server.url, "HF_HOME": str(tmp_path / "hf_home"), "HF_TOKEN": ""}
    translation = run_card_snippet(fresh_python, card.text, tmp_path, **env)
    assert translation == expected_translations(vaswani_run, ["April 22, 2019"], 4, 50)[0]
