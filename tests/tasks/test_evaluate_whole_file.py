"""``hfattn evaluate RUN --data FILE`` scores the whole file (issue 61: a 50-pair held-out file
was cut by the recipe's fractions and 2 pairs scored): every pair of a ``spa.txt``, every row
of a labelled ``.csv``, every character of a text file, in a column named after the file; a
``--split`` is ignored with a note. A dataset folder keeps its named splits."""

from __future__ import annotations

import csv
import random
import shutil

import pytest
import yaml

from hfattn.cli import main
from hfattn.tasks.base import WHOLE_FILE_SPLIT, scores_whole_file, scoring_data
from hfattn.tasks.translation.recipe import PairDataSection


def evaluate(monkeypatch, *args: str) -> dict:
    """``hfattn evaluate`` with ``args``; the table it printed, as ``{column: scores}``."""
    import hfattn.commands.report as report

    printed = {}
    monkeypatch.setattr(report, "print_metrics", lambda metrics, **_: printed.update(metrics))
    assert main(["evaluate", *args]) == 0
    return printed


def test_a_single_file_is_loaded_whole_and_a_folder_by_its_splits(tmp_path):
    data = PairDataSection(source="dates", size=100)
    file = tmp_path / "pairs.txt"
    file.write_text("a\tb\n")
    assert scores_whole_file(str(file)) and not scores_whole_file(str(tmp_path))
    assert not scores_whole_file(None) and not scores_whole_file("dates")
    assert scoring_data(data, None) is data
    whole = scoring_data(data, str(file))
    assert (whole.source, whole.validation_fraction, whole.test_fraction, whole.size) == (
        str(file), 0.0, 0.0, None,
    )  # fmt: skip
    assert whole.train_size > 10**9
    folder = scoring_data(data, str(tmp_path))
    assert (folder.source, folder.validation_fraction, folder.size) == (str(tmp_path), 0.15, 100)
    assert (data.source, data.validation_fraction, data.size) == ("dates", 0.15, 100)


@pytest.fixture(scope="module")
def translation_run(tmp_path_factory):
    from tests.helpers.tiny_runs import build_translation_run

    return build_translation_run(tmp_path_factory.mktemp("whole") / "run", steps=4)


def test_every_pair_of_a_translation_file_is_scored(translation_run, tmp_path, monkeypatch, capsys):
    file = tmp_path / "heldout.txt"
    file.write_text("".join(f"March {d}, 2020\t2020-03-{d:02d}\n" for d in range(1, 29)) +
                    "".join(f"May {d}, 2021\t2021-05-{d:02d}\n" for d in range(1, 23)))  # fmt: skip
    table = evaluate(monkeypatch, str(translation_run), "--data", str(file), "--split", "test")
    assert list(table) == ["heldout.txt"]
    assert table["heldout.txt"]["num_examples"] == 50
    assert "note: --split is ignored" in capsys.readouterr().err
    # the recipe's own data: its test split (10 % of 1,500 pairs), as before
    assert evaluate(monkeypatch, str(translation_run))["test"]["num_examples"] == 150


def test_every_character_of_a_text_file_is_scored(char_rnn_run, tmp_path, monkeypatch):
    text = "".join(random.Random(0).choice("abcdefgh ROMEO:\n") for _ in range(999))
    file = tmp_path / "heldout.txt"
    file.write_text(text)
    args = ["--data", str(file), "--batch-size", "1", "--seq-len", "50"]
    table = evaluate(monkeypatch, str(char_rnn_run), *args)
    assert table["heldout.txt"]["num_chars"] == 999


def test_the_recipes_final_bound_or_max_examples_caps_each_split(
    char_rnn_run, tmp_path, monkeypatch, capsys
):
    """A named split is scored on the recipe's ``evaluation.final_max_examples`` windows of
    ``evaluation.seq_len`` (64) tokens, as at the end of training, or on ``--max-examples``; a
    single file is scored whole unless ``--max-examples`` caps it."""
    run = tmp_path / "run"
    shutil.copytree(char_rnn_run, run)
    recipe = yaml.safe_load((run / "recipe.yaml").read_text())
    recipe["evaluation"]["final_max_examples"] = 3
    (run / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    scored = evaluate(monkeypatch, str(run))["test"]
    assert (scored["num_examples"], scored["num_tokens"]) == (3, 3 * 64)
    scored = evaluate(monkeypatch, str(run), "--max-examples", "2")["test"]
    assert (scored["num_examples"], scored["num_tokens"]) == (2, 2 * 64)
    file = tmp_path / "heldout.txt"
    file.write_text("".join(random.Random(0).choice("abcdefgh ROMEO:\n") for _ in range(999)))
    assert evaluate(monkeypatch, str(run), "--data", str(file))["heldout.txt"]["num_tokens"] == 996
    capped = evaluate(monkeypatch, str(run), "--data", str(file), "--max-examples", "1")
    assert capped["heldout.txt"]["num_tokens"] == 64
    assert main(["evaluate", str(run), "--max-examples", "0"]) == 2
    assert "error: --max-examples must be >= 1, got 0" in capsys.readouterr().err


def test_max_examples_samples_the_pairs_of_a_translation_split(translation_run, monkeypatch):
    scored = evaluate(monkeypatch, str(translation_run), "--max-examples", "7")["test"]
    assert (scored["num_examples"], scored["sampled_from"]) == (7, 150)


def test_every_row_of_a_labelled_file_is_scored(tmp_path, monkeypatch):
    from tests.helpers.tiny_runs import build_classification_run

    words = {"pos": ["merry", "sweet", "love"], "neg": ["grim", "awful", "hate"]}
    rng = random.Random(0)

    def write(path, n):
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["text", "label"])
            for i in range(n):
                label = "pos" if i % 2 else "neg"
                writer.writerow([" ".join(rng.choice(words[label]) for _ in range(4)), label])

    write(tmp_path / "train.csv", 200)
    write(tmp_path / "heldout.csv", 37)
    run = build_classification_run(
        tmp_path, "rnn_classifier_genre.yaml", f"data.source={tmp_path / 'train.csv'}",
        "data.train_size=null", "training.max_steps=4", "training.warmup_steps=0",
    )  # fmt: skip
    table = evaluate(monkeypatch, str(run), "--data", str(tmp_path / "heldout.csv"))
    assert list(table) == ["heldout.csv"] and WHOLE_FILE_SPLIT != "heldout.csv"
    assert table["heldout.csv"]["num_examples"] == 37


@pytest.mark.parametrize("preprocessing", [None, "chollet", "geron"])
def test_a_pair_file_loads_whole_whatever_its_preprocessing(tmp_path, preprocessing):
    """``geron`` keeps its first ``train_size`` pairs for training and holds out the rest:
    scored whole, a file keeps none aside (nor does ``data.size`` cut it)."""
    from hfattn.tasks.translation.encoding import load_pair_splits

    file = tmp_path / "pairs.txt"
    file.write_text("".join(f"Sentence {i}.\tFrase {i}.\n" for i in range(40)))
    train_size = 5 if preprocessing == "geron" else None
    data = PairDataSection(source=str(file), size=10, preprocessing=preprocessing,
                           train_size=train_size)  # fmt: skip
    splits, _ = load_pair_splits(data, str(file))
    assert {name: len(split) for name, split in splits.items()} == {
        WHOLE_FILE_SPLIT: 40, "validation": 0, "test": 0,
    }  # fmt: skip
