"""Metrics (``evaluate`` modules shipped in the package) and evaluation loops.

Each metric under ``metrics/`` (``metrics/<name>/<name>.py``) is a self-contained ``evaluate``
module, as on the Hub, and is loaded by path (:func:`load_metric`): ``evaluate.load`` copies
the script (and the files beside it that it imports relatively) into its modules cache and
imports it from there. A module shared by several metrics would have to stand beside each
script: ``from ..common import x`` cannot be resolved in that cache, and an import of
``hfattn`` would tie a metric module to the package it is shipped in. What the metric modules
have in common is the ``evaluate.Metric`` interface itself (``_info`` declaring the inputs,
``_compute``), so each keeps its own declaration.
"""

from pathlib import Path

METRICS_DIR = Path(__file__).parent / "metrics"


def load_metric(name: str):
    """Load one of hfattn's bundled ``evaluate`` metric modules by name (works offline)."""
    import evaluate

    path = METRICS_DIR / name
    if not (path / f"{name}.py").is_file():
        available = sorted(p.name for p in METRICS_DIR.iterdir() if (p / f"{p.name}.py").is_file())
        raise ValueError(f"metric {name!r} is not bundled; available: {', '.join(available)}")
    return evaluate.load(str(path), keep_in_memory=True)


__all__ = ["METRICS_DIR", "load_metric"]
