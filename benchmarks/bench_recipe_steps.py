"""Training-step speed of recipe variants, interleaved in one process.

A 30-minute run's step count depends on how fast the shared host runs during those 30
minutes, which drifts (the same Luong recipe has run 0.47 s and 0.68 s a step on one CPU on
one day). Comparing two variants' steps across two runs therefore mixes the variant with the
host. This script builds each variant's real training job (its tokenizer, batches and model,
as ``hfattn train`` does), then times optimizer steps of the variants in turn, round after
round, so that every variant sees the same host. It reports, per variant, the median seconds
a step and the rows (sentences, or windows) and trained tokens a second.

A step is what the training loop does: forward, loss, backward, gradient clipping at
``training.max_grad_norm``, the recipe's optimizer (``training_optimizer``, as the engine builds
it: Muon's iteration in bf16 when the variant trains in bf16); the forward and loss under
bf16 autocast when the variant's ``training.mixed_precision`` resolves to ``bf16`` on this
CPU (as Accelerate's autocast in ``hfattn train``). Batches come from epoch 0 in
the training order, so every variant trains on the same sentences (its own tokenization of
them) when the variants share their data and batch size. The steps run with freed memory
kept for reuse when the variants' ``training.reuse_freed_memory`` says so; since that sets the
whole process's allocator, variants that differ in it are refused (time each in its own
process, side by side, one core each).

Usage::

    .venv/bin/python -m benchmarks.bench_recipe_steps [RECIPE] [--variant NAME=OVERRIDES ...]
        [--rounds 40 | --quick] [--warmup 5] [--json PATH]

A variant is ``NAME=OVERRIDE[,OVERRIDE...]`` (``hfattn train --set`` syntax; empty: the
recipe as it is). Without arguments: the Luong Bible recipe, against a joint BPE of 8,000
pieces and a vocabulary of 4,000. Each variant's verses (rows) a second relative to the first
variant's are findings, not targets.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from benchmarks.lib.benchlib import BenchReport, add_json_argument
from hfattn.orchestration.run import build_job
from hfattn.recipes import load_recipe
from hfattn.training.engine import trained_tokens
from hfattn.training.host_memory import freed_memory_kept
from hfattn.training.optim import training_optimizer
from hfattn.training.precision import resolve_mixed_precision

DEFAULT_RECIPE = str(Path(__file__).resolve().parents[1] / "recipes" / "bahdanau_bible_en_es.yaml")
DEFAULT_VARIANTS = (
    "the recipe=",
    "BPE 8000=tokenizer.type=bpe",
    "4,000 pieces=tokenizer.vocab_size=4000",
)


@dataclass
class Variant:
    """One variant's job, optimizer, batch stream and timings."""

    name: str
    job: object
    optimizer: torch.optim.Optimizer
    max_grad_norm: float | None
    batches: object
    reuse_freed_memory: bool = False
    autocast: bool = False
    seconds: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    state: object = None

    def step(self) -> None:
        """One timed optimizer step on the next batch of epoch 0."""
        batch = next(self.batches)
        model = self.job.model
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.autocast):
            loss, self.state, *_ = self.job.compute_loss(
                model, batch, self.state, self.job.batches.stateful
            )
        loss.backward()
        if self.max_grad_norm:
            torch.nn.utils.clip_grad_norm_(model.parameters(), self.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.seconds.append(time.perf_counter() - start)
        self.tokens.append(trained_tokens(batch))
        rows = batch["input_ids"] if isinstance(batch, dict) else batch
        self.rows.append(int(rows.shape[0]))


def build_variant(recipe_path: str, spec: str) -> Variant:
    """The variant ``NAME=OVERRIDES`` of the recipe at ``recipe_path``."""
    name, _, overrides = spec.partition("=")
    recipe = load_recipe(recipe_path, [o for o in overrides.split(",") if o])
    job = build_job(recipe)
    job.model.train()
    training = recipe.training
    precision = resolve_mixed_precision(training.mixed_precision, torch.device("cpu"))
    optimizer = training_optimizer(training, job.model, mixed_precision=precision)
    return Variant(
        name,
        job,
        optimizer,
        training.max_grad_norm,
        iter(job.batches.epoch(0)),
        training.reuse_freed_memory,
        precision == "bf16",
    )


def time_steps(variants: list[Variant], rounds: int, warmup: int) -> None:
    """``warmup`` untimed steps of each variant, then ``rounds`` rounds of one timed step of
    each in turn."""
    for variant in variants:
        for _ in range(warmup):
            variant.step()
        variant.seconds.clear(), variant.tokens.clear(), variant.rows.clear()
    for _ in range(rounds):
        for variant in variants:
            variant.step()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recipe", nargs="?", default=DEFAULT_RECIPE)
    parser.add_argument("--variant", action="append", help="NAME=OVERRIDES (repeatable)")
    parser.add_argument("--rounds", type=int, default=40, help="timed steps of each variant")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps of each first")
    parser.add_argument("--quick", action="store_true", help="10 rounds after 2 warm-up steps")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    rounds, warmup = (10, 2) if args.quick else (args.rounds, args.warmup)
    variants = [build_variant(args.recipe, spec) for spec in args.variant or DEFAULT_VARIANTS]
    reuse = {v.reuse_freed_memory for v in variants}
    if len(reuse) > 1:
        parser.error(
            "training.reuse_freed_memory differs between the variants, and it sets the whole "
            "process's allocator: time each setting in its own process, side by side"
        )
    with freed_memory_kept(reuse.pop()):
        time_steps(variants, rounds, warmup)
    report = BenchReport("recipe_steps")
    report.markdown += [
        f"{Path(args.recipe).name}, torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"{rounds} interleaved rounds",
        "",
        "| variant | s/step (median) | rows/s | trained tokens/s | tokens/row |",
        "|---|---:|---:|---:|---:|",
    ]
    base_rate = None
    for v in variants:
        total = sum(v.seconds)
        rate = sum(v.rows) / total
        base_rate = base_rate or rate
        report.markdown.append(
            f"| {v.name} | {statistics.median(v.seconds):.3f} | {rate:.1f} "
            f"| {sum(v.tokens) / total:.0f} | {sum(v.tokens) / sum(v.rows):.1f} |"
        )
        report.add(f"rows/s relative to {variants[0].name}: {v.name}", rate / base_rate, "x")
    print("\n".join(report.markdown))
    report.write(args.json)


if __name__ == "__main__":
    main()
