"""The Reber grammars (Géron, *Hands-On ML* ch. 16, exercise 8): recogniser, generators,
near-misses and the ``reber`` classification data."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from hfattn.data import reber
from hfattn.data.reber import (
    ALPHABET,
    as_text,
    embedded_reber_string,
    is_embedded_reber,
    is_reber,
    mutate,
    near_miss,
    reber_examples,
    reber_string,
)

# Paths traced by hand on the automaton drawn in the module docstring.
VALID_REBER = ["BTXSE", "BPVVE", "BTSSXXTVVE", "BPTTVPXVVE", "BPVPXVPXVPXVVE", "BTXXVPSE"]
INVALID_REBER = [
    "",
    "B",
    "BTXS",  # stops before E
    "TXSE",  # no B
    "BTSSPXSE",  # P is not an edge of state 2
    "BTXSEE",  # a symbol after the end
    "BPVVXE",  # X is not an edge of state 6
    "BTXSE ",  # a space is not a symbol
]
# The seed's example (Géron: "BPBTSXXVPSEPE") and variants of it.
VALID_EMBEDDED = ["BPBTSXXVPSEPE", "BTBTXSETE", "BPBPVVEPE"]
INVALID_EMBEDDED = [
    "BPBTSXXVPSETE",  # the long-range mismatch: P ... T
    "BTBTXSEPE",
    "BPBTSXXVPSEP",  # no final E
    "BBTXSEBE",  # B is not an embedding symbol
    "BPBTSXXPSEPE",  # inner string invalid (X then P at state 4)
    "BTXSE",  # a plain Reber string is not embedded
    "BPE",
]


@pytest.mark.parametrize("string", VALID_REBER)
def test_recogniser_accepts_hand_traced_reber_strings(string):
    assert is_reber(string)


@pytest.mark.parametrize("string", INVALID_REBER)
def test_recogniser_rejects_non_reber_strings(string):
    assert not is_reber(string)


@pytest.mark.parametrize("string", VALID_EMBEDDED)
def test_embedded_recogniser_accepts(string):
    assert is_embedded_reber(string)


@pytest.mark.parametrize("string", INVALID_EMBEDDED)
def test_embedded_recogniser_rejects(string):
    assert not is_embedded_reber(string)


def test_generated_strings_are_valid_and_cover_every_edge():
    rng = random.Random(0)
    strings = [reber_string(rng) for _ in range(2000)]
    assert all(map(is_reber, strings))
    # every (symbol, next symbol) pair the automaton allows appears: the walk is not stuck
    pairs = {s[i : i + 2] for s in strings for i in range(len(s) - 1)}
    allowed = {"BT", "BP", "TS", "TX", "PT", "PV", "SS", "SX", "XX", "XS", "TT", "TV"}
    allowed |= {"XT", "XV", "SE", "VP", "VV", "PX", "PS", "VE"}
    assert pairs == allowed
    embedded = [embedded_reber_string(rng) for _ in range(2000)]
    assert all(map(is_embedded_reber, embedded))
    assert {s[1] for s in embedded} == {"T", "P"}


def test_shortest_strings_have_probability_one_eighth_each():
    rng = random.Random(1)
    counts = Counter(reber_string(rng) for _ in range(20000))
    for shortest in ("BTXSE", "BPVVE"):  # three binary choices each: (1/2)^3
        assert counts[shortest] / 20000 == pytest.approx(1 / 8, abs=0.01)
    assert min(map(len, counts)) == 5


def _edit_distance(a: str, b: str) -> int:
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def test_mutate_is_one_edit_of_each_kind():
    rng = random.Random(2)
    lengths = Counter()
    for _ in range(3000):
        s = embedded_reber_string(rng)
        m = mutate(s, rng)
        assert _edit_distance(s, m) == 1
        assert set(m) <= set(ALPHABET)
        lengths[len(m) - len(s)] += 1
    # substitute / insert / delete drawn uniformly
    assert set(lengths) == {-1, 0, 1}
    assert all(abs(n / 3000 - 1 / 3) < 0.04 for n in lengths.values())


def _long_range_only(string: str) -> bool:
    """``B c r c' E`` with ``c ≠ c'`` and ``r`` valid: wrong only across the whole string."""
    return (
        string[:1] == "B"
        and string[-1:] == "E"
        and {string[1], string[-2]} == {"T", "P"}
        and is_reber(string[2:-2])
    )


def test_embedded_mutations_swap_the_embedding_symbol_a_quarter_of_the_time():
    rng = random.Random(8)
    mutated = [mutate(embedded_reber_string(rng), rng, embedded=True) for _ in range(4000)]
    swapped = sum(map(_long_range_only, mutated)) / 4000
    # 1/4 swaps, plus the rare substitution that hits position 1 or -2 with T/P
    assert 0.24 < swapped < 0.29
    plain = [mutate(embedded_reber_string(rng), rng) for _ in range(4000)]
    assert sum(map(_long_range_only, plain)) / 4000 < 0.03


@pytest.mark.parametrize("embedded", [True, False])
def test_near_misses_are_rejected_and_one_edit_from_a_valid_string(embedded):
    rng = random.Random(3)
    accepts = is_embedded_reber if embedded else is_reber
    misses = [near_miss(rng, embedded=embedded) for _ in range(2000)]
    assert not any(map(accepts, misses))
    # each is one insertion, deletion or substitution away from some valid string
    for m in misses[:200]:
        neighbours = {m[:i] + m[i + 1 :] for i in range(len(m))}
        neighbours |= {m[:i] + c + m[i:] for i in range(len(m) + 1) for c in ALPHABET}
        neighbours |= {m[:i] + c + m[i + 1 :] for i in range(len(m)) for c in ALPHABET}
        assert any(map(accepts, neighbours)), m


def test_near_miss_redraws_valid_mutations(monkeypatch):
    """A mutation that lands on another valid string is redrawn: deleting an S of
    ``BTSSXSE`` gives the valid ``BTSXSE``, which ``near_miss`` must skip."""
    assert is_reber("BTSSXSE") and is_reber("BTSXSE")
    outcomes = iter(["BTSXSE", "BTSXSE", "BTSSXS"])
    monkeypatch.setattr(reber, "reber_string", lambda rng: "BTSSXSE")
    monkeypatch.setattr(reber, "mutate", lambda s, rng, embedded: next(outcomes))
    assert near_miss(random.Random(0), embedded=False) == "BTSSXS"
    monkeypatch.setattr(reber, "mutate", lambda s, rng, embedded: s)
    with pytest.raises(RuntimeError, match="no invalid mutation in 3 tries"):
        near_miss(random.Random(0), embedded=False, max_tries=3)


def test_examples_are_balanced_labelled_and_deterministic():
    examples = reber_examples(1001, random.Random(5))
    labels = Counter(y for _, y in examples)
    assert labels == {1: 500, 0: 501}
    assert all(is_embedded_reber(s) == bool(y) for s, y in examples)
    assert examples == reber_examples(1001, random.Random(5))
    assert examples != reber_examples(1001, random.Random(6))
    # shuffled: not all the valid strings first
    assert len({y for _, y in examples[:20]}) == 2


def test_as_text_is_one_symbol_per_word():
    assert as_text("BPBTSXXVPSEPE") == "B P B T S X X V P S E P E"
    assert as_text("BPBTSXXVPSEPE").split() == list("BPBTSXXVPSEPE")


def test_load_reber_splits(monkeypatch):
    pytest.importorskip("hfattn.data.classification")
    monkeypatch.setattr(reber, "REBER_SPLIT_SIZES", {"train": 40, "validation": 10, "test": 20})
    data = reber.load_reber(7)
    assert data.label_names == ["invalid", "valid"]
    assert {k: len(v) for k, v in data.splits.items()} == {
        "train": 40,
        "validation": 10,
        "test": 20,
    }
    for split in data.splits.values():
        assert sum(split["label"]) == len(split) // 2
        for text, label in zip(split["text"], split["label"], strict=True):
            assert is_embedded_reber(text.replace(" ", "")) == bool(label)
    again = reber.load_reber(7)
    assert again.splits["test"]["text"] == data.splits["test"]["text"]


def test_reber_recipe_is_a_small_gru_on_the_reber_task():
    from hfattn.recipes import load_recipe

    recipe = load_recipe("recipes/rnn_classifier_reber.yaml")
    assert (recipe.task, recipe.data.source) == ("classification", "reber")
    assert recipe.model["type"] == "rnn-classifier" and recipe.model["cell"] == "gru"
    # one token per symbol, however the string is spaced (BPBTXSEPE as typed)
    assert (recipe.tokenizer.type, recipe.tokenizer.whitespace) == ("char", "ignore")
    # the longest string must fit: no label may depend on a cut-off end
    rng = random.Random(0)
    longest = max(len(near_miss(rng)) for _ in range(5000))
    assert longest + 2 < recipe.data.max_length
