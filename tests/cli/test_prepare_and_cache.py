"""``hfattn prepare RECIPE`` prepares a recipe's data ahead of training (one line: the folder,
its size, whether it was reused) and refuses a bad recipe as ``hfattn train`` does;
``hfattn train`` then maps that folder; ``hfattn cache list`` and ``hfattn cache remove`` show
and delete prepared folders, without importing torch."""

from __future__ import annotations

import csv
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

from hfattn.cli import main
from hfattn.data.prepared import folder_size, human_size, prepare, source_identity
from hfattn.data.prepared_cache import list_prepared
from hfattn.tasks.base import Task
from hfattn.tasks.classification.task import ClassificationTask
from tests.helpers.heavy_imports import heavy_modules_after

RECIPE = str(Path(__file__).resolve().parents[2] / "recipes" / "rnn_classifier_genre.yaml")
LINE = re.compile(r"^(?P<folder>\S+) \((?P<size>[\d.]+ [kMG]?B), (?P<how>.+)\)$")


@pytest.fixture
def labelled_csv(tmp_path) -> Path:
    """40 labelled sentences (two classes, two give-away words)."""
    path = tmp_path / "labelled.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["sentence", "mood"])
        for i in range(40):
            mood, word = ("pos", "merry") if i % 2 else ("neg", "grim")
            writer.writerow([f"the {word} day number {i} of the {word} year", mood])
    return path


def settings(labelled_csv: Path, *extra: str) -> list[str]:
    items = [f"data.source={labelled_csv}", "data.text_column=sentence",
             "data.label_column=mood", "data.max_length=16", "tokenizer.min_frequency=1",
             *extra]  # fmt: skip
    return [x for item in items for x in ("--set", item)]


def prepared_line(capsys) -> re.Match:
    out = capsys.readouterr().out
    assert out.count("\n") == 1, out
    match = LINE.match(out.strip())
    assert match, out
    return match


def test_prepare_prints_the_folder_then_reuses_it_and_train_maps_it(
    cache, labelled_csv, tmp_path, capsys
):
    assert main(["prepare", RECIPE, *settings(labelled_csv)]) == 0
    first = prepared_line(capsys)
    folder = Path(first["folder"])
    assert folder.parent == cache and first["how"].startswith("prepared in ")
    assert first["size"] == human_size(folder_size(folder))
    assert (folder / "tokenizer" / "tokenizer.json").is_file()
    assert len(np.load(folder / "train.labels.npy")) == 32  # 40 less 2 × 10 % held out

    assert main(["prepare", RECIPE, *settings(labelled_csv)]) == 0
    again = prepared_line(capsys)
    assert (again["folder"], again["how"]) == (str(folder), "reused")
    assert main(["prepare", RECIPE, *settings(labelled_csv, "tokenizer.vocab_size=12")]) == 0
    assert prepared_line(capsys)["folder"] != str(folder)  # a tokenizer setting changed
    assert main(["prepare", RECIPE, *settings(labelled_csv, "data.seed=1")]) == 0
    assert prepared_line(capsys)["folder"] != str(folder)  # other splits

    run = tmp_path / "run"
    training = ["model.embedding_dim=8", "model.hidden_size=8", "training.max_steps=2",
                "training.batch_size=8", "training.warmup_steps=1", "training.eval_every=null",
                "training.save_every=null", "evaluation.splits=[test]",
                f"output_dir={run}"]  # fmt: skip
    assert main(["train", RECIPE, *settings(labelled_csv, *training)]) == 0
    record = json.loads((run / "eval_results.json").read_text())["data_preparation"]
    assert (record["folder"], record["reused"]) == (str(folder), True)
    assert json.loads((run / "confusion_matrix.json").read_text())["labels"] == ["neg", "pos"]


def test_prepare_refuses_a_bad_recipe_as_train_does(cache, labelled_csv, capsys):
    for bad in ("data.max_length=1", "tokenizer.type=sentencepiece"):
        assert main(["prepare", RECIPE, *settings(labelled_csv, bad)]) == 2
        prepare_err = capsys.readouterr().err
        assert main(["train", RECIPE, *settings(labelled_csv, bad)]) == 2
        assert prepare_err == capsys.readouterr().err
        assert prepare_err.startswith("error: ") and prepare_err.count("\n") == 1
    assert main(["prepare", RECIPE, "--set", "data.source=no/such.csv"]) == 2
    assert capsys.readouterr().err.startswith("error: data.source: ")
    assert not cache.exists() or list_prepared() == []


def test_prepare_of_a_task_that_cannot_prepare_says_so_in_one_line(
    cache, labelled_csv, capsys, monkeypatch
):
    monkeypatch.setattr(ClassificationTask, "prepare_data", Task.prepare_data)
    assert main(["prepare", RECIPE, *settings(labelled_csv)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: task classification: ")
    assert captured.err.count("\n") == 1


def toy(what: str, n: int):
    """Prepared data of the task ``toy``: one file of ``n`` bytes."""

    def build(folder: Path) -> None:
        (folder / "x.bin").write_bytes(b"0" * n)

    return prepare("toy", {"n": n}, build, what=what)


def test_cache_list_and_remove(cache, capsys):
    assert main(["cache", "list"]) == 0
    assert capsys.readouterr().out == f"no prepared data in {cache}\n"
    one, two = toy("the first toy", 1500).folder, toy("the second toy", 20).folder
    assert main(["cache", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"prepared data in {cache}:"
    assert lines[1].split() == ["NAME", "TASK", "SIZE", "CREATED", "STATE", "WHAT"]
    assert [line.split()[:2] for line in lines[2:]] == [[one.name, "toy"], [two.name, "toy"]]
    assert lines[2].endswith("the first toy") and human_size(folder_size(one)) in lines[2]

    assert main(["cache", "remove", "toy-nope"]) == 2
    assert capsys.readouterr().err.startswith("error: no prepared data named 'toy-nope'")
    for wrong in (["cache", "remove"], ["cache", "remove", one.name, "--all"],
                  ["cache", "remove", "--stale", "--all"], ["cache", "list", "--all"],
                  ["cache", "list", "--stale"]):  # fmt: skip
        assert main(wrong) == 2
        assert capsys.readouterr().err.count("\n") == 1
    assert one.exists() and two.exists()
    assert (cache / f".{one.name}.lock").is_file()  # left by its preparation
    assert main(["cache", "remove", one.name]) == 0
    assert capsys.readouterr().out == f"removed {one}\n"
    assert not one.exists() and [row["name"] for row in list_prepared()] == [two.name]
    assert not (cache / f".{one.name}.lock").exists()  # removed with its data
    (cache / ".toy-0123456789abcdef.lock").touch()  # of a preparation that failed
    assert main(["cache", "remove", "--all"]) == 0
    assert capsys.readouterr().out == f"removed {two}\n"
    assert list_prepared() == [] and sorted(p.name for p in cache.iterdir()) == []
    assert main(["cache", "remove", "--all"]) == 0
    assert capsys.readouterr().out == f"no prepared data in {cache}\n"


def test_cache_list_names_the_folders_left_by_a_preparation_cut_short(cache, capsys):
    toy("a toy", 10)
    left = cache / ".toy-0123456789abcdef.x1y2.tmp"
    left.mkdir()
    (left / "part.bin").write_bytes(b"1" * 3000)
    assert main(["cache", "list"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("and 1 folder(s) set aside by preparations under way or cut short")
    assert "(3.0 kB)" in last
    assert main(["cache", "remove", "--all"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"removed {left} (left by a preparation cut short)"
    )
    assert not left.exists()


def test_cache_list_marks_a_stale_folder_and_remove_stale_deletes_it(cache, tmp_path, capsys):
    """Two preparations of one file, the same description: the one made before the file was
    edited (the same size, its mtime put back) is marked stale, and only it is removed."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("to be or not to be")

    def of_corpus():
        settings = {"source": source_identity(str(corpus))}
        return prepare("toy", settings, lambda folder: None, what=f"the toy corpus of {corpus}")

    old = of_corpus().folder
    stat = corpus.stat()
    corpus.write_text("to be or not to go")
    os.utime(corpus, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    new = of_corpus().folder
    other = toy("a toy", 10).folder
    assert main(["cache", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line for line in lines[2:] if line.startswith("toy-")}
    assert "stale: source changed" in rows[old.name]
    assert "stale:" not in rows[new.name] and "stale:" not in rows[other.name]
    size = human_size(folder_size(old))
    assert lines[-1] == (
        f"1 stale folder(s) ({size}) that no recipe would reuse: `hfattn cache remove --stale` "
        "deletes them (`hfattn cache remove NAME` one)"
    )
    assert main(["cache", "remove", "--stale"]) == 0
    assert capsys.readouterr().out == f"removed {old}\n"
    assert sorted(p.name for p in cache.iterdir() if not p.name.endswith(".lock")) == sorted(
        [new.name, other.name]
    )
    assert not (cache / f".{old.name}.lock").exists()
    assert main(["cache", "remove", "--stale"]) == 0
    assert capsys.readouterr().out == f"no stale prepared data in {cache}\n"


@pytest.mark.parametrize("argv", [["cache", "list"], ["prepare", "--help"], ["cache", "--help"]])
def test_cache_list_and_the_help_import_no_heavy_module(argv, cache):
    toy("a toy", 10)  # the listing reads a manifest
    code, heavy, text = heavy_modules_after(argv)
    assert (code, heavy) == (0, [])
    assert text.startswith(f"usage: hfattn {argv[0]}") if "--help" in argv else cache.name in text
