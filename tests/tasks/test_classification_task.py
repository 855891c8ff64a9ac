"""The classification task end to end on tiny models: a random DistilBERT folder (full
fine-tuning through ``hfattn train``, LoRA through the engine), the packaged MiniLM with LoRA on
the genre task, and an rnn-classifier with word2vec vectors; reloading, the pipeline,
``hfattn evaluate`` and the recipe checks."""

from __future__ import annotations

import csv
import json
import random
import re

import peft
import pytest
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer, pipeline

from hfattn.cli import main
from hfattn.recipes import load_recipe
from hfattn.recipes.schema import RecipeError
from hfattn.tasks.classification.inference import load_classifier
from hfattn.tasks.classification.task import TASK
from hfattn.tasks.pretrained import trainable_parameters
from hfattn.training.engine import train
from tests.helpers.tiny_pretrained import tiny_distilbert_folder

GOOD = "good great happy love wonderful fine sweet merry".split()
BAD = "bad awful sad hate terrible poor bitter grim".split()
FILLER = "the a of and to in that it is was he for on are as with his they".split()


def keyword_rows(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """Filler sentences with two words that give the label away (``pos`` / ``neg``)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        label = rng.choice(["neg", "pos"])
        words = [rng.choice(FILLER) for _ in range(rng.randint(5, 12))]
        for _ in range(2):
            words.insert(rng.randrange(len(words) + 1), rng.choice(GOOD if label == "pos" else BAD))
        rows.append((" ".join(words), label))
    return rows


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("classification")
    data = root / "keywords.csv"
    with open(data, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["sentence", "sentiment"])
        writer.writerows(keyword_rows(320))
    return {"root": root, "data": data, "model": tiny_distilbert_folder(root)}


def overrides(files, output_dir, **extra):
    values = {
        "model.pretrained": files["model"],
        "data.source": files["data"],
        "data.text_column": "sentence",
        "data.label_column": "sentiment",
        "data.max_length": 32,
        "output_dir": output_dir,
        "training.batch_size": 16,
        "training.epochs": 3,
        "training.warmup_steps": 5,
        "training.log_every": 5,
        "training.eval_every": 25,
        "training.save_every": 1000,
        "evaluation.batch_size": 64,
        **extra,
    }
    return [f"{k}={v}" for k, v in values.items()]


def macro_f1_by_hand(predictions, references):
    scores = []
    for c in sorted(set(predictions) | set(references)):
        tp = sum(p == r == c for p, r in zip(predictions, references, strict=True))
        fp = sum(p == c != r for p, r in zip(predictions, references, strict=True))
        fn = sum(r == c != p for p, r in zip(predictions, references, strict=True))
        scores.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return sum(scores) / len(scores)


@pytest.fixture(scope="module")
def full_run(files):
    """``hfattn train recipes/distilbert_sst2.yaml`` on the tiny folder and the keyword csv."""
    out = files["root"] / "full"
    argv = ["train", "recipes/distilbert_sst2.yaml", "--overwrite"]
    for item in overrides(files, out, **{"training.learning_rate": 3e-3}):
        argv += ["--set", item]
    assert main(argv) == 0
    return out


def test_full_fine_tuning_learns_and_reports_independently_checked_scores(full_run, files):
    records = [json.loads(line) for line in (full_run / "metrics.jsonl").read_text().splitlines()]
    train_losses = [r["loss"] for r in records if r["split"] == "train"]
    assert train_losses[-1] < 0.5 * train_losses[0]
    results = json.loads((full_run / "eval_results.json").read_text())
    assert results["task_type"] == "text-classification"
    test = results["all_metrics"]["test"]
    assert test["accuracy"] >= 0.9

    # the scores again, from the saved folder, by hand
    recipe = load_recipe(full_run / "recipe.yaml")
    from hfattn.tasks.classification.encoding import encode_texts, load_data

    data = load_data(recipe.data)
    model = AutoModelForSequenceClassification.from_pretrained(full_run).eval()
    tokenizer = AutoTokenizer.from_pretrained(full_run)
    assert model.config.id2label == {0: "neg", 1: "pos"}
    batch = tokenizer(
        data.texts("test"), padding=True, truncation=True, max_length=32, return_tensors="pt"
    )
    with torch.no_grad():
        logits = model(**batch).logits
    predictions = logits.argmax(-1).tolist()
    labels = data.labels("test")
    accuracy = sum(p == y for p, y in zip(predictions, labels, strict=True)) / len(labels)
    assert test["accuracy"] == pytest.approx(accuracy, abs=1e-12)
    assert test["macro_f1"] == pytest.approx(macro_f1_by_hand(predictions, labels), abs=1e-12)
    loss = -logits.log_softmax(-1)[torch.arange(len(labels)), torch.tensor(labels)].mean()
    assert test["loss"] == pytest.approx(loss.item(), rel=1e-4)
    matrix = json.loads((full_run / "confusion_matrix.json").read_text())
    assert matrix["labels"] == ["neg", "pos"]
    assert matrix["matrix"] == [
        [sum(p == q and y == t for p, y in zip(predictions, labels, strict=True)) for q in (0, 1)]
        for t in (0, 1)
    ]
    assert encode_texts(tokenizer, ["a b"], 32) == [tokenizer("a b")["input_ids"]]


def test_the_prepared_data_holds_every_split_as_the_tokenizer_encodes_it(
    files, tmp_path, monkeypatch
):
    """The ids, labels and texts of every split, encoded in batches, equal the texts of the
    source encoded in one call; texts are cut to the model's positions when data.max_length is
    longer; a second look maps the same folder; a source rewritten prepares anew."""
    from hfattn.tasks.classification.encoding import PreparedClassification, load_data

    monkeypatch.setenv("HFATTN_PREPARED_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("hfattn.tasks.classification.encoding.ENCODE_BATCH_SIZE", 7)
    source = tmp_path / "keywords.csv"
    source.write_bytes(files["data"].read_bytes())
    items = overrides(files, tmp_path / "run", **{"data.source": source, "data.max_length": 200})
    recipe = load_recipe("recipes/distilbert_sst2.yaml", items)
    prepared = PreparedClassification.of(recipe)
    assert not prepared.prepared.reused and prepared.max_length == 128  # the tiny model's positions
    assert prepared.tokenizer.model_max_length == 128
    labelled = load_data(recipe.data)
    tokenizer = AutoTokenizer.from_pretrained(files["model"])
    for split in ("train", "validation", "test"):
        texts = labelled.texts(split)
        expected = tokenizer(texts, truncation=True, max_length=128)["input_ids"]
        encoded = prepared.splits[split]
        assert encoded.ids.tolist() == expected
        assert encoded.labels.tolist() == labelled.labels(split)
        assert list(encoded.texts) == texts
    assert prepared.label_names == ["neg", "pos"] and sum(prepared.sizes().values()) == 320

    again = PreparedClassification.of(recipe)
    assert again.prepared.reused and again.prepared.folder == prepared.prepared.folder
    with open(source, "a", encoding="utf-8") as f:
        f.write("a merry good day,pos\n")
    rewritten = PreparedClassification.of(load_recipe("recipes/distilbert_sst2.yaml", items))
    assert not rewritten.prepared.reused
    assert rewritten.prepared.folder != prepared.prepared.folder
    assert sum(rewritten.sizes().values()) == 321


def test_pipeline_and_hfattn_evaluate_on_the_run_folder(full_run, capsys):
    classify = pipeline("text-classification", model=str(full_run))
    out = classify(["they love the merry sweet day", "a grim and awful hate"])
    assert [o["label"] for o in out] == ["pos", "neg"]
    (full_run / "confusion_matrix.json").unlink()
    assert main(["evaluate", str(full_run), "--split", "test"]) == 0
    assert "macro_f1" in capsys.readouterr().out
    assert json.loads((full_run / "confusion_matrix.json").read_text())["split"] == "test"


def test_lora_keeps_the_base_weights_and_the_adapter_reloads(files):
    recipe = load_recipe(
        "recipes/distilbert_sst2_lora.yaml",
        overrides(
            files,
            files["root"] / "lora",
            **{
                "training.learning_rate": 2e-2,
                "training.epochs": 6,
                "lora.r": 16,
                "lora.dropout": 0.0,
            },
        ),
    )
    job = TASK.build_job(recipe)
    trainable, total = trainable_parameters(job.model)
    assert 0 < trainable < 0.25 * total
    before = {k: v.clone() for k, v in job.model.state_dict().items()}
    train(job, recipe.training, recipe.output_dir, overwrite=True)
    model = job.model.eval()
    after = model.state_dict()
    frozen = [k for k in before if "lora_" not in k and "modules_to_save" not in k]
    assert frozen and all(torch.equal(before[k], after[k]) for k in frozen)
    changed = [k for k in before if "lora_B" in k or "modules_to_save" in k]
    assert any(not torch.equal(before[k], after[k]) for k in changed)

    out = files["root"] / "lora"
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records if r["split"] == "train"]
    # the adapter and head learn: the last three logged losses (the final one may cover a
    # single batch) average well below the first
    assert sum(losses[-3:]) / 3 < 0.8 * losses[0], losses
    config = json.loads((out / "adapter_config.json").read_text())
    assert config["task_type"] == "SEQ_CLS" and sorted(config["target_modules"]) == [
        "q_lin",
        "v_lin",
    ]
    assert not (out / "model.safetensors").exists()
    inputs = AutoTokenizer.from_pretrained(out)(
        ["good day", "the grim day"], return_tensors="pt", padding=True
    )
    with torch.no_grad():
        reference = model(**inputs).logits
        base = AutoModelForSequenceClassification.from_pretrained(
            files["model"],
            num_labels=2,
            id2label={0: "neg", 1: "pos"},
            label2id={"neg": 0, "pos": 1},
        )
        adapter = peft.PeftModel.from_pretrained(base, str(out)).eval()
        torch.testing.assert_close(adapter(**inputs).logits, reference)
        merged = adapter.merge_and_unload().eval()
        torch.testing.assert_close(merged(**inputs).logits, reference, rtol=1e-5, atol=1e-5)
        reloaded, _ = load_classifier(out, ["neg", "pos"])
        torch.testing.assert_close(reloaded(**inputs).logits, reference)


@pytest.mark.slow
def test_minilm_lora_on_genre_trains_a_small_share(tmp_path):
    """The real 22M-parameter checkpoint (packaged, offline): a few LoRA steps on genre."""
    recipe = load_recipe(
        "recipes/minilm_genre_lora.yaml",
        [
            f"output_dir={tmp_path / 'run'}",
            "data.train_size=24",
            "data.max_length=48",
            "training.batch_size=8",
            "training.max_steps=3",
            "training.warmup_steps=1",
            "training.eval_every=null",  # nothing here is about scores
            "evaluation.splits=[]",
        ],
    )
    job = TASK.build_job(recipe)
    assert job.model.config.id2label == {0: "comedy", 1: "history", 2: "tragedy", 3: "romance"}
    trainable, total = trainable_parameters(job.model)
    assert total > 22_000_000 and trainable / total < 0.01
    result = train(job, recipe.training, recipe.output_dir, overwrite=True)
    assert result.progress.step == 3
    config = json.loads((tmp_path / "run" / "adapter_config.json").read_text())
    assert config["task_type"] == "SEQ_CLS" and "classifier" in config["modules_to_save"]


def test_rnn_classifier_with_word2vec_vectors(files, tmp_path):
    recipe = load_recipe(
        "recipes/rnn_classifier_genre_word2vec.yaml",
        [
            f"output_dir={tmp_path / 'run'}",
            f"data.source={files['data']}",
            "data.text_column=sentence",
            "data.label_column=sentiment",
            "model.embedding_dim=16",
            "model.hidden_size=16",
            "model.dropout=0.0",
            "model.input_dropout=0.0",
            "tokenizer.vocab_size=100",
            "tokenizer.min_frequency=1",
            "word_vectors.min_count=1",
            "word_vectors.epochs=2",
            "training.batch_size=16",
            "training.epochs=6",
            "training.max_minutes=null",
            "training.warmup_steps=5",
            "training.learning_rate=0.02",
            "training.eval_every=50",
            "training.log_every=10",
        ],
    )
    job = TASK.build_job(recipe)
    vocab = job.tokenizer.get_vocab()
    embeddings = job.model.get_input_embeddings().weight
    assert embeddings[vocab["good"]].abs().sum() > 0  # a trained word2vec vector
    assert torch.equal(embeddings[vocab["<pad>"]], torch.zeros(16))
    result = train(job, recipe.training, recipe.output_dir, overwrite=True)
    assert result.metrics["test"]["accuracy"] >= 0.9
    classify = pipeline("text-classification", model=str(tmp_path / "run"))
    assert classify("they love the merry sweet day")[0]["label"] == "pos"


def test_a_capped_scoring_reads_a_seeded_sample_of_the_rows(tmp_path, monkeypatch, capsys):
    """``evaluation.max_examples: 5`` of 32 validation rows (a file sorted by label would give
    one label in its first rows): a sample drawn with ``data.seed``, the only rows the model
    reads, and the scores those rows' alone; at the end ``final_max_examples: 9`` test rows,
    the confusion matrix of those 9. Each pass shows its bar (its delay set to 0 here)."""
    import numpy as np

    import hfattn.common.progress as progress
    from hfattn.tasks import get_task
    from hfattn.tasks.classification.encoding import PreparedClassification
    from tests.helpers.recipe_helpers import write_recipe

    data = tmp_path / "keywords.csv"
    with open(data, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("sentence", "sentiment"), *keyword_rows(320)])
    recipe = load_recipe(write_recipe(
        tmp_path, base={}, name="capped", task="classification",
        model={"type": "rnn-classifier", "embedding_dim": 8, "hidden_size": 8},
        tokenizer={"type": "word", "vocab_size": 100},
        data={"source": str(data), "text_column": "sentence", "label_column": "sentiment",
              "max_length": 16, "seed": 3},
        training={"batch_size": 16, "max_steps": 1},
        evaluation={"splits": ["test"], "batch_size": 4, "max_examples": 5,
                    "final_max_examples": 9},
    ))  # fmt: skip
    job = get_task("classification").build_job(recipe)
    splits = PreparedClassification.of(recipe).splits
    (tmp_path / "run").mkdir()
    monkeypatch.setattr(progress, "PROGRESS_DELAY_S", 0.0)
    read = []
    hook = job.model.register_forward_pre_hook(
        lambda module, args, kwargs: read.append(len(kwargs["input_ids"])), with_kwargs=True
    )
    try:
        periodic = job.evaluate(job.model, "validation")
        final = job.final_evaluate(job.model, "test")
    finally:
        hook.remove()
    assert read[:2] == [4, 1] and sum(read) == 5 + 9
    model = job.model.eval()
    for split, scores, cap in (("validation", periodic, 5), ("test", final, 9)):
        size = len(splits[split])
        rows = np.sort(np.random.default_rng(3).choice(size, size=cap, replace=False))
        with torch.no_grad():
            logits = torch.cat([
                model(input_ids=torch.tensor(splits[split].ids[i].tolist())[None]).logits
                for i in rows
            ])  # fmt: skip
        labels = torch.as_tensor(splits[split].labels[rows])
        nll = -torch.log_softmax(logits, -1)[torch.arange(cap), labels].mean()
        assert scores["loss"] == pytest.approx(nll.item(), rel=1e-5)
        assert scores["accuracy"] == int((logits.argmax(-1) == labels).sum()) / cap
        assert (scores["num_examples"], scores["sampled_from"]) == (cap, size)
    matrix = json.loads((tmp_path / "run" / "confusion_matrix.json").read_text())["matrix"]
    assert sum(map(sum, matrix)) == 9
    err = capsys.readouterr().err
    assert re.search(r"validation: loss: .*/5 .*text/s", err), err
    assert re.search(r"test: loss: .*/9 .*text/s", err), err


@pytest.mark.parametrize(
    ("recipe", "items", "message"),
    [
        (
            "minilm_genre.yaml",
            ["tokenizer.type=word"],
            r"^tokenizer: does not apply to a pretrained",
        ),
        ("rnn_classifier_genre.yaml", ["lora.r=4"], r"^lora: applies to pretrained models"),
        (
            "rnn_classifier_genre_word2vec.yaml",
            ["word_vectors.path=vectors.txt"],
            r"^word_vectors: give exactly one of train",
        ),
        (
            "rnn_classifier_genre.yaml",
            ["word_vectors.train=glove"],
            r"^word_vectors.train: 'glove' is not one of",
        ),
        (
            "rnn_classifier_genre.yaml",
            ["tokenizer.type=sentencepiece"],
            r"^tokenizer.type: 'sentencepiece'",
        ),
        ("minilm_genre.yaml", ["data.test_fraction=0.6"], r"^data.test_fraction: must be in"),
    ],
)
def test_recipe_errors_name_the_field(recipe, items, message):
    with pytest.raises(RecipeError, match=message):
        load_recipe(f"recipes/{recipe}", items)


def test_a_pretrained_model_trains_with_its_dropout_on(files, tmp_path, monkeypatch):
    """``from_pretrained`` returns a model in eval mode; every training step, the ones after
    an evaluation included, runs with every module in training mode (dropout on), as
    ``Trainer``'s do."""
    from hfattn.training import engine

    modes, train_step = [], engine._train_step

    def recording_step(run, batch):
        modes.append({m.training for m in run.model.modules()})
        return train_step(run, batch)

    monkeypatch.setattr(engine, "_train_step", recording_step)
    argv = ["train", "recipes/distilbert_sst2.yaml", "--overwrite"]
    extra = {"training.epochs": 1, "training.eval_every": 5, "training.log_every": 5}
    for item in overrides(files, tmp_path / "run", **extra):
        argv += ["--set", item]
    assert main(argv) == 0
    assert len(modes) > 10  # evaluations every 5 steps come between them
    assert all(mode == {True} for mode in modes)
