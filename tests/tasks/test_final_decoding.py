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
from collections import Counter
from pathlib import Path

import pytest

import hfattn.tasks.translation.job as job_module
from hfattn.cli import main
from hfattn.tasks.translation.recipe import TranslationEvaluationSection
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
    recipe = translation_recipe(tmp_path, generation={"num_beams": 1, "max_new_tokens": 16})
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
    assert rows("validation", 20, TranslationEvaluationSection(max_examples=5), 1, True, 0) == (
        range(5)
    )
    monkeypatch.setattr(job_module, "LARGE_FINAL_SPLIT", 10)
    plain = TranslationEvaluationSection()
    with caplog.at_level(logging.WARNING, logger=job_module.logger.name):
        assert rows("validation", 20, plain, 4, False, 0) == range(20)  # no warning
        assert rows("validation", 15_000, plain, 4, True, 0) == range(15_000)
        assert rows("test", 8, plain, 4, True, 0) == range(8)  # small: no warning
    assert [r.getMessage() for r in caplog.records] == [
        "validation: decoding 15,000 pairs at beam 4; set evaluation.final_max_examples to "
        "sample fewer"
    ]
