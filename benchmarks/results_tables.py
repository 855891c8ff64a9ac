"""The published results tables, rendered from the files of ``benchmarks/results/``.

Every figure of the README's headline table, of its speed paragraph and of the docs' results
page (``docs/results/index.md``) is read here from the results file that measured it; what
no file holds (the machine, the command) is written once in :data:`ROWS` and
:data:`SPEED`. ``make results`` (``python benchmarks/results_tables.py --write``) rewrites
the README and the results page between their ``<!-- results:NAME:start -->`` /
``<!-- results:NAME:end -->`` markers; ``--check`` (and ``tests/test_results_tables.py``)
fails when a table and its files disagree or a cited file is missing.

A figure is read from one file by one of:

- ``metric="split/name"``: an ``eval_results.json`` written by ``hfattn train`` or
  ``hfattn baseline`` (``results[].split`` / ``metric_type``);
- ``training="name"``: the ``training`` block of such a file (``global_step``, ...);
- ``record="name"``: a measure of a benchmark script's ``--json`` report
  (:mod:`benchlib`), anywhere in the file (``bench_results.json`` nests them per run);
- ``key="a.b.c"``: a plain JSON path.

The machine of a row is the one its first file records (the ``provenance`` block that
:mod:`hfattn.machine` writes into every new results file, in words by
:func:`hfattn.machine.machine_words`); a file written before files recorded it falls back to
the row's ``machine``.

No torch import (only :mod:`hfattn.machine`, standard library only): the docs build and the
tests read this module in a light process.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `make results` runs with any python3, hfattn not installed
    sys.path.insert(0, str(ROOT))

from hfattn.machine import machine_words  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
README = ROOT / "README.md"
RESULTS_PAGE = ROOT / "docs" / "results" / "index.md"

AVX2_CPU = "2-core AMD EPYC CPU, AVX2"
AVX512_CPU = "2-core AMD EPYC CPU, AVX-512 BF16"
XEON_CPU = "2-core Intel Xeon CPU, AVX-512 BF16"
H100 = "one NVIDIA H100 80GB HBM3 (shared by four trainings)"


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
        for part in self.key.split("."):
            data = data[part]
        return data


def recorded_machine(file: str, root: Path = RESULTS) -> str | None:
    """The machine that ``file`` records in its ``provenance`` (a benchmark report's, or the
    ``training`` block's of an ``eval_results.json``), in words; ``None`` when it records none."""
    data = json.loads((root / file).read_text("utf-8"))
    origin = data.get("provenance") or (data.get("training") or {}).get("provenance")
    return machine_words(origin["machine"]) if origin else None


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
    machine: str
    """The machine of files that do not record theirs (see :meth:`machine_of`)."""
    command: str
    training: str
    result: str
    figures: dict[str, Figure] = field(default_factory=dict)

    def values(self, root: Path = RESULTS) -> dict[str, float]:
        return {name: figure.read(root) for name, figure in self.figures.items()}

    def files(self) -> list[str]:
        return sorted({figure.file for figure in self.figures.values()})

    def machine_of(self, root: Path = RESULTS) -> str:
        """The machine the row's first file records, else :attr:`machine`."""
        first = next(iter(self.figures.values())).file
        return recorded_machine(first, root) or self.machine


def _bible(model: str, split: str, name: str) -> Figure:
    """A beam-4 score of the GPU Bible runs (``bench_translation.py --num-beams 4``)."""
    return Figure("bible_h100_beam4.json", key=f"beam4.{model}.{split}.{name}")


UNIGRAM = "bahdanau_bible_zen3_30min_unigram"
ROWS: tuple[Row, ...] = (
    Row(
        model="char-RNN, GRU 512, Muon",
        recipe="char_rnn_shakespeare",
        held_out="Julius Caesar + Much Ado",
        machine=AVX2_CPU,
        command="make run",
        training="10 min: {steps:,} steps",
        result="validation **{validation:.3f} nats/char**, test {test:.3f}",
        figures={
            "steps": Figure(
                "char_rnn_make_run_muon_fresh_clone_eval_results.json", training="global_step"
            ),
            "validation": Figure(
                "char_rnn_make_run_muon_fresh_clone_eval_results.json", metric="validation/loss"
            ),
            "test": Figure(
                "char_rnn_make_run_muon_fresh_clone_eval_results.json", metric="test/loss"
            ),
        },
    ),
    Row(
        model="Luong RNN, unigram tokenizer",
        recipe="bahdanau_bible_en_es",
        held_out="Bible test books, 1,022 verses",
        machine=AVX2_CPU,
        command="hfattn train recipes/bahdanau_bible_en_es.yaml",
        training="30 min: {steps:,} steps",
        result="BLEU **{bleu:.1f}**, chrF {chrf:.1f} (beam 4; validation {vbleu:.1f} / {vchrf:.1f})",
        figures={
            "steps": Figure(f"{UNIGRAM}_eval_results.json", training="global_step"),
            "bleu": Figure(
                f"{UNIGRAM}_beam4_perturb.json", record="`lu_unigram_zen3` (beam 4): BLEU"
            ),
            "chrf": Figure(
                f"{UNIGRAM}_beam4_perturb.json", record="`lu_unigram_zen3` (beam 4): chrF"
            ),
            "vbleu": Figure(
                f"{UNIGRAM}_decoding_validation.json",
                record="beam 4, length penalty 1.0, most probable: BLEU",
            ),
            "vchrf": Figure(
                f"{UNIGRAM}_decoding_validation.json",
                record="beam 4, length penalty 1.0, most probable: chrF",
            ),
        },
    ),
    Row(
        model="Bahdanau RNNsearch, BiGRU 1000",
        recipe="bahdanau_bible_en_es_rnnsearch",
        held_out="Bible test books, 1,022 verses",
        machine=H100,
        command="hfattn train recipes/bahdanau_bible_en_es_rnnsearch.yaml",
        training="6 min: {steps:,} steps",
        result="BLEU **{bleu:.1f}**, chrF {chrf:.1f} (beam 4; validation {vbleu:.1f} / {vchrf:.1f})",
        figures={
            "steps": Figure(
                "bahdanau_bible_rnnsearch_h100_eval_results.json", training="global_step"
            ),
            "bleu": _bible("bahdanau_bible_rnnsearch", "test", "bleu"),
            "chrf": _bible("bahdanau_bible_rnnsearch", "test", "chrf"),
            "vbleu": _bible("bahdanau_bible_rnnsearch", "validation", "bleu"),
            "vchrf": _bible("bahdanau_bible_rnnsearch", "validation", "chrf"),
        },
    ),
    Row(
        model="Luong et al., 4-layer LSTM 1000",
        recipe="bahdanau_bible_en_es_luong_base",
        held_out="Bible test books, 1,022 verses",
        machine=H100,
        command="hfattn train recipes/bahdanau_bible_en_es_luong_base.yaml",
        training="6 min: {steps:,} steps",
        result="BLEU {bleu:.1f}, chrF {chrf:.1f} (beam 4; validation {vbleu:.1f} / {vchrf:.1f})",
        figures={
            "steps": Figure(
                "bahdanau_bible_luong_base_h100_eval_results.json", training="global_step"
            ),
            "bleu": _bible("bahdanau_bible_luong_base", "test", "bleu"),
            "chrf": _bible("bahdanau_bible_luong_base", "test", "chrf"),
            "vbleu": _bible("bahdanau_bible_luong_base", "validation", "bleu"),
            "vchrf": _bible("bahdanau_bible_luong_base", "validation", "chrf"),
        },
    ),
    Row(
        model="Vaswani base 6+6, pre-LN",
        recipe="vaswani_bible_en_es_base",
        held_out="Bible test books, 1,022 verses",
        machine=H100,
        command="hfattn train recipes/vaswani_bible_en_es_base.yaml",
        training="5 min: {steps:,} steps",
        result="BLEU **{bleu:.1f}**, chrF {chrf:.1f} (beam 4)",
        figures={
            "steps": Figure("vaswani_bible_base_h100_eval_results.json", training="global_step"),
            "bleu": _bible("vaswani_bible_base_preln", "test", "bleu"),
            "chrf": _bible("vaswani_bible_base_preln", "test", "chrf"),
        },
    ),
    Row(
        model="Vaswani 2+2",
        recipe="vaswani_bible_en_es",
        held_out="Bible test books, 1,022 verses",
        machine=AVX512_CPU,
        command="hfattn train recipes/vaswani_bible_en_es.yaml",
        training="30 min: {steps:,} steps",
        result="BLEU **{bleu:.1f}**, chrF {chrf:.1f} (beam 4)",
        figures={
            "steps": Figure("vaswani_bible_cpu_30min_eval_results.json", training="global_step"),
            "bleu": Figure(
                "vaswani_bible_30min_beam4.json", record="`vaswani_bible_30min` (beam 4): BLEU"
            ),
            "chrf": Figure(
                "vaswani_bible_30min_beam4.json", record="`vaswani_bible_30min` (beam 4): chrF"
            ),
        },
    ),
    Row(
        model="Apertium `eng-spa`, rule-based",
        recipe="baseline",
        held_out="Bible test books, 1,022 verses",
        machine=AVX512_CPU,
        command="python benchmarks/bench_translation.py RUN --num-beams 4",
        training="no training",
        result="BLEU {bleu:.1f}, chrF {chrf:.1f}",
        figures={
            "bleu": Figure(
                "bahdanau_bible_30min_beam4.json", record="Apertium eng-spa (rule-based): BLEU"
            ),
            "chrf": Figure(
                "bahdanau_bible_30min_beam4.json", record="Apertium eng-spa (rule-based): chrF"
            ),
        },
    ),
    Row(
        model="n-gram counts + SVM",
        recipe="baseline",
        held_out="2,000 Reber strings",
        machine=XEON_CPU,
        command="hfattn baseline recipes/rnn_classifier_reber.yaml --vectorizer count "
        "--classifier svm --ngram-max 3",
        training="seconds",
        result="accuracy {accuracy:.2%}",
        figures={
            "accuracy": Figure(
                "baseline_reber_count_svm_eval_results.json", metric="test/accuracy"
            ),
        },
    ),
    Row(
        model="TF-IDF + Naive Bayes",
        recipe="baseline",
        held_out="7 test plays, 2,376 passages",
        machine=XEON_CPU,
        command="hfattn baseline recipes/minilm_genre.yaml --classifier nb",
        training="seconds",
        result="accuracy {accuracy:.3f}, macro-F1 {macro_f1:.3f}",
        figures={
            "accuracy": Figure("baseline_genre_tfidf_nb_eval_results.json", metric="test/accuracy"),
            "macro_f1": Figure("baseline_genre_tfidf_nb_eval_results.json", metric="test/macro_f1"),
        },
    ),
)
"""The published rows: one per shipped recipe that has a results file, then the baselines."""

EXPORT = "bench_export_cpu.json"
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
        "bench_results.json",
        record="training tokens/s, CharRNNForCausalLM / bare nn.GRU loop (batch 64 x 128, "
        "GRU 512, AdamW, median of 10)",
    ),
    "char_cache": Figure(
        "bench_results.json",
        record="greedy generation of 500 characters: state cache vs use_cache=False",
    ),
    "marian": Figure(
        "bench_results.json",
        record="greedy, batch 32 × 64 new tokens, tokens/s: hfattn vs Marian, both cached (fp32)",
    ),
    "kv_greedy": Figure(
        "bench_results.json",
        record="greedy, batch 32 × 64 new tokens, tokens/s: KV cache vs use_cache=False (fp32)",
    ),
    "kv_beam": Figure(
        "bench_results.json",
        record="beam4, batch 32 × 64 new tokens, tokens/s: KV cache vs use_cache=False (fp32)",
    ),
    "ct2_fp32": Figure(EXPORT, record="export fp32 / hfattn generate, greedy (tokens/s)"),
    "ct2_int8": Figure(EXPORT, record="export int8 / hfattn generate, greedy (tokens/s)"),
    "ct2_fp32_beam": Figure(EXPORT, record="export fp32 / hfattn generate, beam4 (tokens/s)"),
    "ct2_int8_beam": Figure(EXPORT, record="export int8 / hfattn generate, beam4 (tokens/s)"),
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
"""The figures of :data:`SPEED`, all measured on the 2-core AMD EPYC CPU with AVX-512 BF16."""


def _cells(row: Row, root: Path) -> tuple[str, str]:
    values = row.values(root)
    return row.training.format(**values), row.result.format(**values)


def speed_paragraph(docs: str, root: Path = RESULTS) -> str:
    """:data:`SPEED` with its figures; ``docs``: the path from the page to ``docs/``."""
    figures = {k: f.read(root) for k, f in SPEED_FIGURES.items()}
    machine = recorded_machine(SPEED_FIGURES["char_train"].file, root) or AVX512_CPU
    return SPEED.format(machine=machine, docs=docs, **figures)


def readme_table(root: Path = RESULTS) -> str:
    """The README's headline table and speed paragraph."""
    lines = [
        "| model (recipe) | held-out data | machine, training | result |",
        "|---|---|---|---|",
    ]
    for row in ROWS:
        training, result = _cells(row, root)
        name = row.model if row.recipe == "baseline" else f"{row.model} (`{row.recipe}`)"
        machine = row.machine_of(root)
        lines.append(f"| {name} | {row.held_out} | {machine}, {training} | {result} |")
    return "\n".join(lines) + "\n\n" + speed_paragraph("docs/", root)


def results_page_table(root: Path = RESULTS) -> str:
    """The results page's table: one row per shipped recipe and baseline, with its command
    and the files its figures are read from."""
    lines = [
        "| model | recipe | held-out data | machine | training | result | command | files |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in ROWS:
        training, result = _cells(row, root)
        files = ", ".join(f"`{name}`" for name in row.files())
        recipe = "—" if row.recipe == "baseline" else f"`{row.recipe}`"
        lines.append(
            f"| {row.model} | {recipe} | {row.held_out} | {row.machine_of(root)} | {training} | "
            f"{result} | `{row.command}` | {files} |"
        )
    return "\n".join(lines)


BLOCKS = {
    README: {"headline": readme_table},
    RESULTS_PAGE: {
        "headline": results_page_table,
        "speed": lambda root: speed_paragraph("../", root),
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


def stale_files(root: Path = RESULTS) -> list[Path]:
    """The files whose generated blocks differ from what their results files give."""
    return [path for path in BLOCKS if rendered(path, root) != path.read_text("utf-8")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the generated blocks")
    args = parser.parse_args(argv)
    if args.write:
        for path in BLOCKS:
            new = rendered(path)
            if new != path.read_text("utf-8"):
                path.write_text(new, "utf-8")
                print(f"rewrote {path.relative_to(ROOT)}")
        return 0
    stale = stale_files()
    for path in stale:
        print(f"{path.relative_to(ROOT)}: tables differ from benchmarks/results/ (make results)")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
