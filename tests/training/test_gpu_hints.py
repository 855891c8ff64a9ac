"""A recipe sized for a GPU started on a CPU says so, once, before its first step (the rule:
:data:`hfattn.training.speed.GPU_STEP_FLOPS`); the preset-override warning prints once."""

import copy
import logging

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

from hfattn.cli import main
from hfattn.orchestration.run import run_recipe
from hfattn.recipes import load_recipe
from hfattn.training import speed
from hfattn.training.speed import GPU_STEP_FLOPS, warn_if_sized_for_gpu
from hfattn.training.throughput import FlopCounter, non_embedding_parameters
from tests.helpers.recipe_helpers import write_recipe

GPU_RECIPES = ("vaswani_bible_en_es_base", "bahdanau_bible_en_es_rnnsearch",
               "bahdanau_bible_en_es_luong_base")  # fmt: skip
"""The recipes whose header says they are made for a GPU."""
CPU_RECIPES = ("vaswani_bible_en_es", "bahdanau_bible_en_es", "char_rnn_shakespeare")
"""The largest recipes made for a 2-core CPU."""
ROW_TOKENS = 32
"""Tokens a row of a translation batch here (a Bible verse is about as long)."""


def _step_flops(name: str) -> float:
    """The training FLOPs of one optimizer step of ``recipes/<name>.yaml``, on its model built
    on the meta device (shapes only) and a batch of its size, rows of :data:`ROW_TOKENS`."""
    recipe = load_recipe(f"recipes/{name}.yaml")
    config = copy.deepcopy(recipe.model_config)
    config.vocab_size = getattr(recipe.tokenizer, "vocab_size", None) or 100  # chars: ~65
    training = recipe.training
    lm = recipe.task == "causal-lm"
    with torch.device("meta"):
        model = (AutoModelForCausalLM if lm else AutoModelForSeq2SeqLM).from_config(config)
        if lm:
            batch = torch.zeros(training.batch_size, training.seq_len + 1, dtype=torch.long)
        else:
            rows = (training.token_budget // ROW_TOKENS if training.token_budget
                    else training.batch_size)  # fmt: skip
            ids = torch.zeros(rows, ROW_TOKENS, dtype=torch.long)
            batch = {"input_ids": ids, "attention_mask": ids, "labels": ids}
    return FlopCounter(model)(batch) * training.gradient_accumulation_steps


def test_the_rule_tells_the_gpu_recipes_from_the_cpu_ones():
    gpu = {name: _step_flops(name) for name in GPU_RECIPES}
    cpu = {name: _step_flops(name) for name in CPU_RECIPES}
    # a decade or more either side: 1.7 to 7.3 TFLOP a step against 0.02 to 0.12
    assert min(gpu.values()) > 3 * GPU_STEP_FLOPS, gpu
    assert max(cpu.values()) < GPU_STEP_FLOPS / 4, cpu


def test_a_step_above_the_rule_warns_on_a_cpu_only(caplog):
    with caplog.at_level(logging.WARNING, logger="hfattn.training.speed"):
        assert warn_if_sized_for_gpu(8.63e12, torch.device("cpu"))
        assert not warn_if_sized_for_gpu(8.63e12, torch.device("cuda"))
        assert not warn_if_sized_for_gpu(GPU_STEP_FLOPS, "cpu")
    assert caplog.messages == [
        "this recipe's steps are sized for a GPU: each is 8.63 TFLOP of training arithmetic "
        "(above 0.5), which takes a CPU seconds to minutes a step; docs/training.md, 'Training "
        "on a GPU', says how to run it on one"
    ]


class _Events(logging.Handler):
    """The engine's log records, in one list with the steps of the run."""

    def __init__(self, events):
        super().__init__(logging.WARNING)
        self.events = events

    def emit(self, record):
        self.events.append(("warning", record.getMessage()))


@pytest.mark.parametrize("sized_for_gpu", [True, False])
def test_a_run_warns_once_before_its_first_step(tmp_path, monkeypatch, sized_for_gpu):
    if sized_for_gpu:  # the tiny recipe's steps count as a GPU's
        monkeypatch.setattr(speed, "GPU_STEP_FLOPS", 1.0)
    recipe = load_recipe(write_recipe(tmp_path, training={"max_steps": 6, "log_every": 3}))
    events = []
    handler = _Events(events)
    logging.getLogger("hfattn.training.speed").addHandler(handler)
    try:
        run_recipe(recipe, callbacks=[lambda p: events.append(("step", p.step))])
    finally:
        logging.getLogger("hfattn.training.speed").removeHandler(handler)
    warnings = [text for kind, text in events if kind == "warning" and "GPU" in text]
    steps = [value for kind, value in events if kind == "step"]
    assert steps == [1, 2, 3, 4, 5, 6]
    if not sized_for_gpu:
        assert warnings == []
        return
    assert len(warnings) == 1 and events[0] == ("warning", warnings[0])
    # 6 FLOPs per non-embedding parameter and target token (Kaplan et al.): 8 × 32 a step
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "run")
    flops = 6 * non_embedding_parameters(model) * 8 * 32
    assert f"each is {flops / 1e12:.3g} TFLOP of training arithmetic (above 1e-12)" in warnings[0]


def test_the_preset_override_warning_prints_once_per_train(tmp_path, caplog):
    model = {"type": "char-rnn", "preset": "karpathy", "embedding_dim": 8, "hidden_size": 32,
             "num_layers": 1, "cell": "gru"}  # fmt: skip
    recipe = write_recipe(tmp_path, model=model)
    with caplog.at_level(logging.WARNING, logger="hfattn"):
        assert main(["train", str(recipe), "--set", "training.max_steps=2"]) == 0
    warnings = [m for m in caplog.messages if m.startswith("model.preset 'karpathy'")]
    assert warnings == [
        "model.preset 'karpathy': the recipe overrides its cell, embedding_dim, hidden_size, "
        "num_layers"
    ]
