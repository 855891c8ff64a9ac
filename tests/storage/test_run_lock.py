"""One ``hfattn train`` at a time trains into a folder (:mod:`hfattn.storage.run_lock`): a
second one into a folder in use is refused naming the holder, the library call holds the folder
as the command does, every process of a launch refuses a busy folder together, a lock left by a
killed run is free, and of two runs racing for a folder exactly one holds it. A launch that
Accelerate sees as one process, and an ``output_dir`` that cannot be made, are refused in one
line before anything trains."""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from hfattn.cli import main
from hfattn.orchestration import run as orchestration
from hfattn.orchestration.run import run_recipe
from hfattn.recipes import load_recipe
from hfattn.storage import run_folder, run_lock
from tests.helpers.fault_injection import with_callbacks
from tests.helpers.recipe_helpers import small_recipe
from tests.helpers.resumable_runs import TRAINING, interrupt_at


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

    with_callbacks(monkeypatch, start_again, interrupt_at(5))
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
