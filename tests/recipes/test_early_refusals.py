"""``hfattn train`` refuses a misspelt ``model:`` field and an invalid ``model:`` value before
torch is imported (before any module that costs from 0.1 s to seconds: what keeps a refusal
instant), and the torch-free lists it checks them against (``hfattn/models/config_fields.py``)
are those of the config classes. Each CLI check runs in a fresh interpreter: this test process
has imported torch."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_cli_startup import HEAVY

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "char_rnn_shakespeare.yaml"

_TRAIN = """
import json, sys
from hfattn.cli import main
heavy = json.loads(sys.argv[1])
code = main(["train", *sys.argv[2:]])
print(json.dumps({"code": code, "heavy": [name for name in heavy if name in sys.modules]}))
"""


def train(*args: str) -> tuple[dict, str]:
    """``hfattn train ARGS`` in a fresh interpreter: its exit code and the modules of
    :data:`HEAVY` it imported before returning; and its stderr."""
    result = subprocess.run(
        [sys.executable, "-c", _TRAIN, json.dumps(HEAVY), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    return json.loads(result.stdout.strip().splitlines()[-1]), result.stderr


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "model.hiden_size=5",
            "model.hiden_size: is not a field of CharRNNConfig; did you mean 'hidden_size'?",
        ),  # noqa: E501
        ("model.hidden_size=-3", "model.hidden_size must be a positive integer, got -3"),
        ("model.dropout=1.5", "model.dropout must be in [0, 1), got 1.5"),
        (
            "model.cell=grux",
            "model.cell must be one of gru, lstm, rnn; got 'grux'; did you mean 'gru'?",
        ),
    ],
)
def test_bad_model_field_is_refused_before_torch(tmp_path, override, message):
    out, err = train(str(RECIPE), "--set", override, "--set", f"output_dir={tmp_path / 'run'}")
    assert out["code"] == 2
    assert err.strip().splitlines()[-1] == f"error: {message}"
    assert out["heavy"] == []


def test_a_folder_holding_a_run_is_refused_before_torch(tmp_path):
    """A second ``hfattn train`` into a folder that holds a run: refused before torch or any
    other heavy module is imported; with a bad training value as well, the value is reported
    first."""
    (tmp_path / "run" / "checkpoints" / "step-5").mkdir(parents=True)
    out, err = train(str(RECIPE), "--set", f"output_dir={tmp_path / 'run'}")
    assert out["code"] == 2 and out["heavy"] == []
    assert err.strip().splitlines()[-1].startswith(f"error: output_dir {tmp_path / 'run'} already")
    out, err = train(
        str(RECIPE), "--set", f"output_dir={tmp_path / 'run'}", "--set", "training.optimizer=adamm"
    )
    assert out["code"] == 2 and out["heavy"] == []
    assert err.strip().splitlines()[-1] == (
        "error: training.optimizer: 'adamm' is not one of adamw, nadam, rmsprop, radam, sgd, muon"
    )


def test_optimizer_names_are_the_optimizers_built():
    """The torch-free names the recipe checks accept are the optimizers training builds."""
    from hfattn.training.optim import OPTIMIZERS
    from hfattn.training.optimizer_names import OPTIMIZER_NAMES

    assert tuple(OPTIMIZERS) == OPTIMIZER_NAMES
    assert (
        OPTIMIZERS["rmsprop"].__name__ == "RMSprop" and OPTIMIZERS["muon"].__name__ == "MuonAdamW"
    )


def test_config_field_lists_are_the_config_classes():
    """Every list of ``config_fields.py`` (read without executing it) matches its class: the
    fields, and each rule refused by the class itself."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    import hfattn.models  # noqa: F401  (registers the model types)
    from hfattn.common.models_source import models_literal

    classes = models_literal("config_fields", "CONFIG_CLASSES")
    fields = models_literal("config_fields", "CONFIG_FIELDS")
    positive = models_literal("config_fields", "POSITIVE_INT_FIELDS")
    unit = models_literal("config_fields", "UNIT_INTERVAL_FIELDS")
    choices = models_literal("config_fields", "CHOICES")
    for model_type, name in classes.items():
        config_cls = CONFIG_MAPPING[model_type]
        assert config_cls.__name__ == name
        every_field = (
            models_literal("config_fields", "PRETRAINED_CONFIG_FIELDS") + fields[model_type]
        )
        assert every_field == tuple(f.name for f in dataclasses.fields(config_cls))
        for field in positive[model_type]:
            with pytest.raises(ValueError, match=field):
                config_cls(**{field: -3})
        for field in unit[model_type]:
            with pytest.raises(ValueError, match=field):
                config_cls(**{field: 1.0})
        for field, allowed in choices[model_type].items():
            for value in allowed:
                config_cls(**{field: value})
            with pytest.raises(ValueError, match=field):
                config_cls(**{field: "no-such-choice"})


def test_recipe_yaml_parsed_once(monkeypatch):
    """The outline, the full load and the planned steps of one ``hfattn train --set`` read
    one parse of the recipe file."""
    import yaml

    from hfattn.recipes import load_recipe, recipe_outline

    calls = []
    safe_load = yaml.safe_load
    monkeypatch.setattr(yaml, "safe_load", lambda text: calls.append(1) or safe_load(text))
    overrides = ["training.max_steps=3"]
    recipe_outline(RECIPE, overrides)
    load_recipe(RECIPE, overrides)
    recipe_outline(RECIPE)
    assert len(calls) <= 1
