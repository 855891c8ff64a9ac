"""The speed of a run: target tokens, training FLOPs, tokens/s and MFU of its train records.

:class:`Speedometer` times the steps between two ``metrics.jsonl`` train records (the seconds
waiting for batches apart, evaluations left out); :class:`SessionFlops` adds up the FLOPs of a
session's batches for ``train_flops_per_token`` and holds the device's peak FLOP/s
(:mod:`hfattn.training.throughput`).
"""

from __future__ import annotations

import logging
import sys
import time

import torch
from tqdm.auto import tqdm

from ..batching.seq2seq import IGNORE_INDEX
from ..batching.token_buckets import TokenBatch
from .throughput import FlopCounter, device_peak_flops, mfu

logger = logging.getLogger(__name__)


def trained_tokens(batch) -> int:
    """The tokens a global batch trains on: a :class:`~hfattn.batching.token_buckets.TokenBatch`
    its own count; the per-token labels that count (not ``IGNORE_INDEX``) when the labels are
    ``[B, T]`` (a language model's or a translation's targets); else the non-padding inputs
    (``attention_mask``) or every input id (a classifier); for a bare ``[B, T + 1]`` window of
    a language model, its ``B × T`` next-token targets."""
    if isinstance(batch, TokenBatch):  # counted on the host by the batcher
        return batch.num_tokens
    if isinstance(batch, dict):
        labels = batch.get("labels")
        if labels is not None and labels.dim() == 2:
            return int((labels != IGNORE_INDEX).sum())
        if batch.get("attention_mask") is not None:
            return int(batch["attention_mask"].sum())
        return batch["input_ids"].numel()
    return batch[:, 1:].numel()


def floats(values: list) -> list[float]:
    """``values`` (numbers, and scalar tensors on the device) as numbers, in one read."""
    tensors = [value for value in values if isinstance(value, torch.Tensor)]
    if not tensors:
        return list(values)
    read = iter(torch.stack(tensors).tolist())
    return [next(read) if isinstance(value, torch.Tensor) else value for value in values]


class SessionFlops:
    """The training FLOPs of this session's global batches (:class:`FlopCounter` of ``model``,
    times ``passes``: 2 with R-Drop, whose step runs each batch through the model twice) and
    the peak FLOP/s of ``device`` in ``mixed_precision`` (``None`` on CPUs). The run's own
    count, over all its sessions, is ``Progress.train_flops``."""

    def __init__(self, model, device, mixed_precision: str, num_processes: int, passes: int = 1):
        self.count = FlopCounter(model)
        self.peak_flops, self.peak_source = device_peak_flops(device, mixed_precision)
        self.num_processes, self.passes = num_processes, passes
        self.flops = 0.0

    def start(self) -> None:
        """Open the session: no FLOPs counted yet."""
        self.flops = 0.0

    def add(self, batch) -> float:
        """Count the FLOPs of a global ``batch`` (from its shapes) and return them."""
        flops = self.count(batch) * self.passes
        self.flops += flops
        return flops

    @property
    def total_peak(self) -> float | None:
        """The peak FLOP/s of all processes together (``None`` on CPUs)."""
        return None if self.peak_flops is None else self.peak_flops * self.num_processes


class Speedometer:
    """The speed of the steps since the last ``metrics.jsonl`` train record: the seconds, the
    target tokens, the FLOPs (:class:`~hfattn.training.throughput.FlopCounter` of each global
    batch, added by the loop) and the seconds spent waiting for the next batch."""

    def __init__(self):
        self.start(0)

    def start(self, tokens: int) -> None:
        """Open an interval at the current time, ``tokens`` trained so far."""
        self.since, self.tokens, self.flops, self.data_wait_s = time.monotonic(), tokens, 0.0, 0.0

    def exclude(self, seconds: float) -> None:
        """Leave ``seconds`` (an evaluation's) out of the current interval."""
        self.since += seconds

    def timed(self, batches):
        """Yield ``batches``, adding the time each ``next`` takes to ``data_wait_s``."""
        iterator = iter(batches)
        while True:
            asked = time.monotonic()
            batch = next(iterator, None)
            self.data_wait_s += time.monotonic() - asked
            if batch is None:
                return
            yield batch

    def interval(self, tokens: int, peak_flops: float | None) -> dict:
        """The fields of the interval's train record (``tokens_per_s``, ``mfu``: ``None``
        without a peak, ``data_wait_s``); opens the next interval."""
        seconds = time.monotonic() - self.since
        fields = {
            "tokens_per_s": round((tokens - self.tokens) / seconds, 1) if seconds > 0 else None,
            "mfu": mfu(self.flops, seconds, peak_flops),
            "data_wait_s": round(self.data_wait_s, 3),
        }
        if fields["mfu"] is not None:
            fields["mfu"] = round(fields["mfu"], 4)
        self.start(tokens)
        return fields


GPU_STEP_FLOPS = 5e11
"""The training FLOPs of an optimizer step (each process's share, counted by
:class:`~hfattn.training.throughput.FlopCounter`) above which a step is sized for a GPU: the
GPU recipes' steps count 1.6 to 8.6 TFLOP, those of the recipes made for a CPU at most 0.08
TFLOP; a CPU takes seconds to minutes for one of them."""


def warn_if_sized_for_gpu(step_flops: float, device) -> bool:
    """Warn, in one line, when a run on a CPU ``device`` has optimizer steps of more than
    :data:`GPU_STEP_FLOPS` training FLOPs each (``step_flops``: one process's share of the
    first step); returns whether it warned."""
    if torch.device(device).type != "cpu" or step_flops <= GPU_STEP_FLOPS:
        return False
    with tqdm.external_write_mode(file=sys.stderr):  # above the progress bar, not in it
        logger.warning(
            "this recipe's steps are sized for a GPU: each is %.3g TFLOP of training "
            "arithmetic (above %.3g), which takes a CPU seconds to minutes a step; docs/"
            "training.md, 'Training on a GPU', says how to run it on one",
            step_flops / 1e12,
            GPU_STEP_FLOPS / 1e12,
        )
    return True


__all__ = [
    "GPU_STEP_FLOPS",
    "SessionFlops",
    "Speedometer",
    "floats",
    "trained_tokens",
    "warn_if_sized_for_gpu",
]
