"""What a task hands the training loop (:class:`TrainingJob`), what the loop hands back
(:class:`TrainResult`), and the callbacks that watch it (:class:`TrainingCallback`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from ..batching.protocol import Batches
from .checkpoints import Progress


class StepLoss(NamedTuple):
    """What a job's ``compute_loss`` returns for one training micro-batch.

    Attributes:
        loss: the scalar loss (a tensor with its graph) that the step backpropagates.
        state: the recurrent state after the batch, detached (a stateful job's: a tensor or a
            tuple of tensors, carried to the next batch and saved with checkpoints), else
            ``None``.
        logits: the model's scores ``[..., V]`` of the positions ``labels`` names.
        labels: the target ids (classes) of ``logits``' positions, ``-100`` where none is
            scored (padding); R-Drop compares two passes over them
            (:func:`~hfattn.training.regularization.r_drop_loss`).
    """

    loss: Any
    state: Any = None
    logits: Any = None
    labels: Any = None


@dataclass
class TrainingJob:
    """Everything task-specific the loop needs.

    Attributes:
        model: the ``PreTrainedModel`` to train.
        tokenizer: saved next to the model.
        batches: the training batches (:class:`~hfattn.batching.protocol.Batches`: ``len()``,
            ``epoch(e, start)`` yielding global batches, a tensor or a dict of tensors with
            dim 0 the examples, and what the engine asks of them).
        compute_loss: ``(model, batch, state, stateful) -> StepLoss`` (:class:`StepLoss`: the
            loss, the new state, the logits and their labels); ``model`` may be wrapped (DDP),
            so statefulness is passed in, not read from the model. A stateful task returns the
            state already detached (truncated BPTT); it is a tensor or a tuple of tensors
            (saved with checkpoints).
        evaluate: ``(model, split) -> {metric: value}`` with a ``loss`` entry.
        final_evaluate: the same, for the scores at the end of training (those written to
            ``eval_results.json``) when they differ from the periodic ones (a translation run
            decodes them with its saved generation settings); ``None``: ``evaluate``, whose
            scores of the final weights, when a validation computed them already, are not
            computed again (:meth:`~hfattn.training.session.TrainingSession.scores_of`).
        eval_splits: splits scored at the end (``validation`` is also scored periodically).
        sample: optional ``model -> str`` shown at the end of training.
        card_metadata: task / dataset names recorded in ``eval_results.json``.
        data_preparation: how the run came by its prepared data
            (:meth:`hfattn.data.prepared.Prepared.record`: folder, reused, seconds),
            recorded in ``eval_results.json``; empty for data built in memory.
        noise: ``batch -> batch``, applied by the engine to every training micro-batch (its
            process's rows, on the device) before its forward, never to an evaluation's: the
            job's word dropout (:class:`~hfattn.training.regularization.WordDropout`), drawn
            from torch's generator; ``None``: the batches as they come.
    """

    model: Any
    tokenizer: Any
    batches: Batches
    compute_loss: Callable
    evaluate: Callable[[Any, str], dict]
    final_evaluate: Callable[[Any, str], dict] | None = None
    eval_splits: Sequence[str] = ("validation", "test")
    sample: Callable[[Any], str] | None = None
    card_metadata: dict = field(default_factory=dict)
    data_preparation: dict = field(default_factory=dict)
    noise: Callable | None = None


class NonFiniteLossError(ValueError):
    """The training loss became NaN or infinite; nothing after the last checkpoint is saved."""


class TrainingCallback:
    """Hooks the loop calls; override the ones needed. A callback may set
    ``progress.stop.request(reason)`` to end the run after this step."""

    def on_step_end(self, progress: Progress) -> None:
        """After every optimizer step, once it is logged and validated, before its checkpoint."""

    def on_evaluate(self, progress: Progress, scores: dict) -> None:
        """After each validation of the weights of ``progress.step`` (the periodic ones and
        that of the last step), once its ``scores`` (``{metric: value}``, as logged to
        ``metrics.jsonl``) are logged and the best weights kept. A request to stop made here
        ends the run as its clock does: a checkpoint, the final evaluation, a model folder."""

    def on_checkpoint_state_saved(self, progress: Progress, folder: Path) -> None:
        """In the middle of a checkpoint write: Accelerate's state is in the temporary
        ``folder``, ``progress.json`` and the rename are still to come."""


class _StepEnd(TrainingCallback):
    """A plain function of :class:`Progress` as a callback at the end of every step."""

    def __init__(self, function: Callable[[Progress], None]):
        self.on_step_end = function


@dataclass
class TrainResult:
    """What :func:`train` returns."""

    output_dir: Path
    progress: Progress
    metrics: dict[str, dict] = field(default_factory=dict)
    sample: str | None = None
    interrupted: bool = False


def as_callbacks(
    callbacks: Sequence[TrainingCallback | Callable[[Progress], None]],
) -> list[TrainingCallback]:
    """``callbacks`` as :class:`TrainingCallback` objects (a function becomes the
    ``on_step_end`` of one)."""
    return [c if isinstance(c, TrainingCallback) else _StepEnd(c) for c in callbacks]


__all__ = [
    "NonFiniteLossError",
    "StepLoss",
    "TrainResult",
    "TrainingCallback",
    "TrainingJob",
    "as_callbacks",
]
