"""Bad input, tried with ``hypothesis`` (issue 11): generation, translation and the Spaces.

Prompts and sources that are empty, very long (past a model's positions), full of control
characters, mixed scripts (Arabic + CJK + emoji), or not text at all (a lone surrogate, what an
undecodable command-line byte becomes), and sampling settings at and past their limits
(temperature 0 / 1e-300 / 1e4 / NaN, top-p 0 and 1, top-k 0, 1 to 64 beams) go through the
public entry points: :func:`~hfattn.tasks.causal_lm.inference.generate_text` and ``hfattn
generate``,
:func:`~hfattn.tasks.translation.inference.translate_texts` and ``hfattn translate``, and the Space
handlers called directly. Each gives a valid output (text, one translation per input) or one
clear error naming the parameter and its allowed values.

The models are the tiny trained char-RNN run (``char_rnn_run``) and untrained tiny models
built from the tiny recipes of ``tests/helpers/tiny_runs.py`` (weights do not matter here).
Tokenizers and recipes are fuzzed in ``tests/recipes/test_bad_input.py``.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hfattn.cli import main
from hfattn.commands.model_loading import load_model_and_tokenizer
from hfattn.common.assets import asset_dir
from hfattn.hub import load_space_app
from hfattn.tasks.causal_lm.inference import generate_text
from hfattn.tasks.translation.inference import translate_texts
from tests.helpers.bad_input import FUZZ as BASE_FUZZ
from tests.helpers.bad_input import MIXED_SCRIPTS, one_error_line, texts
from tests.helpers.recipe_helpers import write_recipe
from tests.helpers.tiny_runs import TINY_TRANSLATION_MODELS


def gradio_error() -> type[Exception]:
    """``gradio.Error``, imported by the tests that use it: importing gradio takes seconds,
    and every ``pytest -n`` worker imports this file to collect it."""
    import gradio

    return gradio.Error


FUZZ = settings(BASE_FUZZ, max_examples=25)
"""The budget of every property here."""

NEW_TOKENS = 3
"""New tokens per generation: the settings are under test, not the length."""

LONG = "To be, or not to be, that is the question. " * 40
"""A prompt / source of 1,760 characters: past every tiny model's positions."""

NOT_TEXT = "caf\udce9"
"""``café`` typed in Latin-1 and passed on a UTF-8 command line (byte 0xe9 → U+DCE9)."""

prompts = st.one_of(texts, st.just(LONG), st.text(alphabet=MIXED_SCRIPTS, min_size=100))
"""Any text, very long ones included."""

temperatures = st.one_of(
    st.sampled_from([0.0, 5e-324, 1e-300, 1e-5, 1.0, 1e4, 1e30, math.nan, math.inf, -1.0]),
    st.floats(0, 1e4),
)
top_ks = st.one_of(st.none(), st.sampled_from([0, 1, 10**6, -1]), st.integers(0, 100))
top_ps = st.one_of(st.none(), st.sampled_from([0.0, 1e-9, 1.0, 1.5, math.nan]), st.floats(0, 1))


# ---- fixtures --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def char_lm(char_rnn_run):
    """``(model, tokenizer)`` of the tiny trained char-RNN run."""
    return load_model_and_tokenizer(str(char_rnn_run), "AutoModelForCausalLM")


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory) -> Path:
    """A tiny random GPT-2 with 32 positions (a fixed context)."""
    from tests.helpers.tiny_pretrained import tiny_gpt2_folder

    return tiny_gpt2_folder(tmp_path_factory.mktemp("gpt2"), n_positions=32, vocab_size=300)


@pytest.fixture(scope="module")
def gpt2_lm(gpt2_folder):
    """``(model, tokenizer)`` of :func:`gpt2_folder`."""
    return load_model_and_tokenizer(str(gpt2_folder), "AutoModelForCausalLM")


def untrained_folder(root: Path, name: str, task: str, **sections) -> Path:
    """The model and tokenizer a tiny recipe of ``task`` builds (``sections`` merged into it),
    saved untrained to ``root/name`` (what a run folder holds, without the training)."""
    from hfattn.recipes import load_recipe
    from hfattn.tasks import get_task

    recipe = write_recipe(root / f"{name}_recipe", base={}, name=name, task=task, **sections)
    job = get_task(task).build_job(load_recipe(recipe))
    job.model.save_pretrained(root / name)
    job.tokenizer.save_pretrained(root / name)
    return root / name


TRANSLATION_MODELS = {
    "bahdanau": TINY_TRANSLATION_MODELS["bahdanau"],
    "vaswani": TINY_TRANSLATION_MODELS["vaswani"],
    "vaswani-learned": {
        **TINY_TRANSLATION_MODELS["vaswani"],
        "position_embedding": "learned",
        "max_position_embeddings": 16,
    },
}
"""The tiny translation models: recurrent, sinusoidal positions, 16 learned positions."""


@pytest.fixture(scope="module")
def translators(tmp_path_factory) -> dict[str, Path]:
    """Folders of the untrained :data:`TRANSLATION_MODELS` over a char tokenizer built on
    date-normalisation pairs."""
    root = tmp_path_factory.mktemp("translators")
    return {
        name: untrained_folder(
            root,
            name,
            "translation",
            model=model,
            tokenizer={"type": "char"},
            data={"source": "date-normalization", "size": 200},
        )
        for name, model in TRANSLATION_MODELS.items()
    }


@pytest.fixture(scope="module")
def classifier(tmp_path_factory) -> Path:
    """An untrained tiny ``rnn-classifier`` with attention pooling over a word tokenizer."""
    return untrained_folder(
        tmp_path_factory.mktemp("classifier"),
        "classifier",
        "classification",
        model={
            "type": "rnn-classifier",
            "embedding_dim": 8,
            "hidden_size": 8,
            "pooling": "attention",
        },
        tokenizer={"type": "word", "vocab_size": 32},
        data={"source": "reber", "max_length": 96},
    )


@pytest.fixture(scope="module")
def translation_lms(translators) -> dict[str, tuple]:
    """``(model, tokenizer)`` of each of the :func:`translators`."""
    return {
        name: load_model_and_tokenizer(str(folder), "AutoModelForSeq2SeqLM")
        for name, folder in translators.items()
    }


def space(app: str, model_and_tokenizer: tuple, **limits):
    """``(app module, context)`` of the Space ``app`` serving a loaded model, with
    ``frame.Limits(**limits)``: what the page's handlers receive."""
    module = load_space_app(asset_dir("spaces") / app)
    limits = module.frame.Limits(**limits)
    return module, module.frame.Context(*model_and_tokenizer, limits, app)


# ---- oracles ---------------------------------------------------------------------------------
def out_of_range(sampling: dict) -> list[str]:
    """The settings of ``generate_text`` outside their documented ranges."""
    allowed = {
        "temperature": lambda v: math.isfinite(v) and v >= 0,
        "top_k": lambda v: v >= 0,
        "top_p": lambda v: 0 < v <= 1,
        "num_beams": lambda v: v >= 1,
        "max_new_tokens": lambda v: v >= 1,
    }
    return [k for k, v in sampling.items() if v is not None and k in allowed and not allowed[k](v)]


def is_text(value: str) -> bool:
    """Whether ``value`` is valid Unicode text (no lone surrogate)."""
    return value == value.encode("utf-8", "replace").decode("utf-8")


def check_outcome(run, bad: list[str], error=ValueError) -> object:
    """Call ``run()``: with no ``bad`` setting it must return a value (returned here); with some,
    it must raise ``error`` whose message starts with one of their names."""
    if not bad:
        return run()
    with pytest.raises(error) as err:
        run()
    message = getattr(err.value, "message", str(err.value))  # gradio.Error keeps it apart
    assert message.startswith(tuple(bad)), (bad, message)
    return None


# ---- generate ----------------------------------------------------------------------------------
@FUZZ
@given(
    prompt=prompts,
    temperature=temperatures,
    top_k=top_ks,
    top_p=top_ps,
    num_beams=st.integers(1, 64),
    do_sample=st.booleans(),
)
@example(prompt="ROMEO:", temperature=1e-300, top_k=None, top_p=None, num_beams=1, do_sample=True)
@example(prompt="", temperature=0.0, top_k=0, top_p=1.0, num_beams=64, do_sample=False)
def test_generate_text_gives_text_or_names_the_setting(
    char_lm, prompt, temperature, top_k, top_p, num_beams, do_sample
):
    model, tokenizer = char_lm
    sampling = {"temperature": temperature, "top_k": top_k, "top_p": top_p, "num_beams": num_beams}
    text = check_outcome(
        lambda: generate_text(
            model, tokenizer, prompt, max_new_tokens=NEW_TOKENS, do_sample=do_sample, **sampling
        ),
        out_of_range(sampling),
    )
    if text is not None:
        assert text.startswith(prompt) and len(text) <= len(prompt) + NEW_TOKENS


def test_generate_text_treats_temperature_zero_and_tiny_as_greedy(char_lm):
    """Once ``1e-300`` (in range) made NaN probabilities deep inside ``generate``."""
    model, tokenizer = char_lm
    greedy = generate_text(model, tokenizer, "ROMEO:", max_new_tokens=20, do_sample=False)
    for temperature in (0.0, 1e-300, 1e-5):
        assert (
            generate_text(model, tokenizer, "ROMEO:", max_new_tokens=20, temperature=temperature)
            == greedy
        )


def test_generate_text_reads_the_end_of_a_prompt_past_the_positions(gpt2_lm, caplog):
    model, tokenizer = gpt2_lm
    text = generate_text(model, tokenizer, LONG, max_new_tokens=8, do_sample=False)
    assert text.startswith(LONG) and len(text) > len(LONG)
    assert "the model reads only its last 24" in caplog.text
    with pytest.raises(ValueError, match=r"^max_new_tokens must be < 32 .* got 32$"):
        generate_text(model, tokenizer, "ROMEO:", max_new_tokens=32)
    with pytest.raises(ValueError, match=r"^prompt is not valid text: byte 0xe9 is not UTF-8"):
        generate_text(model, tokenizer, NOT_TEXT, max_new_tokens=4)


def test_a_pretrained_recipe_leaves_room_for_the_prompt(gpt2_folder, tmp_path):
    """Checked when the model is loaded, before training, not when the sample is drawn."""
    from hfattn.orchestration.run import build_job
    from hfattn.recipes import RecipeError, load_recipe

    recipe = write_recipe(
        tmp_path,
        model=str(gpt2_folder),
        training={"mode": "packed", "block_size": 16, "seq_len": 100},  # seq_len: unused, default
        evaluation={"seq_len": 16},
        generation={"max_new_tokens": 32},
    )
    with pytest.raises(RecipeError, match=r"^generation\.max_new_tokens: 32 new tokens leave no"):
        build_job(load_recipe(recipe))


GENERATE_OK = [
    ["--prompt", ""],
    ["--prompt", "\x00\x07\r\n\u2028\x1b[31m"],
    ["--prompt", "مرحبا 你好 😀👍🏽 e\u0301"],
    ["--prompt", LONG],
    ["--prompt", "<eos>"],
    ["--temperature", "1e4"],
    ["--temperature", "1e-300"],
    ["--top-p", "1"],
    ["--top-k", "0"],
    ["--num-beams", "1"],
    ["--num-beams", "64"],
]
GENERATE_REFUSED = [
    (["--temperature", "nan"], "--temperature must be a finite number >= 0 (0 = greedy), got nan"),
    (["--temperature", "-1"], "--temperature must be a finite number >= 0 (0 = greedy), got -1.0"),
    (["--top-p", "0"], "--top-p must be in (0, 1], got 0.0"),
    (["--top-k", "-1"], "--top-k must be >= 0 (0 = off), got -1"),
    (["--num-beams", "0"], "--num-beams must be >= 1, got 0"),
    (["--seed", str(2**70)], f"--seed must be a 64-bit integer, got {2**70}"),
    (["--prompt", NOT_TEXT], "--prompt is not valid text: byte 0xe9 is not UTF-8 (at character 3)"),
]


def test_generate_command_on_bad_input(char_rnn_run, capsys):
    """Each accepted input prints text; each refused one is one line naming the option (once
    a NaN temperature, a huge seed and a lone surrogate were tracebacks)."""
    run = ["generate", str(char_rnn_run), "--max-new-tokens", str(NEW_TOKENS)]
    for options in GENERATE_OK:  # a fixed seed (an option's own comes later and wins)
        assert main([*run, "--seed", "0", *options]) == 0, options
        assert capsys.readouterr().out.strip("\n")
    for options, message in GENERATE_REFUSED:
        assert main([*run, *options]) == 2, options
        assert one_error_line(capsys) == message
    assert main([*run, "--temperature", "0"]) == 0  # 0 = greedy, as in the Space
    zero = capsys.readouterr().out
    assert main([*run, "--greedy"]) == 0
    assert capsys.readouterr().out == zero


# ---- translate -------------------------------------------------------------------------------
@FUZZ
@given(
    name=st.sampled_from(sorted(TRANSLATION_MODELS)),
    sources=st.lists(
        st.one_of(texts, st.just(LONG), st.sampled_from(["", "  ", "\n"])), max_size=4
    ),
    num_beams=st.integers(1, 64),
    max_new_tokens=st.sampled_from([1, NEW_TOKENS, 40]),
)
@example(name="bahdanau", sources=[""], num_beams=1, max_new_tokens=NEW_TOKENS)
@example(name="vaswani-learned", sources=["April 1"], num_beams=2, max_new_tokens=40)
def test_translate_texts_gives_one_translation_per_source(
    translation_lms, name, sources, num_beams, max_new_tokens
):
    """Once ``[""]`` raised ``IndexError`` and 40 new tokens past 16 learned positions a
    ``ValueError`` from inside the decoder."""
    model, tokenizer = translation_lms[name]
    out = translate_texts(
        model, tokenizer, sources, num_beams=num_beams, max_new_tokens=max_new_tokens
    )
    assert len(out) == len(sources) and all(isinstance(t, str) for t in out)
    assert [t for s, t in zip(sources, out, strict=True) if not s.strip()] == [
        "" for s in sources if not s.strip()
    ]
    limit = 16 if name == "vaswani-learned" else max_new_tokens
    assert all(len(t) <= min(limit, max_new_tokens) for t in out)  # one char per token


def test_translate_command_on_bad_input(translators, capsys):
    folder = str(translators["vaswani-learned"])
    assert main(["translate", folder, ""]) == 2
    assert one_error_line(capsys) == "source 0 is blank: there is nothing to translate"
    assert main(["translate", folder, "\x00\x07", "مرحبا 你好 😀", LONG, "--num-beams", "64"]) == 0
    assert len(capsys.readouterr().out.split("\n")) == 3 + 1
    assert main(["translate", folder, "April 1", "--max-new-tokens", "40"]) == 0
    assert capsys.readouterr().out
    assert main(["translate", folder, "April 1", NOT_TEXT]) == 2
    assert (
        one_error_line(capsys)
        == "source 1 is not valid text: byte 0xe9 is not UTF-8 (at character 3)"
    )
    assert main(["translate", folder, LONG, "--refuse-long"]) == 2
    assert "the model accepts at most 16" in one_error_line(capsys)


# ---- Spaces ------------------------------------------------------------------------------------
SPACE_LIMITS = {"max_input_chars": 300, "max_new_tokens": 8}


@pytest.fixture(scope="module")
def text_generation_space(char_lm):
    """The text-generation Space's module and context, serving the tiny char-RNN."""
    return space("text_generation", char_lm, **SPACE_LIMITS)


def space_generate(module, context, *values) -> str:
    """The last text the streaming handler yields."""
    return list(module.generate(context, *values))[-1]


@FUZZ
@given(
    prompt=st.one_of(texts, st.just(LONG[:300]), st.just(LONG[:301]), st.just(NOT_TEXT)),
    temperature=temperatures,
    top_k=st.one_of(st.sampled_from([0, 200, 201, -1]), st.integers(0, 200)),
    top_p=st.one_of(st.sampled_from([0.0, 1.0, 1.5]), st.floats(0, 1)),
    new_tokens=st.sampled_from([0, 1, NEW_TOKENS, 8, 9]),
)
@example(prompt="ROMEO:", temperature=1e-300, top_k=50, top_p=0.95, new_tokens=NEW_TOKENS)
@example(prompt=NOT_TEXT, temperature=0.8, top_k=50, top_p=0.95, new_tokens=NEW_TOKENS)
def test_text_generation_space_streams_text_or_names_the_field(
    text_generation_space, prompt, temperature, top_k, top_p, new_tokens
):
    """Once a temperature of 1e-300 (in range) failed with torch's "probability tensor
    contains inf, nan" and a lone surrogate with a bare ``TypeError``."""
    module, context = text_generation_space
    ranges = {
        "Prompt": len(prompt) <= 300 and is_text(prompt),
        "Temperature": 0 <= temperature <= 2,
        "Top-k": 0 <= top_k <= 200,
        "Top-p": 0 <= top_p <= 1,
        "New tokens": 1 <= new_tokens <= 8,
    }
    text = check_outcome(
        lambda: space_generate(module, context, prompt, temperature, top_k, top_p, new_tokens),
        [name for name, ok in ranges.items() if not ok],
        error=gradio_error(),
    )
    if text is not None:
        assert text.startswith(prompt) and len(text) <= len(prompt) + new_tokens


def test_text_generation_space_cuts_a_prompt_to_the_positions(gpt2_lm):
    """Once an ``IndexError`` from GPT-2's position table, shown as "Generation failed"."""
    module, context = space("text_generation", gpt2_lm, max_input_chars=5000)
    text = space_generate(module, context, LONG, 0.0, 0, 1.0, 8)
    assert text.startswith(LONG) and len(text) > len(LONG)
    with pytest.raises(gradio_error(), match="New tokens must be below 32 for this model"):
        space_generate(module, context, "ROMEO:", 0.0, 0, 1.0, 32)


@pytest.fixture(scope="module")
def translation_spaces(translation_lms):
    """The translation Space's module and a context per tiny translation model."""
    return {name: space("translation", lm, **SPACE_LIMITS) for name, lm in translation_lms.items()}


@FUZZ
@given(
    name=st.sampled_from(sorted(TRANSLATION_MODELS)),
    text=st.one_of(texts, st.just(LONG[:300]), st.just(LONG[:301]), st.just(NOT_TEXT)),
    num_beams=st.sampled_from([0, 1, 4, 8, 9, 64]),
    new_tokens=st.sampled_from([0, 1, NEW_TOKENS, 8, 9]),
    layer=st.sampled_from([None, 1, 2, 3, "2", "x"]),
    head=st.sampled_from(["mean", None, "1", "4", "5", 0]),
)
def test_translation_space_translates_each_line_or_names_the_field(
    translation_spaces, name, text, num_beams, new_tokens, layer, head
):
    """Layer and head are checked as numbers at once, against the model's layers and heads
    when the first sentence's attention is drawn (so only when there is a sentence)."""
    module, context = translation_spaces[name]
    layers, heads = (1, 1) if name == "bahdanau" else (2, 4)
    drawn = any(line.strip() for line in text.splitlines())

    def fits(value, count: int) -> bool:
        return not (drawn and str(value).isdigit() and int(value) > count)

    lines = text.splitlines() or [text]  # a blank line is refused, as translate --file does
    ranges = {
        "Source text": len(text) <= 300 and is_text(text) and all(s.strip() for s in lines),
        "Beam width": 1 <= num_beams <= 8,
        "Max new tokens": 1 <= new_tokens <= 8,
        "Attention layer": layer != "x" and fits(layer, layers),
        "Attention head": head != 0 and fits(head, heads),
    }
    bad = [field for field, ok in ranges.items() if not ok]
    result = check_outcome(
        lambda: module.translate(context, text, num_beams, new_tokens, layer, head),
        bad + ["source "] * ("Source text" in bad),  # the CLI's words: "source 1 is blank"
        error=gradio_error(),
    )
    if result is not None:
        translations, figure = result
        assert len(translations.split("\n")) == max(1, len(text.splitlines()))


@pytest.fixture(scope="module")
def classification_space(classifier):
    """The classification Space's module and context, serving the untrained classifier."""
    lm = load_model_and_tokenizer(str(classifier), "AutoModelForSequenceClassification")
    return space("classification", lm, **SPACE_LIMITS)


@FUZZ
@given(text=st.one_of(texts, st.just(LONG[:300]), st.just(LONG[:301]), st.just(NOT_TEXT)))
def test_classification_space_scores_labels_or_refuses(classification_space, text):
    module, context = classification_space
    valid = len(text) <= 300 and bool(text.strip()) and is_text(text)
    result = check_outcome(
        lambda: module.classify(context, text),
        [] if valid else ["Text", "text "],  # the CLI's words: "text 0 is blank"
        error=gradio_error(),
    )
    if result is not None:
        scores, weights = result
        assert math.isclose(sum(scores.values()), 1.0, rel_tol=1e-5)
        assert all(0.0 <= w <= 1.0 for _, w in weights)
