"""Learning-rate schedules selectable by name (``training.schedule`` in a recipe).

Every schedule is a ``torch.optim.lr_scheduler.LambdaLR`` whose lambda returns a factor of
the optimizer's base ``lr``. Step convention: the scheduler's counter ``e`` (0 at
construction, +1 per ``scheduler.step()``) sets the lr of update number ``t = e + 1``
(1-based), so the very first update already has a non-zero learning rate.

- ``constant``: ``f(t) = w(t)`` (the warmup factor, 1 without warmup).
- ``linear``: ``f = w(t) * max(0, (T - e) / (T - W))`` after ``W`` warmup steps; reaches 0
  after ``T = total_steps`` updates.
- ``cosine``: ``f = w(t) * (1 + cos(pi * (e - W) / (T - W))) / 2`` after warmup.
- ``noam`` (Vaswani et al.): ``f(t) = d^-0.5 * min(t^-0.5, t * W^-1.5)``. The lambda returns
  the Noam learning rate itself: set the optimizer's ``lr=1.0`` to reproduce the paper
  (any other ``lr`` multiplies it, like the "factor" of the Annotated Transformer).
- ``warmup_linear`` / ``warmup_exponential`` / ``warmup_untuned_linear`` /
  ``warmup_untuned_exponential``: ``constant`` with that warmup factor.

Warmup factors ``w(t)`` (Ma & Yarats, 2019), chosen with ``warmup_factor=``; ``tau`` is
``warmup_steps`` and ``beta2`` Adam's second-moment decay:

- ``linear``: ``min(1, t / tau)`` (the default when ``warmup_steps > 0``)
- ``exponential``: ``1 - exp(-t / tau)``
- ``untuned_exponential``: ``1 - exp(-(1 - beta2) t)`` (``tau = (1 - beta2)^-1``)
- ``untuned_linear``: ``min(1, (1 - beta2) t / 2)`` (``tau = 2 (1 - beta2)^-1``)

RAdam is ``torch.optim.RAdam``; :func:`radam_rectification` gives its ``r_t`` for plots.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported where a scheduler is built: the names and checks are light
    import torch
    from torch.optim.lr_scheduler import LambdaLR


def noam_lr(step: int, d_model: int, warmup: int) -> float:
    """Noam learning rate ``d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)`` (``step >= 1``).

    Linear growth for ``warmup`` steps, then decay as ``step^-0.5``; peak
    ``(d_model * warmup)^-0.5`` at ``step = warmup`` (6.988e-4 for d = 512, w = 4000).
    """
    if step < 1:
        raise ValueError(f"noam_lr: step is 1-based; got step={step}")
    if d_model < 1 or warmup < 1:
        raise ValueError(f"noam_lr needs d_model >= 1 and warmup >= 1; got {d_model}, {warmup}")
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def linear_warmup(step: int, tau: float) -> float:
    """``w(t) = min(1, t / tau)``."""
    return min(1.0, step / tau)


def exponential_warmup(step: int, tau: float) -> float:
    """``w(t) = 1 - exp(-t / tau)``."""
    return 1.0 - math.exp(-step / tau)


def untuned_exponential_warmup(step: int, beta2: float = 0.999) -> float:
    """``w(t) = 1 - exp(-(1 - beta2) t)``: exponential warmup with ``tau = (1 - beta2)^-1``."""
    return 1.0 - math.exp(-(1.0 - beta2) * step)


def untuned_linear_warmup(step: int, beta2: float = 0.999) -> float:
    """``w(t) = min(1, (1 - beta2) t / 2)``: linear warmup over ``2 (1 - beta2)^-1`` steps."""
    return min(1.0, (1.0 - beta2) * step / 2.0)


def radam_rectification(step: int, beta2: float = 0.999) -> float:
    """RAdam's variance rectification ``r_t`` (Liu et al., 2020), as ``torch.optim.RAdam`` uses it.

    ``rho_inf = 2 / (1 - beta2) - 1``, ``rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t)`` and
    ``r_t = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))`` when
    ``rho_t > 5``; before that RAdam takes un-adapted (SGD with momentum) steps and this
    returns 0.
    """
    if step < 1:
        raise ValueError(f"radam_rectification: step is 1-based; got step={step}")
    rho_inf = 2.0 / (1.0 - beta2) - 1.0
    rho_t = rho_inf - 2.0 * step * beta2**step / (1.0 - beta2**step)
    if rho_t <= 5.0:
        return 0.0
    return math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))


WARMUP_FACTORS: dict[str, Callable[[int, int, float], float]] = {
    "linear": lambda t, tau, beta2: linear_warmup(t, tau),
    "exponential": lambda t, tau, beta2: exponential_warmup(t, tau),
    "untuned_linear": lambda t, tau, beta2: untuned_linear_warmup(t, beta2),
    "untuned_exponential": lambda t, tau, beta2: untuned_exponential_warmup(t, beta2),
}
"""Warmup factors ``w(t, tau, beta2)`` by name (the untuned ones ignore ``tau``)."""


def warmup_factor(name: str, step: int, *, warmup_steps: int = 0, beta2: float = 0.999) -> float:
    """Value of the warmup factor ``name`` at 1-based ``step`` (``tau = warmup_steps``)."""
    factor = _get(WARMUP_FACTORS, name, "warmup_factor")
    if name in ("linear", "exponential") and warmup_steps < 1:
        raise ValueError(f"warmup_factor {name!r} needs warmup_steps >= 1; got {warmup_steps}")
    return factor(step, warmup_steps, beta2)


def _get(registry: dict, name: str, field: str):
    try:
        return registry[name]
    except KeyError:
        raise ValueError(
            f"{field}: unknown name {name!r}; valid names: {', '.join(registry)}"
        ) from None


def _decay_constant(epoch: int, warmup_steps: int, total_steps: int | None) -> float:
    return 1.0


def _decay_linear(epoch: int, warmup_steps: int, total_steps: int) -> float:
    if epoch < warmup_steps:
        return 1.0
    return max(0.0, (total_steps - epoch) / max(1, total_steps - warmup_steps))


def _decay_cosine(epoch: int, warmup_steps: int, total_steps: int) -> float:
    if epoch < warmup_steps:
        return 1.0
    progress = min(1.0, (epoch - warmup_steps) / max(1, total_steps - warmup_steps))
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def _noam_schedule(
    *, warmup_steps: int, total_steps: int | None, d_model: int | None, warmup_factor, beta2
) -> Callable[[int], float]:
    if warmup_factor is not None:
        raise ValueError("warmup_factor does not apply to the 'noam' schedule (it has its own)")
    if d_model is None or warmup_steps < 1:
        raise ValueError(
            f"the 'noam' schedule needs d_model and warmup_steps >= 1; got d_model={d_model}, "
            f"warmup_steps={warmup_steps}"
        )
    return lambda epoch: noam_lr(epoch + 1, d_model, warmup_steps)


def _warmup_then(decay: Callable[[int, int, int | None], float], needs_total: bool, label: str):
    """Factory of ``f(e) = w(e + 1) * decay(e)``: a warmup factor times a decay."""

    def make(
        *, warmup_steps: int, total_steps: int | None, d_model, warmup_factor, beta2
    ) -> Callable[[int], float]:
        if warmup_factor is None and warmup_steps > 0:
            warmup_factor = "linear"
        warm = None
        if warmup_factor is not None:
            warm = _get(WARMUP_FACTORS, warmup_factor, "warmup_factor")
            if warmup_factor in ("linear", "exponential") and warmup_steps < 1:
                raise ValueError(
                    f"warmup_factor {warmup_factor!r} needs warmup_steps >= 1; got {warmup_steps}"
                )
        if needs_total and (total_steps is None or total_steps <= warmup_steps):
            raise ValueError(
                f"the {label!r} schedule needs total_steps > warmup_steps; got "
                f"total_steps={total_steps}, warmup_steps={warmup_steps}"
            )

        def factor(epoch: int) -> float:
            value = decay(epoch, warmup_steps, total_steps)
            if warm is not None:
                value *= warm(epoch + 1, warmup_steps, beta2)
            return value

        return factor

    return make


def _fixed_warmup(factor_name: str, label: str):
    """Factory of the ``warmup_<factor>`` schedules: ``constant`` with that warmup factor."""
    constant = _warmup_then(_decay_constant, False, label)

    def make(*, warmup_factor, **kwargs) -> Callable[[int], float]:
        if warmup_factor not in (None, factor_name):
            raise ValueError(
                f"schedule {label!r} already fixes the warmup factor; got warmup_factor="
                f"{warmup_factor!r}"
            )
        return constant(warmup_factor=factor_name, **kwargs)

    return make


SCHEDULES: dict[str, Callable[..., Callable[[int], float]]] = {
    "constant": _warmup_then(_decay_constant, False, "constant"),
    "linear": _warmup_then(_decay_linear, True, "linear"),
    "cosine": _warmup_then(_decay_cosine, True, "cosine"),
    "noam": _noam_schedule,
    **{f"warmup_{name}": _fixed_warmup(name, f"warmup_{name}") for name in WARMUP_FACTORS},
}
"""Schedule factories by name: ``SCHEDULES[name](warmup_steps=, total_steps=, d_model=,
warmup_factor=, beta2=)`` returns the LambdaLR lambda ``f(e)``."""

OWN_WARMUP_LENGTH = ("warmup_untuned_linear", "warmup_untuned_exponential")
"""Schedules whose warmup length comes from Adam's ``beta2``: they ignore ``warmup_steps``."""
NEEDS_WARMUP_STEPS = ("noam", "warmup_linear", "warmup_exponential")
"""Schedules that need ``warmup_steps >= 1`` (their peak, or their warmup's time constant)."""
NEEDS_TOTAL_STEPS = ("linear", "cosine")
"""Schedules that decay to the run's last step: they cannot be built for a run that ends within
its warmup."""


def check_schedule_steps(training, *, resume: bool = False) -> None:
    """Whether the ``training:`` section's ``schedule`` fits its ``warmup_steps`` and
    ``max_steps``, from the recipe alone (before any data is loaded): a schedule that sets its
    own warmup length takes no ``warmup_steps``, one that needs them gets them, and the warmup
    ends before ``max_steps`` does. A ``resume`` may end the run early (``max_steps`` at the
    step reached, to save its model) wherever the schedule can still be built.

    ``training`` has ``schedule``, ``warmup_steps`` and ``max_steps``; the data's side (the
    epochs' steps) is :func:`check_warmup_fits_epochs`.

    Raises:
        ValueError: naming the field, e.g. ``training.max_steps: 50 steps end the run within
            its 100 warmup steps ...``.
    """
    name, warmup, max_steps = training.schedule, training.warmup_steps, training.max_steps
    if name in OWN_WARMUP_LENGTH and warmup > 0:
        raise ValueError(
            f"training.warmup_steps: the {name} schedule sets its own warmup length (from "
            f"Adam's beta2) and would ignore warmup_steps={warmup}; leave warmup_steps at 0, "
            "or pick warmup_linear / warmup_exponential to choose the length"
        )
    if name in NEEDS_WARMUP_STEPS and warmup < 1:
        raise ValueError(
            f"training.warmup_steps: the {name} schedule needs warmup_steps >= 1 (its warmup "
            f"length), got {warmup}"
        )
    ends_on_purpose = resume and name not in NEEDS_TOTAL_STEPS  # the run's model, saved now
    if max_steps is not None and 0 < warmup and max_steps <= warmup and not ends_on_purpose:
        raise ValueError(
            f"training.max_steps: {max_steps} steps end the run within its {warmup} warmup steps "
            f"(training.warmup_steps, schedule {name}); raise max_steps above {warmup} or lower "
            "warmup_steps"
        )


CLOCK_SCHEDULE_STEPS = 100_000
"""The length, after its warmup, of the schedule of a run planned by the clock alone
(``epochs: null``, no ``max_steps``, ``max_minutes``): its counter moves with the share of the
clock used, in this many parts (:meth:`hfattn.training.clock.TrainingClock.follow_time_budget`),
so the learning rate changes smoothly whatever the step rate."""


def schedule_steps(training, steps_per_epoch: int) -> int | None:
    """The optimizer steps a ``training:`` section runs:
    ``min(epochs × steps_per_epoch, max_steps)`` (``epochs: null`` counts no limit); ``None``
    for a run planned by the clock alone (``epochs`` and ``max_steps`` both ``null``)."""
    limits = [training.max_steps]
    if training.epochs is not None:
        limits.append(training.epochs * steps_per_epoch)
    limits = [steps for steps in limits if steps is not None]
    return min(limits) if limits else None


def schedule_length(training, total_steps: int | None) -> int:
    """The ``total_steps`` the learning-rate schedule is built with: the run's steps
    (:func:`schedule_steps`), or for a run planned by the clock alone ``warmup_steps +``
    :data:`CLOCK_SCHEDULE_STEPS`."""
    return total_steps if total_steps is not None else training.warmup_steps + CLOCK_SCHEDULE_STEPS


def check_warmup_fits_epochs(training, steps_per_epoch: int) -> None:
    """Once the data is loaded: the warmup must end before the run's ``epochs`` do
    (``epochs × steps_per_epoch`` optimizer steps, when ``max_steps`` does not end it sooner).

    Raises:
        ValueError: ``training.warmup_steps: 500 warmup steps do not fit in this run's 120
            optimizer steps (3 epoch(s) × 40 steps per epoch of this data ...``.
    """
    name, warmup, max_steps = training.schedule, training.warmup_steps, training.max_steps
    if warmup < 1 or name in OWN_WARMUP_LENGTH or training.epochs is None:
        return
    by_epochs = training.epochs * steps_per_epoch
    if by_epochs <= warmup and (max_steps is None or by_epochs <= max_steps):
        raise ValueError(
            f"training.warmup_steps: {warmup} warmup steps do not fit in this run's {by_epochs} "
            f"optimizer steps ({training.epochs} epoch(s) × {steps_per_epoch} steps per epoch "
            f"of this data, schedule {name}); lower warmup_steps below {by_epochs} or raise "
            "training.epochs"
        )


def schedule_factor(
    name: str,
    *,
    warmup_steps: int = 0,
    total_steps: int | None = None,
    d_model: int | None = None,
    warmup_factor: str | None = None,
    beta2: float = 0.999,
) -> Callable[[int], float]:
    """The lambda ``f(e)`` (``e`` = scheduler counter, 0-based) of schedule ``name``; validates
    args."""
    make = _get(SCHEDULES, name, "lr_scheduler")
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps must be >= 0; got {warmup_steps}")
    return make(
        warmup_steps=warmup_steps,
        total_steps=total_steps,
        d_model=d_model,
        warmup_factor=warmup_factor,
        beta2=beta2,
    )


def build_lr_scheduler(
    name: str,
    optimizer: torch.optim.Optimizer,
    *,
    warmup_steps: int = 0,
    total_steps: int | None = None,
    d_model: int | None = None,
    warmup_factor: str | None = None,
    beta2: float = 0.999,
) -> LambdaLR:
    """Return ``LambdaLR(optimizer, f)`` for the schedule ``name`` in :data:`SCHEDULES`.

    ``lr_t = base_lr * f(t)``: see the module docstring for each ``f``. ``noam`` needs
    ``d_model`` and ``warmup_steps``; ``linear`` / ``cosine`` need ``total_steps``;
    ``warmup_factor`` (one of :data:`WARMUP_FACTORS`) shapes the warmup of ``constant``,
    ``linear`` and ``cosine`` (default ``"linear"`` when ``warmup_steps > 0``).
    """
    from torch.optim.lr_scheduler import LambdaLR

    factor = schedule_factor(
        name,
        warmup_steps=warmup_steps,
        total_steps=total_steps,
        d_model=d_model,
        warmup_factor=warmup_factor,
        beta2=beta2,
    )
    return LambdaLR(optimizer, factor)


__all__ = [
    "CLOCK_SCHEDULE_STEPS",
    "SCHEDULES",
    "WARMUP_FACTORS",
    "build_lr_scheduler",
    "check_schedule_steps",
    "check_warmup_fits_epochs",
    "exponential_warmup",
    "linear_warmup",
    "noam_lr",
    "radam_rectification",
    "schedule_factor",
    "schedule_length",
    "schedule_steps",
    "untuned_exponential_warmup",
    "untuned_linear_warmup",
    "warmup_factor",
]
