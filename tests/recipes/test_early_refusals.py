"""``hfattn train`` refuses a misspelt ``model:`` field and a value outside the rule of its
config field before torch is imported (before any module that costs from 0.1 s to seconds:
what keeps a refusal instant): the rules are those declared on the config classes' fields
(``dropout: float | int = rate(0.1)``), read from their source. Each CLI check runs in a fresh
interpreter: this test process has imported torch."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.heavy_imports import HEAVY

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


VASWANI = ROOT / "recipes" / "vaswani_dates_en_es.yaml"


@pytest.mark.parametrize(
    ("recipe", "override", "message"),
    [
        (
            RECIPE,
            "model.hiden_size=5",
            "model.hiden_size: is not a field of CharRNNConfig; did you mean 'hidden_size'?",
        ),
        (RECIPE, "model.hidden_size=-3", "model.hidden_size must be a positive integer, got -3"),
        (RECIPE, "model.dropout=1.5", "model.dropout must be in [0, 1), got 1.5"),
        (
            RECIPE,
            "model.neural_cache_size=-1",
            "model.neural_cache_size must be an integer >= 0, got -1",
        ),
        (
            RECIPE,
            "model.neural_cache_theta=0",
            "model.neural_cache_theta must be a number > 0, got 0",
        ),
        (
            RECIPE,
            "model.cell=grux",
            "model.cell must be one of gru, lstm, rnn; got 'grux'; did you mean 'gru'?",
        ),
        (
            VASWANI,
            "model.embedding_dropout=1.5",
            "model.embedding_dropout must be in [0, 1), got 1.5",
        ),
    ],
    ids=lambda v: v.stem if isinstance(v, Path) else None,
)
def test_bad_model_field_is_refused_before_torch(tmp_path, recipe, override, message):
    out, err = train(str(recipe), "--set", override, "--set", f"output_dir={tmp_path / 'run'}")
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


def _config_classes() -> dict:
    """``model_type`` → hfattn's config class, for each of its model families."""
    from hfattn.common.families import FAMILIES
    from hfattn.models import AUTO_CLASSES

    classes = {config.model_type: config for config, _, _ in AUTO_CLASSES}
    assert set(classes) == set(FAMILIES)
    return classes


def _breaking_value(rule):
    """A value of the right type that ``rule`` refuses."""
    from hfattn.models.config_checks import NonNegativeInt, PositiveInt, PositiveNumber, Rate

    breaking = {PositiveInt: 0, NonNegativeInt: -1, PositiveNumber: 0.0, Rate: 1.5}
    return breaking.get(type(rule), "no-such-choice")


def _harmless_value(hint):
    """A value of type ``hint`` that every field rule would refuse (none applies to a field
    declared without one)."""
    for kind, value in ((bool, True), (int, -3), (float, 1.5), (str, "no-such-choice")):
        if hint is kind or kind in getattr(hint, "__args__", ()):
            return value
    return None


@pytest.mark.parametrize("model_type", ["char-rnn", "bahdanau", "vaswani", "rnn-classifier"])
def test_every_config_field_rule_is_an_early_refusal_and_no_other(model_type):
    """Each rule declared on a config class's fields is the early check's (read from the
    source without torch): a value that breaks it is refused by both, in the same words; and a
    field declared without a rule gets no early refusal."""
    from hfattn.common.models_source import (
        config_field_rules,
        config_field_types,
        config_fields,
        pretrained_config_fields,
    )
    from hfattn.models.config_checks import field_rules
    from hfattn.recipes import RecipeError
    from hfattn.recipes.model_section import check_model_fields, validate_model_section

    config_cls = _config_classes()[model_type]
    every_field = tuple(f.name for f in dataclasses.fields(config_cls))
    assert (*pretrained_config_fields(), *config_fields(model_type)) == every_field
    declared = field_rules(config_cls)
    early = config_field_rules(model_type)
    assert declared and set(early) == set(declared)
    for name, rule in declared.items():
        assert type(early[name]).__name__ == type(rule).__name__
        assert getattr(early[name], "allowed", None) == getattr(rule, "allowed", None)
        for value in getattr(rule, "allowed", ()):
            config_cls(**{name: value})  # every choice builds
        with pytest.raises(ValueError, match=f"^{name} must be "):
            config_cls(**{name: _breaking_value(rule)})
        bad = {"type": model_type, name: _breaking_value(rule)}
        with pytest.raises(RecipeError) as early_error:
            check_model_fields(bad)
        with pytest.raises(RecipeError) as config_error:
            validate_model_section(bad)  # vocab_size: the tokenizer's, refused as such by both
        assert str(early_error.value).startswith(str(config_error.value))
        assert str(config_error.value).startswith(f"model.{name}")
    types = config_field_types(model_type)
    for name in set(config_fields(model_type)) - set(declared) - {"vocab_size"}:
        value = _harmless_value(types.get(name))
        if value is not None:
            check_model_fields({"type": model_type, name: value})


def test_torch_free_choices_are_what_the_models_build():
    """The choices declared without torch name what the modeling code builds: the attention
    distributions, the positional encodings and the FFN activations."""
    from transformers.activations import ACT2FN

    from hfattn.models.configuration_vaswani import ACTIVATIONS, POSITION_EMBEDDINGS
    from hfattn.models.distributions import DISTRIBUTIONS
    from hfattn.models.positional import POSITIONAL_ENCODINGS
    from hfattn.models.score_names import DISTRIBUTION_NAMES

    assert DISTRIBUTION_NAMES == tuple(DISTRIBUTIONS)
    assert POSITION_EMBEDDINGS == tuple(POSITIONAL_ENCODINGS)
    assert set(ACTIVATIONS) <= set(ACT2FN)


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


class _Checked(Exception):
    """Raised by the stand-in for the task registry: ``run_recipe`` got past its checks."""


def test_run_recipe_takes_a_loaded_recipe_and_checks_only_what_it_was_not_checked_for(
    tmp_path, monkeypatch
):
    """``load_recipe(run=Run(...))`` checks the run folder for that run, and ``run_recipe``
    trusts it (``recipe.checks``); a recipe loaded without ``run`` is checked for the run
    ``run_recipe`` is asked for; a recipe ``load_recipe`` did not return is refused."""
    from hfattn.orchestration import run as orchestration
    from hfattn.recipes import RecipeChecks, Run, default_recipe, load_recipe

    folder_checks = []
    real = orchestration.check_run_folder
    monkeypatch.setattr(
        orchestration,
        "check_run_folder",
        lambda recipe, **kw: folder_checks.append(kw) or real(recipe, **kw),
    )
    monkeypatch.setattr(orchestration, "get_task", lambda task: (_ for _ in ()).throw(_Checked))
    overrides = [f"output_dir={tmp_path / 'run'}"]
    with pytest.raises(TypeError, match="load_recipe"):
        orchestration.run_recipe(default_recipe())

    loaded = load_recipe(RECIPE, overrides, run=Run())
    assert loaded.checks == RecipeChecks(Run()) and loaded.model_config.hidden_size > 0
    with pytest.raises(_Checked):
        orchestration.run_recipe(loaded)
    assert folder_checks == []
    with pytest.raises(_Checked):
        orchestration.run_recipe(load_recipe(RECIPE, overrides))  # read only: checked here
    assert folder_checks == [{"resume": False, "overwrite": False}]

    (tmp_path / "run" / "checkpoints" / "step-5").mkdir(parents=True)
    with pytest.raises(FileExistsError, match="already holds a run"):
        load_recipe(RECIPE, overrides, run=Run())
    assert load_recipe(RECIPE, overrides).checks == RecipeChecks(None)  # to evaluate: no run
    with pytest.raises(FileExistsError, match="already holds a run"):
        orchestration.run_recipe(load_recipe(RECIPE, overrides))
    assert load_recipe(RECIPE, overrides, run=Run(overwrite=True)).checks.covers(
        resume=False, overwrite=True
    )


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("max_steps=3", "max_steps: not a field of a recipe; did you mean training.max_steps?"),
        ("seed=3", "seed: not a field of a recipe; did you mean training.seed or "
                   "generation.seed?"),
    ],
)  # fmt: skip
def test_a_section_field_set_at_the_top_names_its_section(tmp_path, override, message):
    out, err = train(str(RECIPE), "--set", override, "--set", f"output_dir={tmp_path / 'run'}")
    assert out["code"] == 2 and out["heavy"] == []
    assert err.strip().splitlines() == [f"error: {message}"]
