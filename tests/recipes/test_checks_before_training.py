"""Fail fast (issue 21): every check of ``hfattn train`` that needs neither data nor the run
folder answers within 2 s, before torch is imported
(``hfattn.recipes.run_checks.check_before_training`` on the recipe's outline); the run folder
is checked once the recipe is fully loaded, so that any bad field comes first. A
``data.source`` typo is in ``test_data_source_typos.py``, the output of a time-bounded run in
``test_time_bounded_run_output.py``.

The timed checks run in fresh interpreters (``tests/helpers/early_errors.py``): this test
process has imported torch already.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hfattn.recipes import task_recipe
from hfattn.tasks import TASK_NAMES, get_task
from tests.helpers.early_errors import HEAVY, assert_fast_error, assert_one_error, early_error
from tests.helpers.recipe_helpers import write_recipe

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "recipes"


# ---- every check that needs no data, before any loading -------------------------------------
@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """A tiny causal-LM recipe (a slice of Macbeth) whose output_dir already holds a run."""
    folder = tmp_path_factory.mktemp("tiny")
    recipe = write_recipe(folder, training={"schedule": "cosine", "warmup_steps": 10})
    (folder / "run" / "checkpoints" / "step-5").mkdir(parents=True)
    return recipe


CHECKS = {
    "max_steps within the warmup": (
        ["--set", "training.max_steps=10"],
        "training.max_steps: 10 steps end the run within its 10 warmup steps"),
    "warmup with a schedule that sets its own": (
        ["--set", "training.schedule=warmup_untuned_linear"],
        "training.warmup_steps: the warmup_untuned_linear schedule sets its own warmup length"),
    "a schedule that needs warmup steps": (
        ["--set", "training.schedule=noam", "--set", "training.warmup_steps=0"],
        "training.warmup_steps: the noam schedule needs warmup_steps >= 1"),
    "a metric the task does not report": (
        ["--set", "training.metric_for_best_model=bleu"],
        "training.metric_for_best_model: 'bleu' is not one of loss, perplexity, bits_per_char, "
        "accuracy"),
    "a bad repo id": (
        ["--set", "hub.push_to_hub=true", "--set", "hub.repo_id=me/a..b"],
        "hub: repo_id must be 'owner/name'"),
    "no token to push with": (
        ["--set", "hub.push_to_hub=true", "--set", "hub.repo_id=me/tiny"],
        "hub: no Hugging Face token"),
    "a field of the wrong type": (
        ["--set", "training.max_steps=many"],
        "training.max_steps: 'many' is not an integer or null"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(CHECKS))
def test_checks_that_need_no_data_answer_within_two_seconds(case, tiny, tmp_path):
    extra, expected = CHECKS[case]
    argv = ["train", str(tiny), "--set", f"output_dir={tmp_path / 'run'}", *extra]
    assert_fast_error(argv, tmp_path, expected, HF_HOME=str(tmp_path / "hf"))


FOLDER_CHECKS = {
    "output_dir holds a run": (
        [], "already holds a run (checkpoints); continue it with `hfattn train --resume"),
    "resume without a checkpoint": (["--resume"], "--resume: no checkpoint under "),
}  # fmt: skip
"""The run folder's checks: made once the recipe is fully loaded, before any data."""


@pytest.mark.parametrize("case", sorted(FOLDER_CHECKS))
def test_the_run_folder_is_checked_before_any_data(case, tiny, tmp_path, monkeypatch, capsys):
    """Not timed, so in this process: a fresh interpreter would spend seconds importing torch
    for the model config that the recipe's full load builds before ``--resume`` looks for a
    checkpoint."""
    from hfattn.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    extra, expected = FOLDER_CHECKS[case]
    output = tiny.parent / "run" if case == "output_dir holds a run" else tmp_path / "run"
    assert main(["train", str(tiny), "--set", f"output_dir={output}", *extra]) == 2
    err = capsys.readouterr().err
    assert expected in err, err
    assert err.count("error: ") == 1, err
    assert not (tmp_path / "run").exists()


LOADED_FIELD_ERRORS = {
    "a misspelt model config field": (
        ["--set", "model.hiden_size=64"],
        "model.hiden_size: is not a field of CharRNNConfig; did you mean 'hidden_size'?"),
    "a batch size out of range": (
        ["--set", "training.batch_size=-8"], "training.batch_size: must be > 0, got -8"),
    "an unknown optimizer": (
        ["--set", "training.optimizer=lbfgs"],
        "training.optimizer: 'lbfgs' is not one of adamw, nadam, rmsprop, radam, sgd, muon"),
}  # fmt: skip
"""Errors that only the full load finds (the model's config class, the sections' value
checks)."""


@pytest.mark.parametrize("case", sorted(LOADED_FIELD_ERRORS))
def test_a_field_error_of_the_full_load_comes_before_the_output_folder(case, tiny, tmp_path):
    """The output folder holds a run: the bad field is what the user is told, not
    "use --overwrite"."""
    extra, expected = LOADED_FIELD_ERRORS[case]
    argv = ["train", str(tiny), "--set", f"output_dir={tiny.parent / 'run'}", *extra]
    assert_one_error(argv, tmp_path, expected, HF_HOME=str(tmp_path / "hf"))


FIELD_TYPOS = {
    "a misspelt training field": (
        "char_rnn_shakespeare.yaml", ["--set", "training.lerning_rate=0.01"],
        "training.lerning_rate: not a field of training (batch_size, "),
    "a misspelt section": (
        "char_rnn_shakespeare.yaml", ["--set", "generaton.max_new_tokens=5"],
        "generaton: not a field of a recipe (name, task, "),
    "a misspelt task-specific field": (
        "vaswani_dates_en_es.yaml", ["--set", "data.on_to_long=error"],
        "data.on_to_long: not a field of data ("),
    "a misspelt score of bahdanau": (
        "bahdanau_dates_en_es.yaml", ["--set", "model.score=dott"],
        "model.score must be one of dot, scaled_dot, "),
    "a misspelt score of vaswani": (
        "vaswani_dates_en_es.yaml", ["--set", "model.attention_score=addative"],
        "model.attention_score must be one of dot, scaled_dot, "),
    "a misspelt score of the rnn classifier": (
        "rnn_classifier_genre.yaml", ["--set", "model.attention_score=dott"],
        "model.attention_score must be one of dot, scaled_dot, "),
}  # fmt: skip
"""A recipe field that is not one the recipe class (or the model's attention) allows."""
SUGGESTIONS = {
    "a misspelt training field": "did you mean 'learning_rate'?",
    "a misspelt section": "did you mean 'generation'?",
    "a misspelt task-specific field": "did you mean 'on_too_long'?",
    "a misspelt score of bahdanau": "did you mean 'dot'?",
    "a misspelt score of vaswani": "did you mean 'additive'?",
    "a misspelt score of the rnn classifier": "did you mean 'dot'?",
}


@pytest.mark.parametrize("case", sorted(FIELD_TYPOS))
def test_a_misspelt_field_is_reported_before_the_output_folder_that_holds_a_run(case, tmp_path):
    """The output folder already holds a run: the typo is what the user is told, at once."""
    recipe, extra, expected = FIELD_TYPOS[case]
    (tmp_path / "run" / "checkpoints" / "step-5").mkdir(parents=True)
    argv = ["train", str(RECIPES / recipe), "--set", f"output_dir={tmp_path / 'run'}", *extra]
    assert SUGGESTIONS[case] in assert_fast_error(argv, tmp_path, expected)


def test_the_default_output_folder_of_a_finished_run_does_not_hide_a_typo(tmp_path):
    """``hfattn train RECIPE`` with the recipe's own ``output_dir`` (``runs/NAME``, relative
    to the working folder) where an earlier run lies."""
    recipe = tmp_path / "char_rnn_shakespeare.yaml"
    recipe.write_text((RECIPES / recipe.name).read_text())
    argv = ["train", str(recipe), "--set", "training.lerning_rate=0.01"]
    (tmp_path / "runs" / "char_rnn_shakespeare" / "checkpoints" / "step-5").mkdir(parents=True)
    (tmp_path / "runs" / "char_rnn_shakespeare" / "model.safetensors").write_bytes(b"")
    assert_fast_error(argv, tmp_path, "training.lerning_rate: not a field of training")
    err, _, _ = early_error(argv[:2], tmp_path)  # the typo fixed: now the folder
    assert "already holds a run" in err and "--overwrite" in err, err


def test_every_shipped_recipe_passes_the_outline_without_torch():
    """The outline's key, type and score checks and every section's value checks accept every
    shipped recipe (no false alarm), and import no heavy library."""
    probe = (
        "import glob, json, sys, hfattn.tasks\n"
        "from hfattn.recipes import check_recipe_values, recipe_outline\n"
        f"names = sorted(glob.glob({str(RECIPES / '*.yaml')!r}))\n"
        "tasks = [recipe_outline(name).task for name in names]\n"
        "recipes = [check_recipe_values(name) for name in names]\n"
        f"print(json.dumps([len(names), [m for m in {list(HEAVY)!r} if m in sys.modules]]))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    count, heavy = json.loads(out.stdout)
    assert count == len(list(RECIPES.glob("*.yaml"))) > 20 and heavy == []


def test_the_torch_free_score_names_are_the_registered_scores():
    """:data:`SCORE_NAMES` (read before torch) lists :data:`SCORES` in order, and every config
    field that takes a score is declared with them."""
    from hfattn.common.models_source import models_literal
    from hfattn.models import AUTO_CLASSES
    from hfattn.models.config_checks import field_rules
    from hfattn.models.score_names import SCORE_NAMES
    from hfattn.models.scores import SCORES

    assert SCORE_NAMES == tuple(SCORES) == models_literal("score_names", "SCORE_NAMES")
    assert [cls.name for cls in SCORES.values()] == list(SCORE_NAMES)
    configs = {config.model_type: config for config, _, _ in AUTO_CLASSES}
    scored = {t: {f for f in ("score", "attention_score") if f in field_rules(c)}
              for t, c in configs.items()}  # fmt: skip
    assert scored == {"char-rnn": set(), "bahdanau": {"score"},
                      "vaswani": {"attention_score"}, "rnn-classifier": {"attention_score"}}  # fmt: skip
    for model_type, (field_name,) in ((t, f) for t, f in scored.items() if f):
        assert field_rules(configs[model_type])[field_name].allowed == SCORE_NAMES
        with pytest.raises(ValueError, match=f"{field_name} must be one of dot, scaled_dot"):
            configs[model_type](**{field_name: "dott"})
        configs[model_type](**{field_name: "general"})


def test_a_misspelt_model_field_is_named_with_the_closest_field(tmp_path):
    """The model's config fields are :func:`load_recipe`'s (they need the config class)."""
    from hfattn.recipes import RecipeError, load_recipe

    recipe = RECIPES / "char_rnn_shakespeare.yaml"
    with pytest.raises(RecipeError, match=r"^model\.hiden_size: is not a field of CharRNNConfig; "
                       r"did you mean 'hidden_size'\?$"):  # fmt: skip
        load_recipe(recipe, ["model.hiden_size=8"])
    with pytest.raises(RecipeError, match=r"^training\.lerning_rate: not a field of training .*"
                       r"did you mean 'learning_rate'\?$"):  # fmt: skip
        load_recipe(recipe, ["training.lerning_rate=0.1"])


def test_a_run_to_publish_without_a_license_is_refused_before_loading(tiny, tmp_path):
    """The tiny recipe trains on a local file, whose licence hfattn cannot know."""
    argv = ["train", str(tiny), "--set", f"output_dir={tmp_path / 'run'}"]
    argv += ["--set", "hub.push_to_hub=true", "--set", "hub.repo_id=me/tiny"]
    expected = "hub.license: not set and the license of data.source"
    assert_fast_error(argv, tmp_path, expected, HF_HOME=str(tmp_path / "hf"), HF_TOKEN="hf_x")


def test_a_run_folder_given_to_resume_is_checked_before_loading(tiny, tmp_path):
    """``hfattn train --resume RUN_FOLDER --set ...`` checks the stored recipe's outline."""
    folder = tiny.parent / "run"
    (folder / "recipe.yaml").write_text(tiny.read_text())
    (folder / "checkpoints" / "step-5" / "progress.json").write_text("{}")
    assert_fast_error(
        ["train", "--resume", str(folder), "--set", "training.max_steps=3"],
        tmp_path,
        "training.max_steps: 3 steps end the run within its 10 warmup steps",
    )


def test_a_resume_may_end_a_run_within_its_warmup_where_the_schedule_allows():
    """``hfattn train --resume RUN --set training.max_steps=STEP`` saves an interrupted run's
    model; only schedules that decay to the last step cannot be built for it."""
    from types import SimpleNamespace

    from hfattn.training.schedules import check_schedule_steps

    for name in ("constant", "noam", "warmup_linear"):
        check_schedule_steps(
            SimpleNamespace(schedule=name, warmup_steps=10, max_steps=5), resume=True
        )
    for name in ("linear", "cosine"):
        cfg = SimpleNamespace(schedule=name, warmup_steps=10, max_steps=5)
        with pytest.raises(ValueError, match="training.max_steps: 5 steps end the run within"):
            check_schedule_steps(cfg, resume=True)


def test_the_data_size_check_names_the_epochs(tmp_path, capsys):
    """Where the warmup must fit the epochs' steps, the engine says so once the data is
    loaded, naming the numbers (it was the schedule factory's ``total_steps`` message)."""
    from hfattn.cli import main

    recipe = write_recipe(
        tmp_path,
        training={
            "max_steps": None,
            "epochs": 1,
            "schedule": "linear",
            "warmup_steps": 10_000,
        },  # fmt: skip
    )
    assert main(["train", str(recipe)]) == 2
    err = capsys.readouterr().err
    assert "training.warmup_steps: 10000 warmup steps do not fit in this run's" in err
    assert "1 epoch(s) × " in err and "steps per epoch of this data" in err


def test_each_task_recipe_module_is_light_and_names_what_validation_reports():
    """The checks before training read ``REPORTED_METRICS`` from the task's ``recipe`` module,
    which imports no heavy library; the task's job records the same metrics."""
    probe = (
        "import json, sys, hfattn.tasks; from hfattn.recipes import task_names, task_recipe\n"
        "metrics = {t: list(task_recipe(t).reported_metrics) for t in task_names()}\n"
        f"print(json.dumps([metrics, [m for m in {list(HEAVY)!r} if m in sys.modules]]))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    metrics, heavy = json.loads(out.stdout)
    assert heavy == [] and set(metrics) == set(TASK_NAMES)
    for name in TASK_NAMES:
        recipe_module = sys.modules[task_recipe(name).recipe_class.__module__]
        metadata = get_task(name).card_metadata(("d", "d"), recipe_module.METRIC_NAMES)
        assert metrics[name] == list(metadata["reported_metrics"]), name
