"""``bench_vaswani.py --recipe``: the recipe's own step, eager and compiled as
``training.compile: true`` compiles it (one graph for every bucket), timed on the same
batches in the recipe's order."""

import functools
from argparse import Namespace

import pytest
import torch

from benchmarks import bench_vaswani

TINY = ["data.size=800", "model.d_model=32", "model.ffn_dim=64", "model.num_heads=4",
        "training.token_budget=600", "training.length_buckets=3"]  # fmt: skip


def args(**extra) -> Namespace:
    return Namespace(recipe="recipes/vaswani_dates_en_es.yaml", set=TINY, device="cpu",
                     steps=4, profile=None, **extra)  # fmt: skip


def test_the_recipe_step_compiles_one_graph_for_its_buckets(monkeypatch):
    """``aot_eager`` stands in for inductor: the graphs are TorchDynamo's either way."""
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="aot_eager"))
    result = bench_vaswani.measure_recipe(args())
    assert result["recipe"] == "vaswani_dates_en_es" and result["rounds"] == 4
    assert len(result["bucket_shapes"]) == 3 and result["compiles"] == 1
    assert result["compile_s"] > 0 and result["optimizer"] == "adamw"
    assert result["mixed_precision"] == "no"  # the recipe sets none: fp32
    assert result["target_tokens"] > 0 and result["flops"] > 0
    for name in ("eager", "compiled"):
        assert result[name]["tokens_per_s"] == pytest.approx(
            result["target_tokens"] / result[name]["seconds"]
        )
        assert result[name]["mfu"] is None  # no peak on a CPU
    assert result["compiled_over_eager"] == pytest.approx(
        result["eager"]["seconds"] / result["compiled"]["seconds"]
    )


def test_a_recipe_without_a_token_budget_is_refused():
    with pytest.raises(SystemExit, match="no training.token_budget"):
        bench_vaswani.measure_recipe(Namespace(**{**vars(args()), "set": ["data.size=800"]}))
