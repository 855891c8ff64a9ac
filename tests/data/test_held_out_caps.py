"""The held-out splits hfattn carves out of a source without them are bounded
(:mod:`hfattn.data.held_out`): ``data.max_held_out_pairs`` for translation (duplicate pairs
included), ``data.max_held_out_chars`` for a text, ``data.max_held_out_rows`` for labelled
rows; a source's own splits are kept whole; the bounds key the prepared data, a bad bound is
refused at load, and one line states every split's size, prepared now or reused."""

from __future__ import annotations

import json
import logging
import re
from collections import Counter

import datasets
import pytest

from hfattn.data.classification import load_classification_data
from hfattn.data.held_out import split_sizes_line
from hfattn.data.shakespeare import SPLITS as SPLITS_OF_PLAYS
from hfattn.data.shakespeare import play_text
from hfattn.data.text import load_text_splits, open_text_splits
from hfattn.data.translation import load_translation_splits
from hfattn.recipes import load_recipe
from hfattn.recipes.schema import RecipeError
from hfattn.tasks.causal_lm.corpus import corpus_settings, open_splits, prepare_char_corpus
from hfattn.tasks.causal_lm.recipe import TextDataSection
from hfattn.tasks.classification import encoding as classification
from hfattn.tasks.translation import prepared as translation
from tests.helpers.recipe_helpers import write_recipe

SPLITS = ("train", "validation", "test")


def write_jsonl(path, rows) -> str:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return str(path)


def pairs_file(path, distinct: int, copies: int = 1) -> str:
    """``distinct`` en-fr pairs, each ``copies`` times in a row, as flat JSON Lines."""
    rows = [{"en": f"cat {i}", "fr": f"chat {i}"} for i in range(distinct) for _ in range(copies)]
    return write_jsonl(path, rows)


def pairs_of(dd) -> dict[str, list[tuple[str, str]]]:
    return {s: [(t["en"], t["fr"]) for t in dd[s]["translation"]] for s in SPLITS}


# ---- translation ---------------------------------------------------------------------------
def test_a_table_of_20000_pairs_carves_held_out_splits_of_the_cap(tmp_path):
    source = pairs_file(tmp_path / "pairs.jsonl", 20_000)
    dd = load_translation_splits(source, target_lang="fr", max_held_out_pairs=50)
    assert [len(dd[s]) for s in SPLITS] == [19_900, 50, 50]  # 15 % would be 3,000 each
    got = pairs_of(dd)
    assert len({p for s in SPLITS for p in got[s]}) == 20_000  # every pair in one split
    unbounded = load_translation_splits(source, target_lang="fr", max_held_out_pairs=None)
    assert [len(unbounded[s]) for s in SPLITS] == [14_000, 3_000, 3_000]
    # the cut is the start of the same seeded deal: the bounded test is part of the unbounded
    assert set(got["test"]) <= set(pairs_of(unbounded)["test"])


@pytest.mark.parametrize(
    ("cap", "fraction", "sizes"),
    [(50, 0.15, (50, 50)), (2_500, 0.1, (2_500, 2_500))],  # cut by the cap / by the fraction
)
def test_the_cap_holds_with_every_pair_copied_five_times(tmp_path, caplog, cap, fraction, sizes):
    """4,000 pairs, each 5 times: the copies of a held-out pair would swell its split (to about
    five times its cut); those past the cap are dropped, and no pair is in two splits."""
    source = pairs_file(tmp_path / "copies.jsonl", 4_000, copies=5)
    with caplog.at_level(logging.INFO, logger="hfattn.data.pair_splits"):
        dd = load_translation_splits(source, target_lang="fr", max_held_out_pairs=cap,
                                     validation_fraction=fraction, test_fraction=fraction)  # fmt: skip
    got = pairs_of(dd)
    assert (len(got["validation"]), len(got["test"])) == sizes
    split_of = {}
    for split in SPLITS:
        for pair in set(got[split]):
            assert split_of.setdefault(pair, split) == split  # no pair in two splits
    # the copies dropped: those of each held-out pair outside its split
    dropped = sum(5 * len(set(got[s])) - len(got[s]) for s in ("validation", "test"))
    assert sum(len(got[s]) for s in SPLITS) == 20_000 - dropped
    assert Counter(got["train"]) == dict.fromkeys(set(got["train"]), 5)  # train keeps its copies
    (line,) = [r.getMessage() for r in caplog.records]
    assert f" and {dropped} dropped, their split full at data.max_held_out_pairs" in line


def test_a_generator_and_spa_txt_respect_the_cap(tmp_path):
    dates = load_translation_splits("dates", size=1_000, max_held_out_pairs=40)
    assert [len(dates[s]) for s in SPLITS] == [920, 40, 40]
    spa = tmp_path / "spa.txt"
    spa.write_text("".join(f"dog {i}\tperro {i}\n" for i in range(1_000)), "utf-8")
    plain = load_translation_splits(str(spa), max_held_out_pairs=40)
    assert [len(plain[s]) for s in SPLITS] == [920, 40, 40]
    geron = load_translation_splits(str(spa), preprocessing="geron", train_size=600,
                                    max_held_out_pairs=40)  # fmt: skip
    assert [len(geron[s]) for s in SPLITS] == [600, 40, 40]  # train keeps train_size pairs


def test_a_sources_own_held_out_splits_are_kept_whole(tmp_path):
    rows = [{"en": f"cat {i}", "fr": f"chat {i}"} for i in range(300)]
    folder = tmp_path / "own"
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(rows[:200]),
         "test": datasets.Dataset.from_list(rows[200:])}
    ).save_to_disk(str(folder))  # fmt: skip
    dd = load_translation_splits(str(folder), max_held_out_pairs=10)
    assert [len(dd[s]) for s in SPLITS] == [190, 10, 100]  # validation carved, test whole


# ---- text ----------------------------------------------------------------------------------
def test_the_text_cap_bounds_the_held_out_tail_of_a_file(tmp_path):
    text = "".join(f"line {i} of the corpus\n" for i in range(10_000))
    path = tmp_path / "big.txt"
    path.write_text(text, "utf-8")
    splits = open_text_splits(str(path), max_held_out_chars=1_000)  # 5 % would be 11,944
    assert [splits.num_chars(s) for s in SPLITS] == [len(text) - 2_000, 1_000, 1_000]
    parts = load_text_splits(str(path), max_held_out_chars=1_000)
    assert parts == {"train": [text[:-2_000]], "validation": [text[-2_000:-1_000]],
                     "test": [text[-1_000:]]}  # fmt: skip
    table = write_jsonl(tmp_path / "rows.jsonl", [{"text": t} for t in text.splitlines()])
    rows = open_text_splits(table, max_held_out_chars=700)
    assert [rows.num_chars(s) for s in ("validation", "test")] == [700, 700]


def test_the_embedded_plays_keep_their_own_splits_whole():
    with pytest.raises(RecipeError, match="^data.max_held_out_chars: 1000 is not used by the "
                       "embedded source shakespeare"):  # fmt: skip
        TextDataSection(max_held_out_chars=1_000)
    splits = open_splits(TextDataSection())  # source: shakespeare
    for split, plays in SPLITS_OF_PLAYS.items():  # two whole plays each
        assert splits.documents(split) == [play_text(play) for play in plays]


# ---- classification ------------------------------------------------------------------------
def test_the_classification_cap_keeps_the_carving_stratified(tmp_path):
    rows = [{"text": f"text number {i}", "label": ["neg", "pos"][i % 2]} for i in range(2_000)]
    source = write_jsonl(tmp_path / "rows.jsonl", rows)
    data = load_classification_data(source, validation_fraction=0.2, test_fraction=0.1,
                                    max_held_out_rows=40)  # fmt: skip
    assert data.sizes() == {"train": 1_920, "validation": 40, "test": 40}
    for split in ("validation", "test"):
        assert Counter(data.labels(split)) == {0: 20, 1: 20}
    held = set(data.texts("validation")) | set(data.texts("test"))
    assert not held & set(data.texts("train"))
    folder = tmp_path / "own"
    datasets.DatasetDict(
        {"train": datasets.Dataset.from_list(rows[:1_500]),
         "test": datasets.Dataset.from_list(rows[1_500:])}
    ).save_to_disk(str(folder))  # fmt: skip
    own = load_classification_data(str(folder), max_held_out_rows=40)
    assert own.sizes() == {"train": 1_460, "validation": 40, "test": 500}


# ---- the recipe fields ---------------------------------------------------------------------
RECIPES = {
    "translation": {
        "task": "translation", "model": {"type": "bahdanau", "embedding_dim": 8,
        "encoder_hidden_size": 8, "decoder_hidden_size": 16},
        "tokenizer": {"type": "word", "vocab_size": 100}, "data": {"target_lang": "fr"},
    },
    "classification": {
        "task": "classification", "model": {"type": "rnn-classifier", "embedding_dim": 8,
        "hidden_size": 8}, "tokenizer": {"type": "word", "vocab_size": 100}, "data": {},
    },
    "causal-lm": {"task": "causal-lm", "data": {}},
}  # fmt: skip
CAPS = {"translation": "max_held_out_pairs", "classification": "max_held_out_rows",
        "causal-lm": "max_held_out_chars"}  # fmt: skip


def recipe(folder, task: str, **data):
    base = {"name": "caps", **RECIPES[task]}
    base["data"] = {**base["data"], **data}
    return load_recipe(write_recipe(folder, base=base))


@pytest.mark.parametrize("task", list(RECIPES))
@pytest.mark.parametrize("value", [0, -5, "many"])
def test_a_bad_cap_is_refused_at_load_in_one_line(tmp_path, task, value):
    field = CAPS[task]
    with pytest.raises(RecipeError) as refused:
        recipe(tmp_path, task, **{field: value})
    message = str(refused.value)
    assert message.startswith(f"data.{field}: ") and "\n" not in message
    assert ("must be > 0" if isinstance(value, int) else "is not an integer or null") in message


@pytest.mark.parametrize("task", list(RECIPES))
def test_the_cap_keys_the_prepared_data_and_null_is_no_bound(tmp_path, task):
    source = pairs_file(tmp_path / "pairs.jsonl", 10)
    if task == "causal-lm":
        (tmp_path / "text.txt").write_text("to be or not to be\n" * 10)
        source = str(tmp_path / "text.txt")
    elif task == "classification":
        source = write_jsonl(tmp_path / "rows.jsonl", [{"text": "a", "label": 1}])

    def settings(**cap):
        loaded = recipe(tmp_path, task, source=source, **cap)
        if task == "causal-lm":
            return corpus_settings(loaded.data, open_splits(loaded.data), {}, "<bos>")
        module = translation if task == "translation" else classification
        return module.data_settings(loaded)

    default = settings()
    assert getattr(recipe(tmp_path, task, source=source).data, CAPS[task]) is not None
    assert settings(**{CAPS[task]: None}) != default
    assert settings(**{CAPS[task]: 7}) != default
    assert settings(**{CAPS[task]: 7}) == settings(**{CAPS[task]: 7})


# ---- the line that states the sizes --------------------------------------------------------
def size_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("data: ")]


def test_the_sizes_line_names_the_splits_at_the_cap():
    sizes = {"train": 994_000, "validation": 3_000, "test": 3_000}
    assert split_sizes_line(sizes, "pairs", cap=3_000, cap_field="data.max_held_out_pairs") == (
        "data: train 994,000 pairs, validation 3,000, test 3,000 "
        "(validation and test at data.max_held_out_pairs)"
    )
    own = {"train": 29_000, "validation": 1_000, "test": 1_022}
    assert split_sizes_line(own, "pairs", cap=3_000, cap_field="data.max_held_out_pairs") == (
        "data: train 29,000 pairs, validation 1,000, test 1,022"
    )


def test_every_task_states_its_split_sizes_prepared_or_reused(tmp_path, cache, caplog):
    pairs = pairs_file(tmp_path / "pairs.jsonl", 400)
    text = tmp_path / "text.txt"
    text.write_text("".join(f"line {i}\n" for i in range(2_500)))  # 23,890 characters
    rows = write_jsonl(tmp_path / "rows.jsonl",
                       [{"text": f"row {i}", "label": i % 2} for i in range(300)])  # fmt: skip
    prepares = {
        "translation": lambda: translation.prepare_pairs(
            recipe(tmp_path, "translation", source=pairs, max_held_out_pairs=20)),
        "causal-lm": lambda: prepare_char_corpus(TextDataSection(
            source=str(text), validation_fraction=0.1, test_fraction=0.1,
            max_held_out_chars=500)).prepared,
        "classification": lambda: classification.prepare_data(
            recipe(tmp_path, "classification", source=rows, max_held_out_rows=10)),
    }  # fmt: skip
    expected = {
        "translation": "data: train 360 pairs, validation 20, test 20 "
        "(validation and test at data.max_held_out_pairs)",
        "causal-lm": "data: train 22,890 characters in 22,891 tokens, validation 500 in 501 "
        "tokens, test 500 in 501 tokens (validation and test at data.max_held_out_chars)",
        "classification": "data: train 280 rows, validation 10, test 10 "
        "(validation and test at data.max_held_out_rows)",
    }
    for task, prepare in prepares.items():
        for reused in (False, True):
            caplog.clear()
            with caplog.at_level(logging.INFO, logger="hfattn"):
                assert prepare().reused is reused
            assert size_lines(caplog) == [expected[task]], (task, reused)
            said = "reusing prepared data" if reused else "preparing"
            assert any(re.match(said, r.getMessage()) for r in caplog.records)
