"""What the model commands make of text (issue 21): what the tokenizer cannot represent
(``<unk>``) is named, by one function for every command; the Reber-grammar recipe reads one
token per symbol, however the string is spaced; each task's training log says which tokenizer
it built.

The models are tiny and untrained (saved with ``save_pretrained``: ``models`` of
``conftest.py``), except one few-second training run of ``recipes/rnn_classifier_reber.yaml``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from hfattn.cli import main
from tests.helpers.bad_input import one_error_line

ROOT = Path(__file__).resolve().parents[2]
REBER_RECIPE = ROOT / "recipes" / "rnn_classifier_reber.yaml"


# ---- 1. what the tokenizer cannot represent ----------------------------------------------------
def unknown_warnings(caplog) -> list[str]:
    """The warnings of :func:`hfattn.tokenization.characters.warn_unknown`, the one function that
    names
    ``<unk>`` input for every command."""
    return [
        r.getMessage()
        for r in caplog.records
        if (r.name, r.funcName, r.levelno) == ("hfattn.tokenization.characters", "warn_unknown", 30)
    ]


def test_every_command_names_what_became_unk(models, capsys, caplog):
    caplog.set_level(logging.WARNING, logger="hfattn")
    assert main(["translate", str(models["translator"]), "lunes 😀 日本", "日本"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert unknown_warnings(caplog) == [
        "source 0 words not in the vocabulary, mapped to <unk>: '😀', '日本'",
        "source 1 is all <unk>: none of its words is in the model's vocabulary ('日本'); the "
        "model sees nothing of it",
    ]
    caplog.clear()
    assert main(["classify", str(models["classifier"]), "BPB 😀 Z", "日本", "BPBTXSEPE"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3
    assert unknown_warnings(caplog) == [
        "text 0 characters not in the vocabulary, mapped to <unk>: '😀', 'Z'",
        "text 1 is all <unk>: none of its characters is in the model's vocabulary ('日', '本'); "
        "the model sees nothing of it",
    ]
    caplog.clear()
    lm = str(models["lm"])
    assert main(["generate", lm, "--prompt", "ROMEO: 日本", "--max-new-tokens", "2"]) == 0
    assert capsys.readouterr().out.startswith("ROMEO: 日本")
    assert unknown_warnings(caplog) == [
        "prompt characters not in the vocabulary, mapped to <unk>: '日', '本'"
    ]


# ---- 2. the Reber classifier reads symbols ----------------------------------------------------
def test_the_reber_recipe_reads_one_token_per_symbol_however_spaced():
    """Once a word tokenizer read ``BPBTXSEPE`` as one ``<unk>`` (and answered "invalid")."""
    from hfattn.data.reber import load_reber
    from hfattn.recipes import load_recipe
    from hfattn.tasks.classification.encoding import build_text_tokenizer

    recipe = load_recipe(REBER_RECIPE)
    assert (recipe.tokenizer.type, recipe.tokenizer.whitespace) == ("char", "ignore")
    texts = load_reber(0).texts("train")[:500]
    tokenizer = build_text_tokenizer(recipe.tokenizer, texts, recipe.data.max_length)
    assert sorted(tokenizer.get_vocab()) == sorted(["<pad>", "<unk>", "<bos>", "<eos>", *"BEPSTVX"])
    symbols = [tokenizer.convert_tokens_to_ids(c) for c in "BPBTXSEPE"]
    for spelling in ("BPBTXSEPE", "B P B T X S E P E", " BPB\tTXS EPE\n"):
        assert tokenizer(spelling)["input_ids"] == [*symbols, tokenizer.eos_token_id]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("tokenizer.whitespace=drop", "tokenizer.whitespace: 'drop' is not one of keep, ignore"),
        ("tokenizer.type=word", "tokenizer.whitespace: ignore applies to type: char only (type "
         "is 'word')"),
    ],
)  # fmt: skip
def test_tokenizer_whitespace_is_checked_before_anything_loads(capsys, override, message):
    assert main(["train", str(REBER_RECIPE), "--set", override]) == 2
    assert one_error_line(capsys) == message


def test_a_trained_reber_classifier_reads_the_string_as_typed(tmp_path, capsys, caplog):
    """A few-step run of the recipe: the saved tokenizer drops spaces too."""
    from tests.helpers.tiny_runs import build_classification_run

    run = build_classification_run(tmp_path, "rnn_classifier_reber.yaml")
    capsys.readouterr()
    caplog.clear()
    assert main(["classify", str(run), "BPBTXSEPE", "B P B T X S E P E", "--top-k", "2"]) == 0
    first, second = capsys.readouterr().out.splitlines()
    assert first == second
    assert unknown_warnings(caplog) == []


# ---- 3. the tokenizer each task's training log names ----------------------------------------
def test_the_training_log_says_what_a_classification_tokenizer_is(caplog):
    """Once the log called it a ``joint char tokenizer (text→none)``, as if it translated."""
    from hfattn.tasks.classification.encoding import build_text_tokenizer
    from hfattn.tasks.classification.recipe import ClassificationTokenizerSection

    caplog.set_level(logging.INFO, logger="hfattn")
    section = ClassificationTokenizerSection(type="char", whitespace="ignore")
    tokenizer = build_text_tokenizer(section, ["B P T", "S X V E"], 32)
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        (
            "hfattn.tasks.classification.encoding",
            f"char tokenizer of the texts to classify: {len(tokenizer)} tokens",
        )
    ]


def test_a_translation_tokenizer_is_logged_by_the_translation_task(caplog):
    """The tokenizer builder logs nothing: each task names what it built in its own log (the
    classifier's once logged as ``hfattn.tokenization.translation``)."""
    from hfattn.tasks.translation.prepared import build_tokenizer
    from hfattn.tasks.translation.recipe import Seq2SeqTokenizerSection, TranslationRecipe

    caplog.set_level(logging.INFO, logger="hfattn")
    recipe = TranslationRecipe(tokenizer=Seq2SeqTokenizerSection(type="char"))
    tokenizer = build_tokenizer(recipe, ["ab c", "d"], ["x yz", "w"], "es")
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        (
            "hfattn.tasks.translation.prepared",
            f"joint char tokenizer (en→es): {len(tokenizer)} tokens",
        )
    ]
