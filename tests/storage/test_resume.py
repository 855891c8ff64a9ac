"""A run is its folder (:mod:`hfattn.storage.run_folder`): ``hfattn train --resume FOLDER``
continues it from the recipe stored there, the interrupt hint says exactly that, a recipe that
is not the run's is refused before anything slow loads (naming the fields), ``--resume
--overwrite`` is one clear error, an intact checkpoint that does not fit the recipe is not
called damaged, and a failed ``--resume`` leaves nothing behind; ``--overwrite`` clears the old
run's files and nothing else; every command printed for pasting pastes as printed. A run cut
short by its budget is in ``test_short_runs.py``, the one ``hfattn train`` at a time that
trains into a folder in ``test_run_lock.py``."""

from __future__ import annotations

import json
import logging
import re
import shutil
import subprocess

import pytest
import yaml

from hfattn.cli import main
from hfattn.orchestration import run as orchestration
from hfattn.orchestration.run import run_recipe
from hfattn.recipes import load_recipe
from hfattn.storage import resume_checks, run_folder, run_status
from hfattn.storage.model_folder import CONFIG_FILE
from hfattn.tasks import get_task
from tests.helpers.recipe_helpers import small_recipe
from tests.helpers.resumable_runs import TRAINING, interrupt_at, snapshot

STOP_AT = 3


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory):
    """A tiny run stopped at step 3 (as by Ctrl-C): ``(recipe path, run folder)``."""
    root = tmp_path_factory.mktemp("interrupted")
    recipe = small_recipe(root, training=TRAINING)
    result = run_recipe(load_recipe(recipe), callbacks=[interrupt_at(STOP_AT)])
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
    recipe = small_recipe(tmp_path, training=TRAINING)
    folder = tmp_path / "elsewhere"
    real = orchestration.run_recipe

    def interrupted_run(recipe, **kwargs):
        return real(recipe, **kwargs, callbacks=[interrupt_at(STOP_AT)])

    monkeypatch.setattr(orchestration, "run_recipe", interrupted_run)
    assert main(["train", str(recipe), "--set", f"output_dir={folder}"]) == 130
    err = capsys.readouterr().err
    assert f"Continue with:\n  hfattn train --resume {folder}\n" in err
    assert run_folder.run_state(folder) == "interrupted"


def test_an_interrupt_says_how_to_continue_once(tmp_path, capsys, caplog, monkeypatch):
    """Once the engine's warning and the command's message both gave the resume command."""
    recipe = small_recipe(tmp_path, training=TRAINING)
    real = orchestration.run_recipe

    def interrupted_run(recipe, **kwargs):
        return real(recipe, **kwargs, callbacks=[interrupt_at(STOP_AT)])

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
    recipe = small_recipe(tmp_path, training=TRAINING)
    _no_model_loading(monkeypatch)
    assert main(["train", str(recipe), "--resume", "--overwrite"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {resume_checks.RESUME_AND_OVERWRITE}"
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
    recipe = small_recipe(tmp_path, training=TRAINING)
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


@pytest.mark.parametrize(
    ("text", "message"),
    [("training: [1, 2\n", r"recipe\.yaml: not valid YAML \("), ("- 1\n", "expected a mapping")],
)
def test_a_stored_recipe_that_is_no_mapping_is_one_error_naming_it(tmp_path, text, message):
    """The one reader of ``recipe.yaml`` (``--resume`` and ``hfattn push`` alike)."""
    assert run_folder.read_recipe(tmp_path) is None
    (tmp_path / run_folder.RECIPE_FILE).write_text(text)
    with pytest.raises(run_folder.RunFolderError, match=message):
        run_folder.read_recipe(tmp_path)


def test_recipe_differences_name_dotted_fields():
    stored = yaml.safe_load("model: {hidden_size: 64}\ntraining: {max_steps: 5}\noutput_dir: a")
    given = {"model": {"hidden_size": 128}, "training": {"max_steps": 5}, "output_dir": "b"}
    assert [str(c) for c in resume_checks.recipe_differences(stored, given)] == [
        "model.hidden_size: 64 vs 128"
    ]


def test_budget_logging_and_hub_fields_may_change_on_resume():
    assert resume_checks.is_resumable("training.max_steps")
    assert resume_checks.is_resumable("hub.license") and resume_checks.is_resumable("hub")
    assert not resume_checks.is_resumable("hubris.x")
    assert not resume_checks.is_resumable("training.learning_rate")


SPACED = "my runs/Año ñandú — été"
"""A run folder whose path a shell would split, with letters beyond ASCII."""


def _pasted(command: str) -> list[str]:
    """The arguments that ``hfattn`` gets when ``command`` is pasted into bash."""
    script = 'hfattn() { printf "%s\\0" "$@"; }\n' + command
    done = subprocess.run(["bash", "-c", script], capture_output=True, check=True)
    return done.stdout.decode().split("\0")[:-1]


def test_printed_commands_paste_as_printed_for_a_folder_with_spaces(interrupted, tmp_path, capsys):
    """Every command printed for pasting quotes the folder (``shlex.quote``): bash gives
    ``hfattn`` the folder as one argument, and the pasted command finishes the run."""
    from hfattn.commands.inputs import ModelLoadError
    from hfattn.commands.model_loading import check_model_fits
    from hfattn.export.export_folder import missing_export

    recipe, folder = interrupted
    copy = tmp_path / SPACED
    shutil.copytree(folder, copy)
    assert main(["train", str(recipe), "--set", f"output_dir={copy}"]) == 2  # holds a run
    assert main(["train", str(recipe), "--resume", str(copy)]) == 2  # both given
    assert main(["train", "--resume", str(copy), "--set", "model.hidden_size=64"]) == 2
    with pytest.raises(ModelLoadError) as wrong_command:  # a translation model to `generate`
        check_model_fits(str(copy), {"is_encoder_decoder": True}, None, "AutoModelForCausalLM")
    said = "\n".join(
        [
            capsys.readouterr().err,
            run_status.interrupted_run_message(copy),
            missing_export(copy),
            str(wrong_command.value),
        ]
    )
    commands = re.findall(r"`(hfattn [^`]*)`", said)
    resume = ["train", "--resume", str(copy)]
    assert [_pasted(c) for c in commands] == [
        resume,  # check_output_dir
        resume,  # a recipe and a folder: the folder's run
        ["train", str(recipe), "--resume"],  # ... or the recipe's
        resume,  # another recipe
        resume,  # interrupted_run_message
        [*resume, "--set", f"training.max_steps={STOP_AT}"],
        ["export", str(copy), "--format", "ctranslate2", str(copy / "ct2")],
        ["translate", str(copy), "TEXT..."],
    ]
    assert main(_pasted(commands[5])) == 0
    assert run_folder.run_state(copy) == "finished"


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
    assert (folder / CONFIG_FILE).is_file()
    assert run_folder.run_state(folder) == "finished"


def test_overwrite_clears_every_file_of_the_old_run_and_nothing_else(tmp_path):
    """The old run's sample must not reach the new run's card; a file of the user's stays."""
    folder = tmp_path / "run"
    (folder / run_folder.CHECKPOINTS_DIR / "step-5").mkdir(parents=True)
    old = ["model.safetensors", *run_folder.RUN_FILES]
    for name in [*old, "notes.txt"]:
        (folder / name).write_text("old")
    with pytest.raises(FileExistsError, match="already holds a run"):
        resume_checks.check_output_dir(folder, overwrite=False)
    assert all((folder / name).exists() for name in old)
    resume_checks.clear_output_dir(folder)
    assert run_folder.SAMPLES_FILE in run_folder.RUN_FILES
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]


def test_resume_of_a_run_ended_by_its_steps_changes_nothing_until_extended(run_copy, capsys):
    _, folder = run_copy
    assert main(["train", "--resume", str(folder)]) == 0  # the interrupted run finishes
    before = snapshot(folder)
    capsys.readouterr()
    assert main(["train", "--resume", str(folder)]) == 0
    err = capsys.readouterr().err.strip()
    assert err == (
        f"{folder} is already finished: it stopped at step 10 (training.max_steps=10) and saved "
        f"its model; nothing changed. Extend it with `hfattn train --resume {folder} --set "
        "training.max_steps=N (> 10)`"
    )
    assert snapshot(folder) == before
    # a larger budget extends it
    assert main(["train", "--resume", str(folder), "--set", "training.max_steps=12"]) == 0
    results = json.loads(run_folder.eval_results_path(folder).read_text())
    assert results["training"]["global_step"] == 12
