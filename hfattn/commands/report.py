"""Console output shared by the commands (rich tables)."""

from __future__ import annotations

NO_SPLIT_SCORED = "no split is scored (evaluation.splits is empty)"
"""What :func:`print_metrics` prints after the title in place of a table without a column."""


def print_metrics(metrics: dict[str, dict], title: str, note: str | None = None) -> None:
    """Print ``{split: {metric: value}}`` as one table: a row per metric, a column per split
    (tasks report many metrics; splits are few, so the table stays narrow), and ``note`` (what
    a metric means) as a paragraph under it; no split (``evaluation.splits: []``): one line,
    ``title: no split is scored (evaluation.splits is empty)``."""
    from rich.console import Console

    if not metrics:
        print(f"{title}: {NO_SPLIT_SCORED}")
        return
    names = list(dict.fromkeys(k for scores in metrics.values() for k in scores))
    table = titled_table(title)
    table.add_column("metric")
    for split in metrics:
        table.add_column(split, justify="right")
    for name in names:
        table.add_row(name, *(_fmt(scores.get(name)) for scores in metrics.values()))
    console = Console()
    console.print(table)
    if note:
        console.print(note, highlight=False, markup=False)


def titled_table(title: str, **options):
    """A ``rich.table.Table`` whose ``title`` stays on one line: the table is at least as wide
    as its title (rich wraps a title to the table's width: ``evaluation (step`` / ``40)``)."""
    from rich.cells import cell_len
    from rich.table import Table

    return Table(title=title, min_width=cell_len(title), **options)


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    return "" if value is None else str(value)
