"""Classification data: the embedded genre task, file / dataset sources and their errors, the
f1 metric, confusion matrices and label batches."""

from __future__ import annotations

import hashlib
import json

import datasets
import pytest
import torch

from hfattn.batching.seq2seq import LabelBatches
from hfattn.data.classification import load_classification_data
from hfattn.data.genre import (
    GENRES,
    MIN_CHARS,
    PLAY_GENRES,
    SPLITS,
    genre_plays,
    load_genre,
    play_passages,
)
from hfattn.data.shakespeare import play_files, play_text
from hfattn.evaluation import load_metric
from hfattn.evaluation.classification import classification_scores, confusion_matrix
from hfattn.recipes.schema import RecipeError


# ---- genre -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def genre():
    return load_genre()


def test_genre_splits_are_disjoint_by_play_and_cover_every_play_and_genre():
    plays = {split: set(genre_plays(split)) for split in ("train", "validation", "test")}
    assert not plays["train"] & plays["validation"]
    assert not plays["train"] & plays["test"]
    assert not plays["validation"] & plays["test"]
    assert set().union(*plays.values()) == set(play_files()) == set(PLAY_GENRES)
    for split, slugs in plays.items():
        assert {PLAY_GENRES[s] for s in slugs} == set(GENRES), split
    assert len(plays["train"]) == 27 and len(SPLITS["validation"]) == 4
    romances = {p for p, g in PLAY_GENRES.items() if g == "romance"}
    assert romances == {"pericles", "cymbeline", "a-winter-s-tale", "the-tempest"}


def test_genre_passages_are_the_speech_lines_in_order():
    slug = "the-comedy-of-errors"
    passages = play_passages(slug)
    # every speech line of the play, speaker lines dropped, in order
    lines = [
        line for block in play_text(slug).split("\n\n") for line in block.strip().split("\n")[1:]
    ]
    rebuilt = " ".join(" ".join(p.split("\n")) for p in passages)
    assert " ".join(lines).startswith(rebuilt)  # only a short tail may be dropped
    assert len(" ".join(lines)) - len(rebuilt) < 100 + 1
    assert all(len(p) >= MIN_CHARS for p in passages[:-1])
    assert not any(
        line.endswith(":") and line.isupper() for p in passages for line in p.split("\n")
    )


def test_genre_is_stable_and_labelled_by_play(genre):
    assert genre.label_names == list(GENRES)
    assert genre.sizes() == {"train": 9879, "validation": 1519, "test": 2376}
    digest = hashlib.sha256("\x00".join(genre.texts("test")).encode()).hexdigest()
    again = load_genre(seed=5)  # the split is fixed: the seed changes nothing
    assert hashlib.sha256("\x00".join(again.texts("test")).encode()).hexdigest() == digest
    # the labels are the genres of the plays, in play order
    expected = [
        GENRES.index(PLAY_GENRES[slug])
        for slug in genre_plays("validation")
        for _ in play_passages(slug)
    ]
    assert genre.labels("validation") == expected


# ---- file and dataset sources ----------------------------------------------------------------
def _write_csv(path, rows, header=("text", "label"), delimiter=","):
    import csv

    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, delimiter=delimiter)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def _rows(n=100):
    return [(f"text number {i}", ["pos", "neg", "meh"][i % 3]) for i in range(n)]


def test_csv_source_carves_stratified_test_and_validation(tmp_path):
    path = _write_csv(tmp_path / "data.csv", _rows(100))
    data = load_classification_data(str(path), validation_fraction=0.2, test_fraction=0.1, seed=3)
    assert data.label_names == ["meh", "neg", "pos"]  # sorted values seen in train
    assert data.sizes() == {"train": 70, "validation": 20, "test": 10}
    texts = [t for s in ("train", "validation", "test") for t in data.texts(s)]
    assert sorted(texts) == sorted(t for t, _ in _rows(100))  # a partition
    truth = dict(_rows(100))
    for split in data.splits:
        for text, label in zip(data.texts(split), data.labels(split), strict=True):
            assert data.label_names[label] == truth[text]
    # stratified: every class in every split
    assert all(set(data.labels(s)) == {0, 1, 2} for s in data.splits)
    again = load_classification_data(str(path), validation_fraction=0.2, test_fraction=0.1, seed=3)
    assert again.texts("test") == data.texts("test")


def test_tsv_and_jsonl_sources_and_other_columns(tmp_path):
    tsv = _write_csv(tmp_path / "d.tsv", _rows(30), header=("review", "stars"), delimiter="\t")
    data = load_classification_data(str(tsv), text_column="review", label_column="stars")
    assert sum(data.sizes().values()) == 30
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text(
        "".join(json.dumps({"text": f"t{i}", "label": i % 2}) + "\n" for i in range(30))
    )
    data = load_classification_data(str(jsonl))
    assert data.label_names == ["0", "1"]
    assert all(
        data.labels(s)[k] == int(data.texts(s)[k][1:]) % 2 for s in data.splits for k in range(2)
    )


def test_train_size_keeps_a_subset_of_train_only(tmp_path):
    path = _write_csv(tmp_path / "data.csv", _rows(100))
    full = load_classification_data(str(path))
    cut = load_classification_data(str(path), train_size=12)
    assert len(cut.splits["train"]) == 12
    assert set(cut.texts("train")) <= set(full.texts("train"))
    assert cut.texts("test") == full.texts("test")


def test_unlabelled_test_split_is_replaced_by_validation(tmp_path):
    """SST-2's shape: test labels are all -1, so validation becomes test and validation is
    carved from train."""
    label = datasets.ClassLabel(names=["negative", "positive"])
    features = datasets.Features({"sentence": datasets.Value("string"), "label": label})

    def split(n, labels):
        return datasets.Dataset.from_dict(
            {"sentence": [f"s{i}" for i in range(n)], "label": labels}, features=features
        )

    datasets.DatasetDict(
        {
            "train": split(50, [i % 2 for i in range(50)]),
            "validation": split(8, [0, 1] * 4),
            "test": split(6, [-1] * 6),
        }
    ).save_to_disk(tmp_path / "sst")
    data = load_classification_data(
        str(tmp_path / "sst"), text_column="sentence", validation_fraction=0.2
    )
    assert data.label_names == ["negative", "positive"]
    assert data.sizes() == {"train": 40, "validation": 10, "test": 8}
    assert data.labels("test") == [0, 1] * 4


def _folder_with_splits(tmp_path, train_rows, test_rows):
    folder = tmp_path / "splits"
    folder.mkdir()
    _write_csv(folder / "train.csv", train_rows)
    _write_csv(folder / "test.csv", test_rows)
    return folder


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"text_column": "body"},
            r"data\.text_column: 'body' is not a column .*columns: text, label",
        ),
        ({"label_column": "y"}, r"data\.label_column: 'y' is not a column .*columns: text, label"),
    ],
)
def test_missing_columns_name_the_field_and_the_columns(tmp_path, kwargs, message):
    path = _write_csv(tmp_path / "data.csv", _rows(20))
    with pytest.raises(RecipeError, match=message):
        load_classification_data(str(path), **kwargs)


def test_labels_unseen_in_train_are_refused(tmp_path):
    folder = _folder_with_splits(tmp_path, _rows(20), [("odd one", "surprise"), ("x", "pos")])
    with pytest.raises(
        RecipeError, match=r"data\.label_column: label\(s\) surprise of the test split"
    ):
        load_classification_data(str(folder))


def test_non_string_texts_and_missing_labels_are_refused(tmp_path):
    jsonl = tmp_path / "numbers.jsonl"
    jsonl.write_text("".join(json.dumps({"text": i, "label": i % 2}) + "\n" for i in range(20)))
    with pytest.raises(RecipeError, match=r"data\.text_column: 'text' must hold strings"):
        load_classification_data(str(jsonl))
    gaps = tmp_path / "gaps.jsonl"
    rows = [{"text": f"t{i}", "label": None if i == 7 else "a"} for i in range(20)]
    gaps.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(RecipeError, match=r"data\.label_column: 1 row\(s\) of the train split"):
        load_classification_data(str(gaps))


def test_unknown_sources_name_the_field(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"data\.source: no such file or folder"):
        load_classification_data(str(tmp_path / "missing.csv"))
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(
        RecipeError,
        match=r"data\.source: .* is not a \.csv, \.tsv, \.json, \.jsonl, \.parquet file",
    ):
        load_classification_data(str(tmp_path / "notes.txt"))
    with pytest.raises(RecipeError, match=r"data\.validation_fraction: must be in \[0, 0\.5\)"):
        load_classification_data("genre", validation_fraction=0.7)


# ---- metrics ---------------------------------------------------------------------------------
def _f1_by_hand(predictions, references):
    """Macro-F1 over the classes present, from precision and recall (0 when undefined)."""
    scores = []
    for c in sorted(set(predictions) | set(references)):
        tp = sum(p == c and r == c for p, r in zip(predictions, references, strict=True))
        predicted = sum(p == c for p in predictions)
        actual = sum(r == c for r in references)
        precision = tp / predicted if predicted else 0.0
        recall = tp / actual if actual else 0.0
        scores.append(2 * precision * recall / (precision + recall) if tp else 0.0)
    return sum(scores) / len(scores)


def test_f1_metric_and_scores_match_a_hand_computation():
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(50, 4, generator=generator)
    labels = torch.randint(0, 4, (50,), generator=generator).tolist()
    predictions = logits.argmax(-1).tolist()
    scores = classification_scores(logits, labels)
    assert scores["accuracy"] == sum(p == r for p, r in zip(predictions, labels, strict=True)) / 50
    assert scores["macro_f1"] == pytest.approx(_f1_by_hand(predictions, labels), abs=1e-12)
    log_probs = logits.log_softmax(-1)
    assert scores["loss"] == pytest.approx(
        -sum(log_probs[i, y].item() for i, y in enumerate(labels)) / 50, rel=1e-6
    )
    f1 = load_metric("f1")
    per_class = f1.compute(predictions=[0, 0, 1, 2], references=[0, 1, 1, 1], average=None)["f1"]
    # class 1: precision 1, recall 1/3; class 2: predicted, never true
    assert per_class == pytest.approx([2 / 3, 0.5, 0.0])
    assert (
        f1.compute(predictions=[0, 0, 1, 2], references=[0, 1, 1, 1], average="micro")["f1"] == 0.5
    )
    with pytest.raises(ValueError, match="average"):
        f1.compute(predictions=[0], references=[0], average="binary")


def test_confusion_matrix_rows_are_true_labels():
    assert confusion_matrix([0, 1, 1, 2], [0, 0, 1, 2], 3) == [[1, 1, 0], [0, 1, 0], [0, 0, 1]]


def test_label_batches_are_length_grouped_and_padded():
    sources = [[5] * n for n in range(1, 41)]
    labels = [n % 3 for n in range(1, 41)]
    batches = LabelBatches(sources, labels, 8, pad_token_id=0, seed=1)
    seen = []
    for batch in batches.epoch(0):
        assert batch["input_ids"].shape[0] == 8
        lengths = batch["attention_mask"].sum(1)
        assert torch.equal(batch["input_ids"] != 0, batch["attention_mask"].bool())
        assert batch["labels"].tolist() == [int(n) % 3 for n in lengths]
        assert batch["input_ids"].shape[1] == int(lengths.max())
        seen += lengths.tolist()
    assert sorted(seen) == list(range(1, 41))
    assert [b["labels"].tolist() for b in batches.epoch(0)] == [
        b["labels"].tolist() for b in batches.epoch(0)
    ]
