"""The translation pairs prepared once (:mod:`hfattn.tasks.translation.prepared`): a second
preparation maps the first's folder (the same tokenizer and ids), a changed source, data or
tokenizer setting prepares anew, the tokenizer trains on ``tokenizer.sample_pairs`` pairs,
the ids are those the tokenizer gives (cut as the list encoders cut them) and a refused pair
leaves nothing prepared."""

from __future__ import annotations

import logging

import datasets
import pytest

from hfattn.data.prepared_cache import list_prepared
from hfattn.recipes import load_recipe
from hfattn.tasks import get_task
from hfattn.tasks.translation.encoding import (
    SourceTooLongError,
    encode_sources,
    encode_targets,
    load_pair_splits,
    load_pairs,
)
from hfattn.tasks.translation.prepared import (
    TOKENIZER_FOLDER,
    PreparedPairs,
    build_tokenizer,
    load_tokenizer,
    tokenizer_sample,
)
from tests.helpers.recipe_helpers import write_recipe

BASE = {
    "name": "prepared_pairs",
    "task": "translation",
    "model": {"type": "bahdanau", "embedding_dim": 8, "encoder_hidden_size": 8,
              "decoder_hidden_size": 16},
    "tokenizer": {"type": "word", "vocab_size": 200},
    "data": {"source": "dates", "size": 300, "max_source_length": 4, "max_target_length": 6},
    "training": {"batch_size": 8, "max_steps": 2},
}  # fmt: skip


def recipe_with(folder, **sections):
    """The :data:`BASE` recipe with ``sections`` merged in, loaded."""
    merged = {k: dict(v) if isinstance(v, dict) else v for k, v in BASE.items()}
    for key, value in sections.items():
        merged[key].update(value)
    return load_recipe(write_recipe(folder, base=merged))


def prepare(recipe):
    return get_task("translation").prepare_data(recipe)


def tokenizer_files(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((folder / TOKENIZER_FOLDER).iterdir())}


def test_a_second_preparation_maps_the_first(tmp_path, cache, caplog):
    recipe = recipe_with(tmp_path)
    first = prepare(recipe)
    assert not first.reused and first.folder.parent == cache
    with caplog.at_level(logging.WARNING):
        again = prepare(recipe)
        PreparedPairs(again.folder).warn_cuts()
    assert again.reused and again.folder == first.folder and again.record()["reused"] is True
    assert [row["name"] for row in list_prepared()] == [first.folder.name]
    assert tokenizer_files(again.folder) == tokenizer_files(first.folder)
    # the cut sources are warned about on every run, from the facts kept with the data
    assert any("source(s) longer than 4 tokens were truncated" in r.message for r in caplog.records)


def test_the_prepared_ids_are_the_tokenizers_cut_as_the_list_encoders_cut(tmp_path, cache):
    """Training sources cut to ``data.max_source_length`` (``encode_sources``), held-out
    sources whole (the scoring cuts them to the model's limit), every target cut to
    ``data.max_target_length`` (``encode_targets``); the texts as loaded."""
    recipe = recipe_with(tmp_path)
    d = recipe.data
    pairs = PreparedPairs(prepare(recipe).folder)
    tok = load_tokenizer(pairs.folder)
    cut = 0
    for split, (sources, targets) in load_pairs(d).items():
        source_ids, target_ids = pairs.ids(split)
        source_texts, target_texts = pairs.texts(split)
        assert (list(source_texts), list(target_texts)) == (sources, targets)
        limit = d.max_source_length if split == "train" else None
        assert source_ids.tolist() == encode_sources(tok, sources, limit)
        assert target_ids.tolist() == encode_targets(tok, targets, d.max_target_length, "warn")
        cut += pairs.facts[split]["cuts"][0]["count"]
        assert max(source_ids.lengths) > d.max_source_length or split == "train"
    assert cut > 0 and pairs.facts["train"]["rows"] == len(load_pairs(d)["train"][0])


@pytest.mark.slow
@pytest.mark.parametrize(
    "change",
    [
        {"data": {"size": 301}},
        {"data": {"seed": 1}},
        {"data": {"test_fraction": 0.2}},
        {"data": {"max_source_length": 10}},
        {"data": {"on_too_long": "error", "max_source_length": 40, "max_target_length": 40}},
        {"tokenizer": {"vocab_size": 201}},
        {"tokenizer": {"lowercase": False}},
        {"tokenizer": {"sample_pairs": 100}},
    ],
)
def test_a_changed_data_or_tokenizer_setting_prepares_anew(tmp_path, cache, change):
    first = prepare(recipe_with(tmp_path / "a"))
    other = prepare(recipe_with(tmp_path / "b", **change))
    assert not other.reused and other.folder != first.folder
    assert len(list_prepared()) == 2
    assert prepare(recipe_with(tmp_path / "c")).folder == first.folder  # the first is kept


def save_pairs(folder, pairs) -> str:
    """A ``save_to_disk`` folder of ``pairs`` (train / validation / test)."""
    features = datasets.Features({"translation": {"en": datasets.Value("string"),
                                                  "es": datasets.Value("string")}})  # fmt: skip

    def split(rows):
        return datasets.Dataset.from_dict(
            {"translation": [{"en": s, "es": t} for s, t in rows]}, features=features
        )

    datasets.DatasetDict(
        {
            "train": split(pairs[:-20]),
            "validation": split(pairs[-20:-10]),
            "test": split(pairs[-10:]),
        }
    ).save_to_disk(str(folder))
    return str(folder)


def test_a_changed_dataset_folder_prepares_anew_and_stays_in_arrow(tmp_path, cache):
    pairs = [(f"the day {i} of may", f"el día {i} de mayo") for i in range(120)]
    source = save_pairs(tmp_path / "pairs", pairs)
    recipe = recipe_with(tmp_path, data={"source": source, "size": None})
    splits, target_lang = load_pair_splits(recipe.data)
    assert target_lang == "es" and splits["train"].cache_files  # memory-mapped Arrow
    first = prepare(recipe)
    assert prepare(recipe).reused
    save_pairs(tmp_path / "pairs", pairs[:-1] + [("the last day", "el último día")])
    changed = prepare(recipe)
    assert not changed.reused and changed.folder != first.folder
    assert PreparedPairs(changed.folder).texts("test")[0][-1] == "the last day"


def test_the_tokenizer_trains_on_a_seeded_sample_of_sample_pairs(tmp_path, cache):
    recipe = recipe_with(tmp_path, tokenizer={"sample_pairs": 40, "vocab_size": 10_000})
    splits, target_lang = load_pair_splits(recipe.data)
    train = splits["train"]
    sources, targets = tokenizer_sample(train, 40, recipe.data.seed, "en", target_lang)
    everything = tokenizer_sample(train, None, 0, "en", target_lang)
    assert len(sources) == len(targets) == 40 and len(everything[0]) == len(train)
    positions = [everything[0].index(s) for s in sources]
    assert positions == sorted(positions)  # kept in corpus order
    assert tokenizer_sample(train, 40, 1, "en", target_lang)[0] != sources  # drawn by seed
    assert tokenizer_sample(train, len(train), 5, "en", target_lang) == everything  # all, in order

    tok = load_tokenizer(prepare(recipe).folder)
    on_sample = build_tokenizer(recipe, sources, targets, target_lang)
    on_all = build_tokenizer(recipe, *everything, target_lang)
    assert tok.get_vocab() == on_sample.get_vocab()
    assert len(on_sample) < len(on_all)  # fewer pairs, fewer words


def test_a_pair_refused_at_preparation_leaves_nothing_prepared(tmp_path, cache):
    from hfattn.recipes.schema import RecipeError

    recipe = recipe_with(tmp_path, data={"on_too_long": "error"})
    with pytest.raises(
        SourceTooLongError, match=r"source \d+ has \d+ tokens; the model accepts at most 4"
    ):
        prepare(recipe)
    recipe = recipe_with(tmp_path, data={"on_too_long": "error", "max_source_length": 40})
    with pytest.raises(
        RecipeError, match=r"data.max_target_length: target \d+ has \d+ tokens \(> 6\)"
    ):
        prepare(recipe)
    assert list_prepared() == [] and not [p for p in cache.iterdir() if p.is_dir()]


def test_the_sample_pairs_field_is_checked(tmp_path):
    from hfattn.recipes.schema import RecipeError

    with pytest.raises(RecipeError, match="tokenizer.sample_pairs: must be > 0"):
        recipe_with(tmp_path, tokenizer={"sample_pairs": 0})
