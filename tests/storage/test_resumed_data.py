"""A resumed run trains on the prepared data its checkpoint was trained on: each checkpoint
records that data's name, a resume whose data now gives another name is refused in one line
before anything is prepared, ``--allow-data-change`` goes on with the new data (one warning
line, recorded in ``eval_results.json``), and a checkpoint without the record resumes
unchecked, said in one line."""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path

import pytest

from hfattn.cli import main
from hfattn.orchestration.run import run_recipe
from hfattn.recipes import load_recipe
from hfattn.storage.run_folder import (
    EVAL_RESULTS_FILE,
    PROGRESS_FILE,
    latest_checkpoint,
    read_progress,
)
from tests.helpers.recipe_helpers import small_recipe

TRAINING = {"max_steps": 4, "eval_every": None, "save_every": 100, "log_every": 1}
STOP_AT = 2
REFUSAL = re.compile(
    r"^error: --resume: the checkpoint of step 2 was trained on prepared data "
    r"(?P<old>causal_lm-[0-9a-f]{16}) but the recipe's data now gives "
    r"(?P<new>causal_lm-[0-9a-f]{16}) \(data\.source (?P<source>\S+) changed since\); continue "
    r"on the new data with --allow-data-change, or restore the data$"
)


@pytest.fixture
def interrupted(tmp_path, cache) -> tuple[Path, Path]:
    """A tiny run on its own corpus file, stopped at step 2: ``(run folder, corpus)``."""

    def stop(progress):
        if progress.step >= STOP_AT:
            progress.stop.request("interrupted")

    recipe = small_recipe(tmp_path, training=TRAINING)
    assert run_recipe(load_recipe(recipe), callbacks=[stop]).interrupted
    return tmp_path / "run", tmp_path / "input.txt"


def edit_one_line(corpus: Path) -> None:
    """Change one line of ``corpus``, its size and modification time kept (``cp -p``)."""
    stat = corpus.stat()
    text = corpus.read_text(encoding="utf-8")
    corpus.write_text(text.replace("Macbeth", "Macduff", 1), encoding="utf-8")
    os.utime(corpus, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert corpus.stat().st_size == stat.st_size


def test_a_resume_on_edited_data_is_refused_before_preparing_then_allowed(
    interrupted, cache, capsys, caplog
):
    run, corpus = interrupted
    trained_on = read_progress(latest_checkpoint(run))["prepared_data"]
    assert [p.name for p in cache.iterdir() if p.is_dir()] == [trained_on]
    cached = sorted(p.name for p in cache.iterdir())
    edit_one_line(corpus)

    assert main(["train", "--resume", str(run)]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and (refusal := REFUSAL.match(errors[0])), errors
    assert refusal["old"] == trained_on and refusal["new"] != trained_on
    assert refusal["source"] == str(corpus.resolve())
    assert sorted(p.name for p in cache.iterdir()) == cached  # nothing prepared, nothing aside
    assert read_progress(latest_checkpoint(run))["prepared_data"] == trained_on

    caplog.set_level(logging.WARNING, logger="hfattn")
    assert main(["train", "--resume", str(run), "--allow-data-change"]) == 0
    warned = [r.getMessage() for r in caplog.records if "--allow-data-change" in r.getMessage()]
    assert warned == [
        f"--allow-data-change: the checkpoint of step 2 was trained on prepared data "
        f"{trained_on}; training goes on with {refusal['new']} (data.source "
        f"{corpus.resolve()} changed since)"
    ]
    results = json.loads((run / EVAL_RESULTS_FILE).read_text())
    record = results["data_preparation"]
    assert Path(record["folder"]).name == refusal["new"] and not record["reused"]
    assert record["changes"] == [{"step": 2, "from": trained_on, "to": refusal["new"]}]
    assert results["training"]["global_step"] == TRAINING["max_steps"]
    progress = read_progress(latest_checkpoint(run))
    assert progress["prepared_data"] == refusal["new"]
    assert progress["data_changes"] == record["changes"]


def test_a_checkpoint_without_the_record_resumes_unchecked_in_one_line(interrupted, caplog):
    run, corpus = interrupted
    checkpoint = latest_checkpoint(run)
    progress = read_progress(checkpoint)
    del progress["prepared_data"]  # as a checkpoint written without it
    (checkpoint / PROGRESS_FILE).write_text(json.dumps(progress))
    edit_one_line(corpus)
    caplog.set_level(logging.WARNING, logger="hfattn")
    assert main(["train", "--resume", str(run)]) == 0
    said = [r.getMessage() for r in caplog.records if "prepared data" in r.getMessage()]
    assert said == [
        "--resume: the checkpoint of step 2 does not record the prepared data it was trained "
        "on: the data could not be checked"
    ]
    record = json.loads((run / EVAL_RESULTS_FILE).read_text())["data_preparation"]
    assert "changes" not in record
    assert read_progress(latest_checkpoint(run))["prepared_data"] == Path(record["folder"]).name


def test_allow_data_change_without_resume_is_refused_in_one_line(tmp_path, capsys):
    recipe = small_recipe(tmp_path, training=TRAINING)
    assert main(["train", str(recipe), "--allow-data-change"]) == 2
    assert capsys.readouterr().err == (
        "error: --allow-data-change goes with --resume (a run to continue)\n"
    )
    assert not (tmp_path / "run").exists()


def test_a_corpus_moved_unchanged_is_the_data_the_checkpoint_was_trained_on(
    interrupted, tmp_path, caplog
):
    """A project folder moved (the corpus copied with its modification time, the run's recipe
    naming the new path): the same files, so the resume goes on, said in one line."""
    import shutil

    run, corpus = interrupted
    moved = tmp_path / "moved" / corpus.name
    moved.parent.mkdir()
    shutil.copy2(corpus, moved)
    corpus.unlink()
    stored = run / "recipe.yaml"
    stored.write_text(stored.read_text().replace(str(corpus.resolve()), str(moved.resolve())))
    caplog.set_level(logging.INFO, logger="hfattn")
    assert main(["train", "--resume", str(run)]) == 0
    said = [r.getMessage() for r in caplog.records if "moved from" in r.getMessage()]
    assert said == [
        f"--resume: data.source moved from {corpus.resolve()} to {moved.resolve()}, the same "
        "files (sizes, modification times, sampled bytes): the data the checkpoint was trained on"
    ]
    results = json.loads((run / EVAL_RESULTS_FILE).read_text())
    assert results["training"]["global_step"] == TRAINING["max_steps"]
    (change,) = results["data_preparation"]["changes"]  # prepared anew for the new path
    assert change["from"] == read_progress(latest_checkpoint(run))["data_changes"][0]["from"]
