"""English→Spanish parallel data: generators, spa.txt, dataset folders, the Bible."""

import datetime as dt
import logging
import shutil
import subprocess

import datasets
import pytest

from hfattn.data.pair_generators import (
    date_normalization_pair,
    date_pair,
    generate_pairs,
    number_pair,
)
from hfattn.data.tatoeba import chollet_standardize
from hfattn.data.translation import load_translation_splits

SPLITS = ("train", "validation", "test")


def sources(dd, lang="en"):
    return {s: [t[lang] for t in dd[s]["translation"]] for s in SPLITS}


def test_generator_examples_are_exact():
    day = dt.date(2019, 4, 22)
    assert date_pair(day, "full") == {
        "en": "Monday, April 22, 2019",
        "es": "lunes, 22 de abril de 2019",
    }
    assert date_pair(day, "long") == {"en": "April 22, 2019", "es": "22 de abril de 2019"}
    assert date_pair(day, "short") == {"en": "4/22/19", "es": "22/4/19"}
    # one English text, one reference: May's medium form is its long form
    may = dt.date(1985, 5, 6)
    assert (
        date_pair(may, "medium")
        == date_pair(may, "long")
        == {
            "en": "May 6, 1985",
            "es": "6 de mayo de 1985",
        }
    )
    assert date_pair(dt.date(1985, 6, 6), "medium") == {"en": "Jun 6, 1985", "es": "6 jun 1985"}
    assert number_pair(345) == {
        "en": "three hundred and forty-five",
        "es": "trescientos cuarenta y cinco",
    }
    assert number_pair(21_000)["es"] == "veintiún mil"  # num2words says "veintiuno mil"
    assert number_pair(151_074)["es"] == "ciento cincuenta y un mil setenta y cuatro"
    assert date_normalization_pair(day) == {"en": "April 22, 2019", "iso": "2019-04-22"}
    assert date_normalization_pair(day, "us-numeric")["en"] == "4/22/2019"
    with pytest.raises(ValueError, match="width must be one of"):
        date_pair(day, "tiny")


@pytest.mark.parametrize("name", ["dates", "numbers", "date-normalization"])
def test_generated_splits_are_deterministic_sized_and_disjoint(name):
    dd = load_translation_splits(name, size=400, seed=3)
    assert [len(dd[s]) for s in SPLITS] == [280, 60, 60]
    assert load_translation_splits(name, size=400, seed=3)["test"][:] == dd["test"][:]
    assert load_translation_splits(name, size=400, seed=4)["test"][:] != dd["test"][:]
    src = sources(dd)
    assert len(set().union(*map(set, src.values()))) == 400  # every source sentence once
    assert not set(src["train"]) & (set(src["validation"]) | set(src["test"]))
    target = "iso" if name == "date-normalization" else "es"
    assert set(dd["train"][0]["translation"]) == {"en", target}


def test_generated_pairs_are_valid_translations():
    for pair in generate_pairs("date-normalization", 200, seed=0):
        day = dt.date.fromisoformat(pair["iso"])
        assert str(day.year) in pair["en"] and str(day.day) in pair["en"]
    dates = generate_pairs("dates", 200, seed=0)
    assert all(str(int(p["en"][-2:])) in p["es"][-4:] or p["en"][-4:] in p["es"] for p in dates)
    with pytest.raises(ValueError, match="too large"):
        generate_pairs("numbers", 1_000_001)


def test_unknown_bare_name_fails_fast():
    with pytest.raises(
        ValueError, match=r"not an embedded dataset \(bible, bible\+kjv, dates, numbers"
    ):
        load_translation_splits("tatoeba")
    with pytest.raises(FileNotFoundError, match="data.source"):
        load_translation_splits("missing/spa.txt")
    with pytest.raises(ValueError, match="data.target_lang"):
        load_translation_splits("dates", size=10, target_lang="fr")
    with pytest.raises(ValueError, match="data.preprocessing"):
        load_translation_splits("dates", size=10, preprocessing="keras")


SPA_LINES = [
    "Go.\tVe.\tCC-BY 2.0 (France) Attribution: tatoeba.org #2877272 (CM)",
    "Go.\tVete.\tCC-BY 2.0",
    "How are you?\t¿Cómo estás?\tCC-BY 2.0",
    "this line has no tab",
    "Wow!\t¡Órale!",
] + [f"I have {n} cats.\tTengo {n} gatos.\tCC-BY 2.0" for n in range(95)]


@pytest.fixture
def spa_txt(tmp_path):
    path = tmp_path / "spa.txt"
    path.write_text("\n".join(SPA_LINES) + "\n", encoding="utf-8")
    return path


def test_spa_txt_raw_and_malformed_line_reported(spa_txt, caplog):
    with caplog.at_level(logging.WARNING, logger="hfattn.data.tatoeba"):
        dd = load_translation_splits(str(spa_txt), seed=0)
    assert "spa.txt: 1 malformed line(s) skipped" in caplog.text and "at line 4:" in caplog.text
    assert [len(dd[s]) for s in SPLITS] == [
        71,
        14,
        14,
    ]  # 99 good lines; int(0.15 * 99) = 14 held out each, as Chollet
    every = [t for s in SPLITS for t in dd[s]["translation"]]
    assert {"en": "How are you?", "es": "¿Cómo estás?"} in every
    assert {"en": "Wow!", "es": "¡Órale!"} in every  # no attribution field: fine
    again = load_translation_splits(str(spa_txt), seed=0)
    assert again["validation"][:] == dd["validation"][:]


def test_chollet_preprocessing(spa_txt):
    assert chollet_standardize("¿Cómo estás?") == "cómo estás"
    assert chollet_standardize("¡Órale!") == "órale"
    assert chollet_standardize("Don't go, Tom.") == "dont go tom"
    dd = load_translation_splits(str(spa_txt), preprocessing="chollet", seed=1)
    every = [t for s in SPLITS for t in dd[s]["translation"]]
    assert {"en": "how are you", "es": "[start] cómo estás [end]"} in every
    assert all(t["es"].startswith("[start] ") and t["es"].endswith(" [end]") for t in every)
    assert [len(dd[s]) for s in SPLITS] == [71, 14, 14]


def test_geron_preprocessing_and_grouping(spa_txt):
    dd = load_translation_splits(str(spa_txt), preprocessing="geron", train_size=80)
    assert [len(dd[s]) for s in SPLITS] == [80, 9, 10]
    every = [t for s in SPLITS for t in dd[s]["translation"]]
    assert {"en": "How are you?", "es": "Cómo estás?"} in every  # only ¿ ¡ removed
    grouped = load_translation_splits(str(spa_txt), group_by_source=True, seed=5)
    where = {t["en"]: s for s in SPLITS for t in grouped[s]["translation"]}
    go = [s for s in SPLITS for t in grouped[s]["translation"] if t["en"] == "Go."]
    assert len(go) == 2 and go[0] == go[1] == where["Go."]


def test_dataset_folder_and_json_files(tmp_path):
    rows = [{"en": f"sentence {i}", "es": f"frase {i}"} for i in range(100)]
    folder = tmp_path / "saved"
    datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict({"translation": rows[:80]}),
            "test": datasets.Dataset.from_dict({"translation": rows[80:]}),
        }
    ).save_to_disk(str(folder))
    dd = load_translation_splits(str(folder), validation_fraction=0.1, seed=0)
    assert [len(dd[s]) for s in SPLITS] == [72, 8, 20]  # validation carved from train
    assert not set(sources(dd)["train"]) & set(sources(dd)["validation"])
    assert (
        load_translation_splits(str(folder), seed=0)["validation"][:]
        == (load_translation_splits(str(folder), seed=0)["validation"][:])
    )
    json_dir = tmp_path / "json_ds"
    json_dir.mkdir()
    datasets.Dataset.from_dict({"pairs": rows}).to_json(str(json_dir / "train.jsonl"))
    dd = load_translation_splits(str(json_dir), translation_column="pairs", size=50)
    assert [len(dd[s]) for s in SPLITS] == [50, 15, 15]
    assert dd["test"][0]["translation"]["es"].startswith("frase ")
    with pytest.raises(ValueError, match="data.translation_column"):
        load_translation_splits(str(json_dir))


# ---------------------------------------------------------------------------------- Bible


def _bible_installed(source: str = "bible") -> bool:
    from hfattn.data.bible import BibleNotInstalledError, install_hint, module_versions

    try:
        module_versions(source=source)
        return True
    except BibleNotInstalledError:
        pass
    if shutil.which("apt-get") is None:
        return False
    subprocess.run(
        install_hint(source).replace("install", "install -y -qq", 1),
        shell=True,
        capture_output=True,
        timeout=600,
    )
    try:
        module_versions(source=source)
        return True
    except BibleNotInstalledError:
        return False


@pytest.fixture(scope="session")
def bible():
    if not _bible_installed():
        pytest.skip("sword-text-web / sword-text-sparv could not be installed with apt-get")
    return load_translation_splits("bible")  # cached under $HF_HOME/hfattn after the first run


def test_bible_split_by_whole_books(bible):
    from hfattn.data.bible import SPLITS as BOOKS

    assert [len(bible[s]) for s in SPLITS] == [29_004, 1_051, 1_022]
    assert set(bible["test"]["book"]) == set(BOOKS["test"])
    assert set(bible["validation"]["book"]) == set(BOOKS["validation"])
    assert not set(bible["train"]["book"]) & (set(BOOKS["test"]) | set(BOOKS["validation"]))
    keys = [(r["book"], r["chapter"], r["verse"]) for s in SPLITS for r in bible[s]]
    assert len(keys) == len(set(keys))  # no verse in two splits (or twice)
    first = bible["train"][0]
    assert (first["book"], first["chapter"], first["verse"]) == ("Genesis", 1, 1)
    assert first["translation"] == {
        "en": "In the beginning, God created the heavens and the earth.",
        "es": "En el principio crió Dios los cielos y la tierra.",
    }
    for r in bible["test"]["translation"]:
        assert r["en"] and r["es"] and "<" not in r["en"] + r["es"]


@pytest.fixture(scope="session")
def bible_kjv():
    if not _bible_installed("bible+kjv"):
        pytest.skip("sword-text-kjv could not be installed with apt-get")
    return load_translation_splits("bible+kjv")


def test_bible_kjv_pairs_a_second_english_with_the_training_verses(bible, bible_kjv):
    for split in ("validation", "test"):  # the same held-out verses, from the WEB
        assert bible_kjv[split]["translation"] == bible[split]["translation"]
    web, kjv = bible["train"], bible_kjv["train"]
    assert bible_kjv["train"][: len(web)]["translation"] == web["translation"]
    extra = kjv.select(range(len(web), len(kjv)))
    assert 28_000 < len(extra) <= 31_102 - len(bible["validation"]) - len(bible["test"])
    assert set(extra["book"]) <= set(web["book"])
    first = extra[0]
    assert (first["book"], first["chapter"], first["verse"]) == ("Genesis", 1, 1)
    assert first["translation"] == {
        "en": "In the beginning God created the heaven and the earth.",
        "es": "En el principio crió Dios los cielos y la tierra.",
    }
    spanish = {(r["book"], r["chapter"], r["verse"]): r["translation"]["es"] for r in web}
    for r in extra.select(range(0, len(extra), 97)):  # the same Spanish verse as the WEB's pair
        key = (r["book"], r["chapter"], r["verse"])
        assert key not in spanish or spanish[key] == r["translation"]["es"]
        assert r["translation"]["en"] and "<" not in r["translation"]["en"]
        assert "¶" not in r["translation"]["en"]


def test_bible_missing_modules_error_names_apt(tmp_path):
    from hfattn.data.bible import BibleNotInstalledError, load_bible

    (tmp_path / "mods.d").mkdir()
    with pytest.raises(BibleNotInstalledError, match="apt-get install sword-text-web"):
        load_bible(tmp_path)
    with pytest.raises(BibleNotInstalledError, match="sword-text-sparv sword-text-kjv`"):
        load_bible(tmp_path, source="bible+kjv")
