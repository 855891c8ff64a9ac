"""The headline table of the README and of the results page: one row per shipped recipe that
has a results file, then the baselines, each with its machine, training budget, command and
result read from its files; what no file holds (the command) is written once in :data:`ROWS`.

Standard library only, as :mod:`docs.hooks.results_tables`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

if __package__:  # docs.hooks.headline_table (tests, python -m)
    from .results_figures import Figure, figure_files, shared_machine
    from .results_pages import RESULTS
else:  # MkDocs loads a hook with its folder on the path
    from results_figures import Figure, figure_files, shared_machine
    from results_pages import RESULTS


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
        """The row's figures by name, read from the files under ``root``."""
        return {name: figure.read(root) for name, figure in self.figures.items()}

    def files(self) -> list[str]:
        """The files the row's figures are read from (:func:`figure_files`)."""
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


def results_page_table(root: Path = RESULTS) -> str:
    """The results page's table: one row per shipped recipe and baseline."""
    return markdown_table(RESULTS_PAGE_COLUMNS, root)
