"""Evaluation off the hot path: a translation run scores each split from its prepared ids in
length-sorted batches (the same numbers as file order), and the training loop keeps the
evaluations' seconds out of its clock (``elapsed_s``, ``max_minutes``, tokens/s), reporting
them apart (``eval_s`` in ``metrics.jsonl``, ``eval_runtime_s`` / ``final_eval_runtime_s`` /
``wall_time_s`` in ``eval_results.json``), across a resume too."""

from __future__ import annotations

import json
import re
import time

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from hfattn.batching.seq2seq import IGNORE_INDEX, pad_pairs
from hfattn.recipes import load_recipe
from hfattn.tasks import get_task
from hfattn.tasks.translation.encoding import encode_sources, encode_targets
from hfattn.training.checkpoints import Progress
from hfattn.training.engine import train
from tests.helpers.recipe_helpers import write_recipe

SLEEP_S = 0.5
"""What the sleeping evaluation of the engine tests adds to every scoring."""


@pytest.fixture(scope="module")
def translation_job(tmp_path_factory):
    """A tiny untrained Marian job on date normalisation (built, not trained)."""
    from tests.helpers.tiny_runs import TINY_TRANSLATION_MODELS

    folder = tmp_path_factory.mktemp("eval_job")
    recipe = write_recipe(
        folder,
        base={},
        name="eval_off_clock",
        task="translation",
        model=TINY_TRANSLATION_MODELS["marian"],
        tokenizer={"type": "char"},
        data={"source": "date-normalization", "size": 600, "validation_fraction": 0.1},
        training={"batch_size": 16, "max_steps": 2},
        evaluation={"splits": ["validation"], "batch_size": 8, "max_new_tokens": 8},
        generation={"max_new_tokens": 8, "num_beams": 2},  # the final scoring: its own
    )
    recipe = load_recipe(recipe)
    return recipe, get_task("translation").build_job(recipe)


def count_tokenizer_calls(monkeypatch, tokenizer) -> list:
    """Record every call of ``tokenizer`` (its class's ``__call__``) in the returned list."""
    calls, cls = [], type(tokenizer)
    original = cls.__call__

    def counting(self, *args, **kwargs):
        calls.append((args, kwargs))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, "__call__", counting)
    return calls


def test_a_split_is_read_from_the_prepared_ids_not_tokenized(translation_job, monkeypatch):
    """The split was encoded when the data was prepared: scoring it, again and again and for
    the final decoding, tokenizes nothing."""
    recipe, job = translation_job
    calls = count_tokenizer_calls(monkeypatch, job.tokenizer)
    first = job.evaluate(job.model, "validation")
    assert job.evaluate(job.model, "validation") == first
    job.final_evaluate(job.model, "validation")
    assert calls == []


def file_order_scores(recipe, job, rows=None) -> tuple[float, int, int, int]:
    """``(nll, correct, tokens, cells)`` of the validation pairs ``rows`` (default: all),
    encoded with the list encoders and padded in file order with ``pad_pairs`` (the old way, by
    hand), in batches of ``evaluation.batch_size``."""
    model, tok, d = job.model.eval(), job.tokenizer, recipe.data
    sources, targets = job_pairs(recipe, "validation")
    rows = range(len(sources)) if rows is None else rows
    src = encode_sources(tok, [sources[i] for i in rows], d.max_source_length)
    tgt = encode_targets(tok, [targets[i] for i in rows], d.max_target_length, "warn")
    step = recipe.evaluation.batch_size
    nll, hits, n, file_order_cells = 0.0, 0, 0, 0
    with torch.no_grad():
        for k in range(0, len(src), step):
            batch = pad_pairs(src[k : k + step], tgt[k : k + step], tok.pad_token_id)
            logits = model(**batch).logits.float()
            labels = batch["labels"]
            keep = labels != IGNORE_INDEX
            nll += F.cross_entropy(logits[keep], labels[keep], reduction="sum").item()
            hits += int((logits.argmax(-1)[keep] == labels[keep]).sum())
            n += int(keep.sum())
            file_order_cells += batch["input_ids"].numel() + labels.numel()
    return nll, hits, n, file_order_cells


def test_length_sorted_teacher_forcing_gives_the_file_order_scores(translation_job):
    """The scores of the sorted batches are those of the split padded in file order with
    ``pad_pairs`` (the old way, computed here by hand), from fewer padded positions."""
    recipe, job = translation_job
    model = job.model.eval()
    nll, hits, n, file_order_cells = file_order_scores(recipe, job)

    cells = []

    def count_cells(module, args, kwargs):
        if kwargs.get("labels") is not None:  # the teacher-forced passes, not generate()
            cells.append(kwargs["input_ids"].numel() + kwargs["labels"].numel())

    hook = model.register_forward_pre_hook(count_cells, with_kwargs=True)
    try:
        scores = job.evaluate(model, "validation")
    finally:
        hook.remove()
    assert scores["num_tokens"] == n
    assert scores["loss"] == pytest.approx(nll / n, rel=1e-6)
    assert scores["perplexity"] == pytest.approx(torch.tensor(nll / n).exp().item(), rel=1e-6)
    assert scores["token_accuracy"] == hits / n
    assert sum(cells) < file_order_cells


def test_a_capped_scoring_reads_the_same_pairs_for_the_loss_and_the_translations(
    translation_job, monkeypatch, capsys
):
    """``evaluation.max_examples: 10``: the loss pass and the decoding read the first 10 of the
    60 validation pairs, and the scores are those 10 pairs' alone; at the end
    (``final_max_examples: 7``) both read the same seeded sample of 7. Each pass shows its bar
    (its delay set to 0 here) with its count and rate."""
    import hfattn.common.progress as progress
    import hfattn.tasks.translation.job as job_module
    from hfattn.tasks.translation.prepared import PreparedPairs
    from hfattn.tasks.translation.recipe import TranslationEvaluationSection

    recipe, job = translation_job
    prepared = get_task("translation").prepare_data(recipe)  # the job's, found in the cache
    split = job_module.EncodedSplits(job.tokenizer, PreparedPairs(prepared.folder), recipe.data)
    split = split["validation"]
    evaluation = TranslationEvaluationSection(
        batch_size=8, max_new_tokens=8, max_examples=10, final_max_examples=7
    )
    taught, decoded = [], []

    def count_pairs(module, args, kwargs):
        if kwargs.get("labels") is not None:  # the teacher-forced passes, not generate()
            taught.append(len(kwargs["labels"]))

    translate = job_module.translate_texts

    def recording(model, tokenizer, texts, **options):
        decoded.extend(texts)
        return translate(model, tokenizer, texts, **options)

    monkeypatch.setattr(job_module, "translate_texts", recording)
    monkeypatch.setattr(progress, "PROGRESS_DELAY_S", 0.0)
    sources = job_pairs(recipe, "validation")[0]
    assert len(split) == len(sources) == 60
    sample = np.sort(np.random.default_rng(recipe.data.seed).choice(60, size=7, replace=False))
    hook = job.model.register_forward_pre_hook(count_pairs, with_kwargs=True)
    try:
        for final, rows in ((False, range(10)), (True, sample)):
            taught.clear(), decoded.clear()
            scores = job_module.score_split(job.model, split, evaluation, final=final)
            assert sum(taught) == len(rows) and decoded == [sources[i] for i in rows]
            nll, hits, n, _ = file_order_scores(recipe, job, rows)
            assert scores["num_tokens"] == n and scores["token_accuracy"] == hits / n
            assert scores["loss"] == pytest.approx(nll / n, rel=1e-6)
            assert scores["num_examples"] == len(rows)
            assert scores.get("sampled_from") == (60 if final else None)
    finally:
        hook.remove()
    err = capsys.readouterr().err
    for total in (10, 7):
        for phase, unit in (("loss", "pair"), ("decoding", "source")):
            assert re.search(rf"validation: {phase}: .*/{total} .*{unit}/s", err), err[-2000:]


def job_pairs(recipe, split: str):
    """``(sources, targets)`` of ``split`` as the job loads them."""
    from hfattn.tasks.translation.encoding import load_pairs

    return load_pairs(recipe.data)[split]


def sleeping_char_rnn_job(folder, **training):
    """``(recipe, job)``: the tiny char-RNN recipe whose every evaluation sleeps
    :data:`SLEEP_S` first."""
    recipe = load_recipe(write_recipe(folder, training=training))
    job = get_task(recipe.task).build_job(recipe)
    scores = job.evaluate

    def sleeping(model, split):
        time.sleep(SLEEP_S)
        return scores(model, split)

    job.evaluate = sleeping
    return recipe, job


def records(run_dir, split: str) -> list[dict]:
    """The ``metrics.jsonl`` records of ``split``."""
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["split"] == split]


def assert_evaluations_off_the_clock(run_dir, periodic: int, final: int) -> dict:
    """Check the log and ``eval_results.json`` of a run with ``periodic`` sleeping validations
    and ``final`` sleeping final scorings; returns its ``training`` summary."""
    validations = records(run_dir, "validation")
    assert len(validations) == periodic
    assert all(r["eval_s"] >= SLEEP_S for r in validations)
    train_records = records(run_dir, "train")
    for before, after in zip(train_records, train_records[1:], strict=False):
        # an interval with a validation in it: neither the clock nor tokens/s counts it
        seconds = (after["tokens"] - before["tokens"]) / after["tokens_per_s"]
        assert seconds < SLEEP_S and after["elapsed_s"] - before["elapsed_s"] < SLEEP_S
    summary = json.loads((run_dir / "eval_results.json").read_text())["training"]
    assert summary["eval_runtime_s"] >= periodic * SLEEP_S - 0.05
    assert summary["final_eval_runtime_s"] >= final * SLEEP_S - 0.05
    assert train_records[-1]["elapsed_s"] <= summary["train_runtime_s"] + 0.05
    spent = summary["train_runtime_s"] + summary["eval_runtime_s"] + summary["final_eval_runtime_s"]
    assert spent <= summary["wall_time_s"] + 0.2
    assert summary["train_runtime_s"] < summary["wall_time_s"] - (periodic + final) * SLEEP_S
    return summary


def test_evaluations_are_timed_apart_from_training(tmp_path):
    """Six validations of 0.5 s exceed the 3-second budget of training time; the run still
    trains its 12 steps (the evaluations do not count), and reports them apart."""
    recipe, job = sleeping_char_rnn_job(
        tmp_path, max_steps=12, eval_every=2, log_every=2, save_every=None, max_minutes=0.05
    )
    result = train(job, recipe.training, recipe.output_dir, overwrite=True)
    assert result.progress.step == 12 and result.progress.stop.reason is None
    assert result.progress.eval_s >= 6 * SLEEP_S
    # the final validation is step 12's, not scored again: one final scoring, test's
    summary = assert_evaluations_off_the_clock(tmp_path / "run", periodic=6, final=1)
    assert summary["stop_reason"] == "completed" and summary["train_runtime_s"] < 3.0


def test_resume_keeps_the_evaluation_seconds(tmp_path):
    recipe, job = sleeping_char_rnn_job(tmp_path, max_steps=12, eval_every=3, log_every=3)

    def stop_at_6(progress):
        if progress.step == 6:
            progress.stop.request("interrupted")

    first = train(job, recipe.training, recipe.output_dir, overwrite=True, callbacks=[stop_at_6])
    assert first.interrupted
    saved = json.loads((tmp_path / "run/checkpoints/step-6/progress.json").read_text())
    assert saved["eval_s"] >= 2 * SLEEP_S
    assert saved["wall_s"] >= saved["elapsed_s"] + saved["eval_s"]

    recipe, job = sleeping_char_rnn_job(tmp_path, max_steps=12, eval_every=3, log_every=3)
    second = train(job, recipe.training, recipe.output_dir, resume=True)
    assert second.progress.step == 12
    summary = assert_evaluations_off_the_clock(tmp_path / "run", periodic=4, final=1)
    assert summary["eval_runtime_s"] >= 4 * SLEEP_S - 0.05
    assert summary["wall_time_s"] >= saved["wall_s"]


def test_a_progress_file_from_before_the_evaluation_clock_loads():
    older = {
        k: v for k, v in Progress(step=3).state_dict().items() if k not in ("eval_s", "wall_s")
    }
    progress = Progress(**older)
    assert (progress.step, progress.eval_s, progress.wall_s) == (3, 0.0, 0.0)
