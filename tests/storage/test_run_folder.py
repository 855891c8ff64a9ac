"""A run is its folder (:mod:`hfattn.storage.run_folder`): ``hfattn train --resume FOLDER``
continues
it from the recipe stored there, the interrupt hint says exactly that, a recipe that is not
the run's is refused before anything slow loads (naming the fields), ``--resume --overwrite``
is one clear error, an intact checkpoint that does not fit the recipe is not called damaged,
and a failed ``--resume`` leaves nothing behind. One ``hfattn train`` at a time trains into a
folder."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hfattn.cli import main
from hfattn.orchestration import run as orchestration
from hfattn.orchestration.run import run_recipe
from hfattn.recipes import load_recipe
from hfattn.storage import resume_checks, run_folder, run_lock, run_status
from hfattn.storage.model_folder import CONFIG_FILE
from hfattn.tasks import get_task
from tests.helpers.fault_injection import with_callbacks
from tests.helpers.recipe_helpers import small_recipe

STOP_AT = 3
TRAINING = {"max_steps": 10, "eval_every": 10, "save_every": 100, "log_every": 1}


def _interrupt_at(step):
    def callback(progress):
        if progress.step >= step:
            progress.stop.request("interrupted")

    return callback


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory):
    """A tiny run stopped at step 3 (as by Ctrl-C): ``(recipe path, run folder)``."""
    root = tmp_path_factory.mktemp("interrupted")
    recipe = small_recipe(root, training=TRAINING)
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
    recipe = small_recipe(tmp_path, training=TRAINING)
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
    recipe = small_recipe(tmp_path, training=TRAINING)
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


def _snapshot(folder):
    """Every file under ``folder`` with its modification time and content."""
    return {
        path: (path.stat().st_mtime_ns, path.read_bytes())
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def test_resume_of_a_run_ended_by_its_steps_changes_nothing_until_extended(run_copy, capsys):
    _, folder = run_copy
    assert main(["train", "--resume", str(folder)]) == 0  # the interrupted run finishes
    before = _snapshot(folder)
    capsys.readouterr()
    assert main(["train", "--resume", str(folder)]) == 0
    err = capsys.readouterr().err.strip()
    assert err == (
        f"{folder} is already finished: it stopped at step 10 (training.max_steps=10) and saved "
        f"its model; nothing changed. Extend it with `hfattn train --resume {folder} --set "
        "training.max_steps=N (> 10)`"
    )
    assert _snapshot(folder) == before
    # a larger budget extends it
    assert main(["train", "--resume", str(folder), "--set", "training.max_steps=12"]) == 0
    results = json.loads(run_folder.eval_results_path(folder).read_text())
    assert results["training"]["global_step"] == 12


def test_resume_of_a_run_ended_by_its_clock_changes_nothing(clocked, tmp_path, capsys):
    _, folder = clocked
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    before = _snapshot(copy)
    capsys.readouterr()
    assert main(["train", "--resume", str(copy)]) == 0
    err = capsys.readouterr().err
    assert "is already finished" in err and "(training.max_minutes=0.01)" in err
    assert f"`hfattn train --resume {copy} --set training.max_minutes=M`" in err
    assert _snapshot(copy) == before


def test_a_process_of_a_launch_that_accelerate_sees_as_one_is_refused(
    tmp_path, capsys, monkeypatch
):
    recipe = small_recipe(tmp_path, training=TRAINING)
    monkeypatch.setenv("WORLD_SIZE", "2")  # torchrun without ACCELERATE_USE_CPU=1 on a CPU
    assert main(["train", str(recipe)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: WORLD_SIZE=2 but Accelerate set up a single process")
    assert "ACCELERATE_USE_CPU=1 torchrun --standalone --nproc_per_node N" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_a_second_train_into_a_folder_in_use_is_refused(tmp_path, capsys, monkeypatch):
    """``hfattn train`` started again into the folder of a run in progress (here from inside
    that run, at step 3: the same command, ``--resume`` and ``--overwrite``) is refused in one
    line naming the holder, and writes nothing; the run goes on, stopped at step 5 it resumes,
    and its log holds every record once."""
    recipe = small_recipe(tmp_path, training={**TRAINING, "save_every": 5})
    folder = tmp_path / "run"
    refusals = []

    def start_again(progress):
        if progress.step == 3:
            lock = json.loads((folder / run_folder.LOCK_FILE).read_text())
            assert lock["pid"] == os.getpid() and lock["host"] == socket.gethostname()
            written = sorted(p.name for p in folder.iterdir())
            for flags in ([], ["--resume"], ["--overwrite"]):
                capsys.readouterr()  # the run's progress so far
                refusals.append((main(["train", str(recipe), *flags]), capsys.readouterr().err))
            assert sorted(p.name for p in folder.iterdir()) == written

    with_callbacks(monkeypatch, start_again, _interrupt_at(5))
    assert main(["train", str(recipe)]) == 130
    assert [code for code, _ in refusals] == [2, 2, 2]
    for _, err in refusals:
        assert err.startswith(
            f"error: output_dir {folder} is in use by another hfattn train (pid {os.getpid()} "
            f"on {socket.gethostname()}, since "
        )
        assert len(err.strip().splitlines()) == 1
    assert not (folder / run_folder.LOCK_FILE).exists()  # released at the end
    monkeypatch.undo()
    assert main(["train", str(recipe), "--resume"]) == 0
    assert not (folder / run_folder.LOCK_FILE).exists()
    logged = [(r["split"], r["step"]) for r in map(json.loads, open(folder / "metrics.jsonl"))]
    assert len(logged) == len(set(logged))
    assert [step for split, step in logged if split == "train"] == list(range(1, 11))


def test_run_recipe_from_python_holds_its_folder(tmp_path):
    """The library call holds the run folder as the command does: while it trains, a second
    hold of the folder is refused naming it; at the end the lock is gone."""
    recipe = load_recipe(small_recipe(tmp_path, training=TRAINING))
    folder = tmp_path / "run"
    seen = []

    def hold_again(progress):
        if progress.step == 3:
            lock = json.loads((folder / run_folder.LOCK_FILE).read_text())
            seen.append(lock["pid"])
            with pytest.raises(run_lock.RunFolderBusy, match=f"pid {os.getpid()} on "):
                with orchestration.holding_output_dir(folder):
                    pass

    result = run_recipe(recipe, callbacks=[hold_again])
    assert seen == [os.getpid()] and result.progress.step == 10
    assert not (folder / run_folder.LOCK_FILE).exists()


def test_a_launch_seen_as_one_process_is_refused_before_the_lock(tmp_path, monkeypatch):
    """Each process of such a launch takes itself for the main one: it must get the launch's
    error, not a lock that another process of the same launch took a moment earlier."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match="^WORLD_SIZE=2 but Accelerate set up a single process"):
        with orchestration.holding_output_dir(tmp_path / "run"):
            pass
    assert not (tmp_path / "run").exists()


HOLD_IN_EACH_PROCESS = """
import os, sys
from hfattn.common.launch import end_process_group
from hfattn.orchestration.run import holding_output_dir
def say(line):  # one write of a line shorter than PIPE_BUF: the processes' lines never mix
    os.write(1, (line + "\\n").encode())
for folder in sys.argv[1:]:
    try:
        with holding_output_dir(folder):
            say("held")
    except ValueError as err:
        say(f"{type(err).__name__} {err}")
end_process_group()  # as hfattn train ends
"""


@pytest.mark.slow
def test_every_process_of_a_run_refuses_a_busy_folder_together(tmp_path):
    """Only the main process of a two-process run takes the lock, and when it is refused the
    other process raises the same error instead of waiting for it (the first collective of
    training would never come)."""
    busy, free = tmp_path / "busy", tmp_path / "free"
    script = tmp_path / "hold.py"
    script.write_text(HOLD_IN_EACH_PROCESS)
    env = {**os.environ, "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1"}
    torchrun = [str(Path(sys.executable).parent / "torchrun"), "--standalone",
                "--nproc_per_node", "2", str(script), str(busy), str(free)]  # fmt: skip
    with run_lock.held_run_folder(busy):  # this process trains into it
        done = subprocess.run(torchrun, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    refusals = [line for line in lines if line.startswith("RunFolderBusy ")]
    assert len(refusals) == 2 and lines.count("held") == 2, done.stdout
    assert all(f"(pid {os.getpid()} on {socket.gethostname()}" in line for line in refusals)
    assert not (free / run_folder.LOCK_FILE).exists() and not free.exists()


HOLD_UNTIL_KILLED = """
import sys, time
from hfattn.storage.run_lock import held_run_folder
with held_run_folder(sys.argv[1]):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_lock_left_by_a_killed_run_is_free(tmp_path):
    """A run killed with SIGKILL leaves its lock file, with its record, behind; the kernel
    released its lock, so the next run holds the folder at once and records itself."""
    folder = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_UNTIL_KILLED, str(folder)],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert holder.stdout.readline() == "held\n"
    lock = folder / run_folder.LOCK_FILE
    assert json.loads(lock.read_text())["pid"] == holder.pid
    with pytest.raises(run_lock.RunFolderBusy, match=f"pid {holder.pid} on "):
        run_lock.check_not_busy(folder)
    holder.kill()
    holder.wait()
    assert json.loads(lock.read_text())["pid"] == holder.pid  # left behind
    run_lock.check_not_busy(folder)  # free
    with run_lock.held_run_folder(folder):
        assert json.loads(lock.read_text())["pid"] == os.getpid()
        with pytest.raises(run_lock.RunFolderBusy, match=f"pid {os.getpid()} on "):
            with run_lock.held_run_folder(folder):
                pass
    assert not lock.exists() and folder.is_dir()
    # a folder made for the lock alone is removed with it
    with run_lock.held_run_folder(tmp_path / "new"):
        assert (tmp_path / "new" / run_folder.LOCK_FILE).is_file()
    assert not (tmp_path / "new").exists()


def _contend(folder, start, said, release):
    """One of two runs starting together on ``folder``: says ``held`` (and holds until
    ``release``) or ``busy``."""
    start.wait()
    try:
        with run_lock.held_run_folder(folder):
            said.put("held")
            release.wait(120)
    except run_lock.RunFolderBusy:
        said.put("busy")


def test_two_runs_racing_for_a_folder_with_a_dead_lock_one_holds_it(tmp_path):
    """Two runs started at the same moment on a folder whose lock file a dead process left:
    exactly one holds it, every try."""
    ctx = multiprocessing.get_context("fork")
    folder = tmp_path / "run"
    folder.mkdir()
    dead = {"pid": 999_999_999, "host": socket.gethostname(), "started": "2026-01-01T00:00:00"}
    for _ in range(25):
        (folder / run_folder.LOCK_FILE).write_text(json.dumps(dead))
        start, said, release = ctx.Barrier(2), ctx.Queue(), ctx.Event()
        runs = [ctx.Process(target=_contend, args=(folder, start, said, release))
                for _ in range(2)]  # fmt: skip
        for run in runs:
            run.start()
        outcomes = sorted(said.get(timeout=120) for _ in runs)
        release.set()
        for run in runs:
            run.join(120)
        assert outcomes == ["busy", "held"]
        assert not (folder / run_folder.LOCK_FILE).exists()


def test_an_output_dir_that_cannot_be_made_is_one_error(tmp_path, capsys):
    recipe = small_recipe(tmp_path, training=TRAINING)
    (tmp_path / "a_file").write_text("not a folder")
    folder = tmp_path / "a_file" / "run"
    assert main(["train", str(recipe), "--set", f"output_dir={folder}"]) == 2
    assert capsys.readouterr().err == (
        f"error: cannot write {folder} (Not a directory): output_dir must be a folder this "
        "user can write; make it writable or pick another output_dir (--set "
        "output_dir=runs/NAME)\n"
    )
