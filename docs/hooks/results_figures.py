"""One figure of one results file of ``benchmarks/results/``, and the machine the files record.

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

Standard library only, as :mod:`docs.hooks.results_tables`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from hfattn.common.machine import machine_words

if __package__:  # docs.hooks.results_figures (tests, python -m)
    from .results_pages import RESULTS
else:  # MkDocs loads a hook with its folder on the path
    from results_pages import RESULTS


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
