"""Speed and memory of the Vaswani Transformer against transformers' ``MarianMTModel`` of the
same size, and of its KV cache against ``use_cache=False``.

    .venv/bin/python -m benchmarks.bench_vaswani [--device cpu|cuda] [--dtype fp32|bf16]
        [--out results.json] [--json PATH] [--quick]

The reference is ``transformers.MarianMTModel`` configured to the *same* network: the same
layers, d_model, heads, FFN size and vocabulary, post-LN, static sinusoidal positions, ReLU
(``activation_function="relu"``), embeddings × √d, one embedding matrix shared by encoder,
decoder and output layer, dropout 0.1 on the residuals and the embeddings (0 on attention
weights and inside the FFN, in both), ``attn_implementation="sdpa"`` in both. The Marian model
gets a copy of the hfattn weights (and of its sinusoidal table), and the script checks that the
two compute the same logits before timing anything: both sides do the same work. Everything
runs in one process; the two models alternate step by step (the order flips every step), the
first steps are discarded as warm-up, and each figure is a median, so that a load on the
machine (another training run) falls on both sides alike.

1. Training: target tokens/s of one step (forward, backward, AdamW step) on right-padded
   sources (lengths drawn in [S/2, S]) and full-length targets, at a small size (3+3 layers,
   d 256, 4 heads, FFN 1024, vocab 8000, batch 64 × 32 → 32) and at the paper's base size
   (6+6 layers, d 512, 8 heads, FFN 2048) at a smaller batch. Memory: the bytes of the
   tensors that autograd saves for the backward pass, counted once per storage and without the
   parameters (``torch.autograd.graph.saved_tensors_hooks``): a deterministic per-step
   activation-memory measure. On CUDA also the peak of ``torch.cuda.max_memory_allocated``
   during a step above the memory held before it (weights, gradients, optimizer state). The
   MFU: FLOPs / step time / peak, with the FLOPs and the peak of
   :mod:`hfattn.training.throughput` (what ``hfattn train`` reports): FLOPs = 6 × (encoder
   layer parameters × source tokens + decoder layer and output-layer parameters × target
   tokens, cross-attention key/value projections × source tokens) + 12 × B × h·d_k × (per layer
   S² (encoder), T² + T·S (decoder)), padded positions included and causal attention counted
   in full; the peak, the device's datasheet figure for the dtype (989 TFLOP/s for an H100 or
   H200 in bf16, dense), an 8192³ product measured on an unlisted CUDA device, and on a CPU
   the best rate of a square matrix product measured on the spot with the same threads
   (:func:`~benchmarks.lib.vaswani_training.matmul_peak`). ``--engine`` trains hfattn as ``hfattn train`` does on the device:
   ``torch.compile`` (on CUDA, as ``training.compile: auto``) and AdamW fused on CUDA
   (:func:`hfattn.training.optim.adamw_kernel`); Marian always trains as transformers ships
   it: eager, ``torch.optim.AdamW`` with its defaults. On CUDA ``--base-batch`` defaults to 256
   rows (16k target tokens of 64) at the paper-base size.
2. Generation, small size, 32 sources, exactly 64 new tokens (``min_new_tokens =
   max_new_tokens = 64``), greedy and beam 4: (a) hfattn with its ``EncoderDecoderCache``
   against ``use_cache=False`` (the whole decoder re-run over the prefix at every step, the
   seeds' loop); (b) hfattn against Marian, both with the cache. Generated tokens/s counts
   batch × 64 (the returned sequences, not the beams).
3. Static cache (``--skip-static-cache`` leaves it out): one source, greedy, 64 new tokens,
   ``cache_implementation="static"`` with the decoding step compiled in one graph
   (``CompileConfig(fullgraph=True)``: transformers' ``reduce-overhead`` mode, CUDA graphs,
   on a GPU; ``mode="default"`` on a CPU) against the dynamic cache; target ≥ 2× on a GPU.

On CPU the default is one torch thread (``--threads``): with other processes on the machine,
two threads that wait for each other are slowed far more than one. Prints a markdown table
(measure, hfattn, reference, ratio, target, met) with, next to each hfattn/Marian ratio of
medians, the range of the ratios of the runs made back to back ("pairs"), then the checks
(logit difference, identical outputs), and writes every number to ``--out`` as JSON; ``--json``
writes the table's ratios against their targets (``benchmarks/lib/benchlib.py``, for
``run_all.py``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import time

import torch
import transformers

from benchmarks.lib.benchlib import (
    add_device_argument,
    add_json_argument,
    gpu_name,
    write_atomically,
)
from benchmarks.lib.vaswani_generation import measure_generation, measure_static_cache
from benchmarks.lib.vaswani_marian import Size
from benchmarks.lib.vaswani_recipe_step import COMPILE_SETTINGS, measure_recipe, recipe_report
from benchmarks.lib.vaswani_report import load_average, machine, notes, table, to_report
from benchmarks.lib.vaswani_training import matmul_peak, measure_training
from hfattn.common.machine import provenance


def main() -> None:
    """Measure as the command line asks, print the table and the checks, write ``--out`` and
    ``--json`` (``--recipe``: :func:`main_recipe`)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_device_argument(parser)
    parser.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--threads", type=int, default=1, help="torch threads on CPU")
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--layers", type=int, default=3, help="encoder = decoder layers")
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--ffn", type=int, default=1024)
    parser.add_argument(
        "--batch", type=int, default=64, help="training batch, small size (0: skip)"
    )
    parser.add_argument(
        "--base-batch",
        type=int,
        default=None,
        help="training batch at the paper-base size (0: skip; default 8 on a CPU, 256 on CUDA)",
    )
    parser.add_argument("--src-len", type=int, default=32)
    parser.add_argument("--tgt-len", type=int, default=32)
    parser.add_argument("--max-positions", type=int, default=512)
    parser.add_argument("--steps", type=int, default=7, help="timed training steps per model")
    parser.add_argument("--warmup", type=int, default=1, help="discarded steps per model")
    parser.add_argument("--gen-batch", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--beams", type=int, default=4)
    parser.add_argument("--gen-repeats", type=int, default=3, help="cached runs per model")
    parser.add_argument("--uncached-repeats", type=int, default=1, help="use_cache=False runs")
    parser.add_argument(
        "--skip-uncached-beam", action="store_true", help="no use_cache=False beam search run"
    )
    parser.add_argument(
        "--skip-static-cache",
        action="store_true",
        help="no static cache + torch.compile run (batch 1; compiling takes seconds to minutes)",
    )
    parser.add_argument(
        "--engine",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="train hfattn as hfattn train does on the device (compiled and fused AdamW on "
        "CUDA); --no-engine: eager with AdamW's defaults, as Marian",
    )
    parser.add_argument("--out", help="write every number to this JSON file")
    parser.add_argument(
        "--skip-generation", action="store_true", help="training only: no generation runs"
    )
    parser.add_argument(
        "--profile",
        help="write the kernels of 3 paper-base hfattn training steps (torch.profiler) here "
        "(with --recipe: 3 compiled steps of the recipe)",
    )
    parser.add_argument(
        "--recipe",
        help="measure this recipe's own training step instead (its batches, optimizer, "
        "precision), eager and compiled: measure_recipe",
    )
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="--recipe override"
    )
    parser.add_argument(
        "--compile",
        nargs="+",
        choices=COMPILE_SETTINGS,
        default=list(COMPILE_SETTINGS),
        help="--recipe: the training.compile settings measured against eager, in this order, "
        "each from a cold Inductor cache (default: %(default)s)",
    )
    add_json_argument(parser)
    parser.add_argument("--quick", action="store_true", help="a smoke run: tiny counts")
    args = parser.parse_args()
    if args.recipe:
        main_recipe(args)
        return
    if args.base_batch is None:
        args.base_batch = 256 if args.device == "cuda" else 8
    if args.quick:
        args.steps, args.warmup, args.gen_repeats, args.new_tokens = 2, 1, 1, 8
        args.base_batch = 0
    if args.device == "cpu":
        torch.set_num_threads(args.threads)

    def autocast():
        return torch.autocast(args.device, dtype=torch.bfloat16, enabled=args.dtype == "bf16")

    small = Size("small", args.layers, args.d_model, args.heads, args.ffn, args.batch)
    sizes = [small] if args.batch else []
    if args.base_batch:
        sizes.append(Size("paper-base", 6, 512, 8, 2048, args.base_batch))
    load_before = load_average()
    started = time.perf_counter()
    peak_flops, peak = matmul_peak(args.device, args.dtype)  # once: one yardstick for all sizes
    results = {
        "provenance": provenance(gpu_name(args.device)),
        "date": datetime.date.today().isoformat(),
        "machine": machine(args.device),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "args": {k: v for k, v in vars(args).items() if k != "json"},
        "load_average_before": load_before,
        "peak_flops": peak_flops,
        "peak": peak,
        "training": [measure_training(size, args, autocast, peak_flops) for size in sizes],
        "generation": None if args.skip_generation else measure_generation(small, args, autocast),
        "static_cache": None
        if args.skip_static_cache
        else measure_static_cache(small, args, autocast),
    }
    results["load_average_after"] = load_average()
    results["wall_seconds"] = time.perf_counter() - started
    report = table(results, args)
    print(
        f"{results['machine']}, {args.dtype}, torch {results['torch']}, transformers "
        f"{results['transformers']}, {results['date']}; load average before/after "
        f"{load_before} / {results['load_average_after']}; {results['wall_seconds']:.0f} s\n"
    )
    print(report)
    print()
    print(notes(results))
    if args.out:
        write_atomically(args.out, json.dumps(results, indent=2))
    to_report(results, args).write(args.json)


def main_recipe(args) -> None:
    """``--recipe``: :func:`measure_recipe`, printed, and written to ``--out`` / ``--json``."""
    if args.device == "cpu":
        torch.set_num_threads(args.threads)
    load_before = load_average()
    results = {"provenance": provenance(gpu_name(args.device)), "torch": torch.__version__,
               "load_average_before": load_before}  # fmt: skip

    def on_result(partial: dict) -> None:  # after the eager steps, then after each setting
        if not partial["compiled"]:
            alone = partial["eager_alone"]
            print(f"{partial['recipe']} eager alone: {alone['tokens_per_s']:,.0f} target "
                  "tokens/s" + (f", MFU {alone['mfu']:.1%}" if alone["mfu"] is not None else ""),
                  flush=True)  # fmt: skip
        else:
            setting, measured = list(partial["compiled"].items())[-1]
            compiled = measured["compiled"]
            print(f"compile {setting}: {compiled['tokens_per_s']:,.0f} target tokens/s"
                  + (f", MFU {compiled['mfu']:.1%}" if compiled["mfu"] is not None else "")
                  + f", {measured['compiled_over_eager']:.2f}x eager; cold compile "
                  f"{measured['compile_s']} s, {measured['compiles']} graph(s) for "
                  f"{len(partial['bucket_shapes'])} shapes", flush=True)  # fmt: skip
        if args.out:
            write_atomically(
                args.out, json.dumps({**results, "recipe_training": partial}, indent=2)
            )

    result = measure_recipe(args, on_result)
    results.update(load_average_after=load_average(), recipe_training=result)
    if args.out:
        write_atomically(args.out, json.dumps(results, indent=2))
    recipe_report(result, args).write(args.json)


if __name__ == "__main__":
    main()
