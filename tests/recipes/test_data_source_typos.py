"""Fail fast (issue 21): a ``data.source`` typo fails at once for every task, before torch is
imported and without trying the network; what cannot be a dataset is named, and a real Hub
dataset id (a local Hub-compatible server) still passes and loads.

The CLI runs in fresh interpreters (``tests/helpers/early_errors.py``): this test process has
imported torch already.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hfattn.data.sources import check_source
from tests.helpers.early_errors import assert_fast_error, clean_env

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "recipes"


# ---- data.source typos, every task ----------------------------------------------------------
TYPOS = {
    "classification": ("rnn_classifier_genre.yaml", "genr",
                       "data.source: 'genr' is not an embedded dataset (genre, reber, reviews-es), "
                       "an existing file, or a Hub dataset id; did you mean 'genre'?"),
    "causal-lm": ("char_rnn_shakespeare.yaml", "shakespear",
                  "data.source: 'shakespear' is not an embedded dataset (shakespeare), an "
                  "existing file, or a Hub dataset id; did you mean 'shakespeare'?"),
    "translation": ("vaswani_dates_en_es.yaml", "date",
                    "data.source: 'date' is not an embedded dataset (bible, bible+kjv, dates, numbers, "
                    "date-normalization), an existing file, or a Hub dataset id; did you mean "
                    "'dates'?"),
}  # fmt: skip


@pytest.mark.parametrize("task", sorted(TYPOS))
def test_a_data_source_typo_fails_at_once(task, tmp_path):
    recipe, typo, expected = TYPOS[task]
    argv = ["train", str(RECIPES / recipe), "--set", f"data.source={typo}",
            "--set", f"output_dir={tmp_path / 'run'}"]  # fmt: skip
    assert_fast_error(argv, tmp_path, expected)


def test_sources_that_cannot_be_a_dataset(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "datasets"))
    embedded = ("genre", "reber", "reviews-es")
    with pytest.raises(FileNotFoundError, match=r"data\.source: no such file or folder"):
        check_source(str(tmp_path / "missing.csv"), embedded)
    with pytest.raises(ValueError, match=r"did you mean 'reviews-es'\?"):
        check_source("reviews_es", embedded, bare_hub_ids=True)
    with pytest.raises(ValueError, match=r"a Hub dataset id is owner/name"):
        check_source("imdb", embedded)  # a bare name where a task takes owner/name only
    with pytest.raises(ValueError, match=r"a Hub dataset id is owner/name"):
        check_source("me/a--b", embedded)
    (tmp_path / "mine.csv").write_text("text,label\n")
    for fine in ("genre", str(tmp_path / "mine.csv"), str(tmp_path), "me/corpus", "imdb"):
        check_source(fine, embedded, bare_hub_ids=True)  # online: Hub ids go to the Hub
    check_source("https://example.org/spa.zip", embedded, urls=True)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(ValueError, match=r"the Hub is offline .* it is not cached"):
        check_source("me/corpus", embedded)
    (tmp_path / "hub" / "datasets--me--corpus").mkdir(parents=True)
    check_source("me/corpus", embedded)  # downloaded before: it loads offline


HUB_DATASET = """
import os, sys
from huggingface_hub import HfApi
from hfattn.data.text import check_text_source, load_text_splits
HfApi().create_repo("me/corpus", repo_type="dataset")
HfApi().upload_file(path_or_fileobj=sys.argv[1], path_in_repo="train.txt", repo_id="me/corpus",
                    repo_type="dataset")
splits = load_text_splits("me/corpus", validation_fraction=0.1, test_fraction=0.1)
print(sum(len(text) for docs in splits.values() for text in docs))
os.environ["HF_DATASETS_OFFLINE"] = "1"
check_text_source("me/corpus")  # cached now: it loads offline too
try:
    check_text_source("me/other")
except ValueError as err:
    print(err)
"""


def test_hub_dataset_ids_keep_working(tmp_path):
    """A real Hub id passes the check and loads (a local Hub-compatible server)."""
    from tests.helpers.hub_server import HubServer

    corpus = tmp_path / "train.txt"
    corpus.write_text("To be, or not to be, that is the question.\n" * 50, encoding="utf-8")
    with HubServer(tmp_path / "hub") as server:
        result = subprocess.run(
            [sys.executable, "-c", HUB_DATASET, str(corpus)],
            env=clean_env(HF_ENDPOINT=server.url, HF_TOKEN="hf_test", HF_HOME=str(tmp_path)),
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert result.returncode == 0, result.stderr
    loaded, offline = result.stdout.strip().splitlines()
    assert int(loaded) == len(corpus.read_text()) - 1  # its lines, joined by newlines
    assert "'me/other' is not an embedded dataset" in offline and "the Hub is offline" in offline
