"""The end of a translation run decodes each held-out split once per decoding setting, with a
bar, a large split warned about or sampled (``evaluation.final_max_examples``), and a stop
asked for during a decoding ends it after the current batch (issue 61: 520 s of silence after
0.4 s of training, the validation split decoded twice with the same final weights, and a
SIGTERM that waited for the whole decoding).

The decodings are counted by wrapping the job's ``translate_texts`` (its ``progress`` label
names the split); no clock is read."""

from __future__ import annotations

import json
import logging
import os
import signal
from collections import Counter
from pathlib import Path

import pytest

import hfattn.tasks.translation.job as job_module
from hfattn.cli import main
from hfattn.common.stop_request import Interrupted
from hfattn.storage.run_folder import latest_checkpoint
from hfattn.tasks.translation.recipe import TranslationEvaluationSection
from hfattn.training.checkpoints import Progress
from hfattn.training.stop_signals import stop_on_signals
from tests.helpers.recipe_helpers import write_recipe
from tests.helpers.tiny_runs import TINY_TRANSLATION_MODELS

STEPS = 4


def translation_recipe(folder: Path, *, generation: dict, evaluation: dict | None = None,
                       training: dict | None = None) -> Path:  # fmt: skip
    """A tiny Bahdanau model on 300 date-normalisation pairs (30 validation, 30 test),
    validated at its last step, scored on validation and test at the end."""
    return write_recipe(
        folder,
        base={},
        name="final_decoding",
        task="translation",
        output_dir=str(folder / "run"),
        model=TINY_TRANSLATION_MODELS["bahdanau"],
        tokenizer={"type": "char"},
        data={
            "source": "date-normalization",
            "size": 300,
            "validation_fraction": 0.1,
            "test_fraction": 0.1,
        },  # fmt: skip
        training={
            "batch_size": 32,
            "max_steps": STEPS,
            "learning_rate": 0.005,
            "eval_every": STEPS,
            "save_every": STEPS,
            **(training or {}),
        },  # fmt: skip
        evaluation={
            "splits": ["validation", "test"],
            "batch_size": 64,
            "max_new_tokens": 16,
            **(evaluation or {}),
        },  # fmt: skip
        generation={"examples": ["April 22, 2019"], **generation},
    )


@pytest.fixture
def decodings(monkeypatch) -> Counter:
    """``(split, num_beams, max_new_tokens) -> decodings`` of the splits scored from now on."""
    counted: Counter = Counter()
    translate = job_module.translate_texts

    def counting(model, tokenizer, texts, **options):
        if isinstance(options.get("progress"), str):  # a split scored (not the sample)
            split = options["progress"].removesuffix(": decoding")
            counted[split, options.get("num_beams"), options.get("max_new_tokens")] += 1
        return translate(model, tokenizer, texts, **options)

    monkeypatch.setattr(job_module, "translate_texts", counting)
    return counted


def logged(run: Path) -> list[dict]:
    """The records of ``metrics.jsonl`` (none yet: no file)."""
    log = run / "metrics.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_each_split_is_decoded_once_per_setting_at_the_end(tmp_path, decodings):
    """Greedy validations during training, the saved beam search at the end: the validation
    split is decoded once with each, the test split once."""
    recipe = translation_recipe(tmp_path, generation={"num_beams": 2, "max_new_tokens": 16})
    assert main(["train", str(recipe)]) == 0
    assert decodings == {
        ("validation", 1, 16): 1,  # the validation of the last step
        ("validation", 2, 16): 1,  # the final scores, with the saved beam search
        ("test", 2, 16): 1,
    }


def test_final_scores_decoded_as_the_last_validation_are_not_decoded_again(tmp_path, decodings):
    """Saved settings that decode as the validations do (greedy, the same length): the final
    validation scores are the last validation's, the split decoded once."""
    recipe = translation_recipe(
        tmp_path,
        generation={"num_beams": 1, "max_new_tokens": 16},
        evaluation={"max_examples": None, "final_max_examples": None},  # the same pairs too
    )
    assert main(["train", str(recipe)]) == 0
    assert decodings == {("validation", 1, 16): 1, ("test", 1, 16): 1}
    run = tmp_path / "run"
    last = [r for r in logged(run) if r["split"] == "validation"][-1]
    final = json.loads((run / "eval_results.json").read_text())["all_metrics"]["validation"]
    assert last["step"] == STEPS
    assert final == {k: v for k, v in last.items() if k in final} and final["num_examples"] == 30


def test_a_final_cap_decodes_a_seeded_sample_and_records_it(tmp_path, decodings):
    recipe = translation_recipe(
        tmp_path, generation={"num_beams": 1, "max_new_tokens": 16},
        evaluation={"final_max_examples": 7},
    )  # fmt: skip
    assert main(["train", str(recipe)]) == 0
    # the cap makes the final scoring differ from the validations': validation decoded twice
    assert decodings == {("validation", 1, 16): 2, ("test", 1, 16): 1}
    saved = json.loads((tmp_path / "run" / "eval_results.json").read_text())["all_metrics"]
    for split in ("validation", "test"):
        assert (saved[split]["num_examples"], saved[split]["sampled_from"]) == (7, 30)
    last = [r for r in logged(tmp_path / "run") if r["split"] == "validation"][-1]
    assert last["num_examples"] == 30 and "sampled_from" not in last  # validations: every pair


def test_decoded_rows_sample_with_the_seed_and_warn_about_a_large_split(monkeypatch, caplog):
    rows = job_module.decoded_rows
    capped = TranslationEvaluationSection(final_max_examples=4)
    sample = rows("validation", 20, capped, 4, True, 0)
    assert len(sample) == 4 and list(sample) == sorted(set(sample))
    assert list(rows("validation", 20, capped, 4, True, 0)) == list(sample)  # seeded
    assert list(rows("validation", 20, capped, 4, True, 1)) != list(sample)
    assert rows("validation", 3, capped, 4, True, 0) == range(3)  # a cap above the split
    assert rows("validation", 20, capped, 4, False, 0) == range(20)  # validations: all
    first_five = TranslationEvaluationSection(max_examples=5, final_max_examples=None)
    assert rows("validation", 20, first_five, 1, True, 0) == range(5)  # the end: as validations
    default = TranslationEvaluationSection()  # 500 pairs a validation, 1,000 at the end
    assert rows("validation", 15_000, default, 1, False, 0) == range(500)
    at_end = rows("validation", 15_000, default, 4, True, 0)
    assert len(at_end) == 1000 and not isinstance(at_end, range)  # a seeded sample
    assert rows("test", 800, default, 4, True, 0) == range(800)  # a smaller split: whole
    monkeypatch.setattr(job_module, "LARGE_FINAL_SPLIT", 10)
    plain = TranslationEvaluationSection(max_examples=None, final_max_examples=None)
    with caplog.at_level(logging.WARNING, logger=job_module.logger.name):
        assert rows("validation", 20, plain, 4, False, 0) == range(20)  # no warning
        assert rows("validation", 15_000, plain, 4, True, 0) == range(15_000)
        assert rows("test", 8, plain, 4, True, 0) == range(8)  # small: no warning
    assert [r.getMessage() for r in caplog.records] == [
        "validation: decoding 15,000 pairs at beam 4; set evaluation.final_max_examples to "
        "sample fewer"
    ]


# ---- a stop asked for during a decoding --------------------------------------------------------


class CountingGenerate:
    """Wraps a model class's ``generate``: counts the calls (one per batch of sources) and
    sends SIGTERM to this process during call ``signal_at``; ``swallow``: the signal's
    exception raised inside is swallowed (a library that catches it), the batch ends
    normally."""

    def __init__(self, monkeypatch, model_class, signal_at: int, swallow: bool = False):
        self.calls, self.signal_at, self.swallow = 0, signal_at, swallow
        generate = model_class.generate

        def counting(model, *args, **kwargs):
            self.calls += 1
            out = generate(model, *args, **kwargs)
            if self.calls == self.signal_at:
                try:
                    os.kill(os.getpid(), signal.SIGTERM)
                except KeyboardInterrupt:
                    if not self.swallow:
                        raise
            return out

        monkeypatch.setattr(model_class, "generate", counting)


def test_a_stop_during_a_decoding_ends_it_after_the_current_batch(monkeypatch):
    from hfattn.models import BahdanauConfig
    from hfattn.tasks.translation.inference import translate_texts

    config = BahdanauConfig(
        vocab_size=20, embedding_dim=8, encoder_hidden_size=8, decoder_hidden_size=16
    )
    model = model_class()(config).train()

    class Tokenizer:
        pad_token_id, eos_token_id, model_max_length = 0, 3, 64

        def batch_decode(self, ids, skip_special_tokens=True):
            return ["x"] * len(ids)

    counter = CountingGenerate(monkeypatch, type(model), signal_at=1)
    progress = Progress()
    texts = [f"source {i}" for i in range(10)]
    ids = [[5 + i % 7, 6, 3] for i in range(10)]
    with pytest.raises(Interrupted), stop_on_signals(progress):
        translate_texts(model, Tokenizer(), texts, batch_size=2, source_ids=ids, num_beams=1,
                        max_new_tokens=3)  # fmt: skip
    assert counter.calls == 1  # batch 1 of 5 decoded, then the stop
    assert progress.stop.interrupted and model.training  # its mode restored
    # the request ends with the run's signal handling: a later decoding is not stopped
    assert len(translate_texts(model, Tokenizer(), texts, source_ids=ids, num_beams=1,
                               max_new_tokens=3)) == 10  # fmt: skip


def model_class():
    from hfattn.models import BahdanauForConditionalGeneration

    return BahdanauForConditionalGeneration


def test_a_sigterm_in_a_periodic_validation_stops_after_its_batch_and_resumes(
    tmp_path, monkeypatch, capsys
):
    """The validation of step 2 (30 pairs, 8 a batch) gets a SIGTERM in its first decoded batch:
    the run stops there, its checkpoint of step 2 unvalidated, and a resume validates step 2
    before it trains on, as an uninterrupted run did."""
    recipe = translation_recipe(
        tmp_path, generation={"num_beams": 1, "max_new_tokens": 16},
        evaluation={"batch_size": 8}, training={"eval_every": 2},
    )  # fmt: skip
    counter = CountingGenerate(monkeypatch, model_class(), signal_at=1)
    assert main(["train", str(recipe)]) == 130
    run = tmp_path / "run"
    assert counter.calls == 1  # not the 3 other batches of the validation
    assert latest_checkpoint(run) == run / "checkpoints" / "step-2"
    assert [r for r in logged(run) if r["split"] == "validation"] == []
    assert "Traceback" not in capsys.readouterr().err
    monkeypatch.undo()
    assert main(["train", str(recipe), "--resume"]) == 0
    validated = [r["step"] for r in logged(run) if r["split"] == "validation"]
    assert validated == [2, 4]
    assert (run / "eval_results.json").is_file()


def test_a_sigterm_lost_inside_a_final_decoding_still_stops_it_after_the_batch(
    tmp_path, monkeypatch, capsys
):
    """After the last checkpoint a signal raises at once; should a library catch that
    exception, the decoding still stops after the batch it was in (the flag its batches
    check), and the run is resumable."""
    recipe = translation_recipe(
        tmp_path, generation={"num_beams": 2, "max_new_tokens": 16},
        evaluation={"batch_size": 8, "splits": ["test"]}, training={"eval_every": None},
    )  # fmt: skip
    counter = CountingGenerate(monkeypatch, model_class(), signal_at=1, swallow=True)
    assert main(["train", str(recipe)]) == 130
    run = tmp_path / "run"
    assert counter.calls == 1 and not (run / "eval_results.json").exists()
    assert latest_checkpoint(run) == run / "checkpoints" / f"step-{STEPS}"
    capsys.readouterr()
    monkeypatch.undo()
    assert main(["train", str(recipe), "--resume"]) == 0
    assert (run / "eval_results.json").is_file()
