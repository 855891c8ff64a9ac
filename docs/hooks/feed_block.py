"""The GPU feed of ``docs/training.md``: each GPU recipe's batches, the host's time a step, the
compiled step's graphs and the Bahdanau step's host reads (``benchmarks/bench_feed.py``), then
the model step's ceiling on one GPU.

Standard library only, as :mod:`docs.hooks.results_tables`.
"""

from __future__ import annotations

from pathlib import Path

if __package__:  # docs.hooks.feed_block (tests, python -m)
    from .results_figures import Figure, shared_machine
    from .results_pages import RESULTS
    from .speed_paragraphs import GPU_BENCH, GPU_FIGURES, gpu_machine
else:  # MkDocs loads a hook with its folder on the path
    from results_figures import Figure, shared_machine
    from results_pages import RESULTS
    from speed_paragraphs import GPU_BENCH, GPU_FIGURES, gpu_machine


FEED = "bench_feed.json"
"""What feeds the GPU (``benchmarks/bench_feed.py``, measured on a CPU)."""
FEED_RECIPES = (
    "vaswani_bible_en_es_base",
    "bahdanau_bible_en_es_rnnsearch",
    "bahdanau_bible_en_es_luong_base",
)
"""The GPU recipes whose batches :data:`FEED` measures, in the order of the table."""
FEED_RECIPE_FIGURES = ("steps", "token_budget", "distinct_shapes", "shapes", "padding_source",
                       "padding_target", "target_tokens_per_step", "target_tokens_per_step_min",
                       "target_tokens_per_step_max", "tokens_vs_budget")  # fmt: skip
"""The figures of each recipe's batches (``recipes.<name>.<figure>`` of :data:`FEED`)."""
FEED_FIGURES = {
    **{
        f"{recipe}/{name}": Figure(FEED, key=f"recipes.{recipe}.{name}")
        for recipe in FEED_RECIPES
        for name in FEED_RECIPE_FIGURES
    },
    "host_ms": Figure(FEED, key="host_ms_per_step_25k"),
    "host_ms_lists": Figure(FEED, key="host_ms_per_step_25k_pad_pairs"),
    "buckets": Figure(FEED, key="compile.buckets"),
    "graphs": Figure(FEED, key="compile.graphs_first_epoch"),
    "recompiles": Figure(FEED, key="compile.recompiles_second_epoch"),
    "graph_breaks": Figure(FEED, key="compile.graph_breaks"),
    "reads_bahdanau": Figure(FEED, key="bahdanau_host_reads.bahdanau"),
    "reads_luong": Figure(FEED, key="bahdanau_host_reads.luong-general"),
}
"""The figures of :func:`feed_block`, all from :data:`FEED` (its CPU machine); the GPU ceiling
beside them is read through :data:`GPU_FIGURES`."""
FEED_TEXT = (
    "A step at {budget:,} target tokens costs the host {host_ms:.2f} ms with the buckets (an "
    "index gather), against {host_ms_lists:.1f} ms on the same pairs padded from lists at each "
    "step (`max_tokens`): {host_ratio:.0f}× less (the engine's loop around a stand-in model of "
    "one parameter, so that a step is the host's work alone). Compiled as `compile: true` "
    "compiles it (the buckets' dimensions marked dynamic) and run for two epochs over the "
    "Bible's batches in {buckets} buckets (a small Transformer), the loss step compiled "
    "{graphs} graph(s) in the first epoch and {recompiles} in the second, with {graph_breaks} "
    "graph breaks. Device-to-host reads in a training step on the CUDA code path: "
    "{reads_bahdanau} for the Bahdanau (additive) model, "
    "{reads_luong} for Luong's (general score)."
)
FEED_CEILING = (
    "The ceiling of the model's step on one GPU ({machine}; `bash benchmarks/gpu_check.sh`): "
    "at the paper's base size (6+6 layers, d 512, bf16, compiled with fused AdamW), on fixed "
    "batches of 256 pairs of 64 → 64 tokens ({v_tokens:,} target tokens a step), the Vaswani "
    "model trains at {v_tps:,.0f} target tokens/s, an MFU of {v_mfu:.1%} ({peak}; "
    "[GPU measurements](results/index.md#on-a-gpu))."
)


def _feed_shapes(shapes) -> str:
    """``[[rows, source, target], ...]`` as ``rows × source → target`` positions."""
    return ", ".join(f"{rows} × {source} → {target}" for rows, source, target in shapes)


def feed_block(root: Path = RESULTS) -> str:
    """The GPU feed of ``docs/training.md``: each GPU recipe's batches (shapes, padding, target
    tokens a step against its budget), the host's time a step, the compiled step's graphs and
    the Bahdanau step's host reads (:data:`FEED`, naming the machine it records), then the
    model step's ceiling on one GPU (:data:`GPU_FIGURES`, :func:`gpu_machine`).

    Raises:
        FileNotFoundError: a file is missing.
        KeyError: a file lacks a figure, or records no provenance.
    """
    values = {name: figure.read(root) for name, figure in FEED_FIGURES.items()}
    machine = shared_machine([FEED], root)
    lines = [
        f"The batches of the GPU recipes as shipped, over the steps of one whole run, and the "
        f"host's share of a step (`.venv/bin/python -m benchmarks.bench_feed`, {machine}):",
        "",
        "| recipe | steps | batch shapes | padding: source, target "
        "| target tokens a step: mean (min–max) | mean against `token_budget` |",
        "|---|---|---|---|---|---|",
    ]
    shapes = {}
    for recipe in FEED_RECIPES:
        v = {name: values[f"{recipe}/{name}"] for name in FEED_RECIPE_FIGURES}
        shapes[recipe] = _feed_shapes(v["shapes"])
        lines.append(
            f"| `{recipe}` | {v['steps']:,} | {v['distinct_shapes']} "
            f"| {v['padding_source']:.1%}, {v['padding_target']:.1%} "
            f"| {v['target_tokens_per_step']:,.0f} ({v['target_tokens_per_step_min']:,}–"
            f"{v['target_tokens_per_step_max']:,}) "
            f"| {v['tokens_vs_budget']:+.1%} of {v['token_budget']:,} |"
        )
    first = FEED_RECIPES[0]
    described = [f"`{first}` {shapes[first]}"] + [
        f"`{recipe}` " + ("the same" if shapes[recipe] == shapes[first] else shapes[recipe])
        for recipe in FEED_RECIPES[1:]
    ]
    lines += ["", f"The batch shapes (rows × source → target positions): {'; '.join(described)}."]
    budget = values[f"{first}/token_budget"]
    host_ratio = values["host_ms_lists"] / values["host_ms"]
    lines += ["", FEED_TEXT.format(budget=budget, host_ratio=host_ratio, **values)]
    gpu = {name: GPU_FIGURES[name].read(root) for name in ("v_tps", "v_mfu", "peak")}
    v_tokens = Figure(GPU_BENCH, key="training.0.target_tokens_per_step").read(root)
    lines += ["", FEED_CEILING.format(machine=gpu_machine(root), v_tokens=v_tokens, **gpu)]
    return "\n".join(lines)
