"""Timing a step on a device, as ``benchmarks/bench_vaswani.py`` measures: the seconds of one
call with the device synchronised around it, the ratios of runs made back to back, and the
kernels of a few steps (``torch.profiler``)."""

from __future__ import annotations

import statistics
import time

from benchmarks.lib.benchlib import synchronize, write_atomically


def timed(device: str, fn, *args):
    """``(seconds, fn(*args))``, the device synchronised before and after."""
    synchronize(device)
    start = time.perf_counter()
    result = fn(*args)
    synchronize(device)
    return time.perf_counter() - start, result


def paired_ratios(ours: list[float], reference: list[float]) -> dict:
    """``reference / ours`` time of each pair of runs made back to back: median and range."""
    ratios = sorted(r / o for o, r in zip(ours, reference, strict=True))
    return {"median": statistics.median(ratios), "min": ratios[0], "max": ratios[-1]}


def write_kernel_profile(path: str, device: str, step, *args, steps: int = 3) -> None:
    """The kernels of ``steps`` training steps (``torch.profiler``), most device time first:
    where a step's time goes (matrix products, attention, fused element-wise kernels, the
    optimizer), written as a text table to ``path``."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if device == "cuda":
        activities.append(ProfilerActivity.CUDA)
    with profile(activities=activities) as prof:
        for _ in range(steps):
            step(*args)
        synchronize(device)
    sort_by = "self_cuda_time_total" if device == "cuda" else "self_cpu_time_total"
    table = prof.key_averages().table(sort_by=sort_by, row_limit=50, max_name_column_width=90)
    write_atomically(path, f"{steps} steps\n{table}\n")
