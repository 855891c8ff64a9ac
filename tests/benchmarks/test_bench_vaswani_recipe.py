"""``bench_vaswani.py --recipe``: the recipe's own step, eager and compiled as each
``training.compile`` setting compiles it (``true``: one graph for every bucket; ``regional``:
each layer stack once), timed on the same batches in the recipe's order."""

import functools
from argparse import Namespace

import pytest
import torch

from benchmarks.lib import vaswani_recipe_step

TINY = [
    "data.size=800",
    "model.d_model=32",
    "model.ffn_dim=64",
    "model.num_heads=4",
    "training.token_budget=600",
    "training.length_buckets=3",
    "training.batch_size=32",
]  # fmt: skip  (the default: a token budget cuts the batches)


def args(**extra) -> Namespace:
    return Namespace(recipe="recipes/vaswani_dates_en_es.yaml", set=TINY, device="cpu",
                     steps=4, profile=None, compile=["regional", "true"], **extra)  # fmt: skip


@pytest.mark.slow
def test_the_recipe_step_compiles_each_setting_once_for_its_buckets(monkeypatch):
    """The ``eager`` backend stands in for inductor: the graphs are TorchDynamo's either
    way."""
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="eager"))
    seen = []
    result = vaswani_recipe_step.measure_recipe(args(), lambda r: seen.append(list(r["compiled"])))
    assert seen == [[], ["regional"], ["regional", "true"]]  # written after each part
    assert result["recipe"] == "vaswani_dates_en_es" and len(result["bucket_shapes"]) == 3
    assert result["optimizer"] == "adamw"
    assert result["mixed_precision"] == "no"  # the recipe sets none: fp32
    assert result["eager_alone"]["mfu"] is None  # no peak on a CPU
    whole, regional = result["compiled"]["true"], result["compiled"]["regional"]
    assert whole["compiles"] == 1 < regional["compiles"]  # the layers and the modules around
    for measured in (whole, regional):
        assert measured["rounds"] == 4 and measured["compile_s"] > 0
        assert measured["target_tokens"] > 0 and measured["flops"] > 0
        for name in ("eager", "compiled"):
            assert measured[name]["tokens_per_s"] == pytest.approx(
                measured["target_tokens"] / measured[name]["seconds"]
            )
        assert measured["compiled_over_eager"] == pytest.approx(
            measured["eager"]["seconds"] / measured["compiled"]["seconds"]
        )


def test_a_recipe_without_a_token_budget_is_refused():
    with pytest.raises(SystemExit, match="no training.token_budget"):
        vaswani_recipe_step.measure_recipe(Namespace(**{**vars(args()), "set": ["data.size=800"]}))
