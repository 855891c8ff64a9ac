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
    "cafe\u0301 decomposed, café composed",  # not in NFC: the normalizer changes it
    "an unassigned code point: \u0378",
    "",
    "   ",
]


def tokenizer(kind: str, **options):
    return build_translation_tokenizer(PAIRS, kind=kind, vocab_size=60, joint=True, **options)


def backend_ids(backend, texts):
    return [e.ids for e in backend.encode_batch_fast(texts)]


@pytest.mark.parametrize("kind", ["unigram", "bpe"])
def test_the_encoder_gives_the_tokenizers_ids_in_every_kind_of_batch(kind):
    backend = tokenizer(kind).backend_tokenizer
    encoder = BatchEncoder(backend)
    assert encoder.twin is not None and encoder.without_nfc  # the cheaper path is taken
    assert encoder.without_split == (kind == "unigram")
    for texts in (TEXTS, TEXTS[:1] + TEXTS[6:], TEXTS[1:6]):  # mixed, plain, all held
        assert encoder.encode(texts) == backend_ids(backend, texts)
    held = [text for text in TEXTS if not encoder.twin_gives_its_ids(text)]
    assert held == TEXTS[1:6]
    literal = encoder.encode(["<eos>"])[0]
    assert literal == backend_ids(backend, ["<eos>"])[0]


@pytest.mark.parametrize("kind", ["bpe", "word"])
def test_a_tokenizer_whose_steps_change_every_text_encodes_with_itself(kind):
    backend = tokenizer(kind, lowercase=True).backend_tokenizer  # NFC, then lowercase
    encoder = BatchEncoder(backend)
    assert encoder.twin is None
    assert encoder.encode(TEXTS) == backend_ids(backend, TEXTS)


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
