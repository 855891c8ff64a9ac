"""Seq2seq tokenizers: word / char / BPE / unigram, joint or per language, text_target,
AutoTokenizer."""

import json
from functools import cache

import pytest
from transformers import AutoTokenizer

from hfattn.data.translation import load_translation_splits
from hfattn.tokenization.translation import build_translation_tokenizer, unknown_rate

PAIRS = [
    {"en": "I love you.", "es": "Te quiero."},
    {"en": "How are you?", "es": "¿Cómo estás?"},
    {"en": "I love cats.", "es": "¡Me encantan los gatos!"},
    {"en": "You love me.", "es": "Tú me quieres."},
]


def ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def test_word_tokenizer_is_keras_like():
    tok = build_translation_tokenizer(PAIRS, kind="word")
    assert [tok.pad_token_id, tok.unk_token_id, tok.bos_token_id, tok.eos_token_id] == [0, 1, 2, 3]
    assert tok.tokenize("¿Cómo estás?") == ["cómo", "estás"]  # Chollet's normalisation
    chollet = build_translation_tokenizer([{"en": "hi", "es": "[start] hola [end]"}])
    assert chollet.tokenize("[start] ¡Hola! [end]") == ["[start]", "hola", "[end]"]
    words = {w for p in PAIRS for side in p.values() for w in tok.tokenize(side)}
    assert len(tok) == 4 + len(words)  # every training word, once, after the specials
    # the most frequent word gets the first id after the specials: "love" (3) > "i"/"you" (2)
    assert tok.convert_ids_to_tokens(4) == "love"
    assert tok.decode(tok("How are you?")["input_ids"], skip_special_tokens=True) == "how are you"
    assert ids(tok, "I love zebras") == [*ids(tok, "i love"), tok.unk_token_id]


def test_text_target_labels_end_with_eos_and_no_bos():
    tok = build_translation_tokenizer(PAIRS, kind="word")
    batch = tok(["I love you.", "How are you?"], text_target=["te quiero.", "¿Cómo estás?"])
    assert set(batch) == {"input_ids", "attention_mask", "labels"}
    assert batch["labels"][0] == [*ids(tok, "te quiero"), tok.eos_token_id]
    assert batch["input_ids"][1] == [*ids(tok, "how are you"), tok.eos_token_id]
    assert all(tok.bos_token_id not in row for row in batch["labels"])
    padded = tok(["I love you.", "I"], padding=True)
    assert padded["input_ids"][1][-2:] == [tok.pad_token_id] * 2
    assert padded["attention_mask"][1] == [1, 1, 0, 0]


def test_vocab_size_and_joint_versus_per_language():
    pairs = [{"en": "red red red blue blue green", "es": "rojo azul"}]
    joint = build_translation_tokenizer(pairs, kind="word", vocab_size=6)
    # joint: the top 2 words overall, both English
    assert len(joint) == 6 and {"red", "blue"} <= set(joint.get_vocab())
    assert ids(joint, "rojo") == [joint.unk_token_id]
    per = build_translation_tokenizer(pairs, kind="word", vocab_size=6, joint=False)
    # per language: each side's own top 2, merged into one id space (source words first)
    assert set(per.get_vocab()) == {"<pad>", "<unk>", "<bos>", "<eos>", "red", "blue"} | {
        "rojo",
        "azul",
    }
    assert per.convert_ids_to_tokens([4, 5, 6, 7]) == ["red", "blue", "azul", "rojo"]
    batch = per(["red green"], text_target=["rojo azul"])
    assert batch["input_ids"][0] == [4, per.unk_token_id, 3]
    assert batch["labels"][0] == [7, 6, 3]


def test_char_tokenizer_round_trips_and_maps_unknown_chars():
    tok = build_translation_tokenizer(PAIRS, kind="char")
    for text in ("¿Cómo estás?", "I love you."):
        assert tok.decode(tok(text)["input_ids"], skip_special_tokens=True) == text
    assert ids(tok, "Iz") == [tok.convert_tokens_to_ids("I"), tok.unk_token_id]
    small = build_translation_tokenizer(PAIRS, kind="char", vocab_size=10)
    assert len(small) == 10
    per = build_translation_tokenizer(PAIRS, kind="char", vocab_size=10, joint=False)
    assert 10 < len(per) <= 16


def test_bpe_tokenizer_restores_spaces_and_honours_vocab_size():
    dd = load_translation_splits("dates", size=600, seed=0)
    tok = build_translation_tokenizer(dd, kind="bpe", vocab_size=200)
    assert len(tok) <= 200
    for pair in dd["test"]["translation"][:20]:
        for text in pair.values():
            assert tok.decode(tok(text)["input_ids"], skip_special_tokens=True) == text
    assert unknown_rate(tok, [p["es"] for p in dd["test"]["translation"]]) == 0.0
    assert tok.tokenize("lunes")[0].startswith("▁")
    per = build_translation_tokenizer(dd, kind="bpe", vocab_size=120, joint=False)
    assert 120 < len(per) <= 236
    text = "lunes, 22 de abril de 2019"
    assert per.decode(per(text)["input_ids"], skip_special_tokens=True) == text


def best_segmentation_score(word: str, scores: dict[str, float]) -> float:
    """The highest sum of piece log-probabilities over every way to cut ``word`` into pieces of
    the vocabulary (exhaustive recursion, independent of the tokenizer's Viterbi search)."""

    @cache
    def best(start: int) -> float:
        if start == len(word):
            return 0.0
        cuts = [
            scores[word[start:end]] + best(end)
            for end in range(start + 1, len(word) + 1)
            if word[start:end] in scores
        ]
        return max(cuts, default=float("-inf"))

    return best(0)


def test_unigram_tokenizer_restores_text_and_cuts_words_at_the_most_likely_pieces():
    dd = load_translation_splits("dates", size=600, seed=0)
    tok = build_translation_tokenizer(dd, kind="unigram", vocab_size=200)
    assert [tok.pad_token_id, tok.unk_token_id, tok.bos_token_id, tok.eos_token_id] == [0, 1, 2, 3]
    assert 100 < len(tok) <= 200
    for pair in dd["test"]["translation"][:20]:
        for text in pair.values():
            assert tok.decode(tok(text)["input_ids"], skip_special_tokens=True) == text
    assert unknown_rate(tok, [p["es"] for p in dd["test"]["translation"]]) == 0.0
    model = json.loads(tok.backend_tokenizer.to_str())["model"]
    assert model["type"] == "Unigram"
    scores = dict(map(tuple, model["vocab"][4:]))
    for word in ("▁miércoles,", "▁septiembre", "▁2019", "▁Thursday"):
        pieces = tok.tokenize(word[1:])
        assert "".join(pieces) == word
        assert sum(scores[p] for p in pieces) == pytest.approx(
            best_segmentation_score(word, scores)
        )
    per = build_translation_tokenizer(dd, kind="unigram", vocab_size=120, joint=False)
    assert 120 < len(per) <= 236
    text = "lunes, 22 de abril de 2019"
    assert per.decode(per(text)["input_ids"], skip_special_tokens=True) == text


@pytest.mark.parametrize("kind", ["word", "char", "bpe", "unigram"])
def test_saved_tokenizer_loads_with_autotokenizer(tmp_path, kind):
    subword = kind in ("bpe", "unigram")
    tok = build_translation_tokenizer(PAIRS, kind=kind, vocab_size=40 if subword else None)
    tok.save_pretrained(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokenizer.json", "tokenizer_config.json"]
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    sources, targets = ["I love you.", "¿Cómo estás, Tom?"], ["Te quiero.", "¡Hola!"]
    assert loaded(sources, text_target=targets) == tok(sources, text_target=targets)
    assert loaded.get_vocab() == tok.get_vocab()
    assert loaded.eos_token_id == 3 and loaded.pad_token_id == 0


def test_bad_arguments():
    with pytest.raises(ValueError, match="kind must be one of"):
        build_translation_tokenizer(PAIRS, kind="wordpiece")
    with pytest.raises(ValueError, match="vocab_size"):
        build_translation_tokenizer(PAIRS, vocab_size=4)
    with pytest.raises(ValueError, match="'fr'"):
        build_translation_tokenizer(PAIRS, target_lang="fr")
    with pytest.raises(ValueError, match="min_frequency must be 1 for a unigram"):
        build_translation_tokenizer(PAIRS, kind="unigram", min_frequency=2)


def test_recipe_check_accepts_exactly_the_kinds_the_builder_builds():
    """The light recipe schema keeps its own list (it must not import ``tokenizers``)."""
    from hfattn.recipes.schema import TOKENIZER_KINDS
    from hfattn.tokenization.translation import KINDS

    assert TOKENIZER_KINDS == KINDS
