"""Untrained translator and char-RNN run folders whose saved generation config differs from
every fallback, for the tests of the commands that decode with it (``tests/cli/``)."""

from __future__ import annotations

from pathlib import Path

import torch
import yaml

SAVED_BEAMS, SAVED_NEW_TOKENS = 3, 7
"""The translators' saved ``num_beams`` and ``max_new_tokens``."""
EXAMPLES = ["7/4/76", "December 31, 1999"]
"""The translation recipe's ``generation.examples``."""
PROMPT = "ROMEO:"
LM_SAVED = {"temperature": 0.7, "top_k": 5, "max_new_tokens": 9, "do_sample": True}
SOURCES = ["7/4/76", "April 22, 2019"]


def save_run(folder: Path, model, tokenizer, generation: dict, recipe: dict) -> Path:
    """``save_pretrained`` of ``model`` (its generation config updated with ``generation``) and
    ``tokenizer`` into ``folder``, with ``recipe`` as its ``recipe.yaml``."""
    for key, value in generation.items():
        setattr(model.generation_config, key, value)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "recipe.yaml").write_text(yaml.safe_dump(recipe), encoding="utf-8")
    return folder


def build_saved_runs(root: Path) -> dict[str, Path]:
    """Untrained run folders under ``root``: ``bahdanau`` and ``vaswani`` translators saved with
    :data:`SAVED_BEAMS` beams and :data:`SAVED_NEW_TOKENS` new tokens and the recipe's
    :data:`EXAMPLES`; ``lm``, a char-RNN saved with :data:`LM_SAVED` and the prompt
    :data:`PROMPT`."""
    import hfattn
    from hfattn.tokenization.characters import build_char_tokenizer
    from hfattn.tokenization.translation import build_translation_tokenizer

    pairs = [("April 22, 2019 7/4/76 December 31, 1999", "22 de abril de 2019, 31 de diciembre")]
    chars = build_translation_tokenizer(pairs, kind="char")
    saved = {"num_beams": SAVED_BEAMS, "max_new_tokens": SAVED_NEW_TOKENS, "do_sample": False}
    recipe = {
        "task": "translation",
        "generation": {**saved, "examples": EXAMPLES},
        "hub": {"license": "mit"},
    }
    torch.manual_seed(0)
    bahdanau = hfattn.BahdanauForConditionalGeneration(
        hfattn.BahdanauConfig(
            vocab_size=len(chars),
            embedding_dim=8,
            encoder_hidden_size=8,
            decoder_hidden_size=16,
        )
    )
    vaswani = hfattn.VaswaniForConditionalGeneration(
        hfattn.VaswaniConfig(
            vocab_size=len(chars),
            encoder_layers=2,
            decoder_layers=2,
            d_model=16,
            num_heads=2,
            ffn_dim=32,
            dropout=0.0,
            max_position_embeddings=64,
        )
    )
    letters = build_char_tokenizer("ROMEO: abcdefghijklmnopqrstuvwxyz\n")
    lm = hfattn.CharRNNForCausalLM(
        hfattn.CharRNNConfig(vocab_size=len(letters), embedding_dim=8, hidden_size=16)
    )
    lm_recipe = {"task": "causal-lm", "generation": {"prompt": PROMPT}, "hub": {"license": "mit"}}
    return {
        "bahdanau": save_run(root / "bahdanau", bahdanau, chars, saved, recipe),
        "vaswani": save_run(root / "vaswani", vaswani, chars, saved, recipe),
        "lm": save_run(root / "lm", lm, letters, LM_SAVED, lm_recipe),
    }


def load(folder: Path):
    """``(model, tokenizer)`` of a translator folder, in eval mode."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    return AutoModelForSeq2SeqLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(
        folder
    )


def translations(folder: Path, texts: list[str], num_beams: int, max_new_tokens: int):
    """What ``translate_texts`` gives with these settings spelt out."""
    from hfattn.tasks.translation.inference import translate_texts

    model, tokenizer = load(folder)
    return translate_texts(
        model, tokenizer, texts, num_beams=num_beams, max_new_tokens=max_new_tokens
    )
