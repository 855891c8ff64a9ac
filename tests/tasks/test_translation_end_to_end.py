"""The translation task end to end: tiny runs through ``hfattn train`` / ``translate`` /
``evaluate`` (Marian here: the task knows no model family; the Bahdanau model has its own
tests), their teacher-forced scores against the formula, n-best lists, training by a token
budget, a unigram tokenizer, ``hfattn plot attention`` and the ``hfattn-translation``
pipeline."""

from __future__ import annotations

import itertools
import json
import math
import os
import subprocess
import sys

import pytest
import torch

from hfattn.batching.seq2seq import IGNORE_INDEX
from hfattn.cli import main
from hfattn.evaluation.translation import teacher_forced_scores
from hfattn.recipes import load_recipe
from hfattn.tasks import get_task
from hfattn.tasks.translation.inference import translate_texts


@pytest.fixture(scope="module")
def marian_run(tmp_path_factory):
    from tests.helpers.tiny_runs import build_translation_run

    return build_translation_run(tmp_path_factory.mktemp("tr") / "marian", model="marian")


def test_teacher_forced_scores_match_the_formula(marian_run):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from hfattn.batching.seq2seq import pad_pairs

    tok = AutoTokenizer.from_pretrained(marian_run)
    model = AutoModelForSeq2SeqLM.from_pretrained(marian_run).eval()
    src = ["April 22, 2019", "1 Mar 1998", "12/31/1999"]
    tgt = ["2019-04-22", "1998-03-01", "1999-12-31"]
    batch = pad_pairs(tok(src)["input_ids"], tok(text_target=tgt)["input_ids"], tok.pad_token_id)
    scores = teacher_forced_scores(model, [batch])
    with torch.no_grad():
        logp = model(**batch).logits.log_softmax(-1)
    nll, hits, n = 0.0, 0, 0
    for b, labels in enumerate(batch["labels"].tolist()):
        for t, y in enumerate(labels):
            if y != IGNORE_INDEX:
                nll -= logp[b, t, y].item()
                hits += int(logp[b, t].argmax().item() == y)
                n += 1
    assert scores["num_tokens"] == n
    assert scores["loss"] == pytest.approx(nll / n, rel=1e-5)
    assert scores["perplexity"] == pytest.approx(math.exp(nll / n), rel=1e-5)
    assert scores["token_accuracy"] == pytest.approx(hits / n)


def test_training_by_max_tokens_trains_the_size_cut_batches_in_order(tmp_path):
    """``hfattn train`` with ``training.max_tokens`` trains the batches of
    :meth:`PairBatches.order` one after the other: the cumulative target tokens of
    ``metrics.jsonl`` are their sums, step by step; the recipe saved with the model keeps the
    setting."""
    from hfattn.orchestration.run import build_job
    from hfattn.storage.run_folder import metrics_path
    from tests.helpers.tiny_runs import build_translation_run

    out = build_translation_run(
        tmp_path / "by_size",
        steps=20,
        training={"max_tokens": 700, "batch_size": 64, "eval_every": None, "log_every": 5},
    )
    recipe = load_recipe(out / "recipe.yaml")
    assert recipe.training.max_tokens == 700
    batches = build_job(recipe).batches
    order = batches.order(0)
    rows = [len(r) for r in order[:20]]
    assert len(set(rows)) > 1 and max(rows) <= 64  # batches by size, not by count
    first = itertools.islice(batches.epoch(0), 20)
    trained = [batch["labels"].ne(IGNORE_INDEX).sum().item() for batch in first]
    records = [json.loads(line) for line in metrics_path(out).read_text().splitlines()]
    logged = {r["step"]: r["tokens"] for r in records if r["split"] == "train"}
    assert logged == {step: sum(trained[:step]) for step in (5, 10, 15, 20)}


def test_a_unigram_run_saves_a_unigram_tokenizer_that_loads_without_hfattn(tmp_path, capsys):
    """``tokenizer.type: unigram`` trains end to end: the folder's ``tokenizer.json`` holds the
    unigram model, ``AutoTokenizer`` reads it back as the run built it, and ``hfattn
    translate`` writes text from it."""
    import transformers

    from tests.helpers.tiny_runs import build_translation_run

    out = build_translation_run(
        tmp_path / "unigram",
        steps=20,
        tokenizer={"type": "unigram", "vocab_size": 120},
        training={"eval_every": None},
    )
    saved = json.loads((out / "tokenizer.json").read_text())
    assert saved["model"]["type"] == "Unigram" and len(saved["model"]["vocab"]) <= 120
    loaded = transformers.AutoTokenizer.from_pretrained(out)
    source = "April 22, 2019"
    assert loaded.decode(loaded(source)["input_ids"], skip_special_tokens=True) == source
    assert main(["translate", str(out), source]) == 0
    assert capsys.readouterr().out.strip()


def test_n_best_lists_start_with_the_translation_and_hold_each_beam(marian_run):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from hfattn.tasks.translation.inference import translate_n_best

    model = AutoModelForSeq2SeqLM.from_pretrained(marian_run)
    tokenizer = AutoTokenizer.from_pretrained(marian_run)
    sources = ["April 22, 2019", "", "3/4/1999", "the 1st of May 2001"]
    n_best = translate_n_best(
        model, tokenizer, sources, num_beams=3, num_return_sequences=3, max_new_tokens=16
    )
    assert n_best[1] == [""] and [len(n_best[i]) for i in (0, 2, 3)] == [3, 3, 3]
    best = translate_texts(model, tokenizer, sources, num_beams=3, max_new_tokens=16)
    assert [hypotheses[0] for hypotheses in n_best] == best


def test_run_folder_translate_and_evaluate_commands(marian_run, tmp_path, capsys):
    results = json.loads((marian_run / "eval_results.json").read_text())
    assert results["task_type"] == "translation"
    test = {r["metric_type"]: r["value"] for r in results["results"] if r["split"] == "test"}
    assert set(test) >= {"bleu", "chrf", "exact_match", "token_accuracy", "loss"}
    assert 0 <= test["bleu"] <= 100 and 0 <= test["exact_match"] <= 1
    assert test["loss"] < math.log(
        len(json.loads((marian_run / "tokenizer.json").read_text())["model"]["vocab"])
    )

    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(marian_run)
    model = AutoModelForSeq2SeqLM.from_pretrained(marian_run)
    sources = ["April 22, 2019", "", "3/1/1998"]
    want = translate_texts(model, tok, sources, num_beams=2, max_new_tokens=128)
    assert want[1] == "" and want[0]
    # the command refuses a blank source in one line, as classify does
    assert main(["translate", str(marian_run), *sources]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == "error: source 1 is blank: there is nothing to translate"
    given = [sources[0], sources[2]]
    assert main(["translate", str(marian_run), *given]) == 0
    assert capsys.readouterr().out.split("\n")[:2] == [want[0], want[2]]  # beam 2 (saved)
    file = tmp_path / "in.txt"
    file.write_text("\n".join(given), encoding="utf-8")
    assert main(["translate", str(marian_run), "--file", str(file), "--num-beams", "2"]) == 0
    assert capsys.readouterr().out.split("\n")[:2] == [want[0], want[2]]
    assert main(["translate", str(marian_run), "x", "--batch-size", "0"]) == 2
    assert "--batch-size must be >= 1" in capsys.readouterr().err

    recipe = load_recipe(marian_run / "recipe.yaml")
    again = get_task("translation").evaluate_folder(marian_run, recipe, ["test"])["test"]
    for name in ("bleu", "chrf", "exact_match", "token_accuracy", "loss"):
        assert again[name] == pytest.approx(test[name], rel=1e-6), name


@pytest.mark.slow
def test_evaluate_writes_nothing_under_hf_home(marian_run, tmp_path):
    """The metrics ship with the package: ``hfattn evaluate``, in a fresh interpreter whose
    ``HF_HOME`` is an empty folder, scores the run as training did and leaves that folder empty
    (``evaluate.load`` wrote ``HF_HOME/modules``)."""
    results = json.loads((marian_run / "eval_results.json").read_text())
    bleu = next(
        r["value"]
        for r in results["results"]
        if r["split"] == "test" and r["metric_type"] == "bleu"
    )
    empty = tmp_path / "hf_home"
    empty.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "hfattn", "evaluate", str(marian_run), "--split", "test"],
        env={**os.environ, "HF_HOME": str(empty), "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if " bleu " in line)
    assert float(row.split("│")[2]) == pytest.approx(bleu, abs=1e-4)
    assert list(empty.iterdir()) == []


def test_plot_attention_draws_the_alignment_of_a_translation(tmp_path, capsys):
    from matplotlib.image import imread
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from hfattn.tasks.translation.inference import alignment
    from tests.helpers.tiny_runs import build_translation_run

    run = build_translation_run(tmp_path / "bahdanau", model="bahdanau", steps=20)
    tok = AutoTokenizer.from_pretrained(run)
    model = AutoModelForSeq2SeqLM.from_pretrained(run)
    source, output, weights = alignment(model, tok, "April 22, 2019", num_beams=2)
    assert source == tok.convert_ids_to_tokens(tok("April 22, 2019")["input_ids"])
    assert weights.shape == (len(output), len(source))
    assert abs(weights.sum(1) - 1).max() < 1e-5  # softmax rows over the source tokens
    out = tmp_path / "align.png"
    assert main(["plot", "attention", str(run), "April 22, 2019", "--out", str(out)]) == 0
    assert imread(out).shape[2] in (3, 4) and out.stat().st_size > 5_000
    assert main(["plot", "attention", str(run)]) == 2
    assert 'usage: hfattn plot attention DIR "source sentence"' in capsys.readouterr().err
    assert main(["plot", "attention", str(run), " ", "--out", str(out)]) == 2
    assert "the source sentence is empty" in capsys.readouterr().err


@pytest.mark.parametrize("family", ["bahdanau", "vaswani"])
def test_the_translation_pipeline_translates_as_the_translate_command(tmp_path, family):
    """transformers 5 refuses ``pipeline("translation")``; ``import hfattn.models`` registers
    ``pipeline("hfattn-translation")`` (``TranslationPipeline``), which loads a saved run with
    ``AutoModelForSeq2SeqLM`` and translates as ``hfattn translate`` does, with generation
    settings at construction or per call on top of the run's ``generation_config.json``."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, pipeline

    from hfattn.models import TranslationPipeline
    from tests.helpers.tiny_runs import build_translation_run

    run = build_translation_run(tmp_path / family, model=family, steps=20)
    translator = pipeline("hfattn-translation", model=str(run), num_beams=2, max_new_tokens=16)
    assert isinstance(translator, TranslationPipeline)
    sources = ["April 22, 2019", "3/4/1999", "the 1st of May 2001"]
    model = AutoModelForSeq2SeqLM.from_pretrained(run)
    tokenizer = AutoTokenizer.from_pretrained(run)
    expected = translate_texts(model, tokenizer, sources, num_beams=2, max_new_tokens=16)
    assert all(expected) and len(set(expected)) == len(sources)
    assert [out[0]["translation_text"] for out in translator(sources)] == expected
    assert translator(sources[0]) == [{"translation_text": expected[0]}]
    greedy = translate_texts(model, tokenizer, sources[:1], num_beams=1, max_new_tokens=3)
    assert translator(sources[0], num_beams=1, max_new_tokens=3)[0]["translation_text"] == greedy[0]
    assert len(translator(sources[0], num_return_sequences=2)) == 2
    direct = TranslationPipeline(model=model, tokenizer=tokenizer, num_beams=2, max_new_tokens=16)
    assert direct(sources[1]) == [{"translation_text": expected[1]}]
