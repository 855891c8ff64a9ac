"""``hfattn --help`` stays fast: the CLI's help paths import neither torch nor transformers,
while ``import hfattn`` still registers the model types with the Auto classes (issue 12).

Every check runs in a fresh interpreter: this test process has imported torch already.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers.heavy_imports import HEAVY, heavy_modules_after

ROOT = Path(__file__).resolve().parents[2]


def python(code: str, *args: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter from the repository root; fail on a non-zero exit."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return result


def test_top_level_help_imports_no_heavy_module():
    code, heavy, text = heavy_modules_after(["--help"])
    assert code == 0
    assert heavy == []
    from hfattn.cli import COMMANDS

    assert text.startswith("usage: hfattn")
    assert all(name in text for name in COMMANDS)


@pytest.mark.parametrize(
    "command", ["train", "sweep", "evaluate", "generate", "translate", "push", "demo", "plot"]
)
def test_command_help_imports_no_heavy_module(command):
    code, heavy, text = heavy_modules_after([command, "--help"])
    assert code == 0
    assert heavy == []
    assert text.startswith(f"usage: hfattn {command}")


def test_build_parser_imports_no_heavy_module():
    """Every command module imports its heavy libraries inside its handler only."""
    out = python(
        """
        import json, sys
        from hfattn.cli import COMMANDS, build_parser
        build_parser()
        print(json.dumps([m for m in json.loads(sys.argv[1]) if m in sys.modules]))
        """,
        json.dumps(HEAVY),
    ).stdout
    assert json.loads(out) == []


@pytest.mark.parametrize("argv", [["--help"], ["train", "--help"]])
def test_console_script_and_python_m_help_import_no_torch(argv):
    """The real entry points, with Python's own import log (``-X importtime``)."""
    script = shutil.which("hfattn", path=str(Path(sys.executable).parent))
    if script is None:
        pytest.skip("the hfattn console script is not installed next to this python")
    for command in ([script, *argv], [sys.executable, "-m", "hfattn", *argv]):
        result = subprocess.run(
            command,
            cwd=ROOT,
            env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("usage: hfattn")
        imported = {
            line.rsplit("|", 1)[1].strip()
            for line in result.stderr.splitlines()
            if line.startswith("import time:") and "|" in line
        }
        assert "hfattn.cli" in imported  # the log is really there
        assert not {name.split(".")[0] for name in imported} & {"torch", "transformers"}


def test_import_hfattn_imports_neither_torch_nor_transformers():
    out = python(
        """
        import json, sys
        import hfattn
        print(json.dumps([m for m in ("torch", "transformers") if m in sys.modules]))
        """
    ).stdout
    assert json.loads(out.strip().splitlines()[-1]) == []


@pytest.mark.slow
def test_importing_the_models_registers_every_model_type(tmp_path):
    """After a model class is imported from ``hfattn`` (its module ``__getattr__`` imports
    ``hfattn.models``, where the registration lives; transformers imported first changes
    nothing), the Auto classes know every hfattn model type, a saved folder round-trips through
    them, and ``save_pretrained`` writes ``auto_map`` (register_for_auto_class). One fresh
    interpreter: ``import hfattn.models`` alone runs the same registration."""
    out = python(
        """
        import json, sys
        import transformers; from hfattn import CharRNNConfig
        from transformers import (
            AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, CONFIG_MAPPING,
        )
        from hfattn.models import AUTO_CLASSES
        report = {
            "char-rnn": type(AutoConfig.for_model("char-rnn", hidden_size=8)).__name__,
            "bahdanau": type(AutoConfig.for_model("bahdanau")).__name__,
            "registered": sorted(
                cfg.__name__ for cfg, _, _ in AUTO_CLASSES
                if CONFIG_MAPPING[cfg.model_type] is cfg
            ),
        }
        from hfattn import BahdanauConfig, CharRNNConfig, CharRNNForCausalLM
        config = BahdanauConfig(
            vocab_size=20, embedding_dim=8, encoder_hidden_size=8, decoder_layers=1
        )
        report["seq2seq"] = type(AutoModelForSeq2SeqLM.from_config(config)).__name__
        CharRNNForCausalLM(CharRNNConfig(vocab_size=10, hidden_size=8)).save_pretrained(sys.argv[1])
        report["auto_map"] = json.load(open(sys.argv[1] + "/config.json"))["auto_map"]
        report["config"] = type(AutoConfig.from_pretrained(sys.argv[1])).__name__
        model = AutoModelForCausalLM.from_pretrained(sys.argv[1])
        report["model"] = type(model).__module__ + "." + type(model).__name__
        print(json.dumps(report))
        """,
        str(tmp_path / "saved"),
    ).stdout
    from hfattn.models import AUTO_CLASSES

    assert json.loads(out.strip().splitlines()[-1]) == {
        "char-rnn": "CharRNNConfig",
        "bahdanau": "BahdanauConfig",
        "registered": sorted(config.__name__ for config, _, _ in AUTO_CLASSES),
        "seq2seq": "BahdanauForConditionalGeneration",
        "auto_map": {
            "AutoConfig": "configuration_char_rnn.CharRNNConfig",
            "AutoModelForCausalLM": "modeling_char_rnn.CharRNNForCausalLM",
        },
        "config": "CharRNNConfig",
        "model": "hfattn.models.modeling_char_rnn.CharRNNForCausalLM",
    }
    assert sorted(p.name for p in (tmp_path / "saved").glob("*.py")) == [
        "config_checks.py",
        "configuration_char_rnn.py",
        "modeling_char_rnn.py",
        "neural_cache.py",
        "recurrent_cache.py",
        "rnn_layers.py",
    ]


def test_public_names_are_the_models_classes():
    import hfattn
    import hfattn.models

    for name in hfattn.__all__:
        if name != "__version__":
            assert getattr(hfattn, name) is getattr(hfattn.models, name)
            assert name in dir(hfattn)
    assert {"CharRNNConfig", "CharRNNForCausalLM", "BahdanauConfig"} <= set(hfattn.__all__)
    with pytest.raises(AttributeError, match="no attribute 'NoSuchModel'"):
        hfattn.NoSuchModel  # noqa: B018
