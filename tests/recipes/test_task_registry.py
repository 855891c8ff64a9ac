"""Tasks register their recipes with :mod:`hfattn.recipes.registry` themselves: parsing a recipe
imports no task module, and a recipe names only a registered task."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from hfattn.recipes import RecipeError, register_task_recipe, task_names, task_recipe
from hfattn.tasks import TASK_NAMES, get_task

PACKAGE = Path(__file__).resolve().parents[2] / "hfattn"


def test_every_task_registers_its_recipe_class_metrics_and_source_check():
    assert task_names() == TASK_NAMES == ("causal-lm", "classification", "translation")
    for name in TASK_NAMES:
        registered = task_recipe(name)
        task = get_task(name)
        assert registered.name == task.name == name
        assert registered.recipe_class is task.recipe_class
        assert registered.reported_metrics and all(
            isinstance(m, str) for m in registered.reported_metrics
        )
    with pytest.raises(ValueError, match=r"data\.source"):
        task_recipe("translation").check_data_source("no-such-corpus")


def test_an_unknown_task_names_the_registered_ones():
    with pytest.raises(
        RecipeError,
        match="^task: 'summarize' is not one of causal-lm, classification, translation$",
    ):
        task_recipe("summarize")
    with pytest.raises(ValueError, match="already registered by TranslationRecipe"):
        register_task_recipe("translation", dict, (), print)


def test_parsing_without_the_tasks_says_how_to_register_them():
    code = (
        "from hfattn.recipes import RecipeError, load_recipe\n"
        "try:\n"
        "    load_recipe('recipes/vaswani_dates_en_es.yaml')\n"
        "except RecipeError as err:\n"
        "    print(err)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE.parent
    )
    assert "`import hfattn.tasks` registers" in out.stdout, out.stderr


def test_no_module_below_the_tasks_imports_them_by_name():
    """No string import (``importlib.import_module("hfattn.tasks...")``) in the recipe layer or
    below: lint-imports cannot see those."""
    below = [
        "recipes",
        "training",
        "evaluation",
        "tokenization",
        "data",
        "models",
        "storage",
        "common",
    ]
    for folder in below:
        for path in (PACKAGE / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                func = getattr(node, "func", None)
                if isinstance(node, ast.Call) and getattr(func, "attr", "") == "import_module":
                    named = " ".join(ast.unparse(arg) for arg in node.args)
                    assert "tasks" not in named and "PACKAGES" not in named, f"{path}: {named}"
