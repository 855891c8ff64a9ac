"""How a translation run's figures are decoded: the end of ``hfattn train`` and ``hfattn
evaluate`` score with the model's saved generation settings (beam 2 in the tiny recipe),
``--num-beams`` / ``--max-new-tokens`` change them, ``--engine ctranslate2`` scores the run's
CTranslate2 export, and bad options fail in one line before any model loads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hfattn.cli import main
from hfattn.evaluation.translation import text_scores
from hfattn.recipes import load_recipe
from hfattn.tasks.translation.encoding import load_pairs, reference_text
from hfattn.tasks.translation.inference import translate_texts
from hfattn.tasks.translation.job import scoring_decoding

TEXT_METRICS = ("bleu", "chrf", "exact_match")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A tiny Vaswani run (saved generation settings: beam 2, 16 new tokens), trained once for
    the session (``hfattn evaluate`` writes nothing into it; the export test copies it)."""
    from tests.helpers.shared_runs import shared_run
    from tests.helpers.tiny_runs import build_vaswani_translation_run

    return shared_run(tmp_path_factory, "vaswani_tiny", build_vaswani_translation_run)


def evaluate(monkeypatch, *args: str) -> dict:
    """``hfattn evaluate`` with ``args``; returns the table it printed, as ``{split: scores}``."""
    import hfattn.commands.report as report

    printed = {}
    monkeypatch.setattr(report, "print_metrics", lambda metrics, **_: printed.update(metrics))
    assert main(["evaluate", *args]) == 0
    return printed


def test_saved_generation_settings_become_the_scoring_decoding():
    saved = {"num_beams": 4, "max_new_tokens": None, "early_stopping": True,
             "length_penalty": 0.6, "no_repeat_ngram_size": 4, "do_sample": True,
             "temperature": 0.7}  # fmt: skip
    assert scoring_decoding(saved, 128) == {
        "num_beams": 4,
        "max_new_tokens": 128,
        "no_repeat_ngram_size": 4,
        "early_stopping": True,
        "length_penalty": 0.6,
        "do_sample": False,
    }
    assert scoring_decoding(saved, 128, num_beams=1, max_new_tokens=9) == {
        "num_beams": 1,
        "max_new_tokens": 9,
        "no_repeat_ngram_size": 4,
        "do_sample": False,
    }
    assert scoring_decoding({}, 32) == {"num_beams": 1, "max_new_tokens": 32, "do_sample": False}


@pytest.mark.slow
def test_train_and_evaluate_score_with_the_saved_beam_search(run, monkeypatch):
    generation = json.loads((run / "generation_config.json").read_text())
    assert generation["num_beams"] == 2
    results = json.loads((run / "eval_results.json").read_text())["results"]
    trained = {r["metric_type"]: r["value"] for r in results if r["split"] == "test"}

    default = evaluate(monkeypatch, str(run))["test"]
    beam2 = evaluate(monkeypatch, str(run), "--num-beams", "2")["test"]
    greedy = evaluate(monkeypatch, str(run), "--num-beams", "1")["test"]
    for name in TEXT_METRICS:
        assert default[name] == pytest.approx(trained[name], abs=1e-9), name
        assert default[name] == pytest.approx(beam2[name], abs=1e-9), name
    assert default["loss"] == pytest.approx(greedy["loss"])  # teacher-forced: no decoding

    # the scores are those of the model's own translations, beam 2 and greedy, which differ
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    recipe = load_recipe(run / "recipe.yaml")
    sources, targets = load_pairs(recipe.data)["test"]
    tokenizer = AutoTokenizer.from_pretrained(run)
    model = AutoModelForSeq2SeqLM.from_pretrained(run)
    references = [reference_text(tokenizer, t) for t in targets]
    by_beams = {
        beams: translate_texts(model, tokenizer, sources, num_beams=beams, max_new_tokens=16)
        for beams in (1, 2)
    }
    assert by_beams[1] != by_beams[2]
    assert text_scores(by_beams[2], references)["chrf"] == pytest.approx(default["chrf"])
    assert text_scores(by_beams[1], references)["chrf"] == pytest.approx(greedy["chrf"])
    assert greedy["chrf"] != pytest.approx(default["chrf"])

    short = evaluate(monkeypatch, str(run), "--max-new-tokens", "3")["test"]
    assert short["chrf"] < default["chrf"]  # three tokens cannot spell a date


def test_ctranslate2_engine_scores_the_export_as_generate(run, tmp_path, monkeypatch, capsys):
    pytest.importorskip("ctranslate2")
    copy = tmp_path / "run"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("checkpoints"))
    assert main(["evaluate", str(copy), "--engine", "ctranslate2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has no CTranslate2 export" in err
    assert main(["export", str(copy), "--format", "ctranslate2", str(copy / "ct2")]) == 0
    capsys.readouterr()

    torch_greedy = evaluate(monkeypatch, str(copy), "--num-beams", "1")["test"]
    export_greedy = evaluate(monkeypatch, str(copy), "--engine", "ctranslate2", "--num-beams", "1")[
        "test"
    ]
    assert set(export_greedy) == {*TEXT_METRICS, "num_examples"}
    for name in TEXT_METRICS:  # fp32 greedy: generate()'s tokens
        assert export_greedy[name] == pytest.approx(torch_greedy[name], abs=1e-9), name
    # a single --data file is scored whole by the export too (issue 61)
    file = tmp_path / "heldout.txt"
    file.write_text("".join(f"June {d}, 2020\t2020-06-{d:02d}\n" for d in range(1, 21)))
    whole = evaluate(monkeypatch, str(copy), "--engine", "ctranslate2", "--data", str(file))
    assert list(whole) == ["heldout.txt"] and whole["heldout.txt"]["num_examples"] == 20


def char_rnn_folder(tmp_path: Path) -> Path:
    """A folder that reads as a causal-LM run up to the model load."""
    folder = tmp_path / "char_rnn"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    shutil.copy("recipes/char_rnn_shakespeare.yaml", folder / "recipe.yaml")
    return folder


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--num-beams", "0"], "error: --num-beams must be >= 1, got 0"),
        (["--max-new-tokens", "-2"], "error: --max-new-tokens must be >= 1, got -2"),
        (["--engine", "ctranslate2", "--num-beams", "0"], "error: --num-beams must be >= 1, got 0"),
    ],
)
def test_bad_decoding_options_fail_in_one_line(run, options, message, capsys):
    assert main(["evaluate", str(run), *options]) == 2
    assert capsys.readouterr().err == message + "\n"


@pytest.mark.parametrize("options", [["--num-beams", "4"], ["--engine", "ctranslate2"]])
def test_decoding_options_are_refused_for_a_run_that_does_not_decode(tmp_path, options, capsys):
    folder = char_rnn_folder(tmp_path)
    assert main(["evaluate", str(folder), *options]) == 2
    flag = options[0]
    assert capsys.readouterr().err == (
        f"error: {flag}: only a translation run decodes; {folder} is a causal-lm run\n"
    )
