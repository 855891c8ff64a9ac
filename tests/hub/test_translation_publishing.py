"""Publishing a translation model: the pushed card (metrics, pipeline tag, attention variant,
a usage snippet that runs where hfattn is not installed), the translation Space called through
gradio_client and driven in a headless Chromium. The same Space app started from the Hub
without hfattn is ``tests/hub/test_vaswani_publishing.py``'s."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from hfattn.cli import main as cli_main
from hfattn.hub import inspect_folder, load_space_app, stage_space
from tests.helpers.browser import CHROMIUM, CHROMIUM_ARGS
from tests.helpers.fresh_env import run_card_snippet
from tests.helpers.space_helpers import SPACE_FILES, heatmap, launch_space, model_calls
from tests.helpers.translation_publishing import (
    NEW_TOKENS,
    SENTENCES,
    expected_translations,
    load_translator,
    push_translation_run,
)

MAX_INPUT_CHARS = 200
TRAIN_STEPS = 200


def _model_family() -> str:
    from transformers import CONFIG_MAPPING

    import hfattn.models  # noqa: F401  (registers the hfattn model types)

    return "bahdanau" if "bahdanau" in CONFIG_MAPPING else "marian"


MODEL = _model_family()
"""The tiny run's model family: the hfattn Bahdanau encoder-decoder (remote code on the Hub),
or the built-in Marian while that model is not in the tree."""


@pytest.fixture(scope="module")
def translation_run(tmp_path_factory) -> Path:
    """A finished tiny translation run (date normalisation, trained long enough for different
    dates to translate differently); do not modify it."""
    from hfattn.orchestration.run import run_recipe
    from hfattn.recipes import load_recipe
    from tests.helpers.recipe_helpers import write_recipe
    from tests.helpers.tiny_runs import TINY_TRANSLATION_MODELS

    run = tmp_path_factory.mktemp("runs") / f"{MODEL}_tiny"
    recipe = write_recipe(
        run.parent / "recipe",
        base={},
        name=f"{MODEL}_tiny_publishing",
        task="translation",
        output_dir=str(run),
        model=TINY_TRANSLATION_MODELS[MODEL],
        tokenizer={"type": "char"},
        data={"source": "date-normalization", "size": 1500, "test_fraction": 0.1},
        training={
            "batch_size": 32,
            "epochs": 20,
            "max_steps": TRAIN_STEPS,
            "learning_rate": 0.005,
            "log_every": 50,
            "eval_every": None,  # no validation: nothing reads it (the card: the test split)
            "save_every": None,  # (a Marian checkpoint reload unties its embeddings)
        },
        evaluation={"splits": ["test"], "batch_size": 64, "max_new_tokens": NEW_TOKENS},
        generation={"max_new_tokens": NEW_TOKENS, "num_beams": 2, "examples": [SENTENCES[0]]},
        hub={"language": ["en"], "tags": ["tiny"]},
    )
    run_recipe(load_recipe(recipe))
    if MODEL == "marian":  # ``MarianMTModel`` has no suffix the Hub code maps to a task
        config = json.loads((run / "config.json").read_text())
        config["architectures"] = ["MarianForConditionalGeneration"]
        (run / "config.json").write_text(json.dumps(config))
    return run


# ---------------------------------------------------------------------------- model card
@pytest.mark.slow
def test_push_translation_card(hub_server, translation_run, tmp_path, capsys):
    repo_id = "tester/translation-tiny"
    files, card, recorded = push_translation_run(hub_server, translation_run, repo_id, capsys)
    want = {r["metric_type"]: r["value"] for r in recorded["results"]}
    assert {r.task_type for r in card.data.eval_results} == {"translation"}
    assert {r.dataset_name for r in card.data.eval_results} == {recorded["dataset_name"]}
    assert card.data.pipeline_tag == "translation"
    assert card.data.library_name == "transformers"
    assert f"| test | chrF | {want['chrf']:.4g} |" in card.text

    config = json.loads((translation_run / "config.json").read_text())
    if MODEL == "bahdanau":  # the attention variant is named in the model details
        row = next(line for line in card.text.splitlines() if line.startswith("| Attention |"))
        assert f"`{config['attention']}`" in row
        for key in ("score", "distribution", "cell"):
            if config.get(key) is not None:
                assert f"{key} `{config[key]}`" in row
        assert "trust_remote_code=True" in card.text
    else:
        assert f"| `decoder_attention_heads` | `{config['decoder_attention_heads']}` |" in (
            card.text
        )

    # The first usage snippet runs as a user would paste it (the model downloaded from the
    # Hub) and translates the recipe's example like translate_texts does.
    snippet = re.search(r"```python\n(.*?)```", card.text, re.S).group(1)
    assert '"April 22, 2019"' in snippet  # the recipe's generation example
    translation = run_card_snippet(
        sys.executable,
        card.text,
        tmp_path,
        HF_HOME=str(tmp_path / "hf_home"),
        HF_ENDPOINT=hub_server.url,
    )
    assert translation == expected_translations(translation_run, ["April 22, 2019"], 4, 50)[0]


def test_card_names_a_model_without_attention(translation_run, tmp_path):
    """``attention: null`` (Sutskever / Cho) is stated as such; models without an
    ``attention`` field (Marian, char-RNN) get no Attention row."""
    from hfattn.hub import render_model_card

    folder = tmp_path / "run"
    shutil.copytree(translation_run, folder, ignore=shutil.ignore_patterns("checkpoints"))
    config = json.loads((folder / "config.json").read_text())
    config.update(attention=None, cell="gru", score=None)
    (folder / "config.json").write_text(json.dumps(config))
    text = render_model_card(inspect_folder(folder), "me/plain").text
    assert (
        "| Attention | none (`attention: null`, the encoder's final state only) (cell `gru`) |"
        in (text)
    )
    config.pop("attention")
    (folder / "config.json").write_text(json.dumps(config))
    assert "| Attention |" not in render_model_card(inspect_folder(folder), "me/plain").text


# --------------------------------------------------------------------------------- Space
@pytest.fixture(scope="module")
def translation_space(translation_run, tmp_path_factory):
    """The translation Space staged for the tiny run and launched in-process (inputs capped at
    :data:`MAX_INPUT_CHARS`); yields its local URL."""
    space = launch_space(
        translation_run, tmp_path_factory.mktemp("space"), max_input_chars=MAX_INPUT_CHARS
    )
    try:
        staged = {p.name for p in space.staged.iterdir() if p.is_file()}
        assert staged == SPACE_FILES | {"translation_engine.py"}  # its decoding, beside app.py
        requirements = (space.staged / "requirements.txt").read_text()
        assert "transformers>=5.24" in requirements and "hfattn" not in requirements
        yield space.url
    finally:
        space.close()


def test_translation_space_via_gradio_client(translation_space, translation_run):
    client = Client(translation_space, verbose=False)
    for beams in (1, 3):
        text, plot = client.predict("\n".join(SENTENCES), beams, NEW_TOKENS, api_name="/translate")
        want = expected_translations(translation_run, SENTENCES, beams)
        assert text.split("\n") == want, beams
        assert heatmap(plot)[1]  # the first sentence's heatmap, with its source tokens
        assert all(want)  # every sentence got a non-empty translation

    # the one-layer model's API advertises layer "1", and takes it
    params = client.view_api(return_format="dict")["named_endpoints"]["/translate"]["parameters"]
    layer = next(p for p in params if p["parameter_name"] == "layer")
    assert layer["python_type"]["type"] == "Literal['1']"
    text, _ = client.predict(SENTENCES[0], 2, NEW_TOKENS, "1", "mean", api_name="/translate")
    assert text == expected_translations(translation_run, SENTENCES[:1], 2)[0]


def test_the_space_answers_and_warns_as_the_translate_command(
    translation_space, translation_run, tmp_path, capsys, caplog
):
    """The same lines give the Space and ``hfattn translate --file`` the same translations and
    the same warnings about what became ``<unk>`` (the Space once gave none), in its log and on
    its page (``gr.Warning``). They differ on a blank line only: ``--file`` keeps one output line
    per input line (an empty one for a blank line), the Space's text box refuses it."""
    import logging

    client = Client(translation_space, verbose=False)
    caplog.set_level(logging.WARNING)

    def command(text: str) -> tuple[int, str, str, list[str]]:
        caplog.clear()
        lines = tmp_path / "lines.txt"
        lines.write_text(text, encoding="utf-8")
        status = cli_main(["translate", str(translation_run), "--file", str(lines),
                           "--num-beams", "2", "--max-new-tokens", str(NEW_TOKENS)])  # fmt: skip
        out, err = capsys.readouterr()
        return status, out, err, [r.getMessage() for r in caplog.records]

    def space(text: str) -> tuple[str, list[str]]:
        caplog.clear()
        answer, _ = client.predict(text, 2, NEW_TOKENS, api_name="/translate")
        return answer, [r.getMessage() for r in caplog.records if r.name == "frame"]

    # a --file of blank lines holds no source: the command asks for one; a blank line among
    # sources is a blank line among the translations (one output line per input line)
    assert command(" \t")[:3] == (2, "", "error: give sentences to translate or --file\n")
    status, out, _, _ = command(f"{SENTENCES[0]}\n\n{SENTENCES[1]}")
    assert status == 0 and out.split("\n")[1] == "" and all(out.split("\n")[i] for i in (0, 2))
    for text, blank in (("", 0), (" \t", 0), (f"{SENTENCES[0]}\n\n{SENTENCES[1]}", 1)):
        refusal = f"source {blank} is blank: there is nothing to translate"
        with pytest.raises(AppError, match=f"^{refusal}$"):
            client.predict(text, 2, NEW_TOKENS, api_name="/translate")
    assert cli_main(["translate", str(translation_run), ""]) == 2
    assert capsys.readouterr().err == "error: source 0 is blank: there is nothing to translate\n"

    text = f"{SENTENCES[0]} 😀\n日本\n{SENTENCES[1]}"
    status, out, err, warned = command(text)
    assert status == 0 and len(out.splitlines()) == 3
    assert warned == [
        "source 0 characters not in the vocabulary, mapped to <unk>: '😀'",
        "source 1 is all <unk>: none of its characters is in the model's vocabulary ('日', "
        "'本'); the model sees nothing of it",
    ]
    assert space(text) == (out.rstrip("\n"), warned)

    app = _space_module(translation_run, tmp_path / "staged")
    model, tokenizer = load_translator(translation_run)
    context = app.frame.Context(model, tokenizer, app.frame.Limits(), "local")
    with pytest.warns(UserWarning) as shown:  # gr.Warning outside a request: a Python warning
        assert app.translate(context, text, 2, NEW_TOKENS)[0] == out.rstrip("\n")
    assert [str(w.message) for w in shown] == warned


def test_translation_space_refuses_bad_input(translation_space):
    client = Client(translation_space, verbose=False)
    with (
        model_calls() as calls,
        pytest.raises(
            AppError,
            match=f"Source text is {MAX_INPUT_CHARS + 1} characters long; "
            f"this Space accepts at most {MAX_INPUT_CHARS}",
        ),
    ):
        client.predict("x" * (MAX_INPUT_CHARS + 1), 1, NEW_TOKENS, api_name="/translate")
    assert calls == []  # refused at once, not after translating
    with pytest.raises(AppError, match="Beam width must be between 1 and 8, got 9"):
        client.predict(SENTENCES[0], 9, NEW_TOKENS, api_name="/translate")


def _space_module(translation_run, tmp_path):
    staged = stage_space(inspect_folder(translation_run), str(translation_run), tmp_path)
    return load_space_app(staged)


def test_translate_checks_fields_and_survives_missing_attention(translation_run, tmp_path):
    """Called directly: out-of-range values name the field; a model whose forward returns no
    cross-attention (``attention: null``) translates without a plot."""
    import gradio as gr

    app = _space_module(translation_run, tmp_path)
    model, tokenizer = load_translator(translation_run)
    context = app.frame.Context(model, tokenizer, app.frame.Limits(max_new_tokens=40), "local")
    with pytest.raises(gr.Error, match="Beam width must be between 1 and 8, got 0"):
        app.translate(context, SENTENCES[0], 0, 10)
    with pytest.raises(gr.Error, match="Max new tokens must be between 1 and 40, got 41"):
        app.translate(context, SENTENCES[0], 1, 41)

    text, plot = app.translate(context, SENTENCES[0], 2, NEW_TOKENS)
    _, sources, _, weights = heatmap(plot)
    source = tokenizer(SENTENCES[0])["input_ids"]
    assert sources == tokenizer.convert_ids_to_tokens(source)
    assert weights.shape[1] == len(source)
    assert weights.shape[0] == len(tokenizer(text_target=text)["input_ids"]) or text == ""
    assert np.allclose(weights.sum(axis=1), 1.0, atol=1e-4)  # a distribution per output

    forward = model.forward

    def without_cross_attention(*args, **kwargs):
        out = forward(*args, **kwargs)
        out.cross_attentions = None
        return out

    model.forward = without_cross_attention
    assert app.translate(context, SENTENCES[0], 2, NEW_TOKENS) == (text, None)

    if MODEL == "bahdanau":  # the real thing: an RNN encoder-decoder with ``attention: null``
        from transformers import AutoConfig, AutoModelForSeq2SeqLM

        config = AutoConfig.from_pretrained(translation_run)
        config.attention = None
        plain = AutoModelForSeq2SeqLM.from_config(config).eval()
        context = app.frame.Context(plain, tokenizer, app.frame.Limits(), "local")
        text, figure = app.translate(context, f"{SENTENCES[0]}\n{SENTENCES[1]}", 2, 5)
        assert figure is None and len(text.split("\n")) == 2


# ------------------------------------------------------------------------------- browser
@pytest.mark.slow
def test_translation_in_headless_chromium(translation_space, translation_run, tmp_path):
    if not CHROMIUM.exists():
        pytest.skip("chromium is not installed (`make browser` / apt-get install chromium)")
    from playwright.sync_api import expect, sync_playwright

    want = expected_translations(translation_run, SENTENCES[:1], 4)[0]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.goto(translation_space)
            page.locator("#source textarea").fill(SENTENCES[0])
            page.get_by_label("number input for Beam width").fill("4")
            page.get_by_label("number input for Max new tokens").fill(str(NEW_TOKENS))
            page.get_by_role("button", name="Translate").click()
            output = page.locator("#translation textarea")
            expect(output).to_have_value(want, timeout=60_000)
            chart = page.locator("#alignment canvas, #alignment svg")  # drawn by Vega
            expect(chart.first).to_be_visible(timeout=30_000)
            page.screenshot(path=tmp_path / "translation.png", full_page=True)
        finally:
            browser.close()
    assert (tmp_path / "translation.png").stat().st_size > 10_000
