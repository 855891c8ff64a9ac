"""Fixtures of the export tests."""

import pytest
from transformers import PreTrainedTokenizerFast

from hfattn.tokenization.translation import build_translation_tokenizer
from tests.helpers.reversal_models import LETTERS, VOCAB


@pytest.fixture(scope="module")
def tokenizer() -> PreTrainedTokenizerFast:
    """hfattn's word-level translation tokenizer over the letters (``a`` = 4 ... ``l`` = 15),
    every encoding ending with ``<eos>``."""
    words = " ".join(LETTERS)
    built = build_translation_tokenizer(
        [(words, words)], kind="word", vocab_size=VOCAB, model_max_length=32
    )
    assert built.convert_tokens_to_ids(list(LETTERS)) == list(range(4, VOCAB))
    return built
