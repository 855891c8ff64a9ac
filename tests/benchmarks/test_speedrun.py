"""``benchmarks/speedrun.py``: a recipe trained as a user trains it (``hfattn train`` in a
child process), its time to quality read back from the run's own files: the wall seconds
from the command to the saved model, the validation curve against them, the steady speed
and the test scores of the saved model."""

import json

import pytest

from benchmarks import speedrun
from tests.helpers.recipe_helpers import write_recipe
from tests.helpers.tiny_runs import TINY_TRANSLATION_MODELS


@pytest.mark.slow
def test_a_speedrun_records_the_wall_seconds_curve_and_scores_of_its_run(tmp_path):
    recipe = write_recipe(
        tmp_path / "recipe",
        filename="tiny_speedrun.yaml",
        base={},
        name="tiny_speedrun",
        task="translation",
        model={**TINY_TRANSLATION_MODELS["vaswani"], "encoder_layers": 1, "decoder_layers": 1},
        tokenizer={"type": "char"},
        data={"source": "date-normalization", "size": 600},
        training={"token_budget": 600, "length_buckets": 3, "max_steps": 12, "epochs": 10,
                  "learning_rate": 0.005, "log_every": 3, "eval_every": 6, "save_every": 6},
        evaluation={"splits": ["validation", "test"], "batch_size": 64, "num_beams": 1,
                    "max_new_tokens": 12},
        generation={"max_new_tokens": 12, "num_beams": 2, "examples": ["April 22, 2019"]},
    )  # fmt: skip
    out = tmp_path / "results"
    assert speedrun.main([str(recipe), "--out", str(out)]) == 0
    run = json.loads((out / "speedrun_tiny_speedrun_cpu.json").read_text())
    assert (out / "speedrun_tiny_speedrun_cpu.png").stat().st_size > 0
    assert run["recipe"] == "tiny_speedrun" and run["gpu"] is None and run["steps"] == 12
    # the command's wall seconds hold the run's own count, which holds its first step
    assert 0 < run["first_step_wall_s"] <= run["run_wall_time_s"] <= run["wall_s"]
    assert [point["step"] for point in run["curve"]] == [6, 12]
    walls = [point["wall_s"] for point in run["curve"]]
    assert run["first_step_wall_s"] < walls[0] < walls[1] <= run["run_wall_time_s"]
    assert all(0 <= point["bleu"] <= 100 for point in run["curve"])
    assert 0 <= run["test_bleu"] <= 100 and 0 <= run["test_chrf"] <= 100
    # an eager run (compile: auto on a CPU) is its own eager twin
    assert run["compiles"] == 0 and run["eager_settings"] is None
    assert run["tokens_per_s"] > 0 and run["eager_tokens_per_s"] == run["tokens_per_s"]
    assert run["provenance"]["machine"]["cores"] >= 1


def test_the_steady_speed_leaves_out_the_records_that_compiled():
    records = [{"tokens_per_s": 10.0, "compiles": 1}, {"tokens_per_s": 90.0, "compiles": 2},
               {"tokens_per_s": 100.0, "compiles": 2}, {"tokens_per_s": 110.0, "compiles": 2},
               {"tokens_per_s": 104.0, "compiles": 2}]  # fmt: skip
    assert speedrun.steady(records, "tokens_per_s") == 104.0  # of 100, 110 and 104
    assert speedrun.steady(records[:1], "tokens_per_s") is None


def test_a_candidate_setting_gets_files_of_its_own_name():
    assert speedrun.file_stem("vaswani_bible_en_es_base", None) == (
        "speedrun_vaswani_bible_en_es_base_cpu"
    )
    assert (
        speedrun.file_stem(
            "vaswani_bible_en_es_base", "NVIDIA H200", "candidate_vaswani_bible_en_es_base_iwslt"
        )
        == "candidate_vaswani_bible_en_es_base_iwslt_NVIDIA_H200"
    )
