"""``tokenizer.bpe_dropout``: the training pairs cut anew every epoch by BPE-dropout, seeded so
that a resumed run trains on the same ids; the held-out splits, the saved tokenizer and the
translations keep the deterministic segmentation; the field is refused in one line where there
are no BPE merges to drop."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from transformers import AutoTokenizer

from hfattn.orchestration.run import build_job, run_recipe
from hfattn.recipes import RecipeError, load_recipe
from hfattn.tasks.translation.prepared import PreparedPairs, data_settings
from tests.helpers.crash_runs import assert_same_weights
from tests.helpers.recipe_helpers import write_recipe
from tests.helpers.tiny_runs import TINY_TRANSLATION_MODELS


def sampling_recipe(folder: Path, **training) -> Path:
    """A tiny Vaswani run on 240 date pairs with BPE-dropout 0.1 and length buckets: 9 batches
    an epoch, so 12 steps cross into epoch 1."""
    return write_recipe(
        folder,
        base={},
        name="bpe_dropout_tiny",
        task="translation",
        output_dir=str(folder / "run"),
        model=TINY_TRANSLATION_MODELS["vaswani"],
        tokenizer={"type": "bpe", "vocab_size": 120, "bpe_dropout": 0.1},
        data={"source": "dates", "size": 300, "validation_fraction": 0.1, "test_fraction": 0.1},
        training={
            "token_budget": 300,
            "length_buckets": 2,
            "epochs": 100,
            "max_steps": 12,
            "log_every": 4,
            "eval_every": None,
            "save_every": 100,
            "compile": False,
            **training,
        },  # fmt: skip
        evaluation={
            "splits": ["test"],
            "batch_size": 64,
            "max_new_tokens": 16,
            "max_examples": 8,
            "final_max_examples": 8,
        },  # fmt: skip
        generation={"max_new_tokens": 16, "num_beams": 1, "examples": ["April 22, 2019"]},
        hub={"language": ["en"], "tags": ["tiny"]},
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same recipe trained straight, and stopped at step 10 (epoch 1) then resumed."""
    root = tmp_path_factory.mktemp("bpe_dropout")
    run_recipe(load_recipe(sampling_recipe(root / "a")))
    resumed = load_recipe(sampling_recipe(root / "b"))

    def stop_at_10(progress):
        if progress.step == 10:
            progress.stop.request("interrupted")

    first = run_recipe(resumed, callbacks=[stop_at_10])
    assert first.interrupted and first.progress.epoch == 1
    second = run_recipe(load_recipe(root / "b" / "run" / "recipe.yaml"), resume=True)
    assert second.progress.step == 12
    return root / "a" / "run", root / "b" / "run"


def job_folder(run: Path) -> Path:
    """The prepared folder the run at ``run`` trained on."""
    return Path(json.loads((run / "eval_results.json").read_text())["data_preparation"]["folder"])


def test_a_resumed_run_trains_on_the_same_sampled_ids(runs):
    straight, resumed = runs
    assert_same_weights(straight, resumed)
    assert load_recipe(resumed / "recipe.yaml").tokenizer.bpe_dropout == 0.1


def test_training_ids_vary_by_epoch_in_the_bucket_shapes(runs):
    """Each epoch cuts many training sources otherwise than the tokenizer (each still spells its
    text), differently from epoch to epoch, and its batches hold those ids in the buckets'
    shapes."""
    straight, _ = runs
    batches = build_job(load_recipe(straight / "recipe.yaml")).batches
    tokenizer = AutoTokenizer.from_pretrained(straight)
    texts = list(PreparedPairs(job_folder(straight)).texts("train")[0])
    deterministic = tokenizer(texts)["input_ids"]
    drawn = [[row.tolist() for row in batches.ids(epoch)[0]] for epoch in range(3)]
    for epoch, ids in enumerate(drawn):
        changed = sum(a != b for a, b in zip(ids, deterministic, strict=True))
        assert len(ids) // 10 < changed < len(ids)
        assert tokenizer.batch_decode(ids, skip_special_tokens=True) == texts
        rows = {tuple(row) for row in ids}
        for batch in batches.epoch(epoch):
            assert (*batch["input_ids"].shape, batch["labels"].shape[1]) in batches.shapes
            pairs = zip(batch["input_ids"], batch["attention_mask"].bool(), strict=True)
            assert all(tuple(r[m].tolist()) in rows for r, m in pairs)
    assert drawn[1] != drawn[2]


def test_held_out_ids_translations_and_the_saved_tokenizer_stay_deterministic(runs):
    straight, _ = runs
    saved = json.loads((straight / "tokenizer.json").read_text())
    assert saved["model"]["type"] == "BPE" and saved["model"]["dropout"] is None
    recipe = load_recipe(straight / "recipe.yaml")
    job = build_job(recipe)
    pairs = PreparedPairs(job_folder(straight))
    tokenizer = AutoTokenizer.from_pretrained(straight)
    sources, targets = pairs.texts("test")
    source_ids, target_ids = pairs.ids("test")
    assert [row.tolist() for row in source_ids] == tokenizer(list(sources))["input_ids"]
    assert [row.tolist() for row in target_ids] == tokenizer(list(targets))["input_ids"]
    first = [job.evaluate(job.model, "test") for _ in range(2)]
    assert first[0] == first[1]
    assert job.sample(job.model) == job.sample(job.model)


def test_the_rate_leaves_the_prepared_data_as_they_are(tmp_path):
    on = load_recipe(sampling_recipe(tmp_path))
    off = load_recipe(sampling_recipe(tmp_path), ["tokenizer.bpe_dropout=0"])
    assert data_settings(on) == data_settings(off)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["tokenizer.bpe_dropout=1"], "tokenizer.bpe_dropout: must be in [0, 1) (0: off), got 1"),
        (["tokenizer.bpe_dropout=-0.1"], "tokenizer.bpe_dropout: must be in [0, 1)"),
        *(
            (
                [f"tokenizer.type={kind}", "tokenizer.bpe_dropout=0.1"],
                f"tokenizer.bpe_dropout: is for type bpe (merges to drop); type {kind} has none "
                "(unigram sampling is not offered: tokenizers cannot seed it)",
            )
            for kind in ("char", "word", "unigram")
        ),
    ],
)
def test_the_rate_is_refused_in_one_line_without_bpe_merges(tmp_path, overrides, message):
    with pytest.raises(RecipeError) as err:
        load_recipe(sampling_recipe(tmp_path), overrides)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_classification_has_no_bpe_dropout(tmp_path):
    recipe = write_recipe(tmp_path, base={"task": "classification"})
    with pytest.raises(RecipeError, match=r"tokenizer.bpe_dropout: not a field of tokenizer"):
        load_recipe(recipe, ["tokenizer.bpe_dropout=0.1"])


def test_sampled_lengths_stay_within_the_longest_bound(runs):
    """Every epoch's ids fit the bound the last bucket is sized by."""
    straight, _ = runs
    batches = build_job(load_recipe(straight / "recipe.yaml")).batches
    sampled = batches.ids
    bound = sampled.longest()
    for epoch in range(3):
        sources, targets = sampled(epoch)
        assert int(sources.lengths.max()) <= bound[0] and int(targets.lengths.max()) <= bound[1]
    assert bound[0] > int(np.max(PreparedPairs(job_folder(straight)).ids("train")[0].lengths))


@pytest.mark.parametrize("by_size", [False, True])
def test_pair_batches_draw_each_epochs_ids_too(tmp_path, by_size):
    """Without length buckets the pairs are grouped by length and cut by count, or by size
    within ``training.max_tokens`` (the fewest rows those of the longest pair an epoch can
    bring), from each epoch's own ids."""
    size = ["training.max_tokens=400", "training.batch_size=64"] if by_size else []
    recipe = load_recipe(
        sampling_recipe(tmp_path),
        ["training.token_budget=null", "training.length_buckets=8", *size],
    )
    batches = build_job(recipe).batches
    longest = batches.ids.longest()
    assert batches.shapes is None
    assert batches.min_rows == (min(64, 400 // sum(longest)) if by_size else 32)
    for epoch in range(2):
        sources, targets = batches.ids(epoch)
        rows = {tuple(row.tolist()) for row in sources}
        for batch in batches.epoch(epoch):
            width = batch["input_ids"].shape[1] + batch["labels"].shape[1]
            if by_size:
                assert len(batch["input_ids"]) * width <= 400
            pairs = zip(batch["input_ids"], batch["attention_mask"].bool(), strict=True)
            assert all(tuple(r[m].tolist()) in rows for r, m in pairs)
