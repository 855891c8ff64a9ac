"""Bad input, tried with ``hypothesis`` (issue 11): tokenizers and recipes.

- Tokenizers: the char tokenizer gives back any text over its vocabulary and turns each other
  character into exactly one ``<unk>`` at its position; the translation tokenizers (word, char,
  BPE) keep the contract their module docstring states, for any Unicode string (mixed scripts,
  control characters, text spelling a special token).
- Recipes: every YAML in ``recipes/`` with a key deleted, an unknown key added, a value of
  another type, a number out of range (negative, zero, huge, NaN, infinite) or a whole section
  deleted either validates or fails with one :class:`~hfattn.recipes.RecipeError` (through the
  CLI: exit status 2 and one ``error: ...`` line) that names the mutated key. Nothing is trained.

Generation, translation and the Spaces are fuzzed in ``tests/cli/test_bad_input_generation.py``.
"""

from __future__ import annotations

import copy
import math
import re
import unicodedata
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hfattn.cli import main
from hfattn.recipes import RecipeBase, RecipeError, load_recipe
from hfattn.tokenization.characters import build_char_tokenizer
from hfattn.tokenization.translation import SPECIAL_TOKEN_DELIMITERS, build_translation_tokenizer
from tests.helpers.bad_input import FUZZ, MIXED_SCRIPTS, one_error_line, texts

RECIPES = sorted((Path(__file__).resolve().parents[2] / "recipes").glob("*.yaml"))

WHITE_SPACE = re.compile("[\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+")
"""Unicode's ``White_Space`` characters, where the word tokenizer splits (Python's
``str.split`` also splits at ``\\x1c``-``\\x1f``, which are not white space in Unicode)."""

TRANSLATION_PAIRS = [
    ("I love you.", "te quiero."),
    ("Where is the station?", "¿dónde está la estación?"),
    ("The cat sleeps on the sofa.", "el gato duerme en el sofá."),
    ("Hello, world!", "¡hola, mundo!"),
    ("مرحبا بالعالم", "你好世界 😀"),
]


# ---- tokenizers ------------------------------------------------------------------------------
@FUZZ
@given(
    case=st.text(min_size=1, max_size=30).flatmap(
        lambda training: st.tuples(st.just(training), st.text(sorted(set(training))))
    )
)
@example(case=("<unk> a<eos>b", "<unk>a<eos>"))  # a special token's spelling stays characters
def test_char_tokenizer_round_trips_text_over_its_vocabulary(case):
    training, text = case
    tokenizer = build_char_tokenizer(training)
    vocab = tokenizer.get_vocab()
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert ids == [vocab[c] for c in text]
    assert tokenizer.decode(ids) == text


@cache
def char_tokenizer():
    """A char tokenizer over :data:`MIXED_SCRIPTS` (built once)."""
    return build_char_tokenizer(MIXED_SCRIPTS)


@FUZZ
@given(text=texts)
@example(text="<unk>")  # once one <unk> id for five characters in the vocabulary
@example(text="a<eos>b")  # once an <eos> in the middle of a prompt
def test_char_tokenizer_maps_each_unknown_character_to_one_unk(text):
    tokenizer = char_tokenizer()
    vocab, unk = tokenizer.get_vocab(), tokenizer.unk_token_id
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert ids == [vocab.get(c, unk) for c in text]
    known = "".join(c for c in text if c in vocab)
    assert tokenizer.decode(ids, skip_special_tokens=True) == known


@cache
def translation_tokenizer(kind: str):
    """A joint tokenizer of ``kind`` on :data:`TRANSLATION_PAIRS` (built once per kind)."""
    return build_translation_tokenizer(
        TRANSLATION_PAIRS, kind=kind, vocab_size=120 if kind in ("bpe", "unigram") else None
    )


def nfc(text: str) -> str:
    """``text`` in Unicode normal form C (the translation tokenizers normalize to it)."""
    return unicodedata.normalize("NFC", text)


def encode(tokenizer, text: str) -> list[int]:
    """The ids of ``text`` with the template's final ``<eos>``, checked to be there and to be the
    only special token besides ``<unk>``."""
    ids = tokenizer(text)["input_ids"]
    assert ids[-1] == tokenizer.eos_token_id
    special = set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}
    assert not special & set(ids[:-1]), "a special token inside the text"
    return ids[:-1]


@FUZZ
@given(text=texts)
@example(text="love <eos> you")
@example(text="\x1cI\x1flove")  # not white space in Unicode: one word
def test_word_tokenizer_maps_each_normalized_word_to_its_id_or_one_unk(text):
    tokenizer = translation_tokenizer("word")
    vocab, unk = tokenizer.get_vocab(), tokenizer.unk_token_id
    normalized = tokenizer.backend_tokenizer.normalizer.normalize_str(text)
    words = [w for w in WHITE_SPACE.split(normalized) if w]
    assert encode(tokenizer, text) == [vocab.get(w, unk) for w in words]


@FUZZ
@given(
    words=st.lists(st.sampled_from(["i", "love", "you", "where", "is", "the", "gato"]), max_size=8),
    separators=st.lists(st.sampled_from([" ", "  ", "\t", "\n", "\u3000", " \r\n "]), min_size=9),
)
def test_word_tokenizer_round_trips_vocabulary_words_up_to_white_space(words, separators):
    tokenizer = translation_tokenizer("word")
    text = "".join(sep + word for sep, word in zip(separators, words, strict=False))
    text += separators[-1]
    ids = encode(tokenizer, text)
    assert tokenizer.decode(ids, skip_special_tokens=True) == " ".join(words)


@FUZZ
@given(text=texts)
@example(text="Ä\u0308 e\u0301")  # decomposed accents: composed by NFC
def test_translation_char_tokenizer_maps_each_unknown_character_to_one_unk(text):
    tokenizer = translation_tokenizer("char")
    vocab, unk = tokenizer.get_vocab(), tokenizer.unk_token_id
    assert encode(tokenizer, text) == [vocab.get(c, unk) for c in nfc(text)]


@FUZZ
@given(text=texts)
@example(text="ö a")  # an unknown first character: the space after it stays
@example(text="  I love")  # only the first leading space goes
@example(text="▁a")  # a literal ▁ reads as a space
@example(text="<pad> <eos>x")  # text, never the special tokens
@pytest.mark.parametrize("kind", ["bpe", "unigram"])
def test_subword_tokenizer_gives_back_the_text_less_unknown_characters(kind, text):
    tokenizer = translation_tokenizer(kind)
    special = set(tokenizer.all_special_tokens)
    alphabet = {c for token in tokenizer.get_vocab() if token not in special for c in token}
    alphabet.add(" ")  # the ▁ of every word
    ids = encode(tokenizer, text)
    spaced = nfc(text).replace("▁", " ").removeprefix(" ")
    known = "".join(c for c in spaced if c in alphabet)
    assert tokenizer.decode(ids, skip_special_tokens=True) == known
    isolated = SPECIAL_TOKEN_DELIMITERS if kind == "unigram" else ""
    assert ids.count(tokenizer.unk_token_id) == unknown_runs(spaced, alphabet, isolated)


def unknown_runs(text: str, alphabet: set[str], isolated: str = "") -> int:
    """The number of maximal runs of characters outside ``alphabet`` (a space ends a run; each
    character of ``isolated`` is a piece, hence a run, of its own)."""
    runs, inside = 0, False
    for c in text:
        runs += c not in alphabet and (not inside or c in isolated)
        inside = c not in alphabet and c not in isolated
    return runs


# ---- recipes ---------------------------------------------------------------------------------
KEY = st.from_regex(r"[a-z][a-z_]{0,8}", fullmatch=True).map(lambda name: f"zz_{name}")
"""An unknown key (no recipe section has a field starting ``zz_``)."""

OTHER_TYPES = st.one_of(
    st.text(max_size=6),
    st.integers(-5, 5),
    st.floats(allow_nan=True, allow_infinity=True),
    st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(st.sampled_from(["a", "type"]), st.integers(0, 3), max_size=1),
    st.none(),
    st.booleans(),
)
"""Values of every YAML type."""

OUT_OF_RANGE = st.sampled_from([-1, 0, -(10**30), 10**30, -1.5, 0.0, 1e308, math.nan, math.inf])
"""Numbers outside most ranges: negative, zero, huge, NaN, infinite."""


def key_paths(tree: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path of a nested mapping, sections and leaves (lists are leaves)."""
    if not isinstance(tree, dict):
        return []
    return [p for k, v in tree.items() for p in [(*prefix, k), *key_paths(v, (*prefix, k))]]


def is_number(value: Any) -> bool:
    """An int or float that is not a bool."""
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True)
class Mutation:
    """One change to a recipe tree: ``delete`` the key at ``path``, ``add`` the unknown key
    ``path[-1]`` to the section ``path[:-1]``, or ``set`` the key at ``path`` to ``value``."""

    kind: str
    path: tuple
    value: Any = None

    @property
    def key(self) -> str:
        """The mutated key, dotted (``training.batch_size``)."""
        return ".".join(map(str, self.path))

    def apply(self, tree: dict) -> dict:
        """A mutated copy of ``tree``."""
        tree = copy.deepcopy(tree)
        section = tree
        for name in self.path[:-1]:
            section = section[name]
        if self.kind == "delete":
            del section[self.path[-1]]
        else:
            section[self.path[-1]] = self.value
        return tree

    def check_message(self, message: str) -> None:
        """The error must be one line naming the mutated key. A cross-field check may name it
        by its bare name next to its section or a field of it (``model.d_model (128) must be
        divisible by num_heads``, ``word_vectors: give exactly one of train ... or path``); a
        deleted key may show as another field of its section that now conflicts (a model's
        fields once ``model.type`` is gone)."""
        assert "\n" not in message and "Traceback" not in message, message
        named = re.match(r"[^:\s]+", message).group(0)
        assert not named.endswith(".yaml"), (self, message)  # a field, not the file
        section = ".".join(map(str, self.path[:-1]))
        same_section = not section or named == section or named.startswith(f"{section}.")
        mentioned = str(self.path[-1]) in message or self.kind == "delete"
        assert self.key in message or (same_section and mentioned), (self, message)


@st.composite
def mutations(draw, tree: dict) -> Mutation:
    """A random :class:`Mutation` of ``tree``."""
    paths = key_paths(tree)
    sections = [()] + [p for p in paths if isinstance(_get(tree, p), dict)]
    numbers = [p for p in paths if is_number(_get(tree, p))]
    kind = draw(
        st.sampled_from(
            ["delete", "add", "retype", "range"] if numbers else ["delete", "add", "retype"]
        )
    )
    if kind == "delete":
        return Mutation("delete", draw(st.sampled_from(paths)))
    if kind == "add":
        return Mutation("add", (*draw(st.sampled_from(sections)), draw(KEY)), draw(OTHER_TYPES))
    if kind == "range":
        return Mutation("set", draw(st.sampled_from(numbers)), draw(OUT_OF_RANGE))
    path = draw(st.sampled_from(paths))
    old = type(_get(tree, path))
    return Mutation("set", path, draw(OTHER_TYPES.filter(lambda v: type(v) is not old)))


def _get(tree: dict, path: tuple) -> Any:
    """The value at key ``path`` of ``tree``."""
    for name in path:
        tree = tree[name]
    return tree


@cache
def recipe_tree(path: Path) -> dict:
    """The shipped recipe as plain data (read once)."""
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def write_mutated(path: Path, mutation: Mutation, folder: Path) -> Path:
    """Write the recipe at ``path`` with ``mutation`` applied to ``folder``; returns the file."""
    out = folder / path.name
    out.write_text(yaml.safe_dump(mutation.apply(recipe_tree(path)), allow_unicode=True))
    return out


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
@settings(FUZZ, max_examples=15)
@given(data=st.data())
def test_mutated_recipe_validates_or_names_the_key(recipe, data, tmp_path):
    mutation = data.draw(mutations(recipe_tree(recipe)), label="mutation")
    try:
        loaded = load_recipe(write_mutated(recipe, mutation, tmp_path))
    except RecipeError as err:
        mutation.check_message(str(err))
    else:
        assert isinstance(loaded, RecipeBase)


def test_every_shipped_recipe_validates_as_is():
    assert RECIPES and all(isinstance(load_recipe(p), RecipeBase) for p in RECIPES)


@pytest.mark.parametrize(
    ("recipe", "mutation", "message"),
    [
        (
            "bahdanau_dates_en_es",
            Mutation("set", ("data",), "dates"),
            "data: expected a mapping of fields, got str 'dates'",
        ),
        (
            "char_rnn_shakespeare",
            Mutation("set", ("evaluation", "splits"), {"a": 1}),
            "evaluation.splits: expected a list, got dict {'a': 1}",
        ),
        (
            "vaswani_dates_en_es",
            Mutation("set", ("model",), [1, 2]),
            "model: expected a mapping of fields, got list [1, 2]",
        ),
        (
            "vaswani_dates_en_es",
            Mutation("set", ("model", "type"), [1, 2]),
            "model.type: unknown model type [1, 2]",
        ),
        (
            "char_rnn_shakespeare",
            Mutation("set", ("training", "learning_rate"), math.inf),
            "training.learning_rate: must be a finite number, got inf",
        ),
        (
            "rnn_classifier_genre",
            Mutation("set", ("training", "weight_decay"), math.inf),
            "training.weight_decay: must be a finite number, got inf",
        ),
        (
            "vaswani_spa_eng_chollet",
            Mutation("set", ("model", "preset"), ["chollet"]),
            "model.preset: must be the name of a preset, got ['chollet']",
        ),
        (
            "seq2seq_spa_eng",
            Mutation("set", ("task",), []),
            "task: must be one of causal-lm, classification, translation, not a list",
        ),
    ],
    ids=lambda v: v.key if isinstance(v, Mutation) else None,
)
def test_mutations_found_by_the_fuzzer_give_one_clear_error(recipe, mutation, message, tmp_path):
    """Once a merge error naming no field, a bare ``TypeError`` from OmegaConf or
    ``CONFIG_MAPPING``, or an infinite value that passed every check."""
    path = next(p for p in RECIPES if p.stem == recipe)
    with pytest.raises(RecipeError) as err:
        load_recipe(write_mutated(path, mutation, tmp_path))
    assert str(err.value) == message


class Validated(Exception):
    """Raised by the stand-in for ``run_recipe``: the recipe passed validation."""


@FUZZ
@given(recipe=st.sampled_from(RECIPES), data=st.data())
def test_cli_reports_a_mutated_recipe_in_one_line(recipe, data, tmp_path, monkeypatch, capsys):
    def validated(*args, **kwargs):
        raise Validated

    monkeypatch.setattr("hfattn.orchestration.run.run_recipe", validated)
    monkeypatch.chdir(tmp_path)  # the default output_dir runs/NAME: never a run of the checkout
    mutation = data.draw(mutations(recipe_tree(recipe)), label="mutation")
    path = write_mutated(recipe, mutation, tmp_path)
    try:
        status = main(["train", str(path)])
    except Validated:
        return
    assert status == 2
    mutation.check_message(one_error_line(capsys))
