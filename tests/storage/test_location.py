"""One rule for "is this a local path or a Hub id?" (:mod:`hfattn.storage.location`), shared by the
model commands (:func:`hfattn.commands.inputs.locate_model`), the recipe's ``data.source``
(:func:`hfattn.data.sources.check_source`) and the Hub card (:mod:`hfattn.hub.folder_inspection`); and the
file names of a model folder (:mod:`hfattn.storage.model_folder`), which are those of transformers
and
peft."""

from __future__ import annotations

import json
from pathlib import Path

import huggingface_hub
import peft.utils
import pytest
import transformers.utils

from hfattn.commands.inputs import ModelLoadError, locate_model
from hfattn.common.field_checks import RecipeError
from hfattn.data.sources import check_source
from hfattn.storage import model_folder
from hfattn.storage.file_reads import read_safetensors, reads_back
from hfattn.storage.location import (
    hub_offline,
    in_local_cache,
    is_repo_id,
    local_model_path,
    looks_like_hub_id,
    looks_like_path,
)
from hfattn.tasks.pretrained import resolve_pretrained


@pytest.mark.parametrize(
    "name",
    ["./x", "/x", "~/x", "a/b/c", "a\\b", "corpus.txt", "owner/data.jsonl", "runs/x", "runs"],
)
def test_a_name_spelt_like_a_path_is_one(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    assert looks_like_path(name)
    assert not looks_like_hub_id(name)


@pytest.mark.parametrize("name", ["gpt2", "owner/name", "Qwen/Qwen2.5-0.5B"])
def test_owner_name_is_a_hub_id(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    assert not looks_like_path(name)
    assert looks_like_hub_id(name)


@pytest.mark.parametrize("name", ["", "owner/na--me", "owner/-name", "owner/name.git"])
def test_an_invalid_repo_id_is_no_hub_id(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    assert not is_repo_id(name)
    assert not looks_like_hub_id(name)


def test_a_bare_name_is_a_repo_id_only_when_bare_ids_are_allowed():
    assert is_repo_id("imdb") and not is_repo_id("imdb", bare=False)
    assert is_repo_id("stanfordnlp/imdb", bare=False)


def test_a_missing_model_file_name_fails_at_once_without_the_hub(tmp_path, monkeypatch):
    """A model named like a data file is a path: no Hub lookup for ``corpus.txt``."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelLoadError, match=r"^model folder not found: corpus\.txt$"):
        locate_model("corpus.txt")


def test_a_model_name_is_a_local_path_when_it_exists_else_a_hub_id(tmp_path, monkeypatch):
    """One rule for the commands and the recipe's ``model.pretrained``: an existing path (a file
    too: its holder checks it), else ``None`` for a Hub id, else an error for a missing path."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "x").mkdir(parents=True)
    (tmp_path / "weights.bin").write_bytes(b"")
    assert local_model_path("runs/x") == Path("runs/x")
    assert local_model_path("weights.bin") == Path("weights.bin")
    assert local_model_path("owner/name") is None and local_model_path("gpt2") is None
    for name in ("runs/y", "./x", "not a repo id!", ""):
        with pytest.raises(FileNotFoundError, match="model folder not found"):
            local_model_path(name)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("runs/y", r"'runs/y' is neither an existing local model folder nor a Hub repo id"),
        ("runs/x", r"the folder runs/x has no config\.json"),
        ("weights.bin", r"weights\.bin is a file, not a model folder"),
    ],
)
def test_a_recipe_model_folder_follows_the_same_rule_at_once(tmp_path, monkeypatch, name, message):
    """``model.pretrained`` refuses a missing path, a folder without config.json and a file
    before any trip to the Hub."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs" / "x").mkdir(parents=True)
    (tmp_path / "weights.bin").write_bytes(b"")
    with pytest.raises(RecipeError, match=rf"^model\.pretrained: .*{message}"):
        resolve_pretrained(name)


def test_a_data_source_under_a_local_folder_is_a_missing_file(tmp_path, monkeypatch):
    """``data/corpus`` next to a ``data/`` folder is that folder's file, as for a model."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    with pytest.raises(FileNotFoundError, match="no such file or folder 'data/corpus'"):
        check_source("data/corpus", ["genre"])


def test_datasets_offline_overrides_the_hub_flag(monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    assert hub_offline(datasets=True) and not hub_offline()
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "0")
    assert not hub_offline(datasets=True) and hub_offline()


def test_the_local_cache_holds_models_and_datasets_apart(tmp_path, monkeypatch):
    cache = tmp_path / "hub"
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HOME", str(tmp_path))
    monkeypatch.delenv("HF_DATASETS_CACHE", raising=False)
    assert not in_local_cache("me/thing") and not in_local_cache("me/thing", "dataset")
    (cache / "datasets--me--thing").mkdir(parents=True)
    assert in_local_cache("me/thing", "dataset") and not in_local_cache("me/thing")
    snapshot = cache / "models--me--thing" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / model_folder.CONFIG_FILE).write_text(json.dumps({}))
    (cache / "models--me--thing" / "refs").mkdir()
    (cache / "models--me--thing" / "refs" / "main").write_text("0" * 40)
    assert in_local_cache("me/thing")


def test_model_folder_names_are_those_of_transformers_and_peft():
    assert model_folder.CONFIG_FILE == transformers.utils.CONFIG_NAME
    assert model_folder.WEIGHTS_FILE == transformers.utils.SAFE_WEIGHTS_NAME
    assert model_folder.GENERATION_CONFIG_FILE == transformers.utils.GENERATION_CONFIG_NAME
    assert model_folder.ADAPTER_CONFIG_FILE == peft.utils.CONFIG_NAME
    assert model_folder.ADAPTER_WEIGHTS_FILE == peft.utils.SAFETENSORS_WEIGHTS_NAME


def test_the_damaged_file_scan_names_the_first_unreadable_file(tmp_path):
    (tmp_path / model_folder.CONFIG_FILE).write_text("{}")
    (tmp_path / model_folder.TOKENIZER_FILE).write_text("{trunc")
    (tmp_path / "notes.txt").write_text("not checked")
    damaged = model_folder.first_damaged_file(tmp_path, model_folder.CHECKED_FILES)
    assert damaged == tmp_path / model_folder.TOKENIZER_FILE
    (tmp_path / model_folder.TOKENIZER_FILE).write_text("{}")
    assert model_folder.first_damaged_file(tmp_path, model_folder.CHECKED_FILES) is None


def test_a_safetensors_file_reads_back_tensor_by_tensor_or_not_at_all(tmp_path):
    import torch
    from safetensors.torch import save_file

    weights = tmp_path / model_folder.WEIGHTS_FILE
    save_file({"a": torch.arange(3.0), "b": torch.ones(2, 2)}, weights)
    read = dict(read_safetensors(weights))
    assert sorted(read) == ["a", "b"] and read["a"].tolist() == [0.0, 1.0, 2.0]
    assert reads_back(weights)
    weights.write_bytes(weights.read_bytes()[:-8])  # truncated
    assert not reads_back(weights)
    with pytest.raises(Exception):  # noqa: B017 (safetensors raises its own error types)
        list(read_safetensors(weights))
