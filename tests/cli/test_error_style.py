"""One error style across the commands (issue 49, item 7): a missing model folder is
``error: model folder not found: NAME`` for ``evaluate`` and ``push`` too, ``push`` names a bad
folder before a missing token, and a value of the wrong type reads the same way in every
section, the model's fields included, before torch is imported."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from hfattn.cli import main
from hfattn.common.field_checks import describe_type
from hfattn.common.models_source import config_field_types
from hfattn.recipes import RecipeError, load_recipe, recipe_outline
from tests.helpers.recipe_helpers import write_recipe

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_token(monkeypatch):
    """No Hub token: neither ``$HF_TOKEN`` nor a saved login."""
    import huggingface_hub

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)


def test_evaluate_names_a_missing_folder_as_the_quickstart_says(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["evaluate", "runs/nope"]) == 2
    assert capsys.readouterr().err == "error: model folder not found: runs/nope\n"
    (tmp_path / "runs" / "nope2").mkdir(parents=True)
    assert main(["evaluate", "runs/nope"]) == 2
    err = capsys.readouterr().err
    assert err == "error: model folder not found: runs/nope; did you mean runs/nope2?\n"
    assert main(["evaluate", "runs/nope2"]) == 2  # a folder without a model: what it lacks
    assert capsys.readouterr().err == "error: runs/nope2 holds no model: config.json is missing\n"


def test_push_names_the_folder_before_the_token(tmp_path, monkeypatch, capsys, no_token):
    monkeypatch.chdir(tmp_path)
    assert main(["push", "runs/nope", "--repo-id", "me/x"]) == 2
    assert capsys.readouterr().err == "error: model folder not found: runs/nope\n"
    (tmp_path / "empty").mkdir()
    assert main(["push", "empty", "--repo-id", "me/x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: empty is not a model folder: config.json missing")
    assert "token" not in err


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("model.hidden_size=big", "model.hidden_size: 'big' is not an integer"),
        ("model.dropout=x", "model.dropout: 'x' is not a number"),
        ("model.use_cache=maybe", "model.use_cache: 'maybe' is not true or false"),
        ("model.pad_token_id=x", "model.pad_token_id: 'x' is not an integer or null"),
        ("training.max_steps=twenty", "training.max_steps: 'twenty' is not an integer or null"),
        ("training.learning_rate=abc", "training.learning_rate: 'abc' is not a number"),
        ("training.batch_size=1.5", "training.batch_size: 1.5 is not an integer"),
        ("training.batch_size=null", "training.batch_size: null is not an integer"),
        ("training.betas=[a,0.9]", "training.betas[0]: 'a' is not a number"),
        ("training.mixed_precision=[1]", "training.mixed_precision: [1] is not a string"),
    ],
)
def test_type_errors_read_one_way(tmp_path, override, message):
    recipe = write_recipe(tmp_path)
    for read in (recipe_outline, load_recipe):  # the early checks and the full load agree
        with pytest.raises(RecipeError) as err:
            read(recipe, [override])
        assert str(err.value) == message


def test_a_model_field_of_the_wrong_type_is_refused_before_torch_is_imported(tmp_path):
    recipe = ROOT / "recipes" / "char_rnn_shakespeare.yaml"
    code = (
        "import sys; from hfattn.cli import main; "
        f"rc = main(['train', {str(recipe)!r}, '--set', 'model.hidden_size=big', "
        f"'--set', 'output_dir={tmp_path / 'run'}']); "
        "print(rc, 'torch' in sys.modules, 'transformers' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.stdout.split() == ["2", "False", "False"], done.stderr
    assert done.stderr == "error: model.hidden_size: 'big' is not an integer\n"
    assert not (tmp_path / "run").exists()


def test_a_pretrained_model_section_is_checked_before_torch_is_imported(tmp_path):
    recipe = ROOT / "recipes" / "minilm_genre.yaml"
    code = (
        "import sys, hfattn.tasks; from hfattn.recipes import RecipeError, recipe_outline\n"
        "try:\n"
        f"    recipe_outline({str(recipe)!r}, ['model.hidden_size=big'])\n"
        "except RecipeError as err:\n"
        "    print(err)\n"
        "print('torch' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.splitlines() == [
        "model.hidden_size: does not apply to a pretrained model (allowed: pretrained, revision)",
        "False",
    ], done.stderr


@pytest.mark.parametrize("model_type", ["char-rnn", "bahdanau", "vaswani", "rnn-classifier"])
def test_the_early_field_types_are_those_of_the_config_class(model_type):
    """What the early check reads from the source is what the config class declares."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    import hfattn.models  # noqa: F401  (registers the model types)
    from hfattn.recipes.model_section import _field_type

    config_cls = CONFIG_MAPPING[model_type]
    declared = {f.name: f for f in dataclasses.fields(config_cls)}
    early = config_field_types(model_type)
    assert {"vocab_size", "pad_token_id"} <= set(early)
    own = {name for name in vars(config_cls).get("__annotations__", {}) if name in declared}
    assert set(early) == own  # every field the class declares, none of its base's
    for name, hint in early.items():
        assert hint == _field_type(config_cls, declared[name]), name
        assert describe_type(hint) is not None, name
