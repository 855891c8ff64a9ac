"""The classification recipe (``task: classification``): its sections (``tokenizer:``,
``data:``, ``word_vectors:``), the choices they check against, and the metrics its validation
reports.

Light by design: parsing a recipe imports this module, and it imports neither torch,
transformers nor datasets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from ...common.extras import Extra
from ...common.field_checks import require, require_choice, require_default, require_positive
from ...data.classification import EMBEDDED_SOURCES, check_classification_source
from ...recipes.model_section import is_pretrained
from ...recipes.registry import register_task_recipe
from ...recipes.schema import (
    BuiltTokenizerSection,
    EvaluationSection,
    RecipeBase,
    SplitTextDataSection,
    TokenBatchingSection,
)

WORD_VECTOR_METHODS = {
    "cbow": ("word2vec", "cbow"),
    "skipgram": ("word2vec", "skipgram"),
    "fasttext": ("fasttext", "skipgram"),
}
"""``word_vectors.train`` → ``(method, architecture)`` of
:func:`hfattn.data.word_vectors.train_word_vectors`."""
UNKNOWN_INIT = ("zero", "random")
WHITESPACE_CHOICES = ("keep", "ignore")
"""``tokenizer.whitespace``: spaces are tokens (``keep``) or dropped before tokenizing."""

METRIC_NAMES = {
    "accuracy": "Accuracy",
    "macro_f1": "Macro-F1",
    "loss": "Loss (nats/example)",
}

REPORTED_METRICS = tuple(METRIC_NAMES)
"""The choices of ``training.metric_for_best_model`` (``loss`` included)."""


# ---- recipe sections -----------------------------------------------------------------------
@dataclass
class ClassificationTokenizerSection(BuiltTokenizerSection):
    """``tokenizer:`` — for ``model.type`` models only (a pretrained model brings its own):
    built on the training texts (:class:`~hfattn.recipes.schema.BuiltTokenizerSection`), ``word``
    (lower-cased, punctuation stripped, the ``vocab_size`` most frequent words), ``char``,
    ``bpe`` or ``unigram``. ``whitespace: ignore`` (``char`` only) drops every space before
    tokenizing, so a text of symbols reads the same however it is spaced (``"B P B T"`` =
    ``"BPBT"``); the default ``keep`` makes spaces tokens like any character."""

    vocab_size: int = 20000
    whitespace: str = "keep"

    def __post_init__(self):
        super().__post_init__()
        require_choice(self.whitespace, "tokenizer.whitespace", WHITESPACE_CHOICES)
        require(
            self.whitespace == "keep" or self.type == "char",
            "tokenizer.whitespace",
            f"ignore applies to type: char only (type is {self.type!r})",
        )


@dataclass
class ClassificationDataSection(SplitTextDataSection):
    """``data:`` — ``source`` is ``genre``, ``reber``, ``reviews-es``, a local file or a Hub
    dataset id; ``text_column`` / ``label_column`` name the columns of a file or dataset;
    ``validation_fraction`` / ``test_fraction`` are carved out of ``train`` where the source has
    no such split (the embedded sources have their own columns and splits: these four fields
    and ``max_held_out_rows`` are refused with them); ``train_size`` keeps a random subset of
    ``train``; texts are cut to ``max_length`` tokens."""

    source: str = "genre"
    label_column: str = "label"
    max_held_out_rows: int | None = 3000
    """The most rows of each held-out split (validation, test) carved out of a source that has
    none (a table file, a dataset without that split): a split takes its fraction's share of
    ``train``, stratified by label, at most this many rows. A source's own held-out splits
    (the embedded tasks', a dataset's ``validation`` / ``test``) are the user's data and are
    kept whole. ``null``: no bound, the fractions alone."""
    train_size: int | None = None
    seed: int = 0
    max_length: int = 256

    embedded_sources: ClassVar[tuple[str, ...]] = tuple(EMBEDDED_SOURCES)
    file_fields: ClassVar[tuple[str, ...]] = (
        *SplitTextDataSection.file_fields,
        "label_column",
        "max_held_out_rows",
    )

    def __post_init__(self):
        require_positive(self, "data", "train_size", "max_held_out_rows")  # values, then use
        super().__post_init__()
        require(self.max_length > 1, "data.max_length", f"must be > 1, got {self.max_length}")


WORD_VECTORS = Extra("word-vectors", "gensim")
"""The extra that a ``word_vectors:`` section needs (:mod:`hfattn.data.word_vectors` trains and
reads the vectors with gensim)."""


@dataclass
class WordVectorsSection:
    """``word_vectors:`` — initialise an ``rnn-classifier``'s embeddings (size
    ``model.embedding_dim``) either with vectors trained on the training texts (``train``:
    ``cbow`` / ``skipgram`` word2vec, or ``fasttext``; ``window``, ``epochs``, ``min_count``)
    or read from a GloVe / word2vec text file (``path``). Vocabulary words without a vector
    start at zero or random (``unknown``); ``model.freeze_embeddings`` keeps the vectors fixed.
    ``window``, ``epochs`` and ``min_count`` train vectors: they are refused with ``path``."""

    train: str | None = None
    path: str | None = None
    window: int = 5
    epochs: int = 5
    min_count: int = 1
    unknown: str = "random"

    def __post_init__(self):
        require(
            (self.train is None) != (self.path is None),
            "word_vectors",
            "give exactly one of train (cbow, skipgram, fasttext) or path (a vectors file)",
        )
        if self.train is not None:
            require_choice(self.train, "word_vectors.train", tuple(WORD_VECTOR_METHODS))
        require_choice(self.unknown, "word_vectors.unknown", UNKNOWN_INIT)
        require_positive(self, "word_vectors", "window", "epochs", "min_count")
        if self.path is not None:
            require_default(
                self,
                "word_vectors",
                ("window", "epochs", "min_count"),
                "is not used with word_vectors.path (the vectors are read, not trained)",
            )


@dataclass
class ClassificationRecipe(RecipeBase):
    """A classification experiment (see ``recipes/minilm_genre.yaml``)."""

    task: str = "classification"
    model: dict[str, Any] = field(default_factory=lambda: {"type": "rnn-classifier"})
    tokenizer: ClassificationTokenizerSection | None = None
    word_vectors: WordVectorsSection | None = None
    data: ClassificationDataSection = field(default_factory=ClassificationDataSection)
    training: TokenBatchingSection = field(default_factory=TokenBatchingSection)
    evaluation: EvaluationSection = field(default_factory=EvaluationSection)

    def __post_init__(self):
        super().__post_init__()
        if is_pretrained(self.model):
            require(
                self.tokenizer is None,
                "tokenizer",
                "does not apply to a pretrained model (it brings its own tokenizer)",
            )
            require(
                self.word_vectors is None,
                "word_vectors",
                "applies to model.type: rnn-classifier, not to a pretrained model",
            )
        else:
            require(self.lora is None, "lora", "applies to pretrained models (model: <id>)")

    def required_extras(self) -> list[tuple[str, Extra]]:
        """The base recipe's extras, and ``word-vectors`` for a ``word_vectors:`` section."""
        extras = super().required_extras()
        if self.word_vectors is not None:
            extras.append(("word_vectors", WORD_VECTORS))
        return extras


RECIPE_CLASS = ClassificationRecipe


TASK_RECIPE = register_task_recipe(
    "classification",
    RECIPE_CLASS,
    REPORTED_METRICS,
    check_classification_source,
    embedded_sources=EMBEDDED_SOURCES,
)
"""The task ``classification`` as recipe parsing knows it (:mod:`hfattn.recipes.registry`).
``data.source`` must name labelled texts it can load, checked before any data is read
(:func:`hfattn.data.classification.check_classification_source`)."""

__all__ = [
    "TASK_RECIPE",
    "METRIC_NAMES",
    "RECIPE_CLASS",
    "REPORTED_METRICS",
    "UNKNOWN_INIT",
    "WHITESPACE_CHOICES",
    "WORD_VECTOR_METHODS",
    "ClassificationDataSection",
    "ClassificationRecipe",
    "ClassificationTokenizerSection",
    "WordVectorsSection",
]
