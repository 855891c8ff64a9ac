"""Safe loading (issue 11): only safetensors weights are read, pickle weights need
``--allow-pickle``, a damaged config / tokenizer / weights file is one error naming it, and
hfattn's models load without ``trust_remote_code``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from hfattn.cli import main
from hfattn.commands.inputs import ModelLoadError
from hfattn.commands.model_loading import allow_pickle, load_model_and_tokenizer

GENERATE = ["--prompt", "ROMEO:", "--max-new-tokens", "8", "--greedy"]


@pytest.fixture
def run_copy(char_rnn_run, tmp_path) -> Path:
    """A copy of the tiny trained char-RNN run, free to modify."""
    return Path(shutil.copytree(char_rnn_run, tmp_path / "run"))


@pytest.fixture
def torch_loads(monkeypatch) -> list[str]:
    """Every file ``torch.load`` is asked to read (the pickle path of ``from_pretrained``)."""
    calls = []
    real_load = torch.load

    def load(f, *args, **kwargs):
        calls.append(Path(str(f)).name)
        return real_load(f, *args, **kwargs)

    monkeypatch.setattr(torch, "load", load)
    return calls


def as_pickle(folder: Path, keep_safetensors: bool = False) -> Path:
    """Save the folder's weights as ``pytorch_model.bin`` (dropping the safetensors file)."""
    weights = load_file(str(folder / "model.safetensors"))
    torch.save(weights, folder / "pytorch_model.bin")
    if not keep_safetensors:
        (folder / "model.safetensors").unlink()
    return folder / "pytorch_model.bin"


def test_pickle_weights_are_refused_unless_allowed(run_copy, char_rnn_run, torch_loads, capsys):
    assert main(["generate", str(char_rnn_run), *GENERATE]) == 0
    expected = capsys.readouterr().out
    pickle = as_pickle(run_copy)
    assert main(["generate", str(run_copy), *GENERATE]) == 2
    err = capsys.readouterr().err
    assert f"{pickle} is a pickle file" in err and "--allow-pickle" in err
    assert torch_loads == []  # refused before anything was unpickled
    for command in (
        ["evaluate", str(run_copy), "--split", "test"],
        ["translate", str(run_copy), "April 1"],
    ):
        assert main(command) == 2
        assert "pytorch_model.bin is a pickle file" in capsys.readouterr().err
    # the user trusts the file: the same model, the same text
    assert main(["generate", str(run_copy), *GENERATE, "--allow-pickle"]) == 0
    assert capsys.readouterr().out == expected
    assert "pytorch_model.bin" in torch_loads
    with allow_pickle():
        model, _ = load_model_and_tokenizer(str(run_copy), "AutoModelForCausalLM")
    assert (
        model.lm_head.weight.shape[0]
        == json.loads((run_copy / "config.json").read_text())["vocab_size"]
    )


def test_a_pickle_next_to_safetensors_is_ignored(run_copy, torch_loads, caplog):
    pickle = as_pickle(run_copy, keep_safetensors=True)
    torch.save({"lm_head.weight": torch.zeros(1)}, pickle)  # would break the model if read
    torch_loads.clear()
    model, _ = load_model_and_tokenizer(str(run_copy), "AutoModelForCausalLM")
    assert torch_loads == []
    assert "ignoring pytorch_model.bin (pickle)" in caplog.text
    expected = load_file(str(run_copy / "model.safetensors"))["lm_head.weight"]
    assert torch.equal(model.lm_head.weight, expected)


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize(
    ("name", "damage"),
    [
        ("model.safetensors", _truncate),
        ("model.safetensors", lambda p: p.write_bytes(b"\xff" * 64)),
        ("config.json", _truncate),
        ("tokenizer.json", _truncate),
        ("tokenizer_config.json", lambda p: p.write_text("not json")),
    ],
)
def test_a_damaged_file_is_one_error_naming_it(run_copy, capsys, name, damage):
    damage(run_copy / name)
    with pytest.raises(ModelLoadError, match=f"{run_copy / name} is truncated or corrupt"):
        load_model_and_tokenizer(str(run_copy), "AutoModelForCausalLM")
    assert main(["generate", str(run_copy), *GENERATE]) == 2
    err = capsys.readouterr().err
    assert f"{run_copy / name} is truncated or corrupt" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_hfattn_models_load_without_trust_remote_code(char_rnn_run):
    config = json.loads((char_rnn_run / "config.json").read_text())
    assert config["auto_map"]  # remote code is there, and not used
    model, tokenizer = load_model_and_tokenizer(str(char_rnn_run), "AutoModelForCausalLM")
    assert type(model).__module__ == "hfattn.models.modeling_char_rnn"
    assert tokenizer("ROMEO")["input_ids"]
