"""Console output shared by the commands (rich tables)."""

from __future__ import annotations


def print_metrics(metrics: dict[str, dict], title: str, note: str | None = None) -> None:
    """Print ``{split: {metric: value}}`` as one table: a row per metric, a column per split
    (tasks report many metrics; splits are few, so the table stays narrow), and ``note`` (what
    a metric means) as a paragraph under it."""
    from rich.console import Console
    from rich.table import Table

    names = list(dict.fromkeys(k for scores in metrics.values() for k in scores))
    table = Table(title=title)
    table.add_column("metric")
    for split in metrics:
        table.add_column(split, justify="right")
    for name in names:
        table.add_row(name, *(_fmt(scores.get(name)) for scores in metrics.values()))
    console = Console()
    console.print(table)
    if note:
        console.print(note, highlight=False, markup=False)


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    return "" if value is None else str(value)
