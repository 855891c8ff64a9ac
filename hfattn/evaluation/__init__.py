"""Metrics (``evaluate`` modules shipped in the package) and evaluation loops.

Each metric under ``metrics/`` (``metrics/<name>/<name>.py``) is a self-contained ``evaluate``
module, as on the Hub, and is loaded from the package by :func:`load_metric`: its file is
imported in place and its ``evaluate.Metric`` class instantiated with its scratch folder in a
temporary directory of the process, so that loading a metric writes nothing under ``HF_HOME``
(``evaluate.load`` would copy the script into ``HF_HOME/modules`` and make a folder under
``HF_HOME/metrics``: a read-only Hugging Face cache would stop every evaluation). A module
shared by several metrics would have to stand beside each script, and an import of ``hfattn``
would tie a metric module to the package it is shipped in, so that the module no longer loads
by path with ``evaluate.load`` elsewhere. What the metric modules have in common is the
``evaluate.Metric`` interface itself (``_info`` declaring the inputs, ``_compute``), so each
keeps its own declaration.
"""

import functools
import os
from pathlib import Path

METRICS_DIR = Path(__file__).parent / "metrics"


@functools.cache
def _metric_class(name: str):
    """The ``evaluate.Metric`` subclass that ``metrics/<name>/<name>.py`` defines, its file
    imported in place (once per process)."""
    import importlib.util

    import evaluate

    module_name = f"hfattn_metric_{name}"
    spec = importlib.util.spec_from_file_location(module_name, METRICS_DIR / name / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return next(
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, evaluate.EvaluationModule)
        and value.__module__ == module_name
    )


@functools.cache
def _scratch_dir() -> str:
    """The folder the metrics may write to: ``evaluate`` makes an empty folder for each metric
    there (``keep_in_memory=True``: their data stays in memory). One folder per user under the
    system's temporary folder, shared by every process and kept, so that a process killed
    before its clean-up leaves nothing new behind."""
    import tempfile

    user = os.getuid() if hasattr(os, "getuid") else os.getlogin()
    folder = os.path.join(tempfile.gettempdir(), f"hfattn-metrics-{user}")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return folder


def load_metric(name: str):
    """One of hfattn's bundled ``evaluate`` metric modules by name, ready to ``compute``: works
    offline and with a read-only ``HF_HOME`` (nothing is written there)."""
    if not (METRICS_DIR / name / f"{name}.py").is_file():
        available = sorted(p.name for p in METRICS_DIR.iterdir() if (p / f"{p.name}.py").is_file())
        raise ValueError(f"metric {name!r} is not bundled; available: {', '.join(available)}")
    return _metric_class(name)(keep_in_memory=True, cache_dir=_scratch_dir())


__all__ = ["METRICS_DIR", "load_metric"]
