"""Metrics (``evaluate`` modules shipped in the package) and evaluation loops."""

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
