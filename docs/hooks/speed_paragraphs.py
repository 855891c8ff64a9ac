"""The speed paragraphs of the README and of the results page: the ratios ``make bench``
measures on a CPU (:data:`SPEED`), the GPU figures (:data:`GPU_SPEED`) and the time to
quality of each GPU recipe's speedrun, each naming the one machine its files record.

Standard library only, as :mod:`docs.hooks.results_tables`.
"""

from __future__ import annotations

import json
from pathlib import Path

if __package__:  # docs.hooks.speed_paragraphs (tests, python -m)
    from .results_figures import Figure, figure_files, shared_machine
    from .results_pages import RESULTS
else:  # MkDocs loads a hook with its folder on the path
    from results_figures import Figure, figure_files, shared_machine
    from results_pages import RESULTS


BENCH = "bench_results.json"
CT2_BIBLE = "ctranslate2_bible_20min_{}.json"
INT8 = "CTranslate2 `vaswani_bible_20min_ct2_int8` (beam {}): same output as the model"
SPEED = (
    "Speed, as ratios in one process (`make bench`, {machine}): `CharRNNForCausalLM` trains at "
    "{char_train:.3f}× a bare `nn.GRU` loop and generates {char_cache:.1f}× faster with its "
    "state cache; the Vaswani model runs greedy decoding at {marian:.3f}× the tokens/s of "
    "`MarianMTModel` of the same size, with a KV cache worth {kv_greedy:.1f}× greedy and "
    "{kv_beam:.1f}× beam 4 ([benchmarks]({docs}results/benchmarks.md)). Exported with "
    "`hfattn export`, it translates with CTranslate2 at {ct2_fp32:.1f}× (fp32) and "
    "{ct2_int8:.1f}× (int8) the tokens/s of `generate()` greedy, {ct2_fp32_beam:.1f}× and "
    "{ct2_int8_beam:.1f}× in beam 4. The fp32 export gives `generate()`'s translation for "
    "{same_greedy:.0%} of the Bible test verses greedy and {same_beam:.0%} in beam 4 (with the "
    "recipe's `early_stopping: true`); the int8 export for {int8_greedy:.0%} and "
    "{int8_beam:.0%}. The translation Space on the int8 export answers 50 concurrent "
    "requests with a p95 {p95:.1f}× lower than on `generate()` ([serving]({docs}serving.md))."
)
SPEED_FIGURES = {
    "char_train": Figure(
        BENCH,
        record="training tokens/s, CharRNNForCausalLM / bare nn.GRU loop (batch 64 x 128, "
        "GRU 512, AdamW, median of 30)",
    ),
    "char_cache": Figure(
        BENCH,
        record="greedy generation of 500 characters: state cache vs use_cache=False",
    ),
    "marian": Figure(
        BENCH,
        record="greedy, batch 32 × 64 new tokens, tokens/s: hfattn vs Marian, both cached (fp32)",
    ),
    "kv_greedy": Figure(
        BENCH,
        record="greedy, batch 32 × 64 new tokens, tokens/s: KV cache vs use_cache=False (fp32)",
    ),
    "kv_beam": Figure(
        BENCH,
        record="beam4, batch 32 × 64 new tokens, tokens/s: KV cache vs use_cache=False (fp32)",
    ),
    "ct2_fp32": Figure(BENCH, record="export fp32 / hfattn generate, greedy (tokens/s)"),
    "ct2_int8": Figure(BENCH, record="export int8 / hfattn generate, greedy (tokens/s)"),
    "ct2_fp32_beam": Figure(BENCH, record="export fp32 / hfattn generate, beam4 (tokens/s)"),
    "ct2_int8_beam": Figure(BENCH, record="export int8 / hfattn generate, beam4 (tokens/s)"),
    "same_greedy": Figure(
        CT2_BIBLE.format("greedy"), record="CTranslate2 `ct2` (beam 1): same output as the model"
    ),
    "same_beam": Figure(
        CT2_BIBLE.format("beam4_early_stopping"),
        record="CTranslate2 `ct2` (beam 4): same output as the model",
    ),
    "int8_greedy": Figure(CT2_BIBLE.format("greedy"), record=INT8.format(1)),
    "int8_beam": Figure(CT2_BIBLE.format("beam4_early_stopping"), record=INT8.format(4)),
    "p95": Figure("space_load_engines.json", key="p95_ratio"),
}
"""The figures of :data:`SPEED`: ``make bench`` (``bench_results.json``), the 20-minute Bible
model's exports scored on the test books, the Space load test; all on one machine."""

GPU_TAG = "NVIDIA_H100_80GB_HBM3"
GPU_BENCH = f"vaswani_cuda_bf16_{GPU_TAG}.json"
GPU_RECIPES = {
    "vaswani": f"vaswani_bible_en_es_base_1.5min_eager_{GPU_TAG}_eval_results.json",
    "rnnsearch": f"bahdanau_bible_en_es_rnnsearch_1min_{GPU_TAG}_eval_results.json",
}
GPU_SPEED = (
    "On a GPU ({machine}, nothing else on it; `bash benchmarks/gpu_check.sh`): at the paper's "
    "base size (6+6 layers, d 512, 256 pairs of 64 → 64 tokens a step, bf16) the Vaswani model, "
    "compiled with fused AdamW, trains at {v_tps:,.0f} target tokens/s, {v_ratio:.2f}× "
    "`MarianMTModel` of the same size as transformers ships it (eager, AdamW defaults): an MFU "
    "of {v_mfu:.1%} against Marian's {m_mfu:.1%} ({peak}). Teacher-forced training runs "
    "{b_additive:.2f}× the per-step loop with Bahdanau's additive attention and "
    "{b_luong:.2f}× with Luong's. Trained by `hfattn train` on batches of 128 verses padded "
    "from lists at each step (`training.batch_size: 128`, no `token_budget`), the two GPU "
    "recipes keep the GPU far from busy: `vaswani_bible_en_es_base` {vr_tps:,.0f} target "
    "tokens/s (MFU {vr_mfu:.1%}), `bahdanau_bible_en_es_rnnsearch` {rr_tps:,.0f} (MFU "
    "{rr_mfu:.1%}), over runs of {vr_min:g} and {rr_min:g} minutes. The recipes as shipped "
    "batch 25,000 target tokens in 8 length buckets (docs/training.md, Training on a GPU): "
    "their time to quality follows."
)
BAHDANAU_GPU = f"bahdanau_cuda_{GPU_TAG}.json"
GPU_FIGURES = {
    "v_tps": Figure(GPU_BENCH, key="training.0.hfattn.tokens_per_s"),
    "v_ratio": Figure(GPU_BENCH, key="training.0.tokens_per_s_ratio"),
    "v_mfu": Figure(GPU_BENCH, key="training.0.hfattn.mfu"),
    "m_mfu": Figure(GPU_BENCH, key="training.0.marian.mfu"),
    "peak": Figure(GPU_BENCH, key="peak"),
    "b_additive": Figure(
        BAHDANAU_GPU, record="teacher-forced training tokens/s, Bahdanau (additive)"
    ),
    "b_luong": Figure(
        BAHDANAU_GPU,
        record="teacher-forced training tokens/s, Luong general, no input feeding",
    ),
    "vr_tps": Figure(GPU_RECIPES["vaswani"], training="train_tokens_per_s"),
    "vr_mfu": Figure(GPU_RECIPES["vaswani"], training="mfu"),
    "rr_tps": Figure(GPU_RECIPES["rnnsearch"], training="train_tokens_per_s"),
    "rr_mfu": Figure(GPU_RECIPES["rnnsearch"], training="mfu"),
    "vr_min": Figure(GPU_RECIPES["vaswani"], training="max_minutes"),
    "rr_min": Figure(GPU_RECIPES["rnnsearch"], training="max_minutes"),
}
"""The figures of :data:`GPU_SPEED`: the benchmarks and the two GPU recipes, each alone on
one GPU."""


def speed_paragraph(docs: str, root: Path = RESULTS) -> str:
    """:data:`SPEED` with its figures; ``docs``: the path from the page to ``docs/``."""
    figures = {k: f.read(root) for k, f in SPEED_FIGURES.items()}
    machine = shared_machine(figure_files(SPEED_FIGURES.values()), root)
    return SPEED.format(machine=machine, docs=docs, **figures)


def gpu_machine(root: Path = RESULTS) -> str:
    """The one machine that the files of :data:`GPU_FIGURES` record, in words.

    :data:`GPU_BENCH` was written before ``bench_vaswani.py`` recorded a provenance: it names
    only its GPU (``machine``), which must be the GPU of the other files' machine.

    Raises:
        ValueError: the files name different machines, or :data:`GPU_BENCH` another GPU.
    """
    files = [file for file in figure_files(GPU_FIGURES.values()) if file != GPU_BENCH]
    machine = shared_machine(files, root)
    gpu = json.loads((root / GPU_BENCH).read_text("utf-8"))["machine"]
    if gpu not in machine:
        raise ValueError(f"{GPU_BENCH}: measured on {gpu}, the other GPU files on {machine}")
    return machine


def gpu_paragraph(root: Path = RESULTS) -> str:
    """:data:`GPU_SPEED` with its figures and the one machine its files record
    (:func:`gpu_machine`)."""
    figures = {k: f.read(root) for k, f in GPU_FIGURES.items()}
    return GPU_SPEED.format(machine=gpu_machine(root), **figures)


SPEEDRUN_RECIPES = (
    "vaswani_bible_en_es_base",
    "bahdanau_bible_en_es_rnnsearch",
    "bahdanau_bible_en_es_luong_base",
)
"""The GPU recipes whose time to quality ``benchmarks/speedrun.py`` measures."""
SPEEDRUN_TEXT = (
    "Time to quality on one {gpu} (`python -m benchmarks.speedrun recipes/{recipe}.yaml`, "
    "the GPU to itself): `hfattn train recipes/{recipe}.yaml` as shipped saves its model "
    "{wall_s:,.0f} s after the command starts, test BLEU **{test_bleu:.1f}**, chrF "
    "{test_chrf:.1f} (beam 4, every test verse), after {steps:,} steps at {tokens_per_s:,.0f} "
    "target tokens/s (MFU {mfu}), {compiled}, first step {first_step_wall_s:.0f} s after the "
    "command; greedy validation BLEU against wall seconds: {curve}."
)
SPEEDRUN_COMPILED = "compiled in {compile_s:.0f} s (eager: {eager_tokens_per_s:,.0f} tokens/s)"
SPEEDRUN_EAGER = "trained eagerly (`training.compile: auto` leaves this family eager)"
SPEEDRUN_NONE = (
    "Time to quality on one GPU, from `hfattn train` to the saved model with its test BLEU "
    "(`python -m benchmarks.speedrun recipes/RECIPE.yaml`, run by `bash "
    "benchmarks/gpu_check.sh`), has no measurement in this release."
)


def speedrun_files(root: Path = RESULTS) -> list[Path]:
    """The speedrun files of :data:`SPEEDRUN_RECIPES` measured on a GPU, by recipe."""
    files = []
    for recipe in SPEEDRUN_RECIPES:
        for path in sorted(root.glob(f"speedrun_{recipe}_*.json")):
            if json.loads(path.read_text("utf-8")).get("gpu"):
                files.append(path)
    return files


def speedrun_paragraph(root: Path = RESULTS) -> str:
    """One sentence of :data:`SPEEDRUN_TEXT` a GPU speedrun file (:func:`speedrun_files`), or
    :data:`SPEEDRUN_NONE` without one.

    Raises:
        KeyError: a file lacks a figure.
    """
    sentences = []
    for path in speedrun_files(root):
        run = json.loads(path.read_text("utf-8"))
        figures = {key: run[key] for key in ("gpu", "recipe", "wall_s", "test_bleu", "test_chrf",
                                             "steps", "tokens_per_s", "eager_tokens_per_s",
                                             "compile_s", "first_step_wall_s")}  # fmt: skip
        mfu = run["mfu"]
        curve = ", ".join(f"{p['bleu']:.1f} at {p['wall_s']:,.0f} s" for p in run["curve"])
        compiled = (SPEEDRUN_COMPILED if figures["compile_s"] else SPEEDRUN_EAGER).format(**figures)
        sentences.append(SPEEDRUN_TEXT.format(
            **figures, mfu="—" if mfu is None else f"{mfu:.1%}", curve=curve or "none",
            compiled=compiled,
        ))  # fmt: skip
    return " ".join(sentences) or SPEEDRUN_NONE
