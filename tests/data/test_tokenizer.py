"""The character tokenizer: round trip, special tokens, <unk>, AutoTokenizer loading."""

import logging

import pytest
from transformers import AutoTokenizer

from hfattn.tokenization.characters import (
    SPECIAL_TOKENS,
    build_char_tokenizer,
    count_unknown_chars,
    encode_prompt,
)

TEXT = "ROMEO:\nBut, soft! what light\tthrough yonder  window breaks?\n"


def test_every_character_is_a_token_and_round_trips():
    tok = build_char_tokenizer(TEXT)
    ids = tok(TEXT, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(TEXT)
    assert tok.decode(ids) == TEXT
    assert len(tok) == len(set(TEXT)) + len(SPECIAL_TOKENS)
    # special tokens come first, in the order the char-RNN config expects
    assert [tok.pad_token_id, tok.unk_token_id, tok.bos_token_id, tok.eos_token_id] == [0, 1, 2, 3]


def test_unknown_characters_map_to_unk_and_are_counted():
    tok = build_char_tokenizer(TEXT, held_out=["Zebra!", "ZZ"])
    assert tok.unknown_char_count == 3  # only 'Z' is new: once in "Zebra!", twice in "ZZ"
    assert count_unknown_chars(tok, "Zq") == 2
    assert tok("Zq", add_special_tokens=False)["input_ids"] == [tok.unk_token_id] * 2


def test_min_frequency_drops_rare_characters():
    tok = build_char_tokenizer("aaab", min_frequency=2)
    assert "b" not in tok.get_vocab() and tok.unknown_char_count == 1
    with pytest.raises(ValueError, match="min_frequency"):
        build_char_tokenizer("a", min_frequency=0)


def test_saved_tokenizer_loads_with_autotokenizer(tmp_path):
    tok = build_char_tokenizer(TEXT)
    tok.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert loaded.decode(loaded(TEXT, add_special_tokens=False)["input_ids"]) == TEXT
    assert loaded.get_vocab() == tok.get_vocab()
    assert loaded.bos_token == SPECIAL_TOKENS["bos_token"]


def test_prompt_encoding_handles_empty_and_unknown(caplog):
    tok = build_char_tokenizer(TEXT)
    assert encode_prompt(tok, "") == [tok.bos_token_id]
    with caplog.at_level(logging.WARNING, logger="hfattn.tokenization.characters"):
        ids = encode_prompt(tok, "RZ")
    assert ids == [tok.convert_tokens_to_ids("R"), tok.unk_token_id]
    assert "'Z'" in caplog.text
