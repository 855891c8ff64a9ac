"""What feeds the GPU: the shapes, padding and host cost of the training batches, the compiled
Transformer step's graphs and the Bahdanau step's host reads, measured on the CPU.

Writes ``benchmarks/results/bench_feed.json`` (``--out``; with the run's provenance) and the
usual report with ``--json``:

- ``recipes.<name>``: each GPU recipe's batches (``recipes/vaswani_bible_en_es_base.yaml``,
  ``recipes/bahdanau_bible_en_es_rnnsearch.yaml``, ``recipes/bahdanau_bible_en_es_luong_base.yaml``,
  as shipped: the job their recipe builds)
  over the steps of one whole run (``training.max_steps``): ``distinct_shapes`` (batch shapes
  met), ``padding_source`` / ``padding_target`` (padded positions over all positions),
  ``target_tokens_per_step`` (mean, min, max) against ``token_budget``.
- ``host_ms_per_step_25k``: the engine's host time a step (``hfattn.training.engine.train``:
  batch gather, token count, optimizer and schedule steps, logging), median over
  ``--host-steps`` steps after warm-up, with a one-parameter stand-in model on the
  Transformer recipe's batches (25k target tokens). The same loop on the same rows padded from
  lists (:class:`hfattn.batching.seq2seq.PairBatches` with ``max_tokens`` giving the same
  tokens a step) is ``host_ms_per_step_25k_pad_pairs``, in the same process.
- ``graph_breaks`` / ``recompiles_second_epoch``: a small Transformer's loss step compiled as
  the engine compiles it (:func:`hfattn.training.compiling.compile_for_training`, inductor)
  over two epochs of the Bible batches in buckets (``--compile-budget`` target tokens a
  step, the buckets' dimensions marked dynamic as the engine marks them): TorchDynamo's graph
  breaks, and the graphs compiled in each epoch (one graph for all buckets, none in the
  second).
- ``bahdanau_host_reads_per_step``: device-to-host reads of one Bahdanau and one Luong
  training step on the CUDA code path (``benchmarks/lib/host_reads.py``).

Usage::

    .venv/bin/python -m benchmarks.bench_feed [--out benchmarks/results/bench_feed.json]
        [--host-steps 200] [--compile-budget 1024] [--skip-compile] [--json PATH]

Without the Bible (``make sword``) it writes ``not_run``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.lib.benchlib import (
    BenchReport,
    add_json_argument,
    load_average,
    report_not_run,
    write_atomically,
)
from benchmarks.lib.host_reads import bahdanau_host_reads_per_step
from hfattn.common.machine import provenance

ROOT = Path(__file__).resolve().parents[1]
GPU_RECIPES = (
    "vaswani_bible_en_es_base",
    "bahdanau_bible_en_es_rnnsearch",
    "bahdanau_bible_en_es_luong_base",
)
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "bench_feed.json"


def recipe_job(name: str, **overrides):
    """The recipe ``recipes/<name>.yaml`` (with ``--set``-style ``overrides``) and its job."""
    from hfattn.orchestration.run import build_job
    from hfattn.recipes import load_recipe

    sets = [f"{key}={value}" for key, value in overrides.items()]
    recipe = load_recipe(ROOT / "recipes" / f"{name}.yaml", overrides=sets)
    return recipe, build_job(recipe)


def run_batches(batches, steps: int):
    """The first ``steps`` batches of a run, epoch after epoch."""
    epoch, done = 0, 0
    while done < steps:
        for batch in batches.epoch(epoch):
            yield batch
            done += 1
            if done == steps:
                return
        epoch += 1


def batch_statistics(batches, steps: int, budget: int | None) -> dict:
    """Shapes, padding and target tokens of the first ``steps`` batches of ``batches``."""
    shapes, tokens = set(), []
    padded = {"source": [0, 0], "target": [0, 0]}
    for batch in run_batches(batches, steps):
        ids, labels = batch["input_ids"], batch["labels"]
        shapes.add((*ids.shape, labels.shape[1]))
        real = int((labels != -100).sum())
        tokens.append(real)
        padded["source"][0] += ids.numel() - int(batch["attention_mask"].sum())
        padded["source"][1] += ids.numel()
        padded["target"][0] += labels.numel() - real
        padded["target"][1] += labels.numel()
    mean = statistics.fmean(tokens)
    return {
        "steps": len(tokens),
        "token_budget": budget,
        "distinct_shapes": len(shapes),
        "shapes": sorted(shapes),
        "padding_source": round(padded["source"][0] / padded["source"][1], 4),
        "padding_target": round(padded["target"][0] / padded["target"][1], 4),
        "target_tokens_per_step": round(mean, 1),
        "target_tokens_per_step_min": min(tokens),
        "target_tokens_per_step_max": max(tokens),
        "tokens_vs_budget": round(mean / budget - 1, 4) if budget else None,
    }


def stand_in_model():
    """A one-parameter seq2seq stand-in: its step costs the device nothing, so a step's time is
    the engine's host work."""
    from transformers import PretrainedConfig, PreTrainedModel
    from transformers.modeling_outputs import Seq2SeqLMOutput

    class StandInConfig(PretrainedConfig):
        model_type = "feed-stand-in"

    class StandIn(PreTrainedModel):
        config_class = StandInConfig

        def __init__(self, config):
            super().__init__(config)
            self.weight = torch.nn.Parameter(torch.ones(()))

        def forward(self, input_ids=None, attention_mask=None, labels=None):
            return Seq2SeqLMOutput(loss=(self.weight - 0.5) ** 2)

    return StandIn(StandInConfig())


def host_ms_per_step(job, batches, steps: int) -> float:
    """The median host milliseconds a step of :func:`hfattn.training.engine.train` on
    ``batches`` with the stand-in model, over ``steps`` steps after 20 of warm-up."""
    from hfattn.tasks.base import model_loss
    from hfattn.tasks.translation.recipe import TranslationTrainingSection
    from hfattn.training.engine import train
    from hfattn.training.training_job import TrainingJob

    marks = []
    stand_in = TrainingJob(model=stand_in_model(), tokenizer=job.tokenizer, batches=batches,
                           compute_loss=model_loss, evaluate=lambda model, split: {"loss": 0.0},
                           eval_splits=())  # fmt: skip
    cfg = TranslationTrainingSection(max_steps=steps + 20, epochs=10_000, eval_every=None,
                                     save_every=None, log_every=50, compile=False,
                                     optimizer="adamw", schedule="linear")  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        train(
            stand_in,
            cfg,
            Path(folder) / "run",
            callbacks=[lambda p: marks.append(time.perf_counter())],
        )
    gaps = [b - a for a, b in zip(marks[20:], marks[21:], strict=False)]
    return round(1000 * statistics.median(gaps), 3)


def compiled_graphs(batches, vocab_size: int) -> dict:
    """Graph breaks and graphs compiled per epoch of a small Transformer's loss step compiled
    as the engine compiles it, over two epochs of ``batches``."""
    import torch._dynamo
    from torch._dynamo.utils import counters

    from hfattn.models import VaswaniConfig, VaswaniForConditionalGeneration
    from hfattn.training.compiling import compile_for_training, mark_dynamic_dims

    torch.manual_seed(0)
    config = VaswaniConfig(vocab_size=vocab_size, encoder_layers=1, decoder_layers=1, d_model=32,
                           num_heads=4, ffn_dim=64, pad_token_id=0, bos_token_id=1,
                           eos_token_id=2, decoder_start_token_id=1,
                           max_position_embeddings=128)  # fmt: skip
    model = VaswaniForConditionalGeneration(config).train()
    step = compile_for_training(model)
    torch._dynamo.reset()
    counters.clear()
    graphs, seconds = [], []
    for epoch in (0, 1):
        began = time.monotonic()
        for batch in batches.epoch(epoch):
            mark_dynamic_dims(batch)  # as the engine marks bucketed batches
            step(**batch).loss.backward()
        seconds.append(round(time.monotonic() - began, 1))
        graphs.append(counters["stats"]["unique_graphs"])
    return {
        "buckets": len(batches.shapes),
        "graphs_first_epoch": graphs[0],
        "recompiles_second_epoch": graphs[1] - graphs[0],
        "graph_breaks": sum(counters["graph_break"].values()),
        "epoch_seconds": seconds,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--host-steps", type=int, default=200)
    parser.add_argument("--compile-budget", type=int, default=1024)
    parser.add_argument("--skip-compile", action="store_true")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    load = load_average()

    from hfattn.data.bible import BibleNotInstalledError

    try:
        jobs = {name: recipe_job(name) for name in GPU_RECIPES}
    except BibleNotInstalledError as error:
        return report_not_run("feed", f"the Bible is not installed ({error}; `make sword`)",
                              args.json)  # fmt: skip
    results = {"recipes": {}}
    report = BenchReport("feed")
    for name, (recipe, job) in jobs.items():
        stats = batch_statistics(job.batches, recipe.training.max_steps,
                                 recipe.training.token_budget)  # fmt: skip
        results["recipes"][name] = stats
        report.add(f"{name}: distinct batch shapes", stats["distinct_shapes"], "", 8, "<=")
        for side in ("source", "target"):
            report.add(f"{name}: {side} padding", stats[f"padding_{side}"], "", 0.15, "<=")
        report.add(f"{name}: |target tokens a step / budget - 1|",
                   abs(stats["tokens_vs_budget"] or 1.0), "", 0.10, "<=")  # fmt: skip

    recipe, job = jobs["vaswani_bible_en_es_base"]
    budget = recipe.training.token_budget
    widest = recipe.data.max_source_length + recipe.data.max_target_length
    # the same rows padded from lists at each step, about the same target tokens a step
    _, listed = recipe_job(
        "vaswani_bible_en_es_base",
        **{
            "training.token_budget": "null",
            "training.batch_size": 100_000,
            "training.max_tokens": max(2 * budget, widest),
            "training.group_by_length": "target",
        },
    )
    results["host_ms_per_step_25k"] = host_ms_per_step(job, job.batches, args.host_steps)
    results["host_ms_per_step_25k_pad_pairs"] = host_ms_per_step(
        job, listed.batches, args.host_steps
    )
    report.add(
        "host ms a step at 25k target tokens (buckets)",
        results["host_ms_per_step_25k"],
        "ms",
        2.0,
        "<=",
        detail=f"lists padded each step: {results['host_ms_per_step_25k_pad_pairs']} ms",
    )

    if not args.skip_compile:
        _, small = recipe_job("vaswani_bible_en_es_base",
                              **{"training.token_budget": args.compile_budget})  # fmt: skip
        compiled = compiled_graphs(small.batches, len(job.tokenizer))
        results["compile"] = compiled
        results["graph_breaks"] = compiled["graph_breaks"]
        results["recompiles_second_epoch"] = compiled["recompiles_second_epoch"]
        report.add("compiled Transformer step: graph breaks", compiled["graph_breaks"], "", 0, "<=")
        report.add("compiled Transformer step: graphs new in epoch 2",
                   compiled["recompiles_second_epoch"], "", 0, "<=")  # fmt: skip

    reads = bahdanau_host_reads_per_step()
    results["bahdanau_host_reads"] = reads
    results["bahdanau_host_reads_per_step"] = max(reads.values())
    report.add("Bahdanau/Luong step host reads (CUDA path)",
               results["bahdanau_host_reads_per_step"], "", 0, "<=")  # fmt: skip

    results["load_average_before"] = load
    results["provenance"] = provenance(None)
    write_atomically(args.out, json.dumps(results, indent=2) + "\n")
    print(json.dumps({k: v for k, v in results.items() if k != "provenance"}, indent=2))
    report.write(args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
