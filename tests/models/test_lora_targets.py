"""The LoRA target modules that docs/models/index.md names for each family are linear layers of
the models its recipes build, and peft wraps them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from torch import nn

import hfattn.tasks  # noqa: F401  (registers the tasks recipes name)
from hfattn.recipes import load_recipe

ROOT = Path(__file__).resolve().parents[2]
ROW = re.compile(r"^\| `[^|]*\(`(?P<recipe>[\w.]+\.yaml)`\) \| (?P<names>.+) \|$")


def _documented() -> list[tuple[str, list[str]]]:
    page = (ROOT / "docs/models/index.md").read_text()
    section = page.split("## LoRA target modules", 1)[1].split("\n## ", 1)[0]
    rows = [ROW.match(line) for line in section.splitlines()]
    return [(m["recipe"], re.findall(r"`(\w+)`", m["names"])) for m in rows if m]


def test_the_page_names_five_recipes():
    assert len(_documented()) == 5


@pytest.mark.parametrize(("recipe", "names"), _documented())
def test_each_named_module_is_a_linear_layer_peft_wraps(recipe, names):
    from peft import LoraConfig, get_peft_model

    config = load_recipe(ROOT / "recipes" / recipe).model_config
    config.vocab_size = 64
    linear = {n.rsplit(".", 1)[-1] for n, m in _task_model(config).named_modules()
              if isinstance(m, nn.Linear)}  # fmt: skip
    assert set(names) == linear, f"{recipe}: linear layers {sorted(linear)}"
    wrapped = get_peft_model(_task_model(config), LoraConfig(r=2, target_modules=names))
    assert wrapped.get_nb_trainable_parameters()[0] > 0


def _task_model(config):
    from transformers import (
        AutoModelForCausalLM,
        AutoModelForSeq2SeqLM,
        AutoModelForSequenceClassification,
    )

    for auto in (AutoModelForSeq2SeqLM, AutoModelForCausalLM, AutoModelForSequenceClassification):
        if type(config) in auto._model_mapping:
            return auto.from_config(config)
    raise AssertionError(f"no Auto class for {type(config).__name__}")
