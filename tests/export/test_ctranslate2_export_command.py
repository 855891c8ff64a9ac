"""The CTranslate2 export of the Vaswani Transformer (issue 23) refuses what it cannot do: the
configs CTranslate2 cannot express are refused in one line before any slow work, as are other
architectures and tokenizers; ``hfattn export`` writes the folder atomically and checks the
model folder before reading weights (or importing torch); the loader refuses bad input in one
line. The models are tiny Vaswani Transformers with random weights
(``tests/helpers/reversal_models.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from transformers import PreTrainedTokenizerFast

from hfattn import BahdanauConfig, VaswaniConfig, VaswaniForConditionalGeneration
from hfattn.cli import main as cli_main
from hfattn.export import CTranslate2Translation, ExportError, check_exportable, export_ctranslate2
from tests.helpers.reversal_models import BASE, VOCAB, make_model

pytest.importorskip(
    "ctranslate2", reason="ctranslate2 is not installed: pip install 'hfattn[serve]'"
)


REFUSED = [
    ({"attention_score": "additive"}, "attention_score='additive'"),
    ({"attention_distribution": "sparsemax"}, "attention_distribution='sparsemax'"),
    ({"activation": "leaky_relu"}, "activation='leaky_relu'"),
    ({"init_method": "t-fixup"}, "init_method='t-fixup'"),
    ({"chollet_cross_attention_mask": True}, "chollet_cross_attention_mask=true"),
]


# ---- the loader ----------------------------------------------------------------------------------
def test_loader_refuses_bad_input_in_one_line(tokenizer, tmp_path):
    folder = export_ctranslate2(make_model({}), tokenizer, tmp_path / "ct2")
    cases = [
        (lambda: CTranslate2Translation(folder, compute_type="int4"), "compute_type must be"),
        (lambda: CTranslate2Translation(folder, device="tpu"), "device must be one of"),
        (lambda: CTranslate2Translation(tmp_path), "model.bin is missing"),
        (lambda: CTranslate2Translation(folder).translate(["a"], num_beams=0), "num_beams"),
        (lambda: CTranslate2Translation(folder).translate(["a"], batch_size=0), "batch_size"),
        (lambda: CTranslate2Translation(folder).translate(["a"], patience=0), "patience must"),
        (
            lambda: CTranslate2Translation(folder).translate(["a"], early_stopping="soon"),
            "early_stopping must",
        ),
    ]
    for call, fragment in cases:
        with pytest.raises(ValueError, match=fragment) as info:
            call()
        assert "\n" not in str(info.value)


# ---- refusals ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("overrides", "named"), REFUSED, ids=[n for _, n in REFUSED])
def test_unsupported_configs_are_refused_in_one_line(overrides, named, tokenizer, tmp_path):
    config = VaswaniConfig(**{**BASE, **overrides})
    with pytest.raises(ExportError) as info:
        check_exportable(config)
    message = str(info.value)
    assert "\n" not in message and named in message and "allowed:" in message
    model = VaswaniForConditionalGeneration(config)
    with pytest.raises(ExportError, match=named.replace("(", r"\(")):
        export_ctranslate2(model, tokenizer, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert list(tmp_path.iterdir()) == []  # no temporary folder left either


def test_other_architectures_and_tokenizers_are_refused(tokenizer):
    with pytest.raises(ExportError, match="model_type='bahdanau'"):
        check_exportable(BahdanauConfig(vocab_size=VOCAB))
    with pytest.raises(ExportError, match="model_type='marian'"):
        check_exportable({"model_type": "marian"})
    check_exportable({"model_type": "vaswani"})  # config.json defaults are exportable
    small = make_model({"vocab_size": VOCAB - 2})
    with pytest.raises(ExportError, match="the tokenizer has 16 tokens .* vocab_size is 14"):
        export_ctranslate2(small, tokenizer, "never-written")


# ---- the command ---------------------------------------------------------------------------------
def test_hfattn_export_writes_the_folder_atomically(tokenizer, tmp_path, capsys, monkeypatch):
    model_dir = tmp_path / "run"
    model = make_model({})
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    out = tmp_path / "exports" / "ct2"
    args = ["export", str(model_dir), str(out), "--format", "ctranslate2"]
    assert cli_main([*args, "--quantization", "int8"]) == 0
    assert f"wrote {out} (CTranslate2, int8)" in capsys.readouterr().out
    names = {p.name for p in out.iterdir()}
    assert {"model.bin", "config.json", "shared_vocabulary.json", "tokenizer.json"} <= names
    assert {"generation_config.json", "hfattn_export.json", "README.md"} <= names
    readme = (out / "README.md").read_text()
    assert "ctranslate2.Translator(" in readme and "--quantization int8" in readme
    assert json.loads((out / "shared_vocabulary.json").read_text())[:4] == [
        "<pad>",
        "<unk>",
        "<bos>",
        "<eos>",
    ]
    stamp = (out / "model.bin").stat().st_mtime_ns

    assert cli_main(args) == 2  # OUT is taken
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "already exists and is not empty" in error
    assert (out / "model.bin").stat().st_mtime_ns == stamp

    def fail(*_, **__):
        raise OSError("disk full")

    monkeypatch.setattr(PreTrainedTokenizerFast, "save_pretrained", fail)
    assert cli_main([*args, "--overwrite"]) == 2  # a failed rewrite keeps the old export
    assert "disk full" in capsys.readouterr().err
    assert (out / "model.bin").stat().st_mtime_ns == stamp
    assert sorted(p.name for p in out.parent.iterdir()) == ["ct2"]  # no temporary folder
    monkeypatch.undo()

    assert cli_main([*args, "--overwrite"]) == 0
    assert json.loads((out / "hfattn_export.json").read_text())["quantization"] == "float32"
    assert cli_main(["export", str(model_dir), str(model_dir), "--overwrite"]) == 2
    assert "is (or holds) the model folder" in capsys.readouterr().err


def test_hfattn_export_into_a_read_only_folder_names_that_folder(
    tokenizer, tmp_path, capsys, monkeypatch
):
    """One ``error:`` line naming the user's folder, before the weights are read (it once
    named the temporary ``.ct2.74quhve4.tmp`` after converting them)."""
    from hfattn.storage import file_io

    model_dir = tmp_path / "run"
    make_model({}).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    real = os.access  # root is never refused: answer as a read-only folder does
    monkeypatch.setattr(file_io.os, "access", lambda p, mode: Path(p) != locked and real(p, mode))
    monkeypatch.setattr(VaswaniForConditionalGeneration, "from_pretrained", None)  # not reached
    for out in (locked / "ct2", locked / "exports" / "ct2"):
        assert cli_main(["export", str(model_dir), str(out)]) == 2
        assert capsys.readouterr().err == (
            f"error: output folder {out} cannot be written: {locked} is read-only for this "
            "user; give a folder you can write to\n"
        )
    assert list(locked.iterdir()) == []


def test_hfattn_export_refuses_a_config_before_reading_weights(tmp_path, capsys):
    folder = tmp_path / "tfixup"
    folder.mkdir()
    config = VaswaniConfig(**BASE, init_method="t-fixup")
    config.architectures = ["VaswaniForConditionalGeneration"]
    config.save_pretrained(folder)
    (folder / "model.safetensors").write_bytes(b"not a safetensors file")
    (folder / "tokenizer.json").write_text("{}")
    assert cli_main(["export", str(folder), str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert "init_method='t-fixup'" in error and "safetensors" not in error
    assert not (tmp_path / "out").exists()


def test_hfattn_export_refuses_another_family_before_importing_torch(tmp_path):
    """A local model's ``config.json`` is checked before torch and transformers load."""
    folder = tmp_path / "bahdanau"
    folder.mkdir()
    BahdanauConfig(vocab_size=VOCAB).save_pretrained(folder)
    (folder / "model.safetensors").write_bytes(b"not read")
    (folder / "tokenizer.json").write_text("{}")
    code = (
        "import sys\n"
        "from hfattn.cli import main\n"
        f"status = main(['export', {str(folder)!r}, {str(tmp_path / 'out')!r}])\n"
        "print(status, 'torch' in sys.modules, 'transformers' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["2", "False", "False"], done.stderr
    assert "model_type='bahdanau'" in done.stderr and done.stderr.count("\n") == 1
    assert not (tmp_path / "out").exists()
