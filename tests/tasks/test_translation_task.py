"""The translation task: pair batches, metrics, references, truncation, recipes, and a tiny
end-to-end run through ``hfattn train`` / ``translate`` / ``evaluate`` (Marian here: the task
knows no model family; the Bahdanau model has its own tests)."""

from __future__ import annotations

import itertools
import json
import logging
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import sacrebleu
import torch

from hfattn.batching.seq2seq import IGNORE_INDEX, PairBatches
from hfattn.cli import main
from hfattn.evaluation import load_metric
from hfattn.evaluation.translation import teacher_forced_scores
from hfattn.orchestration.run import run_recipe
from hfattn.recipes import RecipeError, load_recipe
from hfattn.tasks import TASK_NAMES, get_task
from hfattn.tasks.translation.encoding import SourceTooLongError, encode_sources, reference_text
from hfattn.tasks.translation.inference import translate_texts
from hfattn.tokenization.translation import build_translation_tokenizer
from tests.helpers.recipe_helpers import write_recipe


@pytest.fixture(scope="module")
def marian_run(tmp_path_factory):
    from tests.helpers.tiny_runs import build_translation_run

    return build_translation_run(tmp_path_factory.mktemp("tr") / "marian", model="marian")


def listed(order) -> list[list[int]]:
    """The batches of :meth:`PairBatches.order` (arrays of pair indices) as lists."""
    return [rows.tolist() for rows in order]


def test_pair_batches_cover_each_pair_once_grouped_by_length():
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, 40, (1000,), generator=gen).tolist()
    sources = [[5] * n for n in lengths]
    targets = [[6] * (n % 7 + 1) for n in lengths]
    batches = PairBatches(sources, targets, 32, pad_token_id=0, seed=3, pool_batches=8)
    assert len(batches) == 1000 // 32
    order = batches.order(0)
    flat = [i for rows in order for i in rows]
    gen_order = torch.randperm(len(flat), generator=gen).tolist()
    assert len(flat) == len(set(flat)) == len(batches) * 32
    assert listed(batches.order(0)) == listed(order) != listed(batches.order(1))  # per epoch
    assert [b["input_ids"].tolist() for b in batches.epoch(0, start=5)] == [
        b["input_ids"].tolist() for b in list(batches.epoch(0))[5:]
    ]
    padded_share = []
    for rows, batch in zip(order, batches.epoch(0), strict=True):
        want = [lengths[i] for i in rows]
        assert batch["attention_mask"].sum(1).tolist() == want
        assert (batch["input_ids"][batch["attention_mask"] == 0] == 0).all()
        label_lengths = (batch["labels"] != IGNORE_INDEX).sum(1).tolist()
        assert label_lengths == [n % 7 + 1 for n in want]
        padded_share.append(1 - sum(want) / (len(want) * max(want)))
    # length grouping pads far less than batches of the same pairs in random order
    flat_batches = [[flat[j] for j in gen_order[k : k + 32]] for k in range(0, len(flat), 32)]
    random_share = [
        1 - sum(lengths[i] for i in b) / (32 * max(lengths[i] for i in b)) for b in flat_batches
    ]
    assert sum(padded_share) / len(padded_share) < 0.5 * sum(random_share) / len(random_share)


def test_pair_batches_cut_by_size_stay_within_max_tokens_and_rows():
    """``max_tokens``: every batch's padded size rows × (widest source + widest target) is
    within the budget and its rows within ``batch_size``; a batch closes only when the next
    pair of its pool would not fit; short pairs come many to a batch; every pair but those of
    the epoch's dropped last batch is trained on once."""
    gen = torch.Generator().manual_seed(1)
    lengths = torch.randint(2, 60, (3000,), generator=gen).tolist()
    sources = [[5] * n for n in lengths]
    targets = [[6] * (n // 2 + 1) for n in lengths]
    budget, cap = 600, 64
    batches = PairBatches(
        sources, targets, cap, pad_token_id=0, seed=3, pool_batches=4, max_tokens=budget
    )
    widest = max(lengths) + max(lengths) // 2 + 1
    assert batches.min_rows == budget // widest
    for epoch in (0, 1):
        order = batches.order(epoch)
        flat = [i for rows in order for i in rows]
        assert len(flat) == len(set(flat))
        assert len(sources) - len(flat) <= cap  # only the epoch's last batch is dropped
        for rows in order:
            size = len(rows) * (
                max(lengths[i] for i in rows) + max(lengths[i] // 2 + 1 for i in rows)
            )
            assert size <= budget and batches.min_rows <= len(rows) <= cap
    order = batches.order(0)
    assert len(batches) == len(order)
    assert listed(batches.order(0)) == listed(order) != listed(batches.order(1))
    for rows, batch in zip(order, batches.epoch(0), strict=True):
        assert batch["attention_mask"].sum(1).tolist() == [lengths[i] for i in rows]
        assert (
            batch["input_ids"].shape[0] * (batch["input_ids"].shape[1] + batch["labels"].shape[1])
            <= budget
        )
    rows_by_width = sorted((max(lengths[i] for i in rows), len(rows)) for rows in order)
    assert rows_by_width[0][1] > 4 * rows_by_width[-1][1]  # short pairs: many rows a batch
    # by count, every batch holds the same rows whatever the length of its pairs
    fixed = PairBatches(sources, targets, 16, pad_token_id=0, seed=3, pool_batches=4)
    assert {len(rows) for rows in fixed.order(0)} == {16}


def test_pair_batches_grouped_by_target_length_pad_the_labels_least():
    """``group_by_length="target"`` sorts each pool by target length (ties by source length):
    the same pairs, each once, in batches whose labels pad far less than when the pools are
    sorted by source length, and whose sources pad more; an epoch is still seeded."""
    gen = torch.Generator().manual_seed(2)
    source_lengths = torch.randint(1, 40, (2000,), generator=gen).tolist()
    target_lengths = torch.randint(1, 40, (2000,), generator=gen).tolist()
    sources = [[5] * n for n in source_lengths]
    targets = [[6] * n for n in target_lengths]

    def padded_share(batches, key):
        real = padded = 0
        for batch in batches.epoch(0):
            mask = batch[key] != (0 if key == "input_ids" else IGNORE_INDEX)
            real, padded = real + int(mask.sum()), padded + mask.numel()
        return 1 - real / padded

    by = {
        group: PairBatches(sources, targets, 32, pad_token_id=0, seed=3, group_by_length=group)
        for group in ("source", "target")
    }
    flat = sorted(i for rows in by["target"].order(0) for i in rows)
    assert len(flat) == len(set(flat)) == len(by["target"]) * 32
    assert listed(by["target"].order(0)) == listed(by["target"].order(0))
    assert listed(by["target"].order(0)) != listed(by["target"].order(1))
    source_labels = padded_share(by["source"], "labels")
    target_labels = padded_share(by["target"], "labels")
    assert target_labels < 0.2 * source_labels
    assert padded_share(by["target"], "input_ids") > padded_share(by["source"], "input_ids")
    with pytest.raises(ValueError, match="group_by_length must be one of source, target"):
        PairBatches(sources, targets, 32, pad_token_id=0, group_by_length="both")


def test_pair_batches_refuse_a_budget_below_the_longest_pair():
    with pytest.raises(
        ValueError,
        match=r"training.max_tokens=20 is smaller than the longest source plus the longest target \(21 tokens\)",
    ):
        PairBatches([[1] * 12, [1] * 3], [[2] * 9, [2] * 2], 1, pad_token_id=0, max_tokens=20)


def test_process_shares_of_a_batch_cover_its_rows_once():
    """Each process takes rows ⌊i·B/P⌋ to ⌊(i+1)·B/P⌋ of a global batch: equal shares when P
    divides B (a batch by count), nearly equal otherwise (a batch cut by size)."""
    from hfattn.training.processes import check_rows_per_process, rows_of

    batch = {"input_ids": torch.arange(7)[:, None].repeat(1, 3), "labels": torch.arange(7)}
    shares = [rows_of(batch, i, 3, "cpu") for i in range(3)]
    assert [s["labels"].tolist() for s in shares] == [[0, 1], [2, 3], [4, 5, 6]]
    assert all(torch.equal(s["input_ids"][:, 0], s["labels"]) for s in shares)
    by_size = PairBatches(
        [[1] * 40, [1] * 3], [[2] * 40, [2] * 2], 8, pad_token_id=0, max_tokens=100
    )
    assert by_size.min_rows == 1
    check_rows_per_process(by_size, 1)
    with pytest.raises(ValueError, match="fits only 1 pair.* fewer than the 2 processes"):
        check_rows_per_process(by_size, 2)
    window = torch.arange(8)[:, None].repeat(1, 5)
    assert [rows_of(window, i, 2, "cpu")[:, 0].tolist() for i in range(2)] == [
        [0, 1, 2, 3],
        [4, 5, 6, 7],
    ]


def test_bundled_metrics_equal_sacrebleu():
    hyps = ["el gato se sentó en la alfombra", "hola", "22 de abril de 2019"]
    refs = ["el gato se sentó sobre la alfombra", "hola", "22 de abril del 2019"]
    bleu = load_metric("sacrebleu").compute(predictions=hyps, references=refs)["score"]
    chrf = load_metric("chrf").compute(predictions=hyps, references=refs)["score"]
    assert bleu == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)
    assert chrf == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score)
    em = load_metric("exact_match").compute(predictions=hyps, references=refs)
    assert em["exact_match"] == pytest.approx(1 / 3)


def test_reference_text_follows_the_tokenizer_normalisation():
    pairs = [{"en": "How are you, Tom?", "es": "¿Cómo estás, Tom?"}] * 3
    word = build_translation_tokenizer(pairs, kind="word", vocab_size=50)
    # lowercased, punctuation gone, words spaced as decode writes them; unknown words kept
    assert reference_text(word, "¿Cómo estás, Ana?") == "cómo estás ana"
    ids = word(text_target="¿Cómo estás, Tom?")["input_ids"]
    assert word.decode(ids, skip_special_tokens=True) == reference_text(word, "¿Cómo estás, Tom?")
    char = build_translation_tokenizer(pairs, kind="char")
    assert reference_text(char, "¿Cómo  estás?") == "¿Cómo estás?"


def test_sources_longer_than_the_model_are_cut_with_a_warning_or_refused(caplog):
    pairs = [{"en": "abc def", "es": "abc def"}]
    tok = build_translation_tokenizer(pairs, kind="char")
    with caplog.at_level(logging.WARNING):
        ids = encode_sources(tok, ["abc", "abcdefabcdef"], limit=6)
    assert ids[0] == tok("abc")["input_ids"] and len(ids[1]) == 6
    assert ids[1][-1] == tok.eos_token_id
    assert "1 source(s) longer than 6 tokens were truncated" in caplog.text
    with pytest.raises(
        SourceTooLongError, match="source 1 has 13 tokens; the model accepts at most 6"
    ):
        encode_sources(tok, ["abc", "abcdefabcdef"], limit=6, on_too_long="error")


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


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("task=summarize", f"task: 'summarize' is not one of {', '.join(TASK_NAMES)}"),
        (
            "tokenizer.type=sentencepiece",
            "tokenizer.type: 'sentencepiece' is not one of word, char, bpe, unigram",
        ),
        ("data.on_too_long=maybe", "data.on_too_long: 'maybe' is not one of warn, error"),
        ("data.preprocessing=keras", "data.preprocessing: 'keras' is not one of chollet, geron"),
        ("evaluation.seq_len=5", "evaluation.seq_len: not a field of evaluation ("),
        ("training.mode=stateful", "training.mode: not a field of training ("),
        ("model.score=foo", "model.score must be one of dot, scaled_dot, general"),
        ("model.distribution=softermax", "model.distribution must be one of softmax, sparsemax"),
        ("model.cell=rnn", "model.cell must be one of gru, lstm; got 'rnn'"),
        ("model.attention=global", "model.attention must be one of None, bahdanau, luong"),
        (
            "generation.early_stopping=sometimes",
            """generation.early_stopping: 'sometimes' is not one of true, false, "never\"""",
        ),
        (
            "generation.no_repeat_ngram_size=-1",
            "generation.no_repeat_ngram_size: must be an integer >= 0 (0: off), got -1",
        ),
        ("training.max_tokens=0", "training.max_tokens: must be > 0, got 0"),
        (
            "training.group_by_length=both",
            "training.group_by_length: 'both' is not one of source, target",
        ),
        (
            "training.max_tokens=100",
            "training.max_tokens: must be at least data.max_source_length + "
            "data.max_target_length (256) so that the longest pair fits in a batch, got 100",
        ),
    ],
)
def test_translation_recipe_fields_are_checked(tmp_path, override, message):
    model_type = "bahdanau" if override.startswith("model.") else "marian"
    recipe = write_recipe(tmp_path, base={"task": "translation", "model": {"type": model_type}})
    with pytest.raises(RecipeError) as err:
        load_recipe(recipe, [override])
    assert message in str(err.value)


def test_unigram_tokenizer_refuses_a_minimum_count(tmp_path):
    recipe = write_recipe(tmp_path, base={"task": "translation", "model": {"type": "bahdanau"}})
    with pytest.raises(RecipeError) as err:
        load_recipe(recipe, ["tokenizer.type=unigram", "tokenizer.min_frequency=2"])
    assert str(err.value) == (
        "tokenizer.min_frequency: 2 with type unigram: a unigram model keeps pieces by "
        "likelihood, not count; leave it at 1"
    )


def test_beam_stopping_rule_and_length_penalty_go_into_the_generation_config(tmp_path):
    """``generation.early_stopping`` / ``length_penalty`` are saved for beam search, in a
    ``GenerationConfig`` that transformers accepts, and left out for greedy search (where
    transformers refuses to save them)."""
    from transformers import GenerationConfig

    from hfattn.tasks.translation.task import TASK

    recipe = write_recipe(tmp_path, base={"task": "translation", "model": {"type": "marian"}})
    beams = load_recipe(recipe, ["generation.early_stopping=true", "generation.length_penalty=0.6"])
    defaults = TASK.generation_defaults(beams)
    assert (defaults["num_beams"], defaults["early_stopping"], defaults["length_penalty"]) == (
        4,
        True,
        0.6,
    )
    GenerationConfig(**defaults).save_pretrained(tmp_path / "beams")  # validates strictly
    never = TASK.generation_defaults(load_recipe(recipe, ["generation.early_stopping=never"]))
    assert never["early_stopping"] == "never"
    greedy = TASK.generation_defaults(load_recipe(recipe, ["generation.num_beams=1"]))
    assert "early_stopping" not in greedy and "length_penalty" not in greedy
    GenerationConfig(**greedy).save_pretrained(tmp_path / "greedy")
    with pytest.raises(RecipeError, match=r"^generation.early_stopping: True is not used"):
        load_recipe(recipe, ["generation.num_beams=1", "generation.early_stopping=true"])
    assert load_recipe("recipes/vaswani_bible_en_es.yaml").generation.early_stopping is True


def test_no_repeat_ngram_size_goes_into_the_generation_config_and_binds_decoding(tmp_path):
    """``generation.no_repeat_ngram_size`` is saved (greedy and beam) only when set, and a
    model decoding with it never repeats an n-gram of that size."""
    from transformers import GenerationConfig

    from hfattn.models import BahdanauConfig, BahdanauForConditionalGeneration
    from hfattn.tasks.translation.task import TASK

    recipe = write_recipe(tmp_path, base={"task": "translation", "model": {"type": "marian"}})
    assert "no_repeat_ngram_size" not in TASK.generation_defaults(load_recipe(recipe))
    for beams in (1, 4):
        overrides = [f"generation.num_beams={beams}", "generation.no_repeat_ngram_size=2"]
        defaults = TASK.generation_defaults(load_recipe(recipe, overrides))
        assert defaults["no_repeat_ngram_size"] == 2
        GenerationConfig(**defaults).save_pretrained(tmp_path / f"beams{beams}")
    torch.manual_seed(0)
    config = BahdanauConfig(vocab_size=12, embedding_dim=8, encoder_hidden_size=8,
                            decoder_hidden_size=16, pad_token_id=0, bos_token_id=1,
                            eos_token_id=2, decoder_start_token_id=1)  # fmt: skip
    model = BahdanauForConditionalGeneration(config).eval()
    ids = torch.tensor([[5, 6, 7, 8, 2]])
    plain = model.generate(input_ids=ids, max_new_tokens=20, min_new_tokens=20)[0].tolist()
    bound = model.generate(input_ids=ids, max_new_tokens=20, min_new_tokens=20,
                           no_repeat_ngram_size=2)[0].tolist()  # fmt: skip
    pairs = list(zip(bound, bound[1:], strict=False))
    assert len(set(pairs)) == len(pairs)
    assert len(set(zip(plain, plain[1:], strict=False))) < len(plain) - 1  # untrained: loops


@pytest.mark.parametrize(
    "path",
    sorted((Path(__file__).resolve().parents[2] / "recipes").glob("*.yaml")),
    ids=lambda p: p.stem,
)
def test_shipped_recipes_validate(path):
    recipe = load_recipe(path)
    assert recipe.name == path.stem


SPA_RECIPES = {
    "bahdanau_spa_eng": (
        ["model.embedding_dim=8", "model.encoder_hidden_size=16", "model.decoder_hidden_size=32",
         "data.train_size=200"],
        {"cell": "lstm", "encoder_hidden_size": 16, "bridge": "concat", "attention": "bahdanau"},
        20,  # Géron's split: 200 train pairs, the other 40 halved
    ),
    "vaswani_spa_eng_geron": (
        ["model.d_model=16", "model.head_dim=8", "model.ffn_dim=16", "data.train_size=200"],
        {"encoder_layers": 2, "decoder_layers": 2, "num_heads": 8, "head_dim": 8,
         "ffn_dim": 16, "position_embedding": "sinusoidal", "max_position_embeddings": 50},
        20,  # Géron's split, as the Bahdanau recipe
    ),
    "vaswani_spa_eng_chollet": (
        ["model.d_model=16", "model.head_dim=8", "model.ffn_dim=32"],
        {"encoder_layers": 1, "num_heads": 8, "head_dim": 8, "head_dropout": 0.5,
         "position_embedding": "learned", "max_position_embeddings": 20},
        36,  # Chollet's 70/15/15 split of the 240 pairs
    ),
    "vaswani_spa_eng_base": (
        ["model.encoder_layers=1", "model.decoder_layers=1", "model.d_model=16",
         "model.num_heads=2", "model.ffn_dim=32", "tokenizer.vocab_size=300",
         "training.warmup_steps=2", "training.mixed_precision=no"],
        {"encoder_layers": 1, "d_model": 16, "num_heads": 2, "dropout": 0.1,
         "label_smoothing": 0.1, "norm_position": "post", "position_embedding": "sinusoidal",
         "tie_word_embeddings": True},
        36,  # the default (Chollet's) 70/15/15 split
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(SPA_RECIPES))
def test_spa_recipe_trains_on_a_local_spa_txt(tmp_path, caplog, name):
    lines = [f"I have {n} apples.\tTengo {n} manzanas.\tCC-BY 2.0 (France)" for n in range(240)]
    lines.insert(7, "a line without a tab")
    spa = tmp_path / "spa.txt"
    spa.write_text("\n".join(lines) + "\n", encoding="utf-8")
    model_overrides, expected, held_out = SPA_RECIPES[name]
    overrides = [
        f"data.source={spa}",
        *model_overrides,
        "training.max_steps=4",
        "training.eval_every=4",
        "training.save_every=4",
        "evaluation.splits=[test]",
        f"output_dir={tmp_path / 'run'}",
    ]
    with caplog.at_level(logging.WARNING):
        result = run_recipe(load_recipe(f"recipes/{name}.yaml", overrides))
    assert "spa.txt: 1 malformed line(s) skipped" in caplog.text and "at line 8:" in caplog.text
    assert result.progress.step == 4
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert {key: config[key] for key in expected} == expected
    assert result.metrics["test"]["num_examples"] == held_out


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


def test_the_metrics_share_one_scratch_folder_per_user(tmp_path, monkeypatch):
    """Each metric gets an empty folder in one scratch folder per user, under the temporary
    folder, which outlives the process: a process killed before its clean-up (SIGKILL) leaves
    no folder of its own behind."""
    from hfattn import evaluation

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    evaluation._scratch_dir.cache_clear()
    try:
        assert evaluation.load_metric("sacrebleu").compute(
            predictions=["a b c d"], references=["a b c d"]
        )["score"] == pytest.approx(100.0)
        evaluation._scratch_dir.cache_clear()  # a second process finds the same folder
        evaluation.load_metric("chrf")
    finally:
        evaluation._scratch_dir.cache_clear()
    (scratch,) = tmp_path.glob("hfattn-metrics-*")
    assert scratch.name == f"hfattn-metrics-{os.getuid()}"
    assert len(list(scratch.iterdir())) == 2  # one folder a metric
    assert [path for path in scratch.rglob("*") if not path.is_dir()] == []
