"""A run folder says when its run is short (:mod:`hfattn.storage.run_status`): a run stopped
before the steps its recipe plans says so and ``hfattn push`` asks for ``--force`` (a dry run
still previews); a run ended by its own clock is complete, unless the clock was cut by ``--set``
or an early stop ended it; resuming a finished run changes nothing until its budget grows."""

from __future__ import annotations

import json
import shutil

import pytest

from hfattn.cli import main
from hfattn.storage import run_folder, run_status
from tests.helpers.recipe_helpers import small_recipe
from tests.helpers.resumable_runs import TRAINING, snapshot


def test_a_short_run_says_so_and_push_asks_for_force(tmp_path, capsys, monkeypatch):
    recipe = small_recipe(tmp_path, training=TRAINING, hub={"license": "mit"})
    folder = tmp_path / "short"
    args = ["train", str(recipe), "--set", f"output_dir={folder}", "--set", "training.max_steps=4"]
    assert main(args) == 0
    training = json.loads(run_folder.eval_results_path(folder).read_text())["training"]
    # the plan is the recipe file's (10 steps), not the overridden 4
    assert (training["global_step"], training["planned_steps"]) == (4, TRAINING["max_steps"])
    shortfall = run_status.training_shortfall(folder)
    assert shortfall.startswith("training stopped at step 4 of the 10 its recipe plans (40%)")
    capsys.readouterr()
    monkeypatch.setenv("HF_TOKEN", "hf_test")  # refused before the Hub is asked anything
    assert main(["push", str(folder), "--repo-id", "me/x"]) == 2
    err = capsys.readouterr().err
    assert shortfall in err and "--force" in err
    # a dry run always previews, saying that a real push is refused
    push = ["push", str(folder), "--repo-id", "me/x", "--dry-run"]
    assert main([*push, str(tmp_path / "preview")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "a real push is refused" in out and "--force" in out
    assert (tmp_path / "preview" / "model" / "config.json").is_file()
    assert main([*push, str(tmp_path / "forced"), "--force"]) == 0
    assert "a real push is refused" not in capsys.readouterr().out
    assert (tmp_path / "forced" / "model" / "config.json").is_file()


@pytest.fixture(scope="module")
def clocked(tmp_path_factory):
    """A tiny run that its recipe's own clock (``training.max_minutes: 0.01``) stops long
    before its 100,000 planned steps: ``(recipe path, run folder)``."""
    root = tmp_path_factory.mktemp("clocked")
    training = {"max_steps": 100_000, "epochs": 10_000, "max_minutes": 0.01,
                "log_every": 50, "eval_every": None, "save_every": None}  # fmt: skip
    recipe = small_recipe(root, training=training, hub={"license": "mit"})
    assert main(["train", str(recipe)]) == 0
    return recipe, root / "run"


def test_a_run_ended_by_its_own_clock_is_complete(clocked, tmp_path, capsys):
    recipe, folder = clocked
    training = json.loads(run_folder.eval_results_path(folder).read_text())["training"]
    assert training["stop_reason"] == "time budget"
    assert (training["max_minutes"], training["planned_minutes"]) == (0.01, 0.01)
    assert 0 < training["global_step"] < training["planned_steps"] // 100
    assert run_status.training_shortfall(folder) is None
    capsys.readouterr()
    assert main(["push", str(folder), "--repo-id", "me/x", "--dry-run", str(tmp_path / "p")]) == 0
    out = capsys.readouterr().out
    assert "refused" not in out
    card = (tmp_path / "p" / "model" / "README.md").read_text()
    assert "short run" not in card and "Stopped because" in card
    assert main(["evaluate", str(folder), "--split", "validation"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_a_clock_cut_by_set_or_an_early_stop_is_short(clocked, tmp_path):
    _, folder = clocked
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    results = json.loads(run_folder.eval_results_path(copy).read_text())
    step = results["training"]["global_step"]
    results["training"]["max_minutes"] = 0.005  # --set training.max_minutes=0.005
    run_folder.eval_results_path(copy).write_text(json.dumps(results))
    assert f"training stopped at step {step:,} of the 100,000" in run_status.training_shortfall(
        copy
    )
    results["training"].update(max_minutes=0.01, stop_reason="loss plateau")
    run_folder.eval_results_path(copy).write_text(json.dumps(results))
    assert "ended by the loss plateau" in run_status.training_shortfall(copy)


def test_a_run_of_most_of_its_plan_is_not_short(tmp_path):
    recipe = small_recipe(tmp_path, training=TRAINING)
    folder = tmp_path / "most"
    assert main(["train", str(recipe), "--set", f"output_dir={folder}",
                 "--set", "training.max_steps=6"]) == 0  # fmt: skip
    assert run_status.training_shortfall(folder) is None


def test_resume_of_a_run_ended_by_its_clock_changes_nothing(clocked, tmp_path, capsys):
    _, folder = clocked
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    before = snapshot(copy)
    capsys.readouterr()
    assert main(["train", "--resume", str(copy)]) == 0
    err = capsys.readouterr().err
    assert "is already finished" in err and "(training.max_minutes=0.01)" in err
    assert f"`hfattn train --resume {copy} --set training.max_minutes=M`" in err
    assert snapshot(copy) == before
