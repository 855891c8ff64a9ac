"""``training.report_to``: the trackers receive the records of ``metrics.jsonl``; TensorBoard's
event files hold the same steps, also after an interrupt and a resume."""

from __future__ import annotations

import json
import shutil

import pytest

from hfattn.cli import main
from hfattn.recipes import load_recipe
from hfattn.recipes.schema import RecipeError
from hfattn.storage.run_folder import METRICS_FILE, TRACKER_LOGS_DIR
from hfattn.training.trackers import tracked_scalars
from tests.helpers.fault_injection import with_callbacks
from tests.helpers.recipe_helpers import small_recipe

TRAINING = {"max_steps": 8, "eval_every": 4, "save_every": 2, "log_every": 1,
            "report_to": ["tensorboard"]}  # fmt: skip


def _scalars(folder) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of the run's TensorBoard files, as TensorBoard reads them (points after a
    purge step dropped)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    runs = [p for p in (folder / TRACKER_LOGS_DIR).rglob("events.out.tfevents.*")]
    assert runs, "no event file"
    accumulator = EventAccumulator(str(runs[0].parent), purge_orphaned_data=True).Reload()
    return {tag: [(e.step, e.value) for e in accumulator.Scalars(tag)]
            for tag in accumulator.Tags()["scalars"]}  # fmt: skip


def _stop_at(step):
    def callback(progress):
        if progress.step >= step:
            progress.stop.request("interrupted")

    return callback


def test_tensorboard_holds_the_steps_of_metrics_jsonl_after_a_resume(tmp_path, monkeypatch):
    """Step 5 is logged twice (before the kill and after the resume from step 4): TensorBoard,
    like ``metrics.jsonl``, keeps the second."""
    recipe = small_recipe(tmp_path, training=TRAINING)
    folder = tmp_path / "run"
    with_callbacks(monkeypatch, _stop_at(5))
    assert main(["train", str(recipe)]) == 130  # stopped after step 5, checkpoint at 5
    monkeypatch.undo()
    # as if killed after logging step 5 but before its checkpoint: the resume starts at 4
    shutil.rmtree(folder / "checkpoints" / "step-5")
    assert main(["train", str(recipe), "--resume"]) == 0
    records = [json.loads(line) for line in open(folder / METRICS_FILE)]
    scalars = _scalars(folder)
    for split in ("train", "validation"):
        logged = [(r["step"], r["loss"]) for r in records if r["split"] == split]
        shown = scalars[f"{split}/loss"]
        assert [step for step, _ in shown] == [step for step, _ in logged]
        assert [v for _, v in shown] == pytest.approx([v for _, v in logged], rel=1e-6)
    assert [step for step, _ in scalars["train/loss"]] == list(range(1, 9))


def test_a_record_gives_its_numbers_by_split():
    record = {"step": 4, "epoch": 0, "split": "validation", "loss": 1.5, "bleu": 20.0,
              "best": True, "note": "x"}  # fmt: skip
    assert tracked_scalars(record) == {"validation/loss": 1.5, "validation/bleu": 20.0}


def test_an_unknown_tracker_is_refused_naming_the_field(tmp_path):
    recipe = small_recipe(tmp_path, training={**TRAINING, "report_to": ["tensorbored"]})
    with pytest.raises(RecipeError, match="^training.report_to: 'tensorbored' is not one of"):
        load_recipe(recipe)
