"""Faults survived (issue 11): SIGKILL at any point and ``--resume`` give the weights and the
log of an uninterrupted run; a failed or damaged checkpoint is a clear error naming the file;
a NaN / infinite loss stops the run or skips the step.

Killed runs are real processes: children of a fork server that imported hfattn once (a fresh
interpreter each would cost ~13 s of imports here), running ``hfattn.cli.main(["train", ...])``
with a callback (:mod:`fault_injection`) that SIGKILLs the process at a chosen step or in the
middle of a chosen checkpoint write.
"""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hfattn.cli import main
from hfattn.hub import HubPushError, push_model_folder
from hfattn.orchestration.run import run_recipe
from hfattn.recipes import load_recipe
from hfattn.storage.file_io import FileWriteError, append_text
from tests.helpers.crash_runs import (
    RECIPES,
    RECIPES_DIR,
    SAVE_EVERY,
    assert_same_weights,
    kill_points,
    records,
    small_recipe,
    train_in_child,
    weights,
)
from tests.helpers.fault_injection import (
    kill_at,
    limit_file_size,
    nan_loss_at,
    with_callbacks,
)
from tests.helpers.tiny_runs import PUBLISHED


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(RECIPES))
def test_sigkill_anywhere_then_resume_matches_an_uninterrupted_run(tmp_path, kind):
    straight = RECIPES[kind](tmp_path / "straight")
    reference = run_recipe(load_recipe(straight))
    total = reference.progress.step
    assert reference.progress.epoch == 2 and total >= 18  # three epochs (0-based)

    killed = RECIPES[kind](tmp_path / "killed")
    run = tmp_path / "killed" / "run"
    points = kill_points(total, epochs=3)
    for point in points:
        assert train_in_child(killed, fault=point) == -signal.SIGKILL, point
        assert not (run / "model.safetensors").exists()
    # the last kill came in the middle of the final checkpoint: its temp folder is left over
    assert list((run / "checkpoints").glob(".tmp-step-*"))
    assert train_in_child(killed) == 0

    assert_same_weights(tmp_path / "straight" / "run", run)  # bit for bit
    expected = records(tmp_path / "straight" / "run")
    got = records(run)
    assert got == expected  # the same records, values included: none twice, none missing
    steps = [(r["split"], r["step"]) for r in got]
    assert len(steps) == len(set(steps))
    assert [s for split, s in steps if split == "train"] == list(range(3, total + 1, 3))
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == sorted(
        p.name for p in (tmp_path / "straight" / "run" / "checkpoints").iterdir()
    )  # no temp folder left
    saved = json.loads((run / "eval_results.json").read_text())
    assert (
        saved["all_metrics"]
        == json.loads((tmp_path / "straight" / "run" / "eval_results.json").read_text())[
            "all_metrics"
        ]
    )


def crash_at(step: int):
    """A callback that crashes the run once ``step`` is done and logged, before its
    checkpoint: an in-process stand-in for SIGKILL (nothing after it is saved)."""

    def callback(progress):
        if progress.step == step:
            raise SystemExit(f"crashed at step {step}")

    return callback


def test_resume_drops_what_was_logged_after_the_checkpoint(tmp_path):
    common = {"training": {"max_steps": 14, "log_every": 2, "eval_every": 4, "save_every": 5,
                           "load_best_at_end": False},
              "evaluation": {"splits": ["test"]}}  # fmt: skip
    reference = run_recipe(load_recipe(small_recipe(tmp_path / "a", **common)))
    recipe = load_recipe(small_recipe(tmp_path / "b", **common))
    with pytest.raises(SystemExit):
        run_recipe(recipe, callbacks=[crash_at(9)])
    run = tmp_path / "b" / "run"
    logged = [(r["split"], r["step"]) for r in records(run)]
    # steps 6 and 8 (train) and 8 (validation) were logged after the checkpoint of step 5
    assert logged[-3:] == [("train", 6), ("train", 8), ("validation", 8)]
    # a crash can also cut the last line short
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 9, "spl')
    second = run_recipe(recipe, resume=True)
    assert second.progress.step == reference.progress.step == 14
    # the same records, values included (the train loss logged at step 6 averages steps 5 and
    # 6 although the run resumed in between)
    assert records(run) == records(tmp_path / "a" / "run")
    assert_same_weights(tmp_path / "a" / "run", run)


def test_fault_points_are_checked():
    assert (kill_at("checkpoint:12").where, kill_at("checkpoint:12").step) == ("checkpoint", 12)
    for bad in ("step", "step:0", "export:3", "step:x"):
        with pytest.raises(ValueError, match=f"fault point '{bad}': expected"):
            kill_at(bad)


def disk_full_at(monkeypatch, step: int) -> None:
    """Make the checkpoint write of ``step`` fail as a full disk does: the optimizer state is
    half written when ``torch.save`` raises ``ENOSPC``."""
    import accelerate.checkpointing

    real_save = accelerate.checkpointing.save

    def save(obj, path, *args, **kwargs):
        if f"step-{step}" in str(path):
            Path(path).write_bytes(b"PK\x03\x04 half")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real_save(obj, path, *args, **kwargs)

    monkeypatch.setattr(accelerate.checkpointing, "save", save)


FULL_DISK_TRAINING = {"training": {"max_steps": 12, "eval_every": 6, "save_every": 5},
                      "evaluation": {"splits": ["test"]}}  # fmt: skip


@pytest.fixture(scope="module")
def full_disk_reference(tmp_path_factory) -> Path:
    """The uninterrupted run of :data:`FULL_DISK_TRAINING` (do not modify)."""
    folder = tmp_path_factory.mktemp("full_disk_reference")
    run_recipe(load_recipe(small_recipe(folder, **FULL_DISK_TRAINING)))
    return folder / "run"


def one_error_line(err: str) -> str:
    """The one ``error:`` line of a command's stderr (after its progress bars), checked to be
    the only output after them and no traceback."""
    assert "Traceback" not in err
    lines = [line for line in err.replace("\r", "\n").splitlines() if line.strip()]
    assert lines[-1].startswith("error: "), err[-2000:]
    assert not any(line.startswith("error: ") for line in lines[:-1])
    return lines[-1]


def test_a_full_disk_keeps_the_previous_checkpoint_and_says_so(
    full_disk_reference, tmp_path, monkeypatch, capsys
):
    recipe = small_recipe(tmp_path, **FULL_DISK_TRAINING)
    disk_full_at(monkeypatch, 10)
    assert main(["train", str(recipe)]) == 2
    run = tmp_path / "run"
    assert one_error_line(capsys.readouterr().err) == (
        f"error: cannot write {run / 'checkpoints' / 'step-10' / 'model.safetensors'} (No "
        "space left on device); the checkpoint of step 10 is not written (nothing of it is left); "
        f"the last good checkpoint {run / 'checkpoints' / 'step-5'} is intact: free some space "
        f"and continue with `hfattn train --resume {run}`"
    )
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["best", "step-5"]
    assert not (run / "model.safetensors").exists()
    # space freed: the run continues from step 5 to the weights of an uninterrupted run
    monkeypatch.undo()
    assert main(["train", str(recipe), "--resume"]) == 0
    assert_same_weights(full_disk_reference, run)


def test_a_checkpoint_that_torch_cannot_write_whole_is_one_error(
    full_disk_reference, tmp_path, monkeypatch, capsys
):
    """The optimizer state stops short in ``torch.save``'s own writer, which raises a
    ``RuntimeError`` (``unexpected pos``) that names neither the file nor the cause."""
    recipe = small_recipe(tmp_path, **FULL_DISK_TRAINING)
    run = tmp_path / "run"
    weights = run / "checkpoints" / "step-5" / "model.safetensors"
    with limit_file_size() as limit:

        def full_after_step_9(progress):  # the weights fit, the optimizer's two moments not
            if progress.step == 10:
                limit(weights.stat().st_size + 1)

        with_callbacks(monkeypatch, full_after_step_9)
        assert main(["train", str(recipe)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith(
        f"error: cannot write {run / 'checkpoints' / 'step-10' / 'optimizer.bin'} (File too "
        f"large: the file-size limit is {weights.stat().st_size + 1:,} bytes); the checkpoint "
        "of step 10 is not written"
    )
    assert line.endswith(
        f"the last good checkpoint {run / 'checkpoints' / 'step-5'} is intact: raise the "
        f"file-size limit (ulimit -f) and continue with `hfattn train --resume {run}`"
    )
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["best", "step-5"]
    monkeypatch.undo()
    assert main(["train", str(recipe), "--resume"]) == 0
    assert_same_weights(full_disk_reference, run)
    assert records(run) == records(full_disk_reference)


def test_a_model_folder_that_cannot_be_written_is_one_error(
    full_disk_reference, tmp_path, monkeypatch, capsys
):
    import hfattn.training.finishing as finishing

    recipe = small_recipe(tmp_path, **FULL_DISK_TRAINING)
    run = tmp_path / "run"
    save, weights = finishing.save_run_results, full_disk_reference / "model.safetensors"
    with limit_file_size() as limit:

        def save_on_a_full_disk(*args, **kwargs):
            limit(weights.stat().st_size - 1)  # the configs and source files fit, weights not
            return save(*args, **kwargs)

        monkeypatch.setattr(finishing, "save_run_results", save_on_a_full_disk)
        assert main(["train", str(recipe)]) == 2
    assert one_error_line(capsys.readouterr().err) == (
        f"error: cannot write {run / 'model.safetensors'} (File too large); the last good "
        f"checkpoint {run / 'checkpoints' / 'step-12'} is intact: raise the file-size limit "
        f"(ulimit -f) and continue with `hfattn train --resume {run}`"
    )
    assert not (run / "model.safetensors").exists() and not (run / "eval_results.json").exists()
    assert not list(run.glob(".*"))  # no temporary file or folder left
    monkeypatch.undo()
    assert main(["train", str(recipe), "--resume"]) == 0
    assert_same_weights(full_disk_reference, run)
    assert records(run) == records(full_disk_reference)


def test_a_log_record_cut_short_is_cut_back_off(tmp_path):
    log = tmp_path / "metrics.jsonl"
    append_text(log, '{"step": 1}\n')
    with limit_file_size() as limit, pytest.raises(FileWriteError) as failed:
        limit(log.stat().st_size + 5)
        append_text(log, '{"step": 2, "loss": 1.5}\n')
    assert str(failed.value) == f"cannot write {log} (File too large)"
    assert log.read_text() == '{"step": 1}\n'


@pytest.fixture(scope="module")
def checkpointed_run(tmp_path_factory) -> Path:
    """A tiny char-RNN run stopped after its checkpoint of step 5 (do not modify: copy it)."""
    folder = tmp_path_factory.mktemp("checkpointed")
    recipe = load_recipe(
        small_recipe(folder, training={"max_steps": 8, "eval_every": 5, "save_every": 5})
    )

    def stop_at_5(progress):
        if progress.step == 5:
            progress.stop.request("interrupted")

    run_recipe(recipe, callbacks=[stop_at_5])
    return folder


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _garble(path: Path) -> None:
    path.write_text("{ not json")


@pytest.mark.parametrize(
    ("name", "damage"),
    [
        ("model.safetensors", _truncate),
        ("optimizer.bin", _truncate),
        ("random_states_0.pkl", _truncate),
        ("progress.json", _garble),
        ("custom_checkpoint_0.pkl", Path.unlink),  # the schedule
    ],
)
def test_a_damaged_checkpoint_is_one_error_naming_the_file(
    checkpointed_run, tmp_path, capsys, name, damage
):
    folder = tmp_path / "copy"
    shutil.copytree(checkpointed_run, folder)
    # the whole project moved: the recipe and the run's stored copy name the moved files
    for recipe in (folder / "run" / "recipe.yaml", folder / "recipe.yaml"):
        recipe.write_text(recipe.read_text().replace(str(checkpointed_run), str(folder)))
    damaged = folder / "run" / "checkpoints" / "step-5" / name
    damage(damaged)
    assert main(["train", str(recipe), "--resume"]) == 2
    err = capsys.readouterr().err
    assert f"--resume: cannot read {damaged}" in err
    assert f"delete {damaged.parent} to resume from the previous checkpoint" in err
    assert "Traceback" not in err


def same(a: dict, b: dict) -> bool:
    return all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("accumulation", [1, 2])
def test_a_non_finite_loss_can_skip_its_step(tmp_path, monkeypatch, accumulation):
    snapshots = {}
    first = 2 * accumulation + 1  # the first micro-batch of step 3
    nan_loss_at(monkeypatch, {first, 9 * accumulation}, snapshots)  # and the last one of step 9
    recipe = small_recipe(
        tmp_path,
        training={"mode": "stateless", "epochs": 6, "max_steps": 10, "log_every": 5, "eval_every": 10,
                  "gradient_accumulation_steps": accumulation, "on_nonfinite_loss": "skip",
                  "max_skipped_steps": 3},
        evaluation={"splits": ["test"]},
    )  # fmt: skip
    result = run_recipe(load_recipe(recipe))
    assert result.progress.step == 10 and result.progress.skipped_steps == 2
    # the skipped step 3 changed nothing, step 2 did
    assert same(snapshots[first], snapshots[first + accumulation])
    assert not same(snapshots[first - accumulation], snapshots[first])
    run = tmp_path / "run"
    train = [r for r in records(run) if r["split"] == "train"]
    assert [r.get("skipped_steps") for r in train] == [1, 2]
    assert all(math.isfinite(r["loss"]) for r in train)
    saved = json.loads((run / "eval_results.json").read_text())
    assert saved["training"]["skipped_steps"] == 2
    assert all(torch.isfinite(t).all() for t in weights(run).values())


def test_too_many_skipped_steps_stop_with_the_last_good_checkpoint(tmp_path, monkeypatch, capsys):
    nan_loss_at(monkeypatch, {3, 12})
    recipe = small_recipe(
        tmp_path,
        training={"mode": "stateless", "epochs": 2, "max_steps": 20, "save_every": 5, "eval_every": 5,
                  "on_nonfinite_loss": "skip", "max_skipped_steps": 1},
    )  # fmt: skip
    assert main(["train", str(recipe)]) == 2
    err = capsys.readouterr().err
    assert "training loss is nan at step 12" in err
    assert "after skipping 1 steps (training.max_skipped_steps=1)" in err
    run = tmp_path / "run"
    assert f"the last good checkpoint is {run / 'checkpoints' / 'step-10'}" in err
    assert not (run / "model.safetensors").exists()
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["best", "step-10", "step-5"]
    progress = json.loads((run / "checkpoints" / "step-10" / "progress.json").read_text())
    assert progress["skipped_steps"] == 1
    # --overwrite: the refusal of the folder (checked first, before the recipe is loaded) aside
    ignore = ["--set", "training.on_nonfinite_loss=ignore", "--overwrite"]
    assert main(["train", str(recipe), *ignore]) == 2
    assert "training.on_nonfinite_loss: 'ignore' is not one of stop, skip" in (
        capsys.readouterr().err
    )


@pytest.mark.slow
def test_the_cli_in_a_fresh_interpreter_survives_sigkill(tmp_path):
    """``hfattn train`` in a fresh interpreter (none of the fork server's imports or state)
    killed in the middle of its second checkpoint, then ``hfattn train --resume`` (in this
    process) ends as the uninterrupted run does. The fork server's children are killed at
    every other point (:func:`test_sigkill_anywhere_then_resume_matches_an_uninterrupted_run`)."""
    common = {"training": {"max_steps": 12, "log_every": 1, "eval_every": 4,
                           "save_every": SAVE_EVERY, "load_best_at_end": False},
              "evaluation": {"splits": ["test"]}}  # fmt: skip
    run_recipe(load_recipe(small_recipe(tmp_path / "a", **common)))
    recipe = small_recipe(tmp_path / "b", **common)
    point = f"checkpoint:{2 * SAVE_EVERY}"
    command = [sys.executable, "-m", "tests.helpers.fault_injection", point, "train", str(recipe)]
    proc = subprocess.run(command, cwd=RECIPES_DIR.parent, capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert f"fault injection: killing this process at {point}" in proc.stderr
    assert [c.name for c in (tmp_path / "b" / "run" / "checkpoints").glob("step-*")] == [
        f"step-{SAVE_EVERY}"
    ]  # the checkpoint being written when killed is not one
    assert main(["train", str(recipe), "--resume"]) == 0
    assert_same_weights(tmp_path / "a" / "run", tmp_path / "b" / "run")
    assert records(tmp_path / "b" / "run") == records(tmp_path / "a" / "run")


@pytest.fixture
def fast_retries(monkeypatch):
    """Keep the push's backoff short (the policy itself is unchanged)."""
    import hfattn.hub.push as push_module

    monkeypatch.setattr(push_module, "RETRY_BASE_DELAY_S", 0.01)


def commit_requests(hub_server) -> int:
    return len([r for r in hub_server.requests if r.method == "POST" and "/commit/" in r.path])


@pytest.mark.parametrize("applied", [False, True], ids=["cut-mid-upload", "landed-unanswered"])
def test_a_dropped_commit_is_retried_and_never_half_written(
    hub_server, char_rnn_run, fast_retries, caplog, applied
):
    hub_server.drop_mid_commit(applied=applied)
    push_model_folder(char_rnn_run, "tester/dropped")
    assert commit_requests(hub_server) == 2 and "retrying" in caplog.text
    assert set(hub_server.files("tester/dropped")) == PUBLISHED
    commits = hub_server.repo("tester/dropped").commits
    # cut mid-upload: nothing landed, the retry is the only commit; landed but unanswered:
    # the retry commits the same files again. Either way every revision is complete.
    assert len(commits) == (2 if applied else 1)
    assert all(set(commit["files"]) == PUBLISHED for commit in commits)


def test_a_push_that_fails_for_good_leaves_no_new_revision(
    hub_server, char_rnn_run, fast_retries, tmp_path
):
    push_model_folder(char_rnn_run, "tester/stable")
    before = {
        name: (hub_server.revision_dir("tester/stable") / name).read_bytes()
        for name in hub_server.files("tester/stable")
    }
    changed = Path(shutil.copytree(char_rnn_run, tmp_path / "changed"))
    (changed / "recipe.yaml").write_text(
        (changed / "recipe.yaml").read_text().replace("tiny", "changed")
    )
    hub_server.drop_mid_commit(times=100)
    with pytest.raises(HubPushError, match="failed after 4 attempts"):
        push_model_folder(changed, "tester/stable")
    assert commit_requests(hub_server) == 1 + 4  # bounded: the first push, then 4 tries
    assert len(hub_server.repo("tester/stable").commits) == 1
    after = {
        name: (hub_server.revision_dir("tester/stable") / name).read_bytes()
        for name in hub_server.files("tester/stable")
    }
    assert after == before
