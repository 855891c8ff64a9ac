"""The experiment trackers of ``training.report_to`` (TensorBoard, W&B, trackio, MLflow, ...),
reached through Accelerate (``Accelerator(log_with=...)``, ``init_trackers``, ``log``,
``end_training``). ``metrics.jsonl`` stays the run's record: the trackers receive the same
records, as scalars named ``split/metric`` at the record's step (:func:`tracked_scalars`).

A resumed run starts TensorBoard with ``purge_step`` at the step after its checkpoint: the
points logged after the checkpoint by the run that stopped are dropped by TensorBoard's
readers, as the engine cuts them from ``metrics.jsonl``, so no step shows twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

NOT_TRACKED = ("step", "epoch", "split")
"""Keys of a ``metrics.jsonl`` record that are not scalars of their own."""


def start_trackers(accelerator, report_to: Sequence[str], output_dir: Path, step: int) -> None:
    """Start the trackers of ``report_to`` for the run in ``output_dir`` (named after it),
    which resumes after ``step`` (0: a fresh run)."""
    if not report_to:
        return
    init_kwargs = {"tensorboard": {"purge_step": step + 1}} if step else {}
    accelerator.init_trackers(Path(output_dir).name, init_kwargs=init_kwargs)


def tracked_scalars(record: dict) -> dict[str, float]:
    """The scalars a ``metrics.jsonl`` ``record`` gives the trackers: every number but the
    step and epoch, named ``split/metric`` (``train/loss``, ``validation/bleu``)."""
    split = record.get("split", "train")
    return {
        f"{split}/{name}": value
        for name, value in record.items()
        if name not in NOT_TRACKED
        and isinstance(value, (int, float))
        and not isinstance(value, bool)
    }


__all__ = ["NOT_TRACKED", "start_trackers", "tracked_scalars"]
