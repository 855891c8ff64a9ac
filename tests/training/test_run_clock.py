"""What a run says about its time: the steady ETA of the progress bar (compiles and first
steps left out, the compile named while it runs), the wall seconds from the command's start
in ``metrics.jsonl`` and ``eval_results.json``, and the compiles a bucketed run makes (one
graph for every bucket, none after the first epoch)."""

import functools
import json
import re
from types import SimpleNamespace

import pytest
import torch

from hfattn.training.clock import StepPace, TrainingClock
from tests.helpers.tiny_runs import build_translation_run


def test_pace_leaves_out_the_first_steps_and_those_that_compile():
    pace = StepPace(settle=2)
    # steps ending at these training seconds; the 1st compiles (30 s), the 6th compiles again
    ends = [30.0, 31.0, 32.0, 33.0, 34.0, 64.0, 65.0, 66.0, 67.0, 68.0]
    compiled = [True, False, False, False, False, True, False, False, False, False]
    known = []
    for end, compiling in zip(ends, compiled, strict=True):
        pace.step(end, compiling)
        known.append(pace.seconds_per_step)
    # steps 2-3 settle, steps 4-5 are steady (2 < settle + 1), step 6 compiles, 7-8 settle,
    # then steps 9-10 make 4 steady steps of 1 s each
    assert known[:8] == [None] * 8
    assert known[8:] == [1.0, 1.0]


def clock(max_minutes=None, total_steps=100):
    cfg = SimpleNamespace(max_minutes=max_minutes, warmup_steps=0, schedule="linear")
    accelerator = SimpleNamespace(is_local_main_process=False, num_processes=1)
    return TrainingClock(cfg, scheduler=None, total_steps=total_steps, accelerator=accelerator)


def test_eta_is_the_steps_left_at_the_steady_pace_within_the_time_budget():
    steps = clock()
    timed = clock(max_minutes=1)
    for run in (steps, timed):
        assert run.eta_seconds(0, 0.0) is None  # no pace yet: no ETA
        for step in range(1, 8):
            run.pace.step(10.0 + 0.5 * step, compiled=step == 1)
    assert steps.eta_seconds(7, 13.5) == pytest.approx(93 * 0.5)
    assert timed.eta_seconds(7, 13.5) == pytest.approx(60 - 13.5)  # the clock ends it first


@pytest.mark.slow
@pytest.mark.parametrize(
    ("setting", "label"), [(True, "one graph"), ("regional", "each layer stack once")]
)
def test_a_compiled_bucketed_run_compiles_once_and_says_so(
    setting, label, tmp_path, monkeypatch, capfd
):
    """The ``eager`` backend stands in for inductor (graphs and guards are TorchDynamo's,
    decided before any backend). 16 steps of 4-bucket batches span two epochs of the 1,200
    pairs. A regional compile makes more graphs than the encoder's and the decoder's layers
    (the modules around them), all in the first step."""
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="eager"))
    torch._dynamo.reset()
    run = build_translation_run(tmp_path / "run", model="vaswani", steps=16, source="dates",
                                training={"token_budget": 2000, "length_buckets": 4,
                                          "compile": setting, "log_every": 4, "eval_every": 8,
                                          "epochs": 10})  # fmt: skip
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["split"] == "train"]
    assert train[-1]["epoch"] >= 1  # a second epoch ran: no compile in it
    compiles = train[0]["compiles"]
    assert [r["compiles"] for r in train] == [compiles] * len(train)
    assert compiles == 1 if setting is True else compiles > 1
    assert train[0]["compile_s"] > 0
    summary = json.loads((run / "eval_results.json").read_text())["training"]
    assert (summary["compiles"], summary["compile_s"]) == (compiles, train[-1]["compile_s"])
    # wall seconds grow record by record, from the first step to the saved model
    walls = [r["wall_s"] for r in records if r["split"] in ("train", "validation")]
    assert walls == sorted(walls) and len(walls) == len(train) + 2
    assert 0 < summary["first_step_wall_s"] <= walls[0] <= walls[-1] <= summary["wall_time_s"]
    bar = capfd.readouterr().err
    assert f"compiling {label} for 4 shapes" in bar
    etas = re.findall(r"eta=([0-9:?]+)", bar)
    assert etas[0] == "?" and re.fullmatch(r"\d\d:\d\d", etas[-1])


def test_a_disabled_bar_takes_the_compile_label_and_the_eta():
    """The bars of the other processes of a multi-process run are disabled: labelling and
    moving them does nothing."""
    from tqdm.auto import tqdm

    run = clock()
    bar = tqdm(total=100, disable=True)
    run.label(bar, "compiling one graph for 8 shapes")
    run.show_step(bar, {}, 1, 0.5, compiled=True)
    assert bar.disable


def test_a_run_planned_by_the_clock_alone_anneals_with_the_clock_not_the_steps():
    from hfattn.training.schedules import CLOCK_SCHEDULE_STEPS, build_lr_scheduler

    cfg = SimpleNamespace(max_minutes=1, warmup_steps=10, schedule="linear")
    weight = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([weight], lr=1.0)
    scheduler = build_lr_scheduler(
        "linear", optimizer, warmup_steps=10, total_steps=10 + CLOCK_SCHEDULE_STEPS
    )
    accelerator = SimpleNamespace(is_local_main_process=False, num_processes=1)
    run = TrainingClock(cfg, scheduler, total_steps=None, accelerator=accelerator)
    optimizer.step()  # (no gradient: nothing moves) the order torch expects
    for _ in range(10):  # the warmup counts steps
        scheduler.step()
    assert scheduler.get_last_lr()[0] == pytest.approx(1.0)
    for _ in range(5000):  # many fast steps do not move the schedule: only the clock does
        scheduler.step()
        run.follow_time_budget(elapsed_s=1.0)
    run.follow_time_budget(elapsed_s=15.0)
    assert scheduler.get_last_lr()[0] == pytest.approx(0.75, abs=1e-4)
    run.follow_time_budget(elapsed_s=45.0)
    assert scheduler.get_last_lr()[0] == pytest.approx(0.25, abs=1e-4)
    run.follow_time_budget(elapsed_s=60.0)
    assert scheduler.get_last_lr()[0] == 0.0
    assert run.eta_seconds(6000, 30.0) is None or run.eta_seconds(6000, 30.0) <= 30.0


def test_a_clock_planned_run_trains_to_the_clock_and_ends_annealed(tmp_path):
    """``epochs: null`` and no ``max_steps``: neither the steps nor the passes over the 1,200
    pairs end the run; its last step is the first past the clock, at learning rate 0."""
    budget_minutes = 0.05
    run = build_translation_run(tmp_path / "run", steps=10,
                                training={"max_steps": None, "epochs": None,
                                          "max_minutes": budget_minutes, "schedule": "linear",
                                          "warmup_steps": 2, "log_every": 1, "eval_every": None,
                                          "save_every": None})  # fmt: skip
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["split"] == "train"]
    results = json.loads((run / "eval_results.json").read_text())["training"]
    assert results["stop_reason"] == "time budget"
    # the first step past the clock is the last (the records round elapsed_s to 0.01 s)
    assert train[-1]["elapsed_s"] >= 60 * budget_minutes >= train[-2]["elapsed_s"]
    assert train[-1]["learning_rate"] == 0.0
    after_warmup = [r["learning_rate"] for r in train[2:]]
    assert after_warmup == sorted(after_warmup, reverse=True)  # annealed along the clock
    for record in train[2:-1]:  # the factor is the share of the clock left
        left = 1 - record["elapsed_s"] / (60 * budget_minutes)
        assert record["learning_rate"] == pytest.approx(0.005 * left, abs=0.005 * 0.02)


def test_epochs_null_needs_a_budget_that_ends_the_run():
    from hfattn.recipes.training_section import TrainingSection

    with pytest.raises(
        ValueError, match=r"training\.epochs: null .*max_steps or training\.max_minutes"
    ):
        TrainingSection(epochs=None)
    assert TrainingSection(epochs=None, max_minutes=5).epochs is None


def test_a_clock_planned_run_owes_the_validation_a_stop_cut_short():
    """``validation_owed`` on resume of a run with no step budget (``total_steps`` None)."""
    from functools import partial

    from hfattn.training.session import TrainingSession

    def owed(step, evaluated_step, total_steps=None):
        cfg = SimpleNamespace(eval_every=10, epochs=None)
        progress = SimpleNamespace(step=step, epoch=3, evaluated_step=evaluated_step)
        run = SimpleNamespace(cfg=cfg, progress=progress, total_steps=total_steps)
        run.steps_left = partial(TrainingSession.steps_left, run)
        return TrainingSession.validation_owed(run)

    assert owed(20, evaluated_step=10)
    assert not owed(20, evaluated_step=20) and not owed(25, evaluated_step=20)
    assert not owed(0, evaluated_step=None)
    assert owed(20, evaluated_step=10, total_steps=30) and not owed(30, 20, total_steps=30)


def test_a_bar_within_the_training_bar_writes_plain_lines_into_a_log(monkeypatch, capsys):
    """Runs whose stderr went to log files wrote cursor codes (``\\x1b[A``) into them: tqdm moves
    the cursor to draw a bar opened while another is open (a validation's decoding within the
    training bar). On a stream that is no terminal (``capsys``'s), each state a bar shows is a
    line of its own, the last state of an erased bar kept, and no cursor code is written."""
    from hfattn.common import progress

    monkeypatch.setattr(progress, "PROGRESS_DELAY_S", 0)  # as if the decoding took long
    cfg = SimpleNamespace(max_minutes=None, warmup_steps=0, schedule="linear")
    accelerator = SimpleNamespace(is_local_main_process=True, num_processes=1)
    run = TrainingClock(cfg, scheduler=None, total_steps=3, accelerator=accelerator)
    with run.progress_bar(step=0, elapsed_s=0.0) as bar:
        for step in (1, 2, 3):
            with progress.progress_bar(
                total=4, desc="validation: decoding", unit="source", leave=False
            ) as decoding:
                decoding.update(4)
            run.show_step(bar, {}, step, elapsed_s=float(step))
    err = capsys.readouterr().err
    assert "\x1b[" not in err and "\r" not in err
    lines = err.splitlines()
    assert [re.match(r"[^|]*\|", line)[0] for line in lines] == [
        "train:   0%|",
        *["validation: decoding:   0%|", "validation: decoding: 100%|"] * 3,
        "train: 100%|",
    ]
    assert [re.search(r"\d+/\d+", line)[0] for line in lines] == ["0/3", *["0/4", "4/4"] * 3, "3/3"]
