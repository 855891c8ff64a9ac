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

:func:`classify_texts` is inference on new texts (``hfattn classify``): each text's ``top_k``
labels with their probabilities :math:`\operatorname{softmax}(z)_c`, most probable first.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import torch
from torch.nn import functional as F

from ..data.seq2seq import pad_sources
from ..fileio import atomic_write_json
from ..tokenization import require_text, warn_unknown
from . import load_metric
from .translation import source_limit

logger = logging.getLogger(__name__)

CONFUSION_MATRIX_FILE = "confusion_matrix.json"


@torch.no_grad()
def predict_logits(
    model, encoded: Sequence[Sequence[int]], *, batch_size: int, pad_token_id: int
) -> torch.Tensor:
    """``[N, num_labels]`` logits of ``encoded`` (right-padded batches of similar lengths, in
    eval mode; the model's training mode is restored afterwards)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    logits = [None] * len(encoded)
    try:
        for begin in range(0, len(order), batch_size):
            rows = order[begin : begin + batch_size]
            batch = pad_sources([encoded[i] for i in rows], pad_token_id)
            out = model(**{k: v.to(device) for k, v in batch.items()}).logits.float().cpu()
            for row, i in enumerate(rows):
                logits[i] = out[row]
    finally:
        model.train(was_training)
    if not logits:
        return torch.zeros((0, model.config.num_labels))
    return torch.stack(logits)


@torch.no_grad()
def classify_texts(
    model, tokenizer, texts: Sequence[str], *, top_k: int = 1, batch_size: int = 32
) -> list[list[tuple[str, float]]]:
    """The ``top_k`` most probable labels of each text (all of them when ``top_k`` is larger
    than the model's labels) with their probabilities, the softmax of the model's logits, most
    probable first, in input order. Parts of a text that the tokenizer maps to ``<unk>`` are
    named in a warning (:func:`~hfattn.tokenization.warn_unknown`); texts longer than the model
    accepts (:func:`~hfattn.evaluation.translation.source_limit`) are cut, with a warning.

    Raises:
        ValueError: ``top_k`` or ``batch_size`` below 1, or a text that is blank or not valid
            text (named ``text I``, counted from 0).
    """
    for name, value in (("top_k", top_k), ("batch_size", batch_size)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    for i, text in enumerate(texts):
        require_text(text, f"text {i}")
        if not text.strip():
            raise ValueError(f"text {i} is blank: there is nothing to classify")
        warn_unknown(tokenizer, text, f"text {i}")
    if not texts:
        return []
    limit = source_limit(model, tokenizer)
    encoded = tokenizer(list(texts))["input_ids"]
    cut = [i for i, ids in enumerate(encoded) if limit is not None and len(ids) > limit]
    if cut:
        logger.warning(
            "%d text(s) longer than %d tokens were cut to %d (first: text %d)",
            len(cut),
            limit,
            limit,
            cut[0],
        )
        encoded = tokenizer(list(texts), truncation=True, max_length=limit)["input_ids"]
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    logits = predict_logits(model, encoded, batch_size=batch_size, pad_token_id=pad)
    probabilities, labels = logits.softmax(-1).topk(min(top_k, logits.shape[-1]), dim=-1)
    names = model.config.id2label
    return [
        [(str(names.get(j, f"LABEL_{j}")), p) for p, j in zip(row, ids, strict=True)]
        for row, ids in zip(probabilities.tolist(), labels.tolist(), strict=True)
    ]


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
    predictions = logits.argmax(-1).tolist()
    references = labels.tolist()
    accuracy = load_metric("accuracy").compute(predictions=predictions, references=references)
    f1 = load_metric("f1").compute(predictions=predictions, references=references)
    return {
        "loss": float(F.cross_entropy(logits, labels)),
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
    "classify_texts",
    "confusion_matrix",
    "predict_logits",
    "write_confusion_matrix",
]
