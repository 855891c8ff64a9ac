"""The batch encoder of prepared translation data gives the tokenizer's own ids, through the
unigram tokenizer's twin without the delimiter split wherever that twin is exact."""

from __future__ import annotations

import sys

import pytest

from hfattn.tokenization.translation import (
    SPECIAL_TOKEN_DELIMITERS,
    BatchEncoder,
    _normalizer,
    build_translation_tokenizer,
)

PAIRS = [
    ("In the beginning God created the heavens.", "En el principio creó Dios los cielos."),
    ("Jesus wept.", "Jesús lloró."),
    ("Love is patient and is kind.", "El amor es sufrido, es benigno."),
] * 20

TEXTS = [
    "God said, Let there be light.",
    "a <eos> written in the text",
    "x > y and y < z",
    "≮ is not less, <\u0338 neither",
    "",
    "   ",
]


def tokenizer(kind: str):
    return build_translation_tokenizer(PAIRS, kind=kind, vocab_size=60, joint=True)


def test_the_unigram_encoder_gives_the_tokenizers_ids_in_every_kind_of_batch():
    backend = tokenizer("unigram").backend_tokenizer
    encoder = BatchEncoder(backend)
    assert encoder.twin is not None  # the cheaper path is taken
    for texts in (TEXTS, TEXTS[:1] + TEXTS[4:], TEXTS[1:3]):  # mixed, plain, all delimited
        assert encoder.encode(texts) == [e.ids for e in backend.encode_batch_fast(texts)]
    literal = encoder.encode(["<eos>"])[0]
    assert literal.count(backend.token_to_id("<eos>")) == 1  # the text is not the token


def test_other_tokenizers_encode_with_the_backend_itself():
    backend = tokenizer("bpe").backend_tokenizer
    encoder = BatchEncoder(backend)
    assert encoder.twin is None
    assert encoder.encode(TEXTS) == [e.ids for e in backend.encode_batch_fast(TEXTS)]


@pytest.mark.parametrize("options", [(False, False), (True, True)])
def test_no_character_becomes_a_delimiter_under_the_normalizers(options):
    """The twin is exact for a text without delimiters only if the normalizer cannot make one:
    every code point (surrogates and the delimiters left out), normalized as the tokenizers
    normalize (NFC; with lowercasing and Chollet's punctuation stripped)."""
    text = "".join(
        chr(cp)
        for cp in range(sys.maxunicode + 1)
        if not 0xD800 <= cp <= 0xDFFF and chr(cp) not in SPECIAL_TOKEN_DELIMITERS
    )
    normalized = _normalizer(*options).normalize_str(text)
    assert not any(delimiter in normalized for delimiter in SPECIAL_TOKEN_DELIMITERS)
