"""The classification training job: the model (:func:`build_model`: a pretrained checkpoint
with a new head, LoRA applied when asked, or a fresh ``model.type`` model over the tokenizer
built on the training texts, its embeddings optionally initialised by the ``word_vectors:``
section, :func:`word_vector_matrix`), the loss (:data:`classification_loss`) and the
length-grouped batches, split scoring (with the test confusion matrix) and sample, wired into a
:class:`~hfattn.training.training_job.TrainingJob` by :func:`build_job`. The data and the
tokenizer are the recipe's prepared data, mapped
(:class:`~hfattn.tasks.classification.encoding.PreparedClassification`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForSequenceClassification

from ...batching.seq2seq import LabelBatches
from ...batching.token_buckets import BucketedBatches
from ...common.field_checks import require
from ...evaluation.classification import (
    CONFUSION_MATRIX_FILE,
    classification_scores,
    predict_logits,
    write_confusion_matrix,
)
from ...evaluation.examples import example_counts, scored_rows
from ...recipes.model_section import is_pretrained, sized_model_config
from ...storage.ragged import RaggedTexts
from ...training.training_job import TrainingJob
from ..base import Task, model_loss
from ..pretrained import apply_lora, pretrained_model
from .encoding import (
    DATASET_NAMES,
    EncodedSplit,
    PreparedClassification,
    encode_texts,
    label_maps,
    words_of,
)
from .recipe import METRIC_NAMES, WORD_VECTOR_METHODS, ClassificationRecipe

logger = logging.getLogger(__name__)


SAMPLE_WIDTH = 70
"""The most characters of a text that the end-of-training sample shows."""


def sample_text(text: str, width: int = SAMPLE_WIDTH) -> str:
    """``text`` on one line (runs of whitespace as one space) as the end-of-training sample
    shows it: cut to ``width`` characters and ended with ``…`` only when it was longer."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[:width] + "…"


def word_vector_matrix(recipe: ClassificationRecipe, tokenizer, config, texts: Sequence[str]):
    """The ``[vocab_size, embedding_dim]`` initial embeddings of the ``word_vectors:`` section
    (and the share of the vocabulary they cover); ``texts`` are the training texts."""
    # gensim adds about 0.5 s to the import, and only word_vectors: recipes need it
    from ...data.word_vectors import embedding_matrix, load_word_vectors, train_word_vectors

    w = recipe.word_vectors
    if w.train is not None:
        method, architecture = WORD_VECTOR_METHODS[w.train]
        vectors = train_word_vectors(
            [words_of(tokenizer, t) for t in texts],
            method=method,
            architecture=architecture,
            vector_size=config.embedding_dim,
            window=w.window,
            min_count=w.min_count,
            epochs=w.epochs,
            seed=recipe.training.seed,
        )
    else:
        path = Path(w.path).expanduser()
        require(path.is_file(), "word_vectors.path", f"no such file {w.path!r}")
        vectors = load_word_vectors(path)
    try:
        return embedding_matrix(
            vectors,
            tokenizer.get_vocab(),
            config.embedding_dim,
            num_rows=config.vocab_size,
            unknown=w.unknown,
            seed=recipe.training.seed,
            special_tokens=tokenizer.all_special_tokens,
        )
    except ValueError as err:  # e.g. vectors of another size than model.embedding_dim
        raise ValueError(f"word_vectors: {err} (model.embedding_dim)") from None


def scored_texts(split: EncodedSplit, rows: Sequence[int]) -> EncodedSplit:
    """The texts ``rows`` of ``split`` (:func:`~hfattn.evaluation.examples.scored_rows`) as a
    split of their own, read into memory (a cap bounds them), or ``split`` itself when they are
    all of its texts."""
    if isinstance(rows, range) and len(rows) == len(split):
        return split
    rows = np.asarray(rows, dtype=np.int64)
    return EncodedSplit(split.ids.take(rows), np.asarray(split.labels[rows]),
                        RaggedTexts(split.texts.data.take(rows)))  # fmt: skip


classification_loss = model_loss
"""Mean cross-entropy of a padded batch (the model computes it from ``labels``)."""


def build_model(
    recipe: ClassificationRecipe, data: PreparedClassification, peft_task_type: str | None
):
    """The model over the prepared data's tokenizer: a pretrained checkpoint with a new head
    (LoRA applied when asked) or a fresh ``model.type`` model."""
    labels = label_maps(data.label_names)
    tokenizer = data.tokenizer
    if is_pretrained(recipe.model):
        torch.manual_seed(recipe.training.seed)  # the new head's initialisation
        model = pretrained_model(AutoModelForSequenceClassification, recipe.model, **labels)
        if recipe.lora is not None:
            model = apply_lora(model, recipe.lora, peft_task_type)
        return model
    config = sized_model_config(recipe, tokenizer, special_tokens=("pad_token_id",))
    for key, value in labels.items():
        setattr(config, key, value)
    torch.manual_seed(recipe.training.seed)
    model = AutoModelForSequenceClassification.from_config(config)
    if recipe.word_vectors is not None:
        require(
            hasattr(model, "set_embedding_matrix"),
            "word_vectors",
            f"{type(model).__name__} cannot take word vectors",
        )
        texts = data.splits["train"].texts
        matrix, coverage = word_vector_matrix(recipe, tokenizer, config, texts)
        model.set_embedding_matrix(matrix)
        logger.info("word vectors cover %.1f%% of the vocabulary", 100 * coverage)
    return model


def build_job(recipe: ClassificationRecipe, task: Task) -> TrainingJob:
    """Map the prepared data (preparing it first when needed), build the model and wire
    batches, loss and evaluation (``task`` gives the PEFT task type of a LoRA adapter and the
    card metadata)."""
    data = PreparedClassification.of(recipe)
    model = build_model(recipe, data, task.card.peft_task_type)
    tokenizer, splits = data.tokenizer, data.splits
    t = recipe.training
    sources, targets = splits["train"].ids, splits["train"].labels
    if t.token_budget is not None:
        batches = BucketedBatches(sources, targets,
                                  token_budget=t.token_budget, num_buckets=t.length_buckets,
                                  pad_token_id=tokenizer.pad_token_id, seed=t.seed)  # fmt: skip
    else:
        batches = LabelBatches(sources, targets, t.batch_size,
                               pad_token_id=tokenizer.pad_token_id, seed=t.seed)  # fmt: skip
    output_dir = Path(recipe.output_dir)
    e = recipe.evaluation

    def evaluate(model, split: str, final: bool = False) -> dict:
        encoded = splits[split]
        rows = scored_rows(len(encoded), e.example_cap(final), seed=recipe.data.seed)
        scored = scored_texts(encoded, rows)
        logits = predict_logits(model, scored.ids, batch_size=e.batch_size,
                                pad_token_id=tokenizer.pad_token_id,
                                progress=f"{split}: loss")  # fmt: skip
        if split == "test":
            write_confusion_matrix(
                output_dir / CONFUSION_MATRIX_FILE,
                logits,
                scored.labels,
                data.label_names,
                split=split,
                data=recipe.data.source,
            )
        scores = classification_scores(logits, scored.labels)
        scores.update(example_counts(rows, len(encoded)))
        return scores

    def final_evaluate(model, split: str) -> dict:
        return evaluate(model, split, final=True)

    def sample(model) -> str:
        test = splits["test"]
        texts, truth = test.texts[:3], test.labels[:3]
        logits = predict_logits(
            model,
            encode_texts(tokenizer, texts, data.max_length),
            batch_size=3,
            pad_token_id=tokenizer.pad_token_id,
        )
        return "\n".join(
            f"{sample_text(text)}  →  {data.label_names[int(p)]} (true: {data.label_names[t]})"
            for text, p, t in zip(texts, logits.argmax(-1), truth, strict=True)
        )

    return task.training_job(
        recipe,
        DATASET_NAMES,
        METRIC_NAMES,
        model=model,
        tokenizer=tokenizer,
        batches=batches,
        compute_loss=classification_loss,
        evaluate=evaluate,
        # the validations' rows: the engine reuses their scores of the same weights
        final_evaluate=None if e.example_cap(True) == e.example_cap() else final_evaluate,
        sample=sample,
        data_preparation=data.prepared.record(),
    )


__all__ = [
    "SAMPLE_WIDTH",
    "build_job",
    "build_model",
    "classification_loss",
    "sample_text",
    "scored_texts",
    "word_vector_matrix",
]
