"""Untrained tiny model folders of every kind the model commands take, for the tests of
``hfattn generate``, ``translate`` and ``classify`` (``tests/cli/``, the ``models`` fixture of
its ``conftest.py``)."""

from __future__ import annotations

from pathlib import Path

import torch

REBER_LABELS = ["invalid", "valid"]
GENRES = ["comedy", "history", "tragedy"]
MODEL_NAMES = ("lm", "translator", "classifier", "distilbert", "masked-lm")
"""The folders :func:`build_model_folders` writes, each under its name."""


def save(folder: Path, model, tokenizer) -> Path:
    """``save_pretrained`` of both into ``folder``."""
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_model_folders(root: Path) -> Path:
    """Untrained tiny folders under ``root`` (returned), named as in :data:`MODEL_NAMES`: a
    char-RNN LM, a Bahdanau translator over a word tokenizer, an RNN classifier of Reber symbols
    (the recipe's tokenizer), a DistilBERT genre classifier and a DistilBERT masked LM (a base
    model without a classification head)."""
    from transformers import (
        DistilBertConfig,
        DistilBertForMaskedLM,
        DistilBertForSequenceClassification,
    )

    import hfattn
    from hfattn.tasks.classification.encoding import build_text_tokenizer, label_maps
    from hfattn.tasks.classification.recipe import ClassificationTokenizerSection
    from hfattn.tokenization.characters import build_char_tokenizer
    from hfattn.tokenization.translation import build_translation_tokenizer
    from tests.helpers.tiny_pretrained import tiny_distilbert_tokenizer

    root.mkdir(parents=True)
    torch.manual_seed(0)
    chars = build_char_tokenizer("ROMEO: abcdefghijklmnopqrstuvwxyz\n")
    words = build_translation_tokenizer([("lunes martes", "monday tuesday")], kind="word")
    symbols = build_text_tokenizer(
        ClassificationTokenizerSection(type="char", whitespace="ignore"), ["B P T S X V E"], 96
    )
    wordpiece = tiny_distilbert_tokenizer(vocab_size=200, model_max_length=32, chars=5000)
    bert = {
        "vocab_size": len(wordpiece),
        "n_layers": 1,
        "n_heads": 2,
        "dim": 16,
        "hidden_dim": 32,
        "max_position_embeddings": 32,
        "pad_token_id": wordpiece.pad_token_id,
    }
    built = {
        "lm": (hfattn.CharRNNForCausalLM, hfattn.CharRNNConfig, chars, {}),
        "translator": (
            hfattn.BahdanauForConditionalGeneration,
            hfattn.BahdanauConfig,
            words,
            {"encoder_hidden_size": 8, "decoder_hidden_size": 16},
        ),
        "classifier": (
            hfattn.RNNForSequenceClassification,
            hfattn.RNNClassifierConfig,
            symbols,
            {"cell": "gru", **label_maps(REBER_LABELS)},
        ),
    }
    folders = {
        name: save(
            root / name,
            model(config(vocab_size=len(tokenizer), embedding_dim=8, hidden_size=16, **extra)),
            tokenizer,
        )
        for name, (model, config, tokenizer, extra) in built.items()
    }
    classifier = DistilBertConfig(**bert, **label_maps(GENRES), seq_classif_dropout=0.0)
    folders["distilbert"] = save(
        root / "distilbert", DistilBertForSequenceClassification(classifier), wordpiece
    )
    folders["masked-lm"] = save(
        root / "masked-lm", DistilBertForMaskedLM(DistilBertConfig(**bert)), wordpiece
    )
    assert sorted(folders) == sorted(MODEL_NAMES)
    return root
