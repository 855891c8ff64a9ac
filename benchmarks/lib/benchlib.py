"""What every benchmark script emits with ``--json PATH``, read back by ``run_all.py``.

One JSON object per run of a script::

    {"benchmark": "char_rnn", "device": "cpu",
     "records": [{"benchmark", "name", "value", "unit", "target", "comparison", "met",
                  "device", "detail"?}, ...],
     "series": [{"name", "title", "kind": "seq_len" | "batch", "x_label", "y_label",
                 "x": [...], "lines": {label: [y per x], ...}, "log", "device"}, ...],
     "markdown": ["extra section", ...],
     "provenance": {"hfattn_commit", "command", "date", "machine": {"cpu", "cores", "isa", "gpu"}},
     "not_run": null | "why nothing was measured"}

A record is one measure against its target: ``met`` is ``value >= target`` or ``value <=
target`` (``comparison``), ``None`` where the measure has no target. ``series`` are the raw
points of the charts (time against sequence length or batch size). A script that cannot run
here (data or a Debian package missing) writes ``not_run`` with the reason and exits 0.

No torch import here (only :mod:`hfattn.common.machine` and :mod:`hfattn.storage.file_io`, which
need nothing beyond the standard library): ``run_all.py`` uses this module in a light process.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from hfattn.common.machine import provenance
from hfattn.storage.file_io import atomic_write_bytes, atomic_write_text

COMPARISONS = (">=", "<=")
SERIES_KINDS = ("seq_len", "batch")


def is_met(value: float | None, target: float | None, comparison: str) -> bool | None:
    """Whether ``value`` meets ``target`` (``None`` without a target or a value)."""
    if comparison not in COMPARISONS:
        raise ValueError(f"comparison must be one of {', '.join(COMPARISONS)}, not {comparison!r}")
    if target is None or value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return value >= target if comparison == ">=" else value <= target


def load_average() -> str:
    """The machine's 1-, 5- and 15-minute load averages, as ``"0.84, 1.46, 1.74"``."""
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def write_atomically(path: Path, data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` with hfattn's atomic writer
    (:mod:`hfattn.storage.file_io`): a reader never sees a half-written file, and the file gets the
    mode a plain ``open`` gives (``0o644`` under the usual umask), not ``mkstemp``'s ``0o600``."""
    if isinstance(data, bytes):
        atomic_write_bytes(path, data)
    else:
        atomic_write_text(path, data)


def add_json_argument(parser: argparse.ArgumentParser) -> None:
    """The ``--json PATH`` option every benchmark script takes."""
    parser.add_argument(
        "--json",
        type=Path,
        metavar="PATH",
        help="also write the measures, their targets and the chart series to PATH "
        "(the format of benchmarks/lib/benchlib.py, read by benchmarks/run_all.py)",
    )


DEVICES = ("cpu", "cuda")


def device_type(value: str) -> str:
    """``--device`` value: ``cpu``, or ``cuda`` where torch sees a GPU."""
    if value not in DEVICES:
        raise argparse.ArgumentTypeError(f"must be one of {', '.join(DEVICES)}, not {value!r}")
    if value == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise argparse.ArgumentTypeError(
                "cuda: torch.cuda.is_available() is False on this machine"
            )
    return value


def add_device_argument(parser: argparse.ArgumentParser) -> None:
    """The ``--device cpu|cuda`` option of the scripts that also run on a GPU."""
    parser.add_argument("--device", type=device_type, default="cpu", help="cpu (default) or cuda")


def gpu_name(device: str) -> str | None:
    """The name of the GPU a ``device`` measure runs on (``None`` on the CPU)."""
    if device != "cuda":
        return None
    import torch

    return torch.cuda.get_device_name()


def synchronize(device: str) -> None:
    """Wait for the work queued on ``device`` (CUDA); nothing to wait for on the CPU."""
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


@dataclass
class BenchReport:
    """The measures of one run of one benchmark script, written with :meth:`write`."""

    benchmark: str
    device: str = "cpu"
    records: list[dict] = field(default_factory=list)
    series: list[dict] = field(default_factory=list)
    markdown: list[str] = field(default_factory=list)
    not_run: str | None = None

    def add(
        self,
        name: str,
        value: float,
        unit: str = "",
        target: float | None = None,
        comparison: str = ">=",
        detail: str | None = None,
    ) -> dict:
        """Record one measure; ``detail`` (e.g. the two throughputs behind a ratio) is shown
        next to the value in the report."""
        record = {
            "benchmark": self.benchmark,
            "name": name,
            "value": float(value),
            "unit": unit,
            "target": target,
            "comparison": comparison,
            "met": is_met(float(value), target, comparison),
            "device": self.device,
        }
        if detail:
            record["detail"] = detail
        self.records.append(record)
        return record

    def add_series(
        self,
        name: str,
        title: str,
        kind: str,
        x_label: str,
        x: list[float],
        lines: dict[str, list[float]],
        y_label: str = "seconds",
        log: bool = False,
    ) -> None:
        """Chart points: one y list per line label, each as long as ``x``; ``log``: draw
        both axes on a log scale."""
        if kind not in SERIES_KINDS:
            raise ValueError(f"series kind must be one of {', '.join(SERIES_KINDS)}, not {kind!r}")
        for label, values in lines.items():
            if len(values) != len(x):
                raise ValueError(
                    f"series {name!r}, line {label!r}: {len(values)} points for {len(x)} x"
                )
        self.series.append(
            {
                "name": name,
                "title": title,
                "kind": kind,
                "x_label": x_label,
                "y_label": y_label,
                "x": list(x),
                "lines": {k: list(v) for k, v in lines.items()},
                "log": log,
                "device": self.device,
            }
        )

    def to_dict(self) -> dict:
        """The JSON object of the module docstring, with the run's ``provenance``: the hfattn
        commit, the command line, the date and the machine
        (:func:`hfattn.common.machine.provenance`;
        the GPU's name on ``cuda``)."""
        return {
            "benchmark": self.benchmark,
            "device": self.device,
            "provenance": provenance(gpu_name(self.device)),
            "records": self.records,
            "series": self.series,
            "markdown": self.markdown,
            "not_run": self.not_run,
        }

    def write(self, path: Path | None) -> None:
        """Write the JSON to ``path`` atomically (nothing when ``path`` is ``None``)."""
        if path is not None:
            write_atomically(Path(path), json.dumps(self.to_dict(), indent=2) + "\n")


def report_not_run(benchmark: str, reason: str, json_path: Path | None) -> int:
    """Say why ``benchmark`` measured nothing, write that report to ``json_path`` (``not_run``)
    and return the exit status, 0: a missing model or package is not a failure."""
    print(f"not run: {reason}")
    report = BenchReport(benchmark)
    report.not_run = reason
    report.write(json_path)
    return 0
