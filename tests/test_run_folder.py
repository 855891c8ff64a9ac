"""A run is its folder (:mod:`hfattn.run_folder`): ``hfattn train --resume FOLDER`` continues
it from the recipe stored there, the interrupt hint says exactly that, a recipe that is not
the run's is refused before anything slow loads (naming the fields), ``--resume --overwrite``
is one clear error, an intact checkpoint that does not fit the recipe is not called damaged,
and a failed ``--resume`` leaves nothing behind."""

from __future__ import annotations

import json
import logging
import shutil

import pytest
import yaml
from recipe_helpers import write_recipe

from hfattn import orchestration, run_folder
from hfattn.cli import main
from hfattn.orchestration import run_recipe
from hfattn.recipes import load_recipe
from hfattn.tasks import get_task

STOP_AT = 3
TRAINING = {"max_steps": 10, "eval_every": 10, "save_every": 100, "log_every": 1}


def _interrupt_at(step):
    def callback(progress):
        if progress.step >= step:
            progress.should_stop, progress.stop_reason = True, "interrupted"

    return callback


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory):
    """A tiny run stopped at step 3 (as by Ctrl-C): ``(recipe path, run folder)``."""
    root = tmp_path_factory.mktemp("interrupted")
    recipe = write_recipe(root, training=TRAINING)
    result = run_recipe(load_recipe(recipe), callbacks=[_interrupt_at(STOP_AT)])
    assert result.interrupted
    return recipe, root / "run"


@pytest.fixture
def run_copy(interrupted, tmp_path):
    """A copy of the interrupted run: ``(recipe path, run folder)``."""
    recipe, folder = interrupted
    copy = tmp_path / "copied_run"
    shutil.copytree(folder, copy)
    return recipe, copy


def _no_model_loading(monkeypatch):
    """Make building the model and data (the slow part) fail the test."""

    def boom(self, recipe):
        raise AssertionError("the model and data were loaded")

    monkeypatch.setattr(type(get_task("causal-lm")), "build_job", boom)


def test_the_interrupt_hint_names_the_run_folder(tmp_path, capsys, monkeypatch):
    recipe = write_recipe(tmp_path, training=TRAINING)
    folder = tmp_path / "elsewhere"
    real = orchestration.run_recipe

    def interrupted_run(recipe, **kwargs):
        return real(recipe, **kwargs, callbacks=[_interrupt_at(STOP_AT)])

    monkeypatch.setattr(orchestration, "run_recipe", interrupted_run)
    assert main(["train", str(recipe), "--set", f"output_dir={folder}"]) == 130
    err = capsys.readouterr().err
    assert f"Continue with:\n  hfattn train --resume {folder}\n" in err
    assert run_folder.run_state(folder) == "interrupted"


def test_an_interrupt_says_how_to_continue_once(tmp_path, capsys, caplog, monkeypatch):
    """Once the engine's warning and the command's message both gave the resume command."""
    recipe = write_recipe(tmp_path, training=TRAINING)
    real = orchestration.run_recipe

    def interrupted_run(recipe, **kwargs):
        return real(recipe, **kwargs, callbacks=[_interrupt_at(STOP_AT)])

    monkeypatch.setattr(orchestration, "run_recipe", interrupted_run)
    caplog.set_level(logging.INFO, logger="hfattn")
    assert main(["train", str(recipe)]) == 130
    said = caplog.text + capsys.readouterr().err
    assert said.count("hfattn train --resume") == 1, said


def test_resume_a_run_folder_alone(run_copy, capsys):
    _, folder = run_copy
    assert main(["train", "--resume", str(folder), "--set", "training.max_steps=12"]) == 0
    err = capsys.readouterr().err
    assert "--resume: training.max_steps: 10 vs 12 (the run's recipe is updated)" in err
    results = json.loads((folder / run_folder.EVAL_RESULTS_FILE).read_text())
    assert results["training"]["global_step"] == 12
    stored = run_folder.read_recipe(folder)
    assert stored["training"]["max_steps"] == 12 and stored["output_dir"] == str(folder)
    assert run_folder.run_state(folder) == "finished"


def test_resume_with_another_recipe_is_refused_before_loading(run_copy, capsys, monkeypatch):
    recipe, folder = run_copy
    _no_model_loading(monkeypatch)
    before = run_folder.recipe_path(folder).read_text()
    args = ["train", str(recipe), "--resume", "--set", f"output_dir={folder}"]
    assert main([*args, "--set", "model.hidden_size=64", "--set", "training.seed=3"]) == 2
    err = capsys.readouterr().err
    assert "the recipe differs from the run's" in err
    assert "model.hidden_size: 32 vs 64" in err and "training.seed: 1337 vs 3" in err
    assert run_folder.recipe_path(folder).read_text() == before
    # the budget alone may change, through either spelling
    assert main(["train", "--resume", str(folder), "--set", "model.hidden_size=64"]) == 2
    assert "model.hidden_size: 32 vs 64" in capsys.readouterr().err


def test_resume_with_the_run_recipe_continues(run_copy, capsys):
    recipe, folder = run_copy
    assert main(["train", str(recipe), "--resume", "--set", f"output_dir={folder}"]) == 0
    results = json.loads((folder / run_folder.EVAL_RESULTS_FILE).read_text())
    assert results["training"]["global_step"] == 10


def test_resume_and_overwrite_together_are_refused(tmp_path, capsys, monkeypatch):
    recipe = write_recipe(tmp_path, training=TRAINING)
    _no_model_loading(monkeypatch)
    assert main(["train", str(recipe), "--resume", "--overwrite"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {run_folder.RESUME_AND_OVERWRITE}"
    assert not (tmp_path / "run").exists()


def test_an_intact_checkpoint_that_does_not_fit_is_not_called_damaged(run_copy, capsys):
    recipe, folder = run_copy
    run_folder.recipe_path(folder).unlink()  # a run from before recipes were stored
    args = ["train", str(recipe), "--resume", "--set", f"output_dir={folder}"]
    assert main([*args, "--set", "model.hidden_size=64"]) == 2
    err = capsys.readouterr().err
    assert "--resume: the recipe differs from the run's: size mismatch" in err
    assert "damaged" not in err and "delete" not in err
    assert run_folder.latest_checkpoint(folder) is not None
    assert not run_folder.recipe_path(folder).exists()  # the wrong recipe is not stored


@pytest.mark.parametrize("make_empty", [False, True])
def test_a_failed_resume_leaves_nothing_behind(tmp_path, capsys, make_empty):
    recipe = write_recipe(tmp_path, training=TRAINING)
    folder = tmp_path / "run"
    if make_empty:
        folder.mkdir()
    assert main(["train", str(recipe), "--resume"]) == 2
    assert "--resume: no checkpoint under" in capsys.readouterr().err
    assert folder.exists() == make_empty
    assert not make_empty or not any(folder.iterdir())
    # the library call too
    with pytest.raises(FileNotFoundError, match="no checkpoint under"):
        run_recipe(load_recipe(recipe), resume=True)
    assert folder.exists() == make_empty and (not make_empty or not any(folder.iterdir()))


def test_resume_of_a_folder_that_is_not_a_run(tmp_path, capsys):
    assert main(["train", "--resume", str(tmp_path / "nothing")]) == 2
    assert "the folder does not exist; it is not a run to continue" in capsys.readouterr().err
    assert not (tmp_path / "nothing").exists()
    assert main(["train", "--resume", str(tmp_path)]) == 2
    assert f"has no {run_folder.RECIPE_FILE}" in capsys.readouterr().err
    assert main(["train"]) == 2
    assert "give a recipe" in capsys.readouterr().err


def test_recipe_differences_name_dotted_fields():
    stored = yaml.safe_load("model: {hidden_size: 64}\ntraining: {max_steps: 5}\noutput_dir: a")
    given = {"model": {"hidden_size": 128}, "training": {"max_steps": 5}, "output_dir": "b"}
    assert [str(c) for c in run_folder.recipe_differences(stored, given)] == [
        "model.hidden_size: 64 vs 128"
    ]


def test_budget_logging_and_hub_fields_may_change_on_resume():
    assert run_folder.is_resumable("training.max_steps")
    assert run_folder.is_resumable("hub.license") and run_folder.is_resumable("hub")
    assert not run_folder.is_resumable("hubris.x")
    assert not run_folder.is_resumable("training.learning_rate")


def test_push_of_an_interrupted_run_gives_its_step_and_the_ways_on(run_copy, capsys, tmp_path):
    _, folder = run_copy
    dry = tmp_path / "dry"
    assert main(["push", str(folder), "--repo-id", "me/x", "--dry-run", str(dry)]) == 2
    err = capsys.readouterr().err
    assert f"interrupted at step {STOP_AT}" in err
    assert f"`hfattn train --resume {folder}`" in err
    ending = f"hfattn train --resume {folder} --set training.max_steps={STOP_AT}"
    assert ending in err and "config.json missing" not in err
    assert not dry.exists()
    # the advice works: the run ends at its last checkpoint and saves its model
    assert main(ending.split()[1:]) == 0
    assert (folder / run_folder.CONFIG_FILE).is_file()
    assert run_folder.run_state(folder) == "finished"


def test_a_short_run_says_so_and_push_asks_for_force(tmp_path, capsys):
    recipe = write_recipe(tmp_path, training=TRAINING)
    folder = tmp_path / "short"
    args = ["train", str(recipe), "--set", f"output_dir={folder}", "--set", "training.max_steps=4"]
    assert main(args) == 0
    training = json.loads(run_folder.eval_results_path(folder).read_text())["training"]
    # the plan is the recipe file's (10 steps), not the overridden 4
    assert (training["global_step"], training["planned_steps"]) == (4, TRAINING["max_steps"])
    shortfall = run_folder.training_shortfall(folder)
    assert shortfall.startswith("training stopped at step 4 of the 10 its recipe plans (40%)")
    capsys.readouterr()
    push = ["push", str(folder), "--repo-id", "me/x", "--dry-run"]
    assert main([*push, str(tmp_path / "refused")]) == 2
    err = capsys.readouterr().err
    assert shortfall in err and "--force" in err
    assert not (tmp_path / "refused").exists()
    assert main([*push, str(tmp_path / "forced"), "--force"]) == 0
    assert (tmp_path / "forced" / "model" / "config.json").is_file()


def test_a_run_of_most_of_its_plan_is_not_short(tmp_path):
    recipe = write_recipe(tmp_path, training=TRAINING)
    folder = tmp_path / "most"
    assert main(["train", str(recipe), "--set", f"output_dir={folder}",
                 "--set", "training.max_steps=6"]) == 0  # fmt: skip
    assert run_folder.training_shortfall(folder) is None


def test_overwrite_clears_every_file_of_the_old_run_and_nothing_else(tmp_path):
    """The old run's sample must not reach the new run's card; a file of the user's stays."""
    folder = tmp_path / "run"
    (folder / run_folder.CHECKPOINTS_DIR / "step-5").mkdir(parents=True)
    old = ["model.safetensors", *run_folder.RUN_FILES]
    for name in [*old, "notes.txt"]:
        (folder / name).write_text("old")
    with pytest.raises(FileExistsError, match="already holds a run"):
        run_folder.claim_output_dir(folder, overwrite=False)
    assert all((folder / name).exists() for name in old)
    run_folder.claim_output_dir(folder, overwrite=True)
    assert run_folder.SAMPLES_FILE in run_folder.RUN_FILES
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]
