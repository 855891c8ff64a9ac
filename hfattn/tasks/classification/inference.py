r"""Classification inference: :func:`classify_texts` labels new texts (``hfattn classify``):
each text's ``top_k`` labels with their probabilities :math:`\operatorname{softmax}(z)_c`, most
probable first; :func:`load_classifier` loads a saved classifier (or LoRA adapter) folder.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from ... import models  # noqa: F401  (registers the hfattn model types with the Auto classes)
from ...common.field_checks import require
from ...evaluation.classification import predict_logits
from ...evaluation.translation import source_limit
from ...storage.model_folder import ADAPTER_CONFIG_FILE
from ...tokenization.characters import require_text, warn_unknown
from .encoding import label_maps

logger = logging.getLogger(__name__)


@torch.no_grad()
def classify_texts(
    model, tokenizer, texts: Sequence[str], *, top_k: int = 1, batch_size: int = 32
) -> list[list[tuple[str, float]]]:
    """The ``top_k`` most probable labels of each text (all of them when ``top_k`` is larger
    than the model's labels) with their probabilities, the softmax of the model's logits, most
    probable first, in input order. Parts of a text that the tokenizer maps to ``<unk>`` are
    named in a warning (:func:`~hfattn.tokenization.characters.warn_unknown`); texts longer than
    the model accepts (:func:`~hfattn.evaluation.translation.source_limit`) are cut, with a
    warning.

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


def load_classifier(model_dir: Path, label_names: list[str]):
    """``(model, tokenizer)`` of a saved classifier folder in eval mode. A LoRA adapter folder
    (``adapter_config.json``) is applied to its base model, whose head is built for
    ``label_names`` (the adapter's saved head replaces it)."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if (model_dir / ADAPTER_CONFIG_FILE).is_file():
        import peft

        config = peft.PeftConfig.from_pretrained(str(model_dir))
        base = AutoModelForSequenceClassification.from_pretrained(
            config.base_model_name_or_path, **label_maps(label_names)
        )
        model = peft.PeftModel.from_pretrained(base, str(model_dir))
    else:
        model = AutoModelForSequenceClassification.from_pretrained(model_dir)
        require(
            model.config.num_labels == len(label_names),
            "data.source",
            f"the model has {model.config.num_labels} labels, the data {len(label_names)} "
            f"({', '.join(label_names)})",
        )
    return model.eval(), tokenizer


__all__ = ["classify_texts", "load_classifier"]
