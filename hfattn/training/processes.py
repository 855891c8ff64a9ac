"""The processes of a run: Accelerate's set-up and what crosses between the processes.

:func:`build_accelerator` makes the run's :class:`~accelerate.Accelerator` in the precision
that fits the device (:func:`~hfattn.training.precision.resolve_mixed_precision`);
:func:`check_process_group` and :func:`check_rows_per_process` refuse a launch or a batcher that
would leave a process training alone or on no row. Each global batch is split by rows
(:func:`rows_of`), decisions are taken together (:func:`any_process`) and the logged loss is
the mean over the processes (:func:`logged_loss`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

import torch
from accelerate import Accelerator, PartialState
from accelerate.state import AcceleratorState
from accelerate.utils import ProjectConfiguration, parse_flag_from_env

from ..common.launch import accelerate_launch_command, cpu_processes_command
from .precision import resolve_mixed_precision


def _partial_state() -> PartialState:
    """Accelerate's distributed set-up (the device and the processes) without an
    ``Accelerator``, read as ``AcceleratorState`` sets it up (``PartialState`` alone does not
    read ``ACCELERATE_USE_CPU``)."""
    return PartialState(cpu=parse_flag_from_env("ACCELERATE_USE_CPU"))


def build_accelerator(
    mixed_precision: str,
    gradient_accumulation_steps: int,
    report_to: Sequence[str] = (),
    logging_dir: Path | None = None,
) -> Accelerator:
    """The run's ``Accelerator``: the precision ``mixed_precision`` resolved for the device of
    Accelerate's distributed set-up (``auto``: bf16 where it is native), with
    ``gradient_accumulation_steps``, logging to the trackers ``report_to`` (``log_with``;
    those writing files into ``logging_dir``).

    ``AcceleratorState`` is a process-wide singleton that refuses a second precision; a second
    run in the same process (a notebook, the tests) may ask for another one, so its settings
    are forgotten first through ``AcceleratorState._reset_state`` (Accelerate has no public
    reset), keeping the distributed set-up. This is the one place the engine touches
    Accelerate's private state."""
    precision = resolve_mixed_precision(mixed_precision, _partial_state().device)
    AcceleratorState._reset_state(reset_partial_state=False)
    return Accelerator(
        mixed_precision=precision,
        gradient_accumulation_steps=gradient_accumulation_steps,
        log_with=list(report_to) or None,
        project_config=ProjectConfiguration(logging_dir=str(logging_dir)) if logging_dir else None,
    )


def check_process_group() -> None:
    """Refuse a process that a launcher started as one of ``WORLD_SIZE`` > 1 (torchrun,
    accelerate launch) while Accelerate set up a single process: each would train alone into
    the same ``output_dir``. Called before anything is written.

    Raises:
        ValueError: naming both counts and the command that starts N CPU processes.
    """
    world = int(os.environ.get("WORLD_SIZE") or 1)
    if world <= 1:
        return
    if _partial_state().num_processes == 1:
        raise ValueError(
            f"WORLD_SIZE={world} but Accelerate set up a single process: each of the {world} "
            "would train alone into the same output_dir. On CPUs start N processes with "
            f"`{cpu_processes_command()}`; on GPUs with "
            f"`{accelerate_launch_command(processes='N')}`"
        )


def main_process_error(attempt) -> None:
    """Run ``attempt()`` on the main process of Accelerate's distributed set-up and raise the
    ``ValueError`` it raised on every process, so that all of a run's processes stop together
    (the others would otherwise wait for the main one at their first collective); nothing
    happens on the others when it succeeds. With one process: ``attempt()``.

    Raises:
        ValueError: what ``attempt`` raised on the main process.
    """
    state = _partial_state()
    error = None
    if state.is_main_process:
        try:
            attempt()
        except ValueError as err:
            error = err
    if state.num_processes > 1:
        from accelerate.utils import broadcast_object_list

        error = broadcast_object_list([error], from_process=0)[0]
    if error is not None:
        raise error


def check_batch_size(batch_size: int, num_processes: int) -> None:
    """Refuse a ``training.batch_size`` that ``num_processes`` do not divide."""
    if batch_size % num_processes:
        raise ValueError(
            f"training.batch_size={batch_size} must be divisible by the "
            f"number of processes ({num_processes})"
        )


def check_rows_per_process(batches, num_processes: int) -> None:
    """Refuse batches that some of ``num_processes`` would get no row of: a batcher cut by
    size (``training.max_tokens``) whose fewest rows (``min_rows``) are fewer than the
    processes that split each batch by rows."""
    min_rows = batches.min_rows
    if min_rows < num_processes:
        raise ValueError(
            f"training.max_tokens fits only {min_rows} pair(s) of the longest lengths in a "
            f"batch, fewer than the {num_processes} processes that share it: raise "
            "training.max_tokens or lower data.max_source_length / max_target_length"
        )


def rows_of(batch, index: int, count: int, device):
    """Process ``index``'s share of a global batch (a tensor or a dict of tensors) split by
    rows over ``count`` processes, on ``device``: rows ``⌊index·B/count⌋`` to
    ``⌊(index+1)·B/count⌋`` of its ``B`` (equal shares when ``count`` divides ``B``; a batch cut
    by size may not). To CUDA the rows go through pinned host memory, copied without waiting
    (the copy overlaps the device's queue; the host batch is not reused)."""
    num_rows = len(next(iter(batch.values())) if isinstance(batch, dict) else batch)
    rows = slice(index * num_rows // count, (index + 1) * num_rows // count)
    if isinstance(batch, dict):
        return {key: to_device(value[rows], device) for key, value in batch.items()}
    return to_device(batch[rows], device)


def to_device(tensor: torch.Tensor, device) -> torch.Tensor:
    """``tensor`` on ``device``: itself when it is there (a batch gathered on the device),
    pinned and non-blocking to CUDA, a plain ``.to`` elsewhere."""
    device = torch.device(device)
    if tensor.device.type == device.type and device.index in (None, tensor.device.index):
        return tensor
    if device.type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


def on_device(batches) -> bool:
    """Whether ``batches`` are gathered on an accelerator (a bucketed split that fits there:
    :meth:`hfattn.batching.token_buckets.BucketedBatches.to`), not built on the host."""
    return batches.device.type != "cpu"


def any_process(accelerator: Accelerator, flag: bool) -> bool:
    """Whether ``flag`` holds on any process (a sum over the processes; ``flag`` itself with
    one), so that every process takes the same decision."""
    if accelerator.num_processes == 1:
        return flag
    t = torch.tensor([float(flag)], device=accelerator.device)
    return bool(accelerator.reduce(t, reduction="sum").item() > 0)


def max_over_processes(accelerator: Accelerator, value: int) -> int:
    """The largest of each process's ``value`` (``value`` itself with one process)."""
    if accelerator.num_processes == 1:
        return value
    t = torch.tensor([float(value)], device=accelerator.device)
    return int(accelerator.reduce(t, reduction="max").item())


def logged_loss(accelerator: Accelerator, losses: list[float]) -> float:
    """The ``loss`` of a train record: the mean of the interval's ``losses`` (NaN without
    one); with several processes, the mean over the processes of each one's mean
    (``accelerator.reduce(..., "mean")``, once a record), which is the mean over the whole
    global batches when every process trains on the same number of rows and each row weighs
    the same (a classifier's rows: one label each), as one process on those batches logs."""
    loss = sum(losses) / len(losses) if losses else math.nan
    if accelerator.num_processes == 1:
        return loss
    mean = torch.tensor([loss], dtype=torch.float64, device=accelerator.device)
    return accelerator.reduce(mean, reduction="mean").item()


__all__ = [
    "any_process",
    "build_accelerator",
    "check_batch_size",
    "check_process_group",
    "check_rows_per_process",
    "logged_loss",
    "main_process_error",
    "max_over_processes",
    "on_device",
    "rows_of",
    "to_device",
]
