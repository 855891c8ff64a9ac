"""What users bring as translation data (issue 61): table files and their layouts, the
``data.translation_column`` field, pairs with a missing side, duplicate pairs across carved
splits, the inferred target language, and a local ``data.source`` stored as an absolute path."""

from __future__ import annotations

import json
import logging

import datasets
import numpy as np
import pytest

from hfattn.data.pair_splits import deal_by_pair, pair_keys
from hfattn.data.translation import load_translation_splits
from hfattn.tasks.translation.encoding import load_pair_splits
from hfattn.tasks.translation.recipe import PairDataSection

SPLITS = ("train", "validation", "test")
PAIRS = [(f"the cat number {i}", f"le chat numéro {i}") for i in range(40)]


def every_pair(dd) -> dict[str, list[tuple[str, str]]]:
    return {s: [(t["en"], t["fr"]) for t in dd[s]["translation"]] for s in SPLITS}


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return str(path)


def save_splits(folder, splits: dict[str, list[dict]], column="translation"):
    datasets.DatasetDict(
        {name: datasets.Dataset.from_dict({column: rows}) for name, rows in splits.items()}
    ).save_to_disk(str(folder))
    return str(folder)


# ------------------------------------------------------------------------ files and layouts


def table_files(tmp_path) -> dict[str, str]:
    """The same 40 en-fr pairs in each layout a user may bring."""
    files = {
        "jsonl, translation column": write_jsonl(
            tmp_path / "pairs.jsonl", [{"translation": {"en": s, "fr": t}} for s, t in PAIRS]
        ),
        "jsonl, flat columns": write_jsonl(
            tmp_path / "flat.jsonl", [{"id": i, "en": s, "fr": t} for i, (s, t) in enumerate(PAIRS)]
        ),
    }
    (tmp_path / "pairs.json").write_text(
        json.dumps([{"en": s, "fr": t} for s, t in PAIRS], ensure_ascii=False), "utf-8"
    )
    files["json, flat columns"] = str(tmp_path / "pairs.json")
    (tmp_path / "pairs.csv").write_text(
        "en,fr\n" + "".join(f'"{s}","{t}"\n' for s, t in PAIRS), "utf-8"
    )
    files["csv, flat columns"] = str(tmp_path / "pairs.csv")
    (tmp_path / "pairs.tsv").write_text(
        "en\tfr\n" + "".join(f"{s}\t{t}\n" for s, t in PAIRS), "utf-8"
    )
    files["tsv with a header"] = str(tmp_path / "pairs.tsv")
    datasets.Dataset.from_dict(
        {"en": [s for s, _ in PAIRS], "fr": [t for _, t in PAIRS]}
    ).to_parquet(str(tmp_path / "pairs.parquet"))
    files["parquet, flat columns"] = str(tmp_path / "pairs.parquet")
    return files


def test_table_files_load_in_either_layout_with_the_target_inferred(tmp_path, caplog):
    for layout, path in table_files(tmp_path).items():
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            dd = load_translation_splits(path, validation_fraction=0.1, test_fraction=0.1)
        got = every_pair(dd)
        assert [len(got[s]) for s in SPLITS] == [32, 4, 4], layout
        assert sorted(p for s in SPLITS for p in got[s]) == sorted(PAIRS), layout
        assert set(dd["train"].features["translation"]) == {"en", "fr"}, layout
        assert not caplog.records, (layout, caplog.text)  # no "malformed line" flood


def test_a_tsv_keeps_quotes_and_one_without_a_header_is_spa_txt(tmp_path):
    quoted = tmp_path / "quoted.tsv"
    quoted.write_text("en\tfr\n" + '"Hi," he said.\t« Salut », dit-il.\nNA\tnull\n' * 3, "utf-8")
    dd = load_translation_splits(str(quoted), validation_fraction=0.0, test_fraction=0.0)
    assert {(t["en"], t["fr"]) for t in dd["train"]["translation"]} == {
        ('"Hi," he said.', "« Salut », dit-il."),
        ("NA", "null"),  # text as written, not missing values
    }
    plain = tmp_path / "plain.tsv"
    plain.write_text("".join(f"{s}\t{t}\tCC-BY 2.0\n" for s, t in PAIRS), "utf-8")
    dd = load_translation_splits(str(plain))  # spa.txt: no header, target es
    assert len(dd["train"]) + len(dd["validation"]) + len(dd["test"]) == 40
    assert dd["train"][0]["translation"]["es"].startswith("le chat")


# ------------------------------------------------------------- data.translation_column


def test_the_translation_column_field_reaches_the_loader(tmp_path):
    rows = [{"en": s, "fr": t} for s, t in PAIRS]
    folder = save_splits(tmp_path / "pairs", {"train": rows}, column="pair")
    data = PairDataSection(source=folder, translation_column="pair")
    splits, target_lang = load_pair_splits(data)
    assert target_lang == "fr" and sum(len(splits[s]) for s in SPLITS) == 40
    with pytest.raises(ValueError, match="data.translation_column") as refused:
        load_pair_splits(PairDataSection(source=folder))
    message = str(refused.value)
    assert "(columns: pair)" in message
    assert "a column of {language: text} dicts named by data.translation_column" in message
    assert "flat text columns named by data.source_lang and data.target_lang" in message
    with pytest.raises(ValueError, match="data.translation_column: must be a column name"):
        PairDataSection(translation_column="")


def test_a_column_of_strings_is_not_taken_for_pairs(tmp_path):
    path = write_jsonl(tmp_path / "text.jsonl", [{"translation": s} for s, _ in PAIRS])
    with pytest.raises(ValueError, match=r"'translation' of .* holds string values, not \{lang"):
        load_translation_splits(path)


# ----------------------------------------------------------------- null or empty sides


def test_pairs_with_a_missing_empty_or_blank_side_are_dropped_with_one_warning(tmp_path, caplog):
    good = [{"en": s, "fr": t} for s, t in PAIRS]
    bad = [{"en": "hi", "fr": None}, {"en": "", "fr": "vide"}, {"en": "hello", "fr": "  \t"}]
    folder = save_splits(
        tmp_path / "folder",
        {"train": good[:30] + bad, "validation": good[30:35] + bad[:1], "test": good[35:]},
    )
    path = write_jsonl(tmp_path / "gaps.jsonl", [{"translation": r} for r in good + bad])
    for source, counts in ((folder, "(train: 3, validation: 1)"), (path, "(train: 3)")):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="hfattn.data.translation"):
            dd = load_pair_splits(PairDataSection(source=source))[0]  # no tokenizers TypeError
        lines = [r.getMessage() for r in caplog.records if "side skipped" in r.getMessage()]
        assert len(lines) == 1 and counts in lines[0], caplog.text
        assert "pair(s) with a missing, empty or blank en or fr side" in lines[0]
        texts = [v for s in SPLITS for t in dd[s]["translation"] for v in t.values()]
        assert sum(len(dd[s]) for s in SPLITS) == 40
        assert all(isinstance(v, str) and v.strip() for v in texts)


def test_malformed_spa_txt_lines_are_counted_in_one_warning(tmp_path, caplog):
    lines = [f"{s}\t{t}" for s, t in PAIRS] + ["no tab here", "  \tvide", "empty\t ", ""]
    spa = tmp_path / "spa.txt"
    spa.write_text("\n".join(lines) + "\n", "utf-8")
    with caplog.at_level(logging.WARNING, logger="hfattn.data.tatoeba"):
        dd = load_translation_splits(str(spa))
    assert len(caplog.records) == 1, caplog.text
    assert "spa.txt: 3 malformed line(s) skipped" in caplog.text and "at line 41:" in caplog.text
    assert sum(len(dd[s]) for s in SPLITS) == 40


# --------------------------------------------------------------- duplicates across splits


def test_deal_by_pair_keeps_each_duplicate_in_one_split_and_counts_the_moves(caplog):
    keys = np.array([7, 1, 7, 2, 3, 7, 4, 5, 1, 6])
    order = np.arange(10)  # dealt in row order: test 0-1, validation 2-3, train the rest
    with caplog.at_level(logging.INFO, logger="hfattn.data.pair_splits"):
        rows = deal_by_pair(keys, order, [("test", 2), ("validation", 2), ("train", 0)])
    # 7 and 1 are first seen in test: every copy goes there; 2 alone is left in validation
    assert {s: r.tolist() for s, r in rows.items()} == {
        "test": [0, 1, 2, 5, 8], "validation": [3], "train": [4, 6, 7, 9]
    }  # fmt: skip
    assert "3 copies of a pair moved" in caplog.text  # rows 2, 5 and 8
    assert pair_keys(["a", "a"], ["b", "b"], 2)[0] == pair_keys(["a"], ["b"], 1)[0]


def duplicated_rows() -> list[tuple[str, str]]:
    """180 rows of 60 distinct pairs, each three times, in a fixed scrambled order."""
    rows = [
        p for p in PAIRS + [(f"a dog {i}", f"un chien {i}") for i in range(20)] for _ in range(3)
    ]
    return [rows[i] for i in np.random.default_rng(1).permutation(len(rows))]


@pytest.mark.parametrize("kind", ["jsonl", "folder", "spa.txt"])
def test_carved_splits_share_no_pair(tmp_path, caplog, kind):
    rows = duplicated_rows()
    if kind == "jsonl":
        source = write_jsonl(tmp_path / "dup.jsonl", [{"en": s, "fr": t} for s, t in rows])
    elif kind == "folder":
        source = save_splits(tmp_path / "dup", {"train": [{"en": s, "fr": t} for s, t in rows]})
    else:
        (tmp_path / "spa.txt").write_text("".join(f"{s}\t{t}\n" for s, t in rows), "utf-8")
        source = str(tmp_path / "spa.txt")
    files = sorted(p.name for p in tmp_path.rglob("*"))
    with caplog.at_level(logging.INFO, logger="hfattn.data.pair_splits"):
        dd = load_translation_splits(source, target_lang="fr", seed=3)
    assert sorted(p.name for p in tmp_path.rglob("*")) == files  # nothing written beside it
    got = every_pair(dd)
    train = set(got["train"])
    assert not train & set(got["validation"]) and not train & set(got["test"])
    assert not set(got["validation"]) & set(got["test"])
    assert sum(len(got[s]) for s in SPLITS) == 180  # every copy kept, each pair in one split
    assert all(len(got[s]) % 3 == 0 for s in SPLITS)
    moved = [r.getMessage() for r in caplog.records]
    assert len(moved) == 1 and "copies of a pair moved" in moved[0]


def test_the_sources_own_splits_are_kept_and_their_overlap_said(tmp_path, caplog):
    rows = [{"en": s, "fr": t} for s, t in PAIRS]
    folder = save_splits(
        tmp_path / "own", {"train": rows[:30], "validation": rows[30:35], "test": rows[25:32]}
    )
    with caplog.at_level(logging.WARNING, logger="hfattn.data.translation"):
        dd = load_translation_splits(folder, size=20, preprocessing="chollet")
    assert not [p for p in (tmp_path / "own").rglob("cache-*")]  # no datasets cache in it
    assert [len(dd[s]) for s in SPLITS] == [20, 5, 7]
    assert "5 of the 7 test pairs are also in train" in caplog.text
    assert "validation pairs" not in caplog.text


# ------------------------------------------------------------------- the target language


def test_the_target_language_is_inferred_or_asked_for(tmp_path):
    two = save_splits(tmp_path / "two", {"train": [{"en": s, "fr": t} for s, t in PAIRS]})
    assert load_pair_splits(PairDataSection(source=two))[1] == "fr"
    three = save_splits(
        tmp_path / "three",
        {"train": [{"de": "die Katze", "en": s, "fr": t} for s, t in PAIRS]},
    )
    with pytest.raises(ValueError, match=r"data.target_lang must be set: .* de, en, fr") as err:
        load_translation_splits(three)
    assert "'es'" not in str(err.value)
    dd = load_translation_splits(three, target_lang="de")
    assert set(dd["train"].features["translation"]) == {"en", "de"}
    assert load_pair_splits(PairDataSection(source=three, target_lang="de"))[1] == "de"
    with pytest.raises(ValueError, match=r"data.target_lang: 'es' is not a language of"):
        load_translation_splits(two, target_lang="es")
    with pytest.raises(ValueError, match=r"data.source_lang: 'es' is not a language of"):
        load_translation_splits(two, source_lang="es")


# ------------------------------------------------------------------ a relative data.source


def test_absolute_source_resolves_local_paths_only(tmp_path, monkeypatch):
    from hfattn.storage.location import absolute_source

    monkeypatch.chdir(tmp_path)
    (tmp_path / "dates").mkdir()  # a folder named like an embedded source
    (tmp_path / "mydata").mkdir()
    assert absolute_source("mydata") == str(tmp_path / "mydata")
    assert absolute_source("dates", ("dates", "numbers")) == "dates"
    assert absolute_source("https://example.org/spa-eng.zip") == "https://example.org/spa-eng.zip"
    assert absolute_source("owner/name") == "owner/name"


def test_a_run_on_a_relative_source_loads_its_data_from_another_folder(tmp_path, monkeypatch):
    import yaml

    from hfattn.cli import main
    from hfattn.orchestration.run import run_recipe
    from hfattn.recipes import load_recipe
    from hfattn.storage.resume_checks import check_resume, recipe_differences
    from tests.helpers.recipe_helpers import write_recipe
    from tests.helpers.tiny_runs import TINY_TRANSLATION_MODELS

    monkeypatch.setenv("HFATTN_PREPARED_DIR", str(tmp_path / "cache"))
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    elsewhere.mkdir()
    rows = [{"en": s, "fr": t} for s, t in PAIRS]
    save_splits(work / "mydata" / "ds_disk", {"train": rows})
    monkeypatch.chdir(work)
    recipe_file = write_recipe(
        work,
        base={},
        name="relative_source",
        task="translation",
        model=TINY_TRANSLATION_MODELS["bahdanau"],
        tokenizer={"type": "char"},
        data={
            "source": "mydata/ds_disk",
            "target_lang": "fr",
            "validation_fraction": 0.1,
            "test_fraction": 0.1,
        },
        training={"batch_size": 8, "max_steps": 2, "eval_every": None, "save_every": 2},
        evaluation={"splits": ["test"], "max_new_tokens": 8},
        generation={"max_new_tokens": 8, "num_beams": 1},
    )
    run = work / "run"
    run_recipe(load_recipe(recipe_file))
    stored = yaml.safe_load((run / "recipe.yaml").read_text())
    assert stored["data"]["source"] == str(work / "mydata" / "ds_disk")
    check_resume(run, load_recipe(recipe_file).to_yaml())  # the relative recipe resumes it
    old = {"data": {"source": "mydata/ds_disk"}}  # a run stored before: relative
    assert recipe_differences(old, {"data": {"source": stored["data"]["source"]}}) == []

    monkeypatch.chdir(elsewhere)
    recipe = load_recipe(run / "recipe.yaml")
    splits, target_lang = load_pair_splits(recipe.data)
    assert target_lang == "fr" and sum(len(splits[s]) for s in SPLITS) == 40
    assert main(["evaluate", str(run), "--split", "test"]) == 0


def test_a_source_left_without_pairs_is_refused_in_one_line(tmp_path):
    path = write_jsonl(tmp_path / "empty.jsonl", [{"en": "hi", "fr": ""}] * 3)
    with pytest.raises(ValueError, match=r"data.source: .* has no en-fr pair in train"):
        load_translation_splits(path)
