"""Learning-rate schedules: Noam, warmup factors (Ma & Yarats), RAdam's rectification."""

from __future__ import annotations

import math

import pytest
import torch

from hfattn.training.schedules import (
    SCHEDULES,
    WARMUP_FACTORS,
    build_lr_scheduler,
    noam_lr,
    radam_rectification,
    warmup_factor,
)


def optimizer(lr: float = 1.0) -> torch.optim.Optimizer:
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=lr)


def lrs(scheduler, steps: int) -> list[float]:
    """Learning rate used by updates 1..steps."""
    values = []
    for _ in range(steps):
        values.append(scheduler.optimizer.param_groups[0]["lr"])
        scheduler.optimizer.step()
        scheduler.step()
    return values


def test_noam_values_from_the_theses():
    assert noam_lr(4000, 512, 4000) == pytest.approx(6.988e-4, abs=5e-8)
    assert noam_lr(18000, 512, 4000) == pytest.approx(3.294e-4, abs=5e-8)
    values = [noam_lr(s, 512, 4000) for s in range(1, 20001)]
    assert values.index(max(values)) + 1 == 4000
    assert noam_lr(100, 512, 4000) == pytest.approx(512**-0.5 * 100 * 4000**-1.5)
    assert noam_lr(9000, 512, 4000) == pytest.approx(512**-0.5 * 9000**-0.5)


def test_noam_scheduler_returns_the_noam_rate_itself():
    scheduler = build_lr_scheduler("noam", optimizer(1.0), warmup_steps=4000, d_model=512)
    seen = lrs(scheduler, 5)
    assert seen == pytest.approx([noam_lr(s, 512, 4000) for s in range(1, 6)])
    doubled = build_lr_scheduler("noam", optimizer(2.0), warmup_steps=10, d_model=16)
    assert lrs(doubled, 1)[0] == pytest.approx(2 * noam_lr(1, 16, 10))


def test_warmup_factors_match_ma_yarats():
    beta2 = 0.999
    for t in (1, 10, 500, 1999, 2000, 5000):
        assert warmup_factor("linear", t, warmup_steps=1000) == min(1, t / 1000)
        assert warmup_factor("exponential", t, warmup_steps=1000) == pytest.approx(
            1 - math.exp(-t / 1000)
        )
        assert warmup_factor("untuned_exponential", t, beta2=beta2) == pytest.approx(
            1 - math.exp(-(1 - beta2) * t)
        )
        assert warmup_factor("untuned_linear", t, beta2=beta2) == pytest.approx(
            min(1, (1 - beta2) * t / 2)
        )
    # untuned linear warms up over 2 / (1 - beta2) = 2000 steps
    assert warmup_factor("untuned_linear", 1999) < 1 == warmup_factor("untuned_linear", 2000)


def test_radam_rectification_matches_torch_radam_steps():
    # With beta1 = 0 and a constant gradient of 1, RAdam's update is lr * r_t once rho_t > 5
    # (m_hat = v_hat = 1) and lr * 1 (un-adapted) before: the step sizes reveal r_t.
    parameter = torch.nn.Parameter(torch.zeros(1, dtype=torch.float64))
    radam = torch.optim.RAdam([parameter], lr=1.0, betas=(0.0, 0.999), eps=0.0)
    previous = 0.0
    for t in range(1, 60):
        parameter.grad = torch.ones(1, dtype=torch.float64)
        radam.step()
        step = previous - parameter.item()
        previous = parameter.item()
        expected = radam_rectification(t, 0.999)
        assert step == pytest.approx(expected if expected > 0 else 1.0, rel=1e-9)
    assert radam_rectification(5) == 0 and 0 < radam_rectification(6) < radam_rectification(100)
    assert radam_rectification(18000) == pytest.approx(1.0, abs=1e-6)


def test_constant_linear_and_cosine_schedules():
    constant = lrs(build_lr_scheduler("constant", optimizer(0.5), warmup_steps=4), 6)
    assert constant == pytest.approx([0.125, 0.25, 0.375, 0.5, 0.5, 0.5])
    assert lrs(build_lr_scheduler("constant", optimizer(0.5)), 3) == [0.5] * 3
    linear = lrs(build_lr_scheduler("linear", optimizer(), warmup_steps=2, total_steps=6), 7)
    assert linear == pytest.approx([0.5, 1.0, 1.0, 0.75, 0.5, 0.25, 0.0])
    cosine = lrs(build_lr_scheduler("cosine", optimizer(), warmup_steps=2, total_steps=6), 7)
    expected = [0.5, 1.0] + [0.5 * (1 + math.cos(math.pi * k / 4)) for k in range(5)]
    assert cosine == pytest.approx(expected)


def test_warmup_factor_on_top_of_a_schedule_and_named_warmup_schedules():
    exponential = lrs(
        build_lr_scheduler("constant", optimizer(), warmup_steps=10, warmup_factor="exponential"),
        3,
    )
    assert exponential == pytest.approx([1 - math.exp(-t / 10) for t in (1, 2, 3)])
    named = lrs(build_lr_scheduler("warmup_untuned_exponential", optimizer(), beta2=0.99), 3)
    assert named == pytest.approx([1 - math.exp(-0.01 * t) for t in (1, 2, 3)])
    assert set(SCHEDULES) >= {"constant", "linear", "cosine", "noam"} | {
        f"warmup_{name}" for name in WARMUP_FACTORS
    }


def test_bad_schedule_arguments_raise_with_the_valid_names():
    with pytest.raises(ValueError, match="unknown name 'step'.*constant, linear, cosine, noam"):
        build_lr_scheduler("step", optimizer())
    with pytest.raises(ValueError, match="warmup_factor: unknown name 'cubic'.*untuned_linear"):
        build_lr_scheduler("constant", optimizer(), warmup_steps=3, warmup_factor="cubic")
    with pytest.raises(ValueError, match="'noam' schedule needs d_model"):
        build_lr_scheduler("noam", optimizer(), warmup_steps=4000)
    with pytest.raises(ValueError, match="needs total_steps"):
        build_lr_scheduler("linear", optimizer(), warmup_steps=10)
    with pytest.raises(ValueError, match="already fixes the warmup factor"):
        build_lr_scheduler(
            "warmup_linear", optimizer(), warmup_steps=3, warmup_factor="exponential"
        )
    with pytest.raises(ValueError, match="step is 1-based"):
        noam_lr(0, 512, 4000)
