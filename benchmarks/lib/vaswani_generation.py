"""Generation speed of the Vaswani model: its KV cache against ``use_cache=False``, against
``MarianMTModel`` of the same size, and the static cache with a compiled decoding step against
the dynamic cache (``benchmarks/bench_vaswani.py``, its parts 2 and 3)."""

from __future__ import annotations

import statistics

import torch
from transformers import CompileConfig

from benchmarks.lib.step_timing import paired_ratios, timed
from benchmarks.lib.vaswani_marian import Size, generation_config, make_batch, make_models


def measure_generation(size: Size, args, autocast) -> dict:
    """Cached vs uncached (hfattn) and hfattn vs Marian (cached), greedy and beam."""
    device = args.device
    ours, marian = make_models(size, args.vocab, args.max_positions, device)
    ids, mask, _ = make_batch(args.gen_batch, args.src_len, args.tgt_len, args.vocab, device, 1)
    ours.eval()
    marian.eval()
    tokens = args.gen_batch * args.new_tokens
    result = {"size": size.__dict__, "batch": args.gen_batch, "new_tokens": args.new_tokens}

    def generate(model, beams, use_cache, new_tokens=args.new_tokens):
        config = generation_config(beams, new_tokens, use_cache)
        with torch.no_grad(), autocast():
            return model.generate(input_ids=ids, attention_mask=mask, generation_config=config)

    for label, beams in (("greedy", 1), (f"beam{args.beams}", args.beams)):
        # Warm-up at the full length: a GPU pays once for each new shape (cuDNN builds an
        # attention plan per key length), and a first timed call must not pay it for both.
        for model in (ours, marian):
            generate(model, beams, True)
        uncached = label == "greedy" or not args.skip_uncached_beam
        if device == "cuda" and args.uncached_repeats and uncached:
            generate(ours, beams, False)
        times = {"hfattn": [], "marian": [], "hfattn_no_cache": []}
        outputs = {}
        runs = [("hfattn", ours, True), ("marian", marian, True)]
        for rep in range(args.gen_repeats):
            for key, model, use_cache in runs if rep % 2 == 0 else runs[::-1]:
                seconds, outputs[key] = timed(device, generate, model, beams, use_cache)
                times[key].append(seconds)
            # The uncached runs sit between cached ones, so the two see the same load.
            if rep < args.uncached_repeats and uncached:
                seconds, outputs["hfattn_no_cache"] = timed(device, generate, ours, beams, False)
                times["hfattn_no_cache"].append(seconds)
        entry = {"seconds": times}
        for key, values in times.items():
            if values:
                entry[key] = {"median_s": statistics.median(values), "best_s": min(values)}
                entry[key]["tokens_per_s"] = tokens / entry[key]["median_s"]
        entry["same_output_hfattn_marian"] = same_rows(outputs["hfattn"], outputs["marian"])
        entry["ratio_hfattn_marian"] = (
            entry["hfattn"]["tokens_per_s"] / entry["marian"]["tokens_per_s"]
        )
        entry["paired_ratios_hfattn_marian"] = paired_ratios(times["hfattn"], times["marian"])
        if times["hfattn_no_cache"]:
            entry["same_output_cache_no_cache"] = same_rows(
                outputs["hfattn"], outputs["hfattn_no_cache"]
            )
            entry["ratio_cache_no_cache"] = (
                entry["hfattn"]["tokens_per_s"] / entry["hfattn_no_cache"]["tokens_per_s"]
            )
        assert outputs["hfattn"].shape[1] == args.new_tokens + 1  # start token + new ones
        result[label] = entry
    return result


def compile_config(device: str) -> CompileConfig:
    """How ``generate`` compiles the static-cache step: transformers' own default on a GPU
    (``mode="reduce-overhead"``, CUDA graphs), ``mode="default"`` elsewhere, where
    ``generate`` compiles only when asked to (``_compile_all_devices``)."""
    if device == "cuda":
        return CompileConfig(fullgraph=True)
    config = CompileConfig(fullgraph=True, mode="default")
    config._compile_all_devices = True
    return config


def measure_static_cache(size: Size, args, autocast) -> dict:
    """Greedy generation of one source (batch 1, ``args.new_tokens`` tokens): the static
    cache with the decoding step compiled (``cache_implementation="static"`` and
    :func:`compile_config`, one graph, no break) against the default dynamic cache."""
    device = args.device
    model = make_models(size, args.vocab, args.max_positions, device)[0].eval()
    ids, mask, _ = make_batch(1, args.src_len, args.tgt_len, args.vocab, device, 2)
    config = generation_config(1, args.new_tokens, True)

    def generate(**extra):
        with torch.no_grad(), autocast():
            return model.generate(
                input_ids=ids, attention_mask=mask, generation_config=config, **extra
            )

    static = {"cache_implementation": "static", "compile_config": compile_config(device)}
    generate()  # warm-up
    compile_s, first = timed(device, lambda: generate(**static))
    times, outputs = {"dynamic": [], "static_compiled": []}, {}
    runs = [("dynamic", {}), ("static_compiled", static)]
    for rep in range(max(3, args.gen_repeats)):
        for key, extra in runs if rep % 2 == 0 else runs[::-1]:
            seconds, outputs[key] = timed(device, lambda e=extra: generate(**e))
            times[key].append(seconds)
    medians = {key: statistics.median(values) for key, values in times.items()}
    return {
        "new_tokens": args.new_tokens,
        "first_static_call_s": compile_s,
        "seconds": times,
        "tokens_per_s": {key: args.new_tokens / median for key, median in medians.items()},
        "ratio": medians["dynamic"] / medians["static_compiled"],
        "paired_ratios": paired_ratios(times["static_compiled"], times["dynamic"]),
        "same_output": bool(torch.equal(outputs["dynamic"], outputs["static_compiled"]))
        and bool(torch.equal(first, outputs["dynamic"])),
    }


def same_rows(a: torch.Tensor, b: torch.Tensor) -> float:
    """Fraction of generated sequences that are identical."""
    if a.shape != b.shape:
        return 0.0
    return (a == b).all(dim=1).float().mean().item()
