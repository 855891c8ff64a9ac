"""Console output shared by the commands (rich tables)."""

from __future__ import annotations


def print_metrics(metrics: dict[str, dict], title: str) -> None:
    """Print ``{split: {metric: value}}`` as one table, a row per split."""
    from rich.console import Console
    from rich.table import Table

    names = list(dict.fromkeys(k for scores in metrics.values() for k in scores))
    table = Table(title=title)
    table.add_column("split")
    for name in names:
        table.add_column(name, justify="right")
    for split, scores in metrics.items():
        table.add_row(split, *(_fmt(scores.get(name)) for name in names))
    Console().print(table)


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    return "" if value is None else str(value)
