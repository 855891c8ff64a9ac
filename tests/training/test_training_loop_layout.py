"""The training loop on one screen (issue 50, item 2): the loop calls named pieces that live in
their own modules (non-finite policy, speed, clock, process set-up, finishing), and each piece
does what the loop relied on when it lived inside the engine."""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import hfattn
from hfattn.training.checkpoints import Progress
from hfattn.training.clock import TrainingClock
from hfattn.training.nonfinite import NonFiniteLosses
from hfattn.training.processes import build_accelerator
from hfattn.training.speed import SessionFlops
from hfattn.training.training_job import NonFiniteLossError

PACKAGE = Path(hfattn.__file__).parent


def test_the_engine_fits_a_screenful_and_its_loop_one_screen():
    source = (PACKAGE / "training" / "engine.py").read_text()
    assert len(source.splitlines()) <= 300
    functions = {
        node.name: node.end_lineno - node.lineno + 1
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef)
    }
    assert functions["_train_loop"] <= 80, functions
    assert not [n for n in ast.parse(source).body if isinstance(n, ast.ClassDef)]


def test_no_training_or_recipe_module_is_over_500_lines():
    modules = [*(PACKAGE / "training").glob("*.py"), *(PACKAGE / "recipes").glob("*.py")]
    long = {m.name: n for m in modules if (n := len(m.read_text().splitlines())) > 500}
    assert long == {}


def test_accelerates_private_state_is_touched_in_one_place():
    touching = [
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if "_reset_state" in path.read_text()
    ]
    assert touching == ["training/processes.py"]
    assert (PACKAGE / "training" / "processes.py").read_text().count("_reset_state(") == 1


def test_a_second_accelerator_in_the_process_takes_another_precision():
    assert build_accelerator("no", 2).mixed_precision == "no"
    second = build_accelerator("bf16", 1)
    assert second.mixed_precision == "bf16" and second.gradient_accumulation_steps == 1
    assert build_accelerator("no", 1).mixed_precision == "no"


def _policy(tmp_path, on_nonfinite_loss, max_skipped_steps=1):
    cfg = SimpleNamespace(on_nonfinite_loss=on_nonfinite_loss, max_skipped_steps=max_skipped_steps)
    accelerator = SimpleNamespace(num_processes=1, device=torch.device("cpu"))
    return NonFiniteLosses(accelerator, cfg, tmp_path, every_loss=True)


def _progress(step):
    return SimpleNamespace(step=step, epoch=0, batch_in_epoch=3, skipped_steps=0)


def test_skip_drops_one_step_then_stops_at_the_next_beyond_the_limit(tmp_path):
    policy, p = _policy(tmp_path, "skip"), _progress(4)
    nan = torch.tensor(float("nan"))
    assert policy.finite(torch.tensor(1.5)) and not policy.finite(nan)
    policy.on_nonfinite(nan, p)
    policy.on_nonfinite(nan, p)  # a second micro-batch of the same step: one skip
    assert p.skipped_steps == 1
    assert policy.take_skip() and not policy.take_skip()
    with pytest.raises(NonFiniteLossError) as stop:
        p.step = 7
        policy.on_nonfinite(nan, p)
    assert str(stop.value) == (
        "training loss is nan at step 8 (epoch 0, batch 3); stopped without saving it after "
        "skipping 1 steps (training.max_skipped_steps=1). Lower training.learning_rate or set "
        "training.max_grad_norm"
    )


def test_losses_gathered_on_the_device_are_checked_at_the_next_read(tmp_path):
    policy = _policy(tmp_path, "stop")
    policy.every_loss = False  # as on an accelerator
    assert policy.finite(torch.tensor(float("inf")))  # gathered, not read
    policy.checked_step = 10
    with pytest.raises(NonFiniteLossError, match=r"after step 10 \(up to step 15, epoch 0\)"):
        policy.check_gathered(_progress(15))


def test_the_schedule_follows_the_clock_after_the_warmup_only():
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0), lambda e: 1.0
    )
    cfg = SimpleNamespace(max_minutes=10, warmup_steps=5, schedule="linear")
    clock = TrainingClock(cfg, scheduler, 1000, SimpleNamespace(num_processes=1))
    clock.follow_time_budget(elapsed_s=300)  # half the budget, the warmup not done
    assert scheduler.last_epoch == 0
    for _ in range(5):
        scheduler.optimizer.step()
        scheduler.step()
    clock.follow_time_budget(elapsed_s=300)
    assert scheduler.last_epoch == 500 and clock.bar_position(step=5, elapsed_s=300) == 500
    assert not clock.over_budget(599.0) and clock.over_budget(600.0)


def test_flops_per_token_counts_every_session_of_the_run():
    model = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 10))
    flops = SessionFlops(model, torch.device("cpu"), "no", num_processes=2)
    flops.start()
    batch = torch.zeros(2, 9, dtype=torch.long)
    counted = flops.add(batch)
    assert counted > 0 and flops.flops == counted and flops.total_peak is None
    # the run's count goes on over a resume: 2 batches before it, 1 in this session
    resumed = Progress(train_tokens=32, train_flops=2 * counted)
    resumed.train_tokens += 16
    resumed.train_flops += counted
    assert resumed.flops_per_token == counted / 16
    assert Progress(train_tokens=16, train_flops=None).flops_per_token is None  # not counted
    assert Progress().flops_per_token is None
    # R-Drop runs every batch through the model twice: its steps count both passes
    r_drop = SessionFlops(model, torch.device("cpu"), "no", num_processes=2, passes=2)
    assert r_drop.add(batch) == 2 * counted
