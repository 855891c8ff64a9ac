"""Every command and Space decodes with the model's saved generation config unless an option
says otherwise, and shows the recipe's examples (issue 49, item 2).

The models are tiny and untrained, saved with ``save_pretrained`` next to a ``recipe.yaml``
whose ``generation:`` section holds the examples, as ``hfattn train`` leaves them: a Bahdanau
translator (one attention), a Vaswani Transformer (2 layers of 2 heads) and a char-RNN. Their
``generation_config.json`` sets settings that differ from every fallback, so that a command
that ignored them decodes otherwise.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from hfattn.cli import main
from tests.helpers.saved_runs import (
    EXAMPLES,
    LM_SAVED,
    PROMPT,
    SAVED_BEAMS,
    SAVED_NEW_TOKENS,
    SOURCES,
    load,
    translations,
)


def translate(capsys, *args: str) -> list[str]:
    """The lines ``hfattn translate ARGS`` prints (its exit status must be 0)."""
    capsys.readouterr()
    assert main(["translate", *args]) == 0
    return capsys.readouterr().out.splitlines()


# ---- the rule -----------------------------------------------------------------------------------
def test_an_option_overrides_the_saved_setting_which_overrides_the_fallback():
    from transformers import GenerationConfig

    from hfattn.tasks.decoding import TRANSLATION_FALLBACK, saved_decoding

    saved = GenerationConfig(num_beams=4, max_new_tokens=48)
    assert saved_decoding(saved, TRANSLATION_FALLBACK) == {"num_beams": 4, "max_new_tokens": 48}
    assert saved_decoding(saved, TRANSLATION_FALLBACK, num_beams=None, max_new_tokens=5) == {
        "num_beams": 4,
        "max_new_tokens": 5,
    }
    assert saved_decoding(GenerationConfig(), TRANSLATION_FALLBACK) == {
        "num_beams": 1,
        "max_new_tokens": 128,
    }
    # a generation_config.json read as a mapping, and a model without one
    assert saved_decoding({"num_beams": 2}, {"num_beams": 1}, top_k=3) == {
        "num_beams": 2,
        "top_k": 3,
    }
    assert saved_decoding(None, TRANSLATION_FALLBACK, num_beams=6)["num_beams"] == 6


# ---- hfattn translate ---------------------------------------------------------------------------
def test_translate_decodes_with_the_saved_settings(runs, capsys):
    """``max_new_tokens: 7`` saved: ``translate`` stops after 7 tokens where the 128 it once
    had written in would go on (the untrained decoder never ends)."""
    folder = runs["vaswani"]
    want = translations(folder, SOURCES, SAVED_BEAMS, SAVED_NEW_TOKENS)
    assert want != translations(folder, SOURCES, SAVED_BEAMS, 128)  # the test can tell
    assert translate(capsys, str(folder), *SOURCES) == want
    _, tokenizer = load(folder)
    for line in want:
        assert len(tokenizer(line, add_special_tokens=False)["input_ids"]) <= SAVED_NEW_TOKENS


def test_translate_options_override_the_saved_settings(runs, capsys):
    folder = runs["vaswani"]
    assert translate(
        capsys, str(folder), "--num-beams", "1", "--max-new-tokens", "2", *SOURCES
    ) == translations(folder, SOURCES, 1, 2)
    assert translate(capsys, str(folder), "--max-new-tokens", "12", *SOURCES) == translations(
        folder, SOURCES, SAVED_BEAMS, 12
    )


def test_translate_falls_back_to_greedy_and_128_tokens(runs, tmp_path, capsys):
    """A model whose generation config sets neither setting (a model saved by hand)."""
    folder = tmp_path / "unset"
    shutil.copytree(runs["vaswani"], folder)
    path = folder / "generation_config.json"
    saved = json.loads(path.read_text())
    del saved["num_beams"], saved["max_new_tokens"]
    path.write_text(json.dumps(saved))
    assert translate(capsys, str(folder), *SOURCES) == translations(folder, SOURCES, 1, 128)


def test_translate_help_names_the_saved_default(capsys):
    with pytest.raises(SystemExit) as stopped:
        main(["translate", "--help"])
    assert stopped.value.code == 0
    text = re.sub(r"\s+", " ", capsys.readouterr().out)
    assert (
        "--max-new-tokens MAX_NEW_TOKENS most tokens per translation (default: the model's saved "
        "generation config; 128 when it sets none)" in text
    )
    assert (
        "--num-beams NUM_BEAMS beam width (default: the model's saved generation config; 1, "
        "greedy, when it sets none)" in text
    )


def test_the_attention_plot_decodes_with_the_saved_settings(runs):
    from hfattn.tasks.translation.inference import cross_attention_maps

    model, tokenizer = load(runs["vaswani"])
    saved = cross_attention_maps(model, tokenizer, SOURCES[1])
    spelt_out = cross_attention_maps(
        model, tokenizer, SOURCES[1], num_beams=SAVED_BEAMS, max_new_tokens=SAVED_NEW_TOKENS
    )
    assert saved[1] == spelt_out[1] and len(saved[1]) <= SAVED_NEW_TOKENS + 1  # + <eos>
    assert (saved[2] == spelt_out[2]).all()


# ---- hfattn demo and the Spaces -----------------------------------------------------------------
@pytest.fixture
def demo_page(monkeypatch):
    """``page(folder)``: run ``hfattn demo FOLDER`` with Gradio's ``launch`` replaced by a stub
    that serves nothing, and return the built page's components as ``[(type, props)]``."""
    import gradio as gr

    built = []
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, *a, **k: built.append(self))
    monkeypatch.setattr("hfattn.commands.demo.wait_for_interrupt", lambda: None)
    monkeypatch.setenv("GRADIO_ANALYTICS_ENABLED", "False")

    def page(folder: Path) -> list[tuple[str, dict]]:
        assert main(["demo", str(folder)]) == 0
        return [(c["type"], c["props"]) for c in built.pop().config["components"]]

    return page


def component(page, kind: str, label: str | None = None) -> dict:
    """The props of the one component of ``page`` of type ``kind`` (and ``label``)."""
    (props,) = [p for t, p in page if t == kind and (label is None or p.get("label") == label)]
    return props


def test_the_translation_demo_shows_the_recipe_examples_with_the_saved_settings(runs, demo_page):
    page = demo_page(runs["bahdanau"])
    assert component(page, "dataset")["samples"] == [
        [text, SAVED_BEAMS, SAVED_NEW_TOKENS] for text in EXAMPLES
    ]
    assert component(page, "slider", "Beam width")["value"] == SAVED_BEAMS
    assert component(page, "slider", "Max new tokens")["value"] == SAVED_NEW_TOKENS
    assert (
        component(page, "textbox", "Source text (one sentence per line)")["placeholder"]
        == (EXAMPLES[0])
    )
    # one attention: no layer or head to pick, and no words about them
    header = page[0][1]["value"]
    assert "Transformer" not in header and "layer" not in header and "head" not in header
    for label in ("Attention layer (decoder cross-attention)", "Attention head"):
        assert component(page, "dropdown", label)["visible"] is False


def test_a_transformer_demo_offers_its_layers_and_heads(runs, demo_page):
    page = demo_page(runs["vaswani"])
    assert "pick one of the decoder's 2 layers and one of its 2 heads" in page[0][1]["value"]
    layer = component(page, "dropdown", "Attention layer (decoder cross-attention)")
    head = component(page, "dropdown", "Attention head")
    assert layer["visible"] is not False and head["visible"] is not False
    assert [choice[1] for choice in layer["choices"]] == ["1", "2"]
    assert [choice[1] for choice in head["choices"]] == ["mean", "1", "2"]


def test_the_text_generation_demo_starts_at_the_saved_settings(runs, demo_page):
    page = demo_page(runs["lm"])
    start = [LM_SAVED["temperature"], LM_SAVED["top_k"], 1.0, LM_SAVED["max_new_tokens"]]
    assert component(page, "dataset")["samples"] == [[PROMPT, *start]]
    sliders = [props["value"] for kind, props in page if kind == "slider"]
    assert sliders == start
