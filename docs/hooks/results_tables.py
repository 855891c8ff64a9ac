"""The published results tables, rendered from the files of ``benchmarks/results/``.

Every figure of the README's headline table, of its speed and GPU paragraphs, of the docs'
results page (``docs/results/index.md``), of the attention-variants table of
``docs/models/bahdanau.md``, of the GPU feed of ``docs/training.md`` and of the large corpora
of ``docs/tasks/causal-lm.md`` and ``docs/tasks/translation.md`` is read here from the results
file that measured it; what no file
holds (the command) is written once in :data:`ROWS`, :data:`SPEED` and :data:`GPU_SPEED`.
``make results`` (``python -m docs.hooks.results_tables --write``, from the repository root)
rewrites the README and those pages between their ``<!-- results:NAME:start -->`` /
``<!-- results:NAME:end -->``
markers; ``--check`` (and ``tests/docs/test_results_tables.py``) fails when a table and its files
disagree or a cited file is missing.

A figure is read from one file by one of:

- ``metric="split/name"``: an ``eval_results.json`` written by ``hfattn train`` or
  ``hfattn baseline`` (``results[].split`` / ``metric_type``);
- ``training="name"``: the ``training`` block of such a file (``global_step``, ...);
- ``record="name"``: a measure of a benchmark script's ``--json`` report
  (:mod:`benchlib`), anywhere in the file (``bench_results.json`` nests them per run);
- ``key="a.b.c"``: a plain JSON path (a number indexes a list: ``training.0.mfu``).

The machine of a row, and of each paragraph, is the one its files record (the ``provenance``
block that :mod:`hfattn.common.machine` writes into every results file, in words by
:func:`hfattn.common.machine.machine_words`): a file that records none, or files that name
different machines, fail (:func:`shared_machine`).

No torch import (only :mod:`hfattn.common.machine`, standard library only): the docs build and the
tests read this module in a light process.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from hfattn.common.machine import machine_words
from hfattn.storage.file_io import atomic_write_text

if __package__:  # docs.hooks.results_tables (tests, python -m)
    from .gpu_blocks import candidates_block, compile_block
    from .sweep_block import option_effects_block, sweep_block
else:  # MkDocs loads a hook with its folder on the path
    from gpu_blocks import candidates_block, compile_block
    from sweep_block import option_effects_block, sweep_block

ROOT = Path(__file__).resolve().parents[2]

RESULTS = ROOT / "benchmarks" / "results"
README = ROOT / "README.md"
RESULTS_PAGE = ROOT / "docs" / "results" / "index.md"
BAHDANAU_PAGE = ROOT / "docs" / "models" / "bahdanau.md"
TRAINING_PAGE = ROOT / "docs" / "training.md"
CAUSAL_LM_PAGE = ROOT / "docs" / "tasks" / "causal-lm.md"
TRANSLATION_PAGE = ROOT / "docs" / "tasks" / "translation.md"
SWEEPS_PAGE = ROOT / "docs" / "sweeps.md"
NOTES = ROOT / "benchmarks" / "NOTES.md"
SMALL_CORPUS_RECIPE = "vaswani_bible_en_es"
"""The recipe whose sweep measures the options of a small corpus (the translation page's
"Small corpora" and the benchmark notes)."""


@dataclass(frozen=True)
class Figure:
    """One value of one results file (see the module docstring for the ways to read it)."""

    file: str
    metric: str | None = None
    training: str | None = None
    record: str | None = None
    key: str | None = None

    def read(self, root: Path = RESULTS) -> float:
        """The value.

        Raises:
            FileNotFoundError: the file is missing.
            KeyError: the file holds no such figure.
        """
        path = root / self.file
        if not path.is_file():
            raise FileNotFoundError(f"results file missing: {path}")
        data = json.loads(path.read_text("utf-8"))
        if self.metric is not None:
            split, name = self.metric.split("/")
            for result in data["results"]:
                if result["split"] == split and result["metric_type"] == name:
                    return result["value"]
            raise KeyError(f"{self.file}: no {self.metric}")
        if self.training is not None:
            return data["training"][self.training]
        if self.record is not None:
            for record in _records(data):
                if record["name"] == self.record:
                    return record["value"]
            raise KeyError(f"{self.file}: no record {self.record!r}")
        try:
            for part in self.key.split("."):
                data = data[int(part)] if isinstance(data, list) else data[part]
        except (KeyError, IndexError) as error:
            raise KeyError(f"{self.file}: no {self.key}") from error
        return data


def recorded_machine(file: str, root: Path = RESULTS) -> str | None:
    """The machine that ``file`` records in its ``provenance`` (a benchmark report's, or the
    ``training`` block's of an ``eval_results.json``), in words; ``None`` when it records none."""
    data = json.loads((root / file).read_text("utf-8"))
    training = data.get("training")
    origin = data.get("provenance") or (
        training.get("provenance") if isinstance(training, dict) else None
    )
    return machine_words(origin["machine"]) if origin else None


def figure_files(figures) -> list[str]:
    """The files that ``figures`` (:class:`Figure` objects) are read from, sorted, each once."""
    return sorted({figure.file for figure in figures})


def shared_machine(files, root: Path = RESULTS) -> str:
    """The one machine that every file of ``files`` records, in words.

    Raises:
        KeyError: a file records no ``provenance``.
        ValueError: the files name different machines (their figures are not comparable).
    """
    machines = {}
    for file in files:
        machine = recorded_machine(file, root)
        if machine is None:
            raise KeyError(f"{file}: records no provenance (the machine of its figures)")
        machines[file] = machine
    if len(set(machines.values())) != 1:
        found = "; ".join(f"{file}: {machine}" for file, machine in machines.items())
        raise ValueError(f"figures printed together come from different machines ({found})")
    return next(iter(machines.values()))


def _records(data):
    """Every benchmark record (a dict with ``name`` and ``value``) anywhere in ``data``."""
    if isinstance(data, dict):
        if isinstance(data.get("records"), list):
            yield from data["records"]
        for value in data.values():
            yield from _records(value)
    elif isinstance(data, list):
        for value in data:
            yield from _records(value)


@dataclass(frozen=True)
class Row:
    """One published result: a shipped recipe (or a baseline) with its machine, budget,
    command and figures; ``result`` and ``training`` are format strings over ``figures``."""

    model: str
    recipe: str
    held_out: str
    command: str
    """What trains the model (or, for a baseline, measures it)."""
    training: str
    result: str
    figures: dict[str, Figure] = field(default_factory=dict)
    evaluate: str | None = None
    """The ``hfattn evaluate`` command that prints the figures of the trained run."""

    def values(self, root: Path = RESULTS) -> dict[str, float]:
        return {name: figure.read(root) for name, figure in self.figures.items()}

    def files(self) -> list[str]:
        return figure_files(self.figures.values())

    def machine_of(self, root: Path = RESULTS) -> str:
        """The machine that every file of the row records (:func:`shared_machine`)."""
        return shared_machine(self.files(), root)


BIBLE_TEST = "Bible test books, 1,022 verses"
SCORE_SPLITS = {"test": "", "validation": "v"}
"""The prefix of a split's BLEU and chrF figures (``bleu`` on test, ``vbleu`` on validation)."""


def _steps(run: str) -> Figure:
    """The optimizer steps of the training run ``run`` (its ``{run}_eval_results.json``)."""
    return Figure(f"{run}_eval_results.json", training="global_step")


def _metrics(run: str, **metrics: str) -> dict[str, Figure]:
    """Figures of ``{run}_eval_results.json`` by name, each given as ``"split/metric"``."""
    file = f"{run}_eval_results.json"
    return {name: Figure(file, metric=metric) for name, metric in metrics.items()}


def _scores(file: str, system: str, split: str = "test") -> dict[str, Figure]:
    """The BLEU and chrF records of ``system`` in the benchmark report ``file``, named as
    ``split``'s (:data:`SCORE_SPLITS`)."""
    prefix = SCORE_SPLITS[split]
    return {
        f"{prefix}{name.lower()}": Figure(file, record=f"{system}: {name}")
        for name in ("BLEU", "chrF")
    }


def _bible_scores(run: str) -> dict[str, Figure]:
    """The beam-4 BLEU and chrF of the training run ``run`` on the test and validation books
    (its final evaluation), named as :func:`_translation_row` reads them."""
    return _metrics(
        run,
        bleu="test/bleu",
        chrf="test/chrf",
        vbleu="validation/bleu",
        vchrf="validation/chrf",
    )


def _bleu_chrf(bold: bool) -> str:
    """The test BLEU and chrF of a result cell; ``bold``: the BLEU leads the comparison."""
    return "BLEU **{bleu:.1f}**, chrF {chrf:.1f}" if bold else "BLEU {bleu:.1f}, chrF {chrf:.1f}"


def _translation_row(
    model: str,
    recipe: str,
    minutes: int,
    run: str,
    scores: dict[str, Figure],
    bold: bool = True,
) -> Row:
    """A shipped translation recipe, trained ``minutes`` by ``hfattn train`` (the training run
    ``run``) and scored in beam 4 on the Bible test books (and validation ones where ``scores``
    hold them)."""
    validation = "; validation {vbleu:.1f} / {vchrf:.1f}" if "vbleu" in scores else ""
    return Row(
        model=model,
        recipe=recipe,
        held_out=BIBLE_TEST,
        command=f"hfattn train recipes/{recipe}.yaml",
        evaluate=f"hfattn evaluate runs/{recipe} --split validation --split test",
        training=f"{minutes} min: {{steps:,}} steps",
        result=f"{_bleu_chrf(bold)} (beam 4{validation})",
        figures={"steps": _steps(run), **scores},
    )


def _baseline_row(
    model: str,
    held_out: str,
    command: str,
    result: str,
    figures: dict[str, Figure],
    training: str = "seconds",
) -> Row:
    """A baseline that no shipped recipe trains (``hfattn baseline``, a rule-based system),
    measured by ``command``."""
    return Row(model, "baseline", held_out, command, training, result, figures)


CHAR_RNN = "char_rnn_make_run_epyc_bf16"
LUONG = "bahdanau_bible_en_es_epyc_bf16_30min"
"""The Luong recipe as a user runs it: ``hfattn train`` (its final scores: beam 4, the saved
generation settings, as ``hfattn evaluate`` prints them)."""
VASWANI = "vaswani_bible_en_es_epyc_bf16_30min"
"""The 2+2 pre-LN Vaswani recipe as a user runs it: ``hfattn train`` (its final scores, as
``hfattn evaluate`` prints them)."""
ROWS: tuple[Row, ...] = (
    Row(
        model="char-RNN, GRU 512, Muon, continuous cache",
        recipe="char_rnn_shakespeare",
        held_out="Julius Caesar + Much Ado",
        command="make run",
        evaluate="hfattn evaluate runs/char_rnn_shakespeare --split validation --split test",
        training="10 min: {steps:,} steps",
        result="validation **{validation:.3f} nats/char** (from a zero state {zero:.3f}; the "
        "network without its cache {alone:.3f}), test {test:.3f}",
        figures={
            "steps": _steps(CHAR_RNN),
            **_metrics(
                CHAR_RNN,
                validation="validation/loss",
                zero="validation/loss_zero_state",
                alone="validation/loss_without_cache",
                test="test/loss",
            ),
        },
    ),
    _translation_row(
        "Luong RNN, unigram tokenizer",
        "bahdanau_bible_en_es",
        30,
        LUONG,
        _bible_scores(LUONG),
    ),
    _translation_row(
        "Vaswani 2+2, pre-LN, unigram tokenizer, no dropout",
        "vaswani_bible_en_es",
        30,
        VASWANI,
        _bible_scores(VASWANI),
    ),
    _baseline_row(
        "Apertium `eng-spa`, rule-based",
        BIBLE_TEST,
        "python -m benchmarks.bench_translation --json apertium_bible_test.json",
        _bleu_chrf(bold=False),
        _scores("apertium_bible_test.json", "Apertium eng-spa (rule-based)"),
        training="no training",
    ),
    _baseline_row(
        "n-gram counts + SVM",
        "2,000 Reber strings",
        "hfattn baseline recipes/rnn_classifier_reber.yaml --vectorizer count "
        "--classifier svm --ngram-max 3",
        "accuracy {accuracy:.2%}",
        _metrics("baseline_reber_count_svm", accuracy="test/accuracy"),
    ),
    _baseline_row(
        "TF-IDF + Naive Bayes",
        "7 test plays, 2,376 passages",
        "hfattn baseline recipes/minilm_genre.yaml --classifier nb",
        "accuracy {accuracy:.3f}, macro-F1 {macro_f1:.3f}",
        _metrics("baseline_genre_tfidf_nb", accuracy="test/accuracy", macro_f1="test/macro_f1"),
    ),
)
"""The published rows: one per shipped recipe that has a results file, then the baselines."""

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


def row_cells(row: Row, root: Path = RESULTS) -> dict[str, str]:
    """Every cell a table can show of ``row``, by its column's header."""
    values = row.values(root)
    baseline = row.recipe == "baseline"
    machine, training = row.machine_of(root), row.training.format(**values)
    return {
        "model": row.model,
        "model (recipe)": row.model if baseline else f"{row.model} (`{row.recipe}`)",
        "recipe": "—" if baseline else f"`{row.recipe}`",
        "held-out data": row.held_out,
        "machine": machine,
        "training": training,
        "machine, training": f"{machine}, {training}",
        "result": row.result.format(**values),
        "command": f"`{row.command}`" + (f", then `{row.evaluate}`" if row.evaluate else ""),
        "files": ", ".join(f"`{name}`" for name in row.files()),
    }


README_COLUMNS = ("model (recipe)", "held-out data", "machine, training", "result")
"""The columns of the README's headline table (headers of :func:`row_cells`)."""
RESULTS_PAGE_COLUMNS = (
    "model",
    "recipe",
    "held-out data",
    "machine",
    "training",
    "result",
    "command",
    "files",
)
"""The columns of the results page's table: also each row's command and the files its
figures are read from."""


def markdown_table(columns: tuple[str, ...], root: Path = RESULTS) -> str:
    """The Markdown table of :data:`ROWS` with ``columns`` (headers of :func:`row_cells`)."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in ROWS:
        cells = row_cells(row, root)
        lines.append("| " + " | ".join(cells[column] for column in columns) + " |")
    return "\n".join(lines)


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


def readme_table(root: Path = RESULTS) -> str:
    """The README's headline table, speed paragraph, GPU paragraph and time to quality."""
    return "\n\n".join(
        (
            markdown_table(README_COLUMNS, root),
            speed_paragraph("docs/", root),
            gpu_paragraph(root),
            speedrun_paragraph(root),
        )
    )


def results_page_table(root: Path = RESULTS) -> str:
    """The results page's table: one row per shipped recipe and baseline."""
    return markdown_table(RESULTS_PAGE_COLUMNS, root)


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


ATTENTION_VARIANTS = "scores_date_normalization.md"
"""The attention variants on the date normalisation recipe (``benchmarks/bench_scores.py``)."""


def printed_table(file: str, root: Path = RESULTS) -> str:
    """The Markdown table a benchmark script printed into ``file`` (its lines that start
    with ``|``).

    Raises:
        FileNotFoundError: the file is missing.
        KeyError: the file holds no table.
    """
    path = root / file
    if not path.is_file():
        raise FileNotFoundError(f"results file missing: {path}")
    lines = [line for line in path.read_text("utf-8").splitlines() if line.startswith("|")]
    if not lines:
        raise KeyError(f"{file}: no table")
    return "\n".join(lines)


DATA_SCALE = "data_scale.json"
"""Time to the first step and memory on large corpora (``benchmarks/bench_data_scale.py``):
optional, a page says it has no measurement while the file is missing."""
DATA_SCALE_NONE = (
    "The time to the first step and the memory of `hfattn train` on large corpora have no "
    "measurement in this release (`python -m benchmarks.bench_data_scale`; how it measures: "
    "[benchmark notes](../../benchmarks/NOTES.md))."
)
DATA_SCALE_TEXT = (
    "`hfattn train` as a user runs it on {machine} (`python -m benchmarks.bench_data_scale`, "
    "{date}): each corpus twice, first with an empty prepared-data cache, then with the cache "
    "the first run left; the peak RSS is the whole process tree's, sampled every {poll_s:g} s; "
    "steps/s are the second run's, from step {steady_from} to the last of the {steps} steps "
    "watched. How the figures are measured: [benchmark notes](../../benchmarks/NOTES.md)."
)
DATA_SCALE_MODEL_TEXT = (
    "To the saved model: the same command with `--set training.max_steps={steps}`, run to its "
    "exit, its final evaluation included (each held-out split as hfattn carves or the corpus "
    "brings it, scored as the recipe bounds it)."
)
DATA_SCALE_FAMILIES = {
    CAUSAL_LM_PAGE: ("char-rnn", "char-rnn-model"),
    TRANSLATION_PAGE: ("luong", "vaswani", "vaswani-prepare", "luong-2proc", "chollet-model"),
}
"""The cases of each page (the part of a case's name before ``/``)."""


def _scale_corpus(corpus: dict) -> str:
    """A case's corpus in words: its size, what it is made of and, when measured, the
    milliseconds of its preparation key (``key_ms``: a sample of its bytes, not all of them)."""
    key = f"; its key in {corpus['key_ms']:g} ms" if "key_ms" in corpus else ""
    if "pairs" in corpus:
        held_out = f"; {corpus['held_out']}" if "held_out" in corpus else ""
        return (
            f"{corpus['pairs']:,} pairs ({corpus['made_of']}, {corpus['repeats']:g}×{held_out}"
            f"{key})"
        )
    if "bytes" in corpus:
        return f"{corpus['bytes'] / 1e6:,.1f} MB ({corpus['made_of']}, {corpus['copies']:g}×{key})"
    return corpus["made_of"]


def _scale_run(run: dict, first: bool) -> str:
    """One run of a case: seconds to the first step (the preparation's), peak RSS."""
    if run["status"] == "not run":
        return "not run"
    peak = f"peak {run['peak_rss_gb']:.2f} GB"
    if run.get("seconds_to_prepared") is not None:  # `hfattn prepare`: the data path alone
        how = "prepared" if first else run["preparation"]
        return f"`hfattn prepare`: {run['seconds_to_prepared']:,.1f} s ({how}), {peak}"
    if run["seconds_to_first_step"] is None:
        return f"{run['status']} after {run['seconds']:,.0f} s, no step; {peak}"
    how = run["preparation"]
    if first and run["preparation_seconds"] is not None:
        how = f"prepared in {run['preparation_seconds']:,.1f} s"
    return f"{run['seconds_to_first_step']:,.1f} s ({how}), {peak}"


def _scale_saved(run: dict) -> str:
    """One run of a ``model`` case: seconds to the saved model, the final evaluation's."""
    if run["status"] == "not run":
        return "not run"
    if run.get("seconds_to_saved_model") is None:
        return f"{run['status']} after {run['seconds']:,.0f} s, no saved model"
    return (
        f"{run['seconds_to_saved_model']:,.1f} s (final evaluation "
        f"{run['final_evaluation_s']:,.1f} s), peak {run['peak_rss_gb']:.2f} GB"
    )


def _scale_scored(run: dict) -> str:
    """The examples a ``model`` case's final evaluation scored, per split."""
    parts = []
    for split, scored in run.get("scored", {}).items():
        part = f"{split} {scored['num_examples']:,}"
        if "sampled_from" in scored:
            part += f" of {scored['sampled_from']:,}"
        parts.append(part)
    return ", ".join(parts) or "—"


def _scale_targets(targets: list[dict]) -> str:
    """The targets of a case: how many are met, then each one missed or not measured."""
    if not targets:
        return "—"
    parts = [f"{sum(t['met'] is True for t in targets)} of {len(targets)} met"]
    for t in targets:
        if t["met"] is False:
            value = "none" if t["value"] is None else t["value"]
            parts.append(f"missed: {t['name']} {value} (target {t['comparison']} {t['target']})")
        elif t["met"] is None:
            parts.append(f"not measured: {t['name']}")
    return "; ".join(parts)


def data_scale_block(page: Path, root: Path = RESULTS) -> str:
    """The "Large corpora" tables of ``page`` (:data:`DATA_SCALE_FAMILIES`): per case the
    recipe, the corpus, both runs (seconds to the first step, how the data was come by, peak
    RSS), the steady steps/s and the targets; then the cases run to the saved model (``model``
    cases: seconds to the saved model and of its final evaluation, the examples scored);
    :data:`DATA_SCALE_NONE` without the file or without a case of the page.

    Raises:
        ValueError: the file holds a ``--quick`` run's figures (tiny corpora).
        KeyError: the file lacks a figure, or records no provenance.
    """
    path = root / DATA_SCALE
    if not path.is_file():
        return DATA_SCALE_NONE
    data = json.loads(path.read_text("utf-8"))
    if data.get("quick"):
        raise ValueError(f"{DATA_SCALE}: the figures of a --quick run (tiny corpora)")
    families = DATA_SCALE_FAMILIES[page]
    cases = {n: c for n, c in data["cases"].items() if n.split("/")[0] in families}
    if not cases:
        return DATA_SCALE_NONE
    settings = data["settings"]
    model_cases = {n: c for n, c in cases.items() if n.split("/")[0].endswith("-model")}
    steps = {c["steps_watched"] for n, c in cases.items() if n not in model_cases}
    lines = [
        DATA_SCALE_TEXT.format(
            machine=shared_machine([DATA_SCALE], root),
            date=data["provenance"]["date"][:10],
            poll_s=settings["poll_s"],
            steady_from=settings["steady_from"],
            steps=" or ".join(str(n) for n in sorted(steps)),
        ),
        "",
        "| recipe | corpus | first run: to the first step, peak RSS | second run | "
        "steps/s | targets |",
        "|---|---|---|---|---|---|",
    ]
    for name, case in cases.items():
        if name in model_cases:
            continue
        processes = f", {case['processes']} processes" if case["processes"] > 1 else ""
        speed = case["steps_per_s"]
        lines.append(
            f"| `{case['recipe']}`{processes} | {_scale_corpus(case['corpus'])} "
            f"| {_scale_run(case['first_run'], True)} | {_scale_run(case['cached_run'], False)} "
            f"| {'—' if speed is None else f'{speed:.2f}'} | {_scale_targets(case['targets'])} |"
        )
    if model_cases:
        steps = sorted({c["steps_watched"] for c in model_cases.values()})
        lines += [
            "",
            DATA_SCALE_MODEL_TEXT.format(steps=" or ".join(map(str, steps))),
            "",
            "| recipe | corpus | first run: to the saved model, peak RSS | second run | "
            "examples scored at the end | targets |",
            "|---|---|---|---|---|---|",
        ]
        for case in model_cases.values():
            lines.append(
                f"| `{case['recipe']}` | {_scale_corpus(case['corpus'])} "
                f"| {_scale_saved(case['first_run'])} | {_scale_saved(case['cached_run'])} "
                f"| {_scale_scored(case['cached_run'])} | {_scale_targets(case['targets'])} |"
            )
    return "\n".join(lines)


SMALL_CORPUS_BLOCK = {
    "small-corpus-options": lambda root: option_effects_block(root, SMALL_CORPUS_RECIPE)
}
"""The options of a small corpus measured by the sweep of :data:`SMALL_CORPUS_RECIPE`."""

BLOCKS = {
    README: {"headline": readme_table},
    RESULTS_PAGE: {
        "headline": results_page_table,
        "speed": lambda root: speed_paragraph("../", root),
        "gpu": lambda root: "\n\n".join((gpu_paragraph(root), speedrun_paragraph(root))),
    },
    BAHDANAU_PAGE: {"attention-variants": lambda root: printed_table(ATTENTION_VARIANTS, root)},
    TRAINING_PAGE: {
        "feed": feed_block,
        "speedrun": speedrun_paragraph,
        "compile": compile_block,
        "candidates": candidates_block,
    },
    SWEEPS_PAGE: {
        "example": sweep_block,
        "small-corpus": lambda root: sweep_block(root, SMALL_CORPUS_RECIPE),
    },
    NOTES: SMALL_CORPUS_BLOCK,
    CAUSAL_LM_PAGE: {"large-corpora": lambda root: data_scale_block(CAUSAL_LM_PAGE, root)},
    TRANSLATION_PAGE: {
        "large-corpora": lambda root: data_scale_block(TRANSLATION_PAGE, root),
        **SMALL_CORPUS_BLOCK,
    },
}
"""The generated blocks of each file, by marker name."""


def markers(name: str) -> tuple[str, str]:
    return f"<!-- results:{name}:start -->", f"<!-- results:{name}:end -->"


def replace_block(text: str, name: str, body: str) -> str:
    """``text`` with the block between ``name``'s markers replaced by ``body``.

    Raises:
        ValueError: a marker is missing.
    """
    start, end = markers(name)
    if start not in text or end not in text:
        raise ValueError(f"markers {start} / {end} missing")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{body}\n{end}{tail}"


def render_blocks(text: str, path: Path, root: Path = RESULTS) -> str:
    """``text`` (the content of ``path``, one of :data:`BLOCKS`) with its generated blocks
    rendered from the files under ``root``; the docs build renders each page so
    (``docs/hooks/results.py``)."""
    for name, render in BLOCKS[path].items():
        text = replace_block(text, name, render(root))
    return text


def rendered(path: Path, root: Path = RESULTS) -> str:
    """``path``'s text with its generated blocks rendered from the files under ``root``."""
    return render_blocks(path.read_text("utf-8"), path, root)


def render_page(markdown: str, src_path: str | None) -> str:
    """A docs page's ``markdown`` with its results blocks rendered, when ``src_path`` (the page's
    file) is a page of :data:`BLOCKS`; else ``markdown`` as it is (``docs/hooks/results.py``
    calls it on every page of the build)."""
    path = Path(src_path).resolve() if src_path else None
    if path not in BLOCKS:
        return markdown
    return render_blocks(markdown, path)


def stale_files(root: Path = RESULTS) -> list[Path]:
    """The files whose generated blocks differ from what their results files give."""
    return [path for path in BLOCKS if rendered(path, root) != path.read_text("utf-8")]


def main(argv: list[str] | None = None) -> int:
    """``--write`` (``make results``): rewrite the generated blocks that differ from what
    ``benchmarks/results/`` gives, one line per file, or one line saying that none differs;
    without it: name each stale file, exit status 1 when there is one."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the generated blocks")
    args = parser.parse_args(argv)
    if args.write:
        rewritten = 0
        for path in BLOCKS:
            new = rendered(path)
            if new != path.read_text("utf-8"):
                atomic_write_text(path, new)
                print(f"rewrote {path.relative_to(ROOT)}")
                rewritten += 1
        if not rewritten:
            print("docs and README already match benchmarks/results (nothing rewritten)")
        return 0
    stale = stale_files()
    for path in stale:
        print(f"{path.relative_to(ROOT)}: tables differ from benchmarks/results/ (make results)")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
