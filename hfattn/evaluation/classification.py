r"""Scoring a sequence classifier on held-out texts.

:func:`predict_logits` runs the model over token-id sequences in length-sorted, padded batches
(order restored), :func:`classification_scores` turns the logits :math:`z_i` and labels
:math:`y_i` of :math:`N` examples into

.. math:: L = -\frac{1}{N}\sum_i \ln \operatorname{softmax}(z_i)_{y_i}, \qquad
          \mathrm{acc} = \frac{1}{N}\sum_i 1[\arg\max_c z_{i,c} = y_i], \qquad
          F1_{\text{macro}} = \frac{1}{|C|}\sum_{c\in C} \frac{2\,TP_c}{2\,TP_c + FP_c + FN_c}

(accuracy and macro-F1 through the bundled ``evaluate`` modules ``accuracy`` and ``f1``; the
classes :math:`C` of macro-F1 are those that occur in the references or the predictions), and
:func:`confusion_matrix` counts :math:`M_{tp} = |\{i : y_i = t, \hat y_i = p\}|` (rows: true
labels, columns: predictions), which :func:`write_confusion_matrix` saves as JSON.

Inference on new texts (``hfattn classify``) is
:func:`hfattn.tasks.classification.inference.classify_texts`, on top of :func:`predict_logits`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from torch.nn import functional as F

from ..batching.seq2seq import pad_sources
from ..common.progress import progress_bar
from ..common.stop_request import raise_if_stop_requested
from ..storage.file_io import atomic_write_json
from ..storage.run_folder import CONFUSION_MATRIX_FILE
from . import load_metric


@torch.no_grad()
def predict_logits(
    model,
    encoded: Sequence[Sequence[int]],
    *,
    batch_size: int,
    pad_token_id: int,
    progress: str | None = None,
) -> torch.Tensor:
    """``[N, num_labels]`` logits of ``encoded`` (right-padded batches of similar lengths, in
    eval mode; the model's training mode is restored afterwards); with ``progress`` (its label)
    a bar counts the texts once the pass has taken 2 s
    (:func:`~hfattn.common.progress.progress_bar`)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    logits = [None] * len(encoded)
    bar = progress_bar(total=len(order), desc=progress or "classifying", unit="text",
                       shown=bool(progress), leave=False)  # fmt: skip
    try:
        for begin in range(0, len(order), batch_size):
            raise_if_stop_requested()
            rows = order[begin : begin + batch_size]
            batch = pad_sources([encoded[i] for i in rows], pad_token_id)
            out = model(**{k: v.to(device) for k, v in batch.items()}).logits.float().cpu()
            for row, i in enumerate(rows):
                logits[i] = out[row]
            bar.update(len(rows))
    finally:
        bar.close()
        model.train(was_training)
    if not logits:
        return torch.zeros((0, model.config.num_labels))
    return torch.stack(logits)


def confusion_matrix(
    predictions: Sequence[int], references: Sequence[int], num_labels: int
) -> list[list[int]]:
    """``M[t][p]`` = how many examples of true label ``t`` were predicted as ``p``."""
    matrix = [[0] * num_labels for _ in range(num_labels)]
    for p, t in zip(predictions, references, strict=True):
        matrix[t][p] += 1
    return matrix


def classification_scores(logits: torch.Tensor, labels: Sequence[int]) -> dict:
    """Loss (nats / example), accuracy, macro-F1 and the number of examples (see the module
    docstring); the predictions are ``argmax`` of ``logits``."""
    labels = torch.as_tensor(list(labels), dtype=torch.long)
    if len(labels) == 0:
        raise ValueError("cannot score a classifier on an empty split")
    return {
        "loss": float(F.cross_entropy(logits, labels)),
        **label_scores(logits.argmax(-1).tolist(), labels.tolist()),
    }


def label_scores(predictions: Sequence[int], references: Sequence[int]) -> dict:
    """Accuracy, macro-F1 (see the module docstring) and the number of examples of predicted
    labels against their references; a classifier's (:func:`classification_scores`) and a
    baseline's (:func:`hfattn.tasks.classification.baselines.run_baseline`)."""
    accuracy = load_metric("accuracy").compute(predictions=predictions, references=references)
    f1 = load_metric("f1").compute(predictions=predictions, references=references)
    return {
        "accuracy": float(accuracy["accuracy"]),
        "macro_f1": float(f1["f1"]),
        "num_examples": len(references),
    }


def write_confusion_matrix(
    path: str | Path,
    logits: torch.Tensor,
    labels: Sequence[int],
    label_names: Sequence[str],
    *,
    split: str,
    data: str,
) -> dict:
    """Save ``{"split", "data", "labels", "matrix"}`` (rows: true labels, columns:
    predictions) atomically to ``path`` and return it."""
    record = {
        "split": split,
        "data": data,
        "labels": list(label_names),
        "matrix": confusion_matrix(logits.argmax(-1).tolist(), list(labels), len(label_names)),
    }
    atomic_write_json(path, record)
    return record


__all__ = [
    "CONFUSION_MATRIX_FILE",
    "classification_scores",
    "confusion_matrix",
    "label_scores",
    "predict_logits",
    "write_confusion_matrix",
]
