"""Corpora of any size: the time from ``hfattn train`` to its first optimizer step, and the peak
memory of its processes, on texts of 4.4 MB to 1 GB and on 31 k to 4.5 M sentence pairs,
the first time (an empty prepared-data cache) and the second (the cache the first left).

    .venv/bin/python -m benchmarks.bench_data_scale [--cases NAME ...] [--work DIR]
        [--out benchmarks/results/data_scale.json] [--update] [--quick] [--steps N]
        [--timeout-s 3600] [--rss-limit-gb 12] [--json PATH]

The cases (:data:`CASES`): ``recipes/char_rnn_shakespeare.yaml`` on the Shakespeare plays as
the recipe ships them (``data.source: shakespeare``, 4.4 MB of training plays) and on texts of
100 MB and 1 GB made of the training plays repeated; ``recipes/bahdanau_bible_en_es.yaml``
(Luong attention, the CPU recipe) and ``recipes/vaswani_bible_en_es_base.yaml`` (the paper's
base Transformer) on ``save_to_disk`` folders whose ``train`` split is the Bible's training
books repeated to 31 k (once), 290 k, 1.45 M and 4.5 M pairs (WMT14 en-de's size), with the
Bible's own validation and test books; and the Luong recipe on 1.45 M pairs in two processes
(``ACCELERATE_USE_CPU=1 torchrun --standalone --nproc_per_node 2 -m hfattn train ...``). The
corpora are made under ``--work`` (``benchmarks/lib/scale_corpora.py``) and reused from there.

Each case runs its recipe twice as a user runs it, ``python -m hfattn train RECIPE --set
data.source=CORPUS --set output_dir=... --overwrite``, as shipped but for
``training.log_every=1``, in a child process whose ``HFATTN_PREPARED_DIR`` is the case's own
folder: empty for the first run, as the first left it for the second. A run is watched
(``benchmarks/lib/process_tree.py``) until its ``metrics.jsonl`` holds the record of step
:attr:`Case.steps`, then killed (the rest of the run, its final evaluation included, is not
measured). Per run:

- ``seconds_to_first_step``: from starting the command to the first train record of
  ``metrics.jsonl`` (written after the first optimizer step; polled every ``--poll-s``);
  ``first_step_wall_s``: the run's own count in that record (``wall_s``, from its process's
  start);
- ``peak_rss_gb``: the highest sum of the RSS of every process of the command's tree, sampled
  every ``--poll-s``; ``peak_rss_training_gb`` the same from the first step on;
  ``peak_rss_per_process_gb`` each process's own peak (``command``, ``rank N``);
- ``preparation``: ``prepared`` (a folder of prepared data appeared in the cache),
  ``reused`` (the log says ``reusing prepared data``) or ``not reported``;
  ``preparation_seconds`` and ``prepared_by`` from the ``manifest.json`` of the folders
  prepared (``hfattn/data/prepared.py``); ``preparing_lines`` / ``reusing_lines``: those log
  lines (under several processes only the first prints them);
- ``steps_per_s``: steps ``--steady-from`` to the last one over the ``wall_s`` between their
  records.

A ``prepare`` case (``hfattn prepare RECIPE --set data.source=CORPUS``) runs to its exit instead
and records ``seconds_to_prepared``. A ``model`` case (``...-model/``) trains to the saved model:
the same command with ``--set training.max_steps=STEPS``, run to its exit, final evaluation
included, and records ``seconds_to_saved_model`` (from the command's start to its exit with the
model folder's ``eval_results.json`` written), ``final_evaluation_s`` (the run's own count of
its final evaluation, ``eval_results.json``), ``scored`` (each split's examples scored, and out
of how many when sampled), ``evaluation_lines`` (the log's ``evaluating the ... split`` lines
and progress-bar updates of the evaluation) and ``split_sizes`` (the log's line of the split
sizes). Its corpora include ``1M``, a JSON Lines file of a million pairs with no held-out split
of its own (:func:`~benchmarks.lib.scale_corpora.bible_jsonl`): the held-out splits are the
ones hfattn carves. A run that makes no step (killed over ``--rss-limit-gb``,
failed, out of time) keeps its peak
RSS and the end of its output (``log_tail``), and its case's second run is not made. A case's
``targets`` are the issue's (:data:`TARGETS`), each with ``met`` true, false (every target of
a case whose first run made no step) or ``null`` (not measured). The results file holds the
provenance, the settings and the cases (each with its corpus, command, load average at its
start and commit); ``--update`` keeps the cases of the previous file that are not run now.
``--quick`` runs the cases on tiny corpora (:data:`QUICK_CORPORA`) for a few steps and writes
``data_scale_quick.json`` (not published).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.lib.benchlib import (
    BenchReport,
    add_json_argument,
    is_met,
    load_average,
    write_atomically,
)
from benchmarks.lib.process_tree import GB, Watch, Watched, run_watched
from benchmarks.lib.scale_corpora import bible_jsonl, bible_pairs, shakespeare_text
from hfattn.common.launch import cpu_processes_command
from hfattn.common.machine import hfattn_commit, provenance
from hfattn.data.prepared import MANIFEST_FILE, ROOT_VARIABLE, source_identity
from hfattn.storage.run_folder import EVAL_RESULTS_FILE, METRICS_FILE

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DEFAULT_OUT = RESULTS / "data_scale.json"
QUICK_OUT = RESULTS / "data_scale_quick.json"
DEFAULT_WORK = Path(tempfile.gettempdir()) / "hfattn-bench-data-scale"
LOG_TAIL_LINES = 15


@dataclass(frozen=True)
class Corpus:
    """A corpus of the cases: the embedded plays (``text_bytes``, ``repeats`` and
    ``jsonl_rows`` unset), a text of ``text_bytes`` (:func:`shakespeare_text`), Bible pairs
    repeated ``repeats`` times (:func:`bible_pairs`, the first ``base_rows`` verses or all) or
    a JSON Lines file of ``jsonl_rows`` pairs (:func:`bible_jsonl`)."""

    label: str
    text_bytes: int | None = None
    repeats: int | None = None
    base_rows: int | None = None
    jsonl_rows: int | None = None

    @property
    def pairs(self) -> bool:
        """Whether the corpus is sentence pairs (else a text)."""
        return self.repeats is not None or self.jsonl_rows is not None


CORPORA = {
    "4.4MB": Corpus("4.4MB"),
    "100MB": Corpus("100MB", text_bytes=100_000_000),
    "1GB": Corpus("1GB", text_bytes=1_000_000_000),
    "31k": Corpus("31k", repeats=1),
    "290k": Corpus("290k", repeats=10),
    "1.45M": Corpus("1.45M", repeats=50),
    "4.5M": Corpus("4.5M", repeats=155),
    "1M": Corpus("1M", jsonl_rows=1_000_000),
}
"""The corpora by label: the plays as the recipe ships them (``data.source: shakespeare``),
texts of the training plays repeated, the Bible's 29,004 training verses repeated (a
``save_to_disk`` folder with the Bible's own held-out books, or ``1M``: a JSON Lines file with
no held-out split)."""
QUICK_CORPORA = {
    "4.4MB": Corpus("4.4MB", text_bytes=150_000),
    "100MB": Corpus("100MB", text_bytes=300_000),
    "1GB": Corpus("1GB", text_bytes=450_000),
    "31k": Corpus("31k", repeats=1, base_rows=1000),
    "290k": Corpus("290k", repeats=2, base_rows=1000),
    "1.45M": Corpus("1.45M", repeats=3, base_rows=1000),
    "4.5M": Corpus("4.5M", repeats=4, base_rows=1000),
    "1M": Corpus("1M", jsonl_rows=3000),
}
"""``--quick``: the same labels on tiny corpora (a few hundred kB, a few thousand pairs)."""

CHAR = "char_rnn_shakespeare"
LUONG = "bahdanau_bible_en_es"
VASWANI = "vaswani_bible_en_es_base"
CHOLLET = "vaswani_spa_eng_chollet"


@dataclass(frozen=True)
class Case:
    """One recipe on one corpus in ``processes`` processes, watched for ``steps`` steps."""

    name: str
    recipe: str
    corpus: str
    steps: int = 100
    processes: int = 1
    command: str = "train"
    """``train`` (watched to step :attr:`steps`), ``prepare`` (``hfattn prepare``, watched to
    its exit: the data path alone) or ``model`` (``training.max_steps`` set to :attr:`steps`,
    watched to its exit: to the saved model, final evaluation included)."""


CASES = {
    case.name: case
    for case in (
        *(Case(f"char-rnn/{size}", CHAR, size) for size in ("4.4MB", "100MB", "1GB")),
        *(Case(f"luong/{size}", LUONG, size) for size in ("31k", "290k", "1.45M", "4.5M")),
        *(
            Case(f"vaswani/{size}", VASWANI, size, steps=3)
            for size in ("31k", "290k", "1.45M", "4.5M")
        ),
        *(
            Case(f"vaswani-prepare/{size}", VASWANI, size, command="prepare")
            for size in ("31k", "1.45M", "4.5M")
        ),
        Case("luong-2proc/1.45M", LUONG, "1.45M", processes=2),
        Case("char-rnn-model/100MB", CHAR, "100MB", command="model"),
        Case("chollet-model/1M", CHOLLET, "1M", command="model"),
    )
}
"""Every case by name. The paper-base Transformer's step takes a minute or more on a 2-core CPU
(25,000 target tokens) and holds about 17 GB there: its ``train`` cases are watched for 3 steps
(time to the first step, memory), not 100, and have no steady steps/s; its ``prepare`` cases
measure its data path alone (``hfattn prepare``: the tokenizer and every split encoded), which
is all of the first step's wait that the data makes. The pairs' ``model`` case trains Chollet's
Transformer (``recipes/vaswani_spa_eng_chollet.yaml``, the small Transformer a user takes for
pairs of their own): the Bible recipes score their held-out books whole, at beam 4, by
design."""
QUICK_STEPS, QUICK_STEADY_FROM = 4, 2


# ---------------------------------------------------------------------------- corpora


KEY_REPEATS = 7
"""Calls of :func:`~hfattn.data.prepared.source_identity` timed for a corpus's ``key_ms``."""


def key_ms(source: str) -> float:
    """The median milliseconds of the source's part of the preparation key
    (:func:`~hfattn.data.prepared.source_identity`: each file's size, modification time and a
    digest of sampled blocks), over :data:`KEY_REPEATS` calls: what every run, a reused
    preparation's included, spends to know its data."""
    times = []
    for _ in range(KEY_REPEATS):
        began = time.perf_counter()
        source_identity(source)
        times.append(time.perf_counter() - began)
    return round(statistics.median(times) * 1000, 2)


def make_corpus(corpus: Corpus, work: Path) -> dict:
    """The corpus under ``work/corpora`` (made, or reused when there), described, with the
    cost of its preparation key (:func:`key_ms`); the embedded plays are ``data.source:
    shakespeare``."""
    if corpus.text_bytes is None and not corpus.pairs:
        return {"source": "shakespeare", "label": corpus.label, "made_of": "the Shakespeare "
                "plays as the recipe ships them (data.source: shakespeare)"}  # fmt: skip
    folder = work / "corpora"
    if corpus.jsonl_rows is not None:
        made = bible_jsonl(folder / f"bible-{corpus.jsonl_rows}.jsonl", corpus.jsonl_rows)
    elif corpus.pairs:
        base = "" if corpus.base_rows is None else f"-first{corpus.base_rows}"
        made = bible_pairs(folder / f"bible{base}-x{corpus.repeats}", corpus.repeats,
                           corpus.base_rows)  # fmt: skip
    else:
        made = shakespeare_text(folder / f"shakespeare-{corpus.text_bytes}.txt", corpus.text_bytes)
    return {"source": made["path"], "label": corpus.label, **made,
            "key_ms": key_ms(made["path"])}  # fmt: skip


# ---------------------------------------------------------------------------- one run


class MetricsTail:
    """The train records of a run's ``metrics.jsonl`` as it grows (whole lines only)."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.rows: list[dict] = []

    def read(self) -> list[dict]:
        """The train records so far."""
        try:
            with open(self.path, "rb") as file:
                file.seek(self.offset)
                chunk = file.read()
        except FileNotFoundError:
            return self.rows
        whole = chunk[: chunk.rfind(b"\n") + 1]
        self.offset += len(whole)
        for line in whole.decode("utf-8").splitlines():
            record = json.loads(line) if line.strip() else {}
            if record.get("split") == "train":
                self.rows.append(record)
        return self.rows


def steps_seen_until(tail: MetricsTail, steps: int) -> Callable[[Watch], bool]:
    """The watch's condition: the record of step ``steps`` is written; marks ``first step``
    at the first train record."""

    def until(watch: Watch) -> bool:
        rows = tail.read()
        if rows:
            watch.mark("first step")
        return bool(rows) and rows[-1]["step"] >= steps

    return until


def never(watch: Watch) -> bool:
    """The watch's condition of a ``prepare`` case: it runs until the command exits."""
    return False


def first_step_seen(tail: MetricsTail) -> Callable[[Watch], bool]:
    """The watch's condition of a ``model`` case: it runs until the command exits; marks
    ``first step`` at the first train record."""

    def until(watch: Watch) -> bool:
        if tail.read():
            watch.mark("first step")
        return False

    return until


EVALUATING = re.compile(r"evaluating the (?P<split>\S+) split with ")
EVALUATION_BAR = re.compile(r"\b(validation|test)\b[^|]*:\s*\d+%\|")
SPLIT_SIZES = re.compile(r"\btrain [\d,]+ .*\bvalidation [\d,]+.*\btest [\d,]+")
"""The log lines of a run's final evaluation (``hfattn/training/finishing.py``, the bars of
``hfattn/common/progress.py``) and of its split sizes."""


def saved_model_record(watched: Watched, output_dir: Path, lines: list[str]) -> dict:
    """What a ``model`` case's run adds to its record (see the module docstring): the seconds
    to the saved model, the final evaluation's seconds and examples, and its log lines."""
    results_path = output_dir / EVAL_RESULTS_FILE
    saved = watched.status == "exited" and watched.returncode == 0 and results_path.is_file()
    results = json.loads(results_path.read_text("utf-8")) if saved else {}
    training = results.get("training", {})
    scored = {split: {k: scores[k] for k in ("num_examples", "sampled_from") if k in scores}
              for split, scores in results.get("all_metrics", {}).items()}  # fmt: skip
    sizes = [m.group(0) for m in map(SPLIT_SIZES.search, lines) if m]
    return {
        "seconds_to_saved_model": round(watched.seconds, 1) if saved else None,
        "final_evaluation_s": training.get("final_eval_runtime_s"),
        "scored": scored,
        "evaluation_lines": {
            "evaluating": [m["split"] for m in map(EVALUATING.search, lines) if m],
            "bar_updates": sum(bool(EVALUATION_BAR.search(line)) for line in lines),
        },
        "split_sizes": sizes[-1] if sizes else None,
    }


def ready_seconds(run: dict) -> float | None:
    """The seconds a run took to be ready: to its first step (``train``) or to its exit
    (``prepare``); ``None`` when it never was."""
    return run.get("seconds_to_first_step") or run.get("seconds_to_prepared")


def steady_steps_per_s(rows: list[dict], steady_from: int) -> float | None:
    """Steps per second from the record of step ``steady_from`` to the last one (their
    ``wall_s``), ``None`` with fewer steps."""
    first = next((r for r in rows if r["step"] == steady_from), None)
    last = rows[-1] if rows else None
    if first is None or last["step"] <= steady_from or last["wall_s"] <= first["wall_s"]:
        return None
    return round((last["step"] - steady_from) / (last["wall_s"] - first["wall_s"]), 3)


PREPARING = re.compile(r": preparing (?P<what>.+) into (?P<folder>\S+)\s*$")
REUSING = re.compile(r": reusing prepared data (?P<folder>\S+) .*prepared by (?P<by>.+)\)\s*$")
WAITING = re.compile(r": waiting for another process preparing ")
"""The lines of ``hfattn/data/prepared.py`` (its logger; printed by the first process only)."""


def log_lines(log: Path) -> list[str]:
    """The lines of a run's output (a progress bar's ``\\r`` updates split too)."""
    return re.split(r"[\r\n]+", log.read_text("utf-8", errors="replace"))


def prepared_folders(cache: Path) -> dict[str, dict]:
    """The manifests of the complete prepared folders of the cache ``cache``, by name."""
    found = {}
    for manifest in sorted(cache.glob(f"*/{MANIFEST_FILE}")):
        try:
            found[manifest.parent.name] = json.loads(manifest.read_text("utf-8"))
        except (OSError, ValueError):
            continue
    return found


def preparation_of(lines: list[str], before: dict, after: dict) -> dict:
    """How a run came by its prepared data: the folders that appeared in its cache
    (``after`` less ``before``, their manifests) and its log lines."""
    new = {name: after[name] for name in sorted(set(after) - set(before))}
    preparing = [m["folder"] for m in map(PREPARING.search, lines) if m]
    reusing = [m.groupdict() for m in map(REUSING.search, lines) if m]
    if new:
        status = "prepared"
    elif reusing:
        status = "reused"
    else:
        status = "not reported"
    seconds = [m.get("seconds") for m in new.values()]
    per_folder = {folder: preparing.count(folder) for folder in set(preparing)}
    return {
        "preparation": status,
        "preparation_seconds": round(sum(seconds), 2) if new and None not in seconds else None,
        "prepared_by": sorted({m.get("prepared_by", "?") for m in new.values()}),
        "prepared_folders": sorted(new),
        "preparing_lines": len(preparing),
        "most_preparing_lines_for_one_folder": max(per_folder.values(), default=0),
        "reusing_lines": len(reusing),
        "reused_prepared_by": sorted({r["by"] for r in reusing}),
        "waiting_lines": sum(bool(WAITING.search(line)) for line in lines),
    }


def gb(value: float | None) -> float | None:
    """Bytes in GB, three decimals (``None`` stays ``None``)."""
    return None if value is None else round(value / GB, 3)


def run_record(watched: Watched, rows: list[dict], prepared: dict, log: Path,
               steady_from: int) -> dict:  # fmt: skip
    """The record of one run (see the module docstring)."""
    record = {
        "status": watched.status,
        "returncode": watched.returncode,
        "seconds": round(watched.seconds, 1),
        "seconds_to_first_step": (
            round(watched.marks["first step"], 1) if "first step" in watched.marks else None
        ),  # fmt: skip
        "first_step_wall_s": rows[0]["wall_s"] if rows else None,
        "steps_seen": rows[-1]["step"] if rows else 0,
        "steps_per_s": steady_steps_per_s(rows, steady_from),
        "peak_rss_gb": gb(watched.peak_rss),
        "peak_rss_training_gb": gb(watched.peak_rss_after.get("first step")),
        "peak_rss_per_process_gb": {k: gb(v) for k, v in watched.peak_rss_per_process.items()},
        "rss_samples": watched.samples,
        **prepared,
        "log": str(log),
    }
    if watched.status != "done":
        lines = [line for line in log_lines(log) if line.strip()]
        record["log_tail"] = lines[-LOG_TAIL_LINES:]
    return record


def skipped_run(like: dict, reason: str) -> dict:
    """The record of a run not made: ``like``'s fields, each ``None``."""
    return {**dict.fromkeys(like), "status": "not run", "reason": reason,
            "peak_rss_per_process_gb": {}}  # fmt: skip


def train_command(
    case: Case, source: str, output_dir: Path, steps: int | None = None
) -> tuple[list[str], str]:
    """The command of a case's run (argv) and how a user types it (``steps``: a ``model``
    case's ``training.max_steps``)."""
    arguments = [
        "train", f"recipes/{case.recipe}.yaml",
        "--set", f"data.source={source}",
        "--set", f"output_dir={output_dir}",
        "--set", "training.log_every=1",
        "--overwrite",
    ]  # fmt: skip
    if case.command == "model":
        arguments[-1:-1] = ["--set", f"training.max_steps={steps or case.steps}"]
    if case.command == "prepare":
        arguments = ["prepare", f"recipes/{case.recipe}.yaml", "--set", f"data.source={source}"]
    typed = " ".join(arguments)
    if case.processes == 1:
        return [sys.executable, "-m", "hfattn", *arguments], f"hfattn {typed}"
    launcher = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
                str(case.processes)]  # fmt: skip
    shown = cpu_processes_command(typed).replace(" N ", f" {case.processes} ")
    return [sys.executable, *launcher, "-m", "hfattn", *arguments], shown


@dataclass(frozen=True)
class Settings:
    """The measuring settings of one invocation."""

    steps: int | None
    """Steps watched in every case (``--steps``; ``None``: :attr:`quick_steps`, else each
    case's own)."""
    steady_from: int
    poll_s: float
    timeout_s: float
    rss_limit_gb: float
    quick_steps: int | None = None
    """``--quick`` without ``--steps``: :data:`QUICK_STEPS`, the steps of every case but the
    ``model`` ones (their recipes refuse a run that ends within its warm-up)."""


def run_case(case: Case, corpus: dict, settings: Settings, work: Path) -> dict:
    """Both runs of ``case`` on ``corpus`` (:func:`make_corpus`) under a cache of its own."""
    slug = case.name.replace("/", "-")
    cache = work / "prepared" / slug
    shutil.rmtree(cache, ignore_errors=True)
    cache.mkdir(parents=True)
    env = {**os.environ, ROOT_VARIABLE: str(cache)}
    if case.processes > 1:
        env["ACCELERATE_USE_CPU"] = "1"
    quick = settings.quick_steps if case.command != "model" else None
    steps = settings.steps or quick or case.steps
    record = {"recipe": case.recipe, "processes": case.processes, "steps_watched": steps,
              "steady_from": settings.steady_from,
              "corpus": corpus, "load_average": load_average(),
              "hfattn_commit": hfattn_commit(), "prepared_dir": str(cache)}  # fmt: skip
    for run in ("first_run", "cached_run"):
        if run == "cached_run" and ready_seconds(record["first_run"]) is None:
            record[run] = skipped_run(record["first_run"], "the first run made no step")
            continue
        output_dir = work / "runs" / slug / run
        shutil.rmtree(output_dir, ignore_errors=True)  # no old metrics.jsonl to read
        command, typed = train_command(case, corpus["source"], output_dir, steps)
        record["command"] = typed
        before = prepared_folders(cache)
        tail = MetricsTail(output_dir / METRICS_FILE)
        log = work / "logs" / f"{slug}-{run}.log"
        print(f"{case.name}, {run.replace('_', ' ')}: {typed}", flush=True)
        until = {"train": steps_seen_until(tail, steps), "model": first_step_seen(tail)}.get(
            case.command, never
        )
        watched = run_watched(command, env=env, cwd=ROOT, log_path=log,
                              until=until, poll_s=settings.poll_s,
                              timeout_s=settings.timeout_s,
                              rss_limit_bytes=settings.rss_limit_gb * GB)  # fmt: skip
        lines = log_lines(log)
        prepared = preparation_of(lines, before, prepared_folders(cache))
        tail.read()
        record[run] = run_record(watched, tail.rows, prepared, log, settings.steady_from)
        if case.command == "model":
            record[run].update(saved_model_record(watched, output_dir, lines))
        if case.command == "prepare":
            done = watched.status == "exited" and watched.returncode == 0
            record[run]["seconds_to_prepared"] = round(watched.seconds, 1) if done else None
        print(json.dumps({k: v for k, v in record[run].items() if k != "log_tail"}), flush=True)
    runs = (record["first_run"], record["cached_run"])
    peaks = [run["peak_rss_gb"] for run in runs if run["peak_rss_gb"] is not None]
    record["peak_rss_gb"] = max(peaks, default=None)
    record["steps_per_s"] = record["cached_run"]["steps_per_s"]
    return record


# ---------------------------------------------------------------------------- targets


def _run(name: str, key: str) -> Callable[[dict, dict], float | None]:
    return lambda record, cases: record[name][key]


def _peak(record: dict, cases: dict) -> float | None:
    return record["peak_rss_gb"]


def _first_peak(record: dict, cases: dict) -> float | None:
    return record["first_run"]["peak_rss_gb"]


def _steps_against(reference: str) -> Callable[[dict, dict], float | None]:
    def ratio(record: dict, cases: dict) -> float | None:
        other = cases.get(reference, {}).get("steps_per_s")
        mine = record["steps_per_s"]
        return round(mine / other, 3) if mine and other else None

    return ratio


def _training_rss_above(reference: str) -> Callable[[dict, dict], float | None]:
    def above(record: dict, cases: dict) -> float | None:
        other = cases.get(reference, {}).get("cached_run", {}).get("peak_rss_training_gb")
        mine = record["cached_run"]["peak_rss_training_gb"]
        return None if mine is None or other is None else round(mine - other, 3)

    return above


def _ranks_peak(record: dict, cases: dict) -> float | None:
    ranks = [v for k, v in record["first_run"]["peak_rss_per_process_gb"].items()
             if k.startswith("rank ")]  # fmt: skip
    return max(ranks, default=None)


def _one_preparation(record: dict, cases: dict) -> float | None:
    run = record["first_run"]
    if run["preparation"] != "prepared":
        return None
    return max(run["most_preparing_lines_for_one_folder"], 1)


FIRST = ("first run: seconds to the first step", _run("first_run", "seconds_to_first_step"))
SECOND = ("second run: seconds to the first step", _run("cached_run", "seconds_to_first_step"))
PEAK = ("peak RSS of the process tree (GB)", _peak)
PREPARED_IN = ("first run: preparation seconds", _run("first_run", "preparation_seconds"))
PREPARED_PEAK = ("first run: peak RSS of the process tree (GB)", _first_peak)


def _pairs_targets(first: float, second: float, peak: float) -> tuple:
    return ((*FIRST, first, "<="), (*SECOND, second, "<="), (*PEAK, peak, "<="))


def _big_pairs_targets(model: str) -> tuple:
    return (
        (*PREPARED_IN, 360, "<="),
        (*PREPARED_PEAK, 4.0, "<="),
        (f"second run: training RSS above {model}/31k's (GB)", _training_rss_above(f"{model}/31k"),
         1.0, "<="),
    )  # fmt: skip


def _splits_announced(record: dict, cases: dict) -> float | None:
    return len(record["first_run"].get("evaluation_lines", {}).get("evaluating", [])) or None


def _saved_model_targets() -> tuple:
    return (
        ("first run: final evaluation seconds", _run("first_run", "final_evaluation_s"), 120,
         "<="),
        ("second run: final evaluation seconds", _run("cached_run", "final_evaluation_s"), 120,
         "<="),
        ("first run: splits announced as they are scored", _splits_announced, 1, ">="),
    )  # fmt: skip


TARGETS = {
    "char-rnn/100MB": (
        (*FIRST, 60, "<="),
        (*SECOND, 10, "<="),
        (*PEAK, 2.5, "<="),
        ("steady steps/s over char-rnn/4.4MB's", _steps_against("char-rnn/4.4MB"), 0.9, ">="),
    ),
    "char-rnn/1GB": ((*PREPARED_IN, 600, "<="), (*PREPARED_PEAK, 3.0, "<=")),
    "luong/1.45M": _pairs_targets(120, 15, 3.0),
    "vaswani/1.45M": _pairs_targets(120, 15, 3.0),
    "luong/4.5M": _big_pairs_targets("luong"),
    "vaswani/4.5M": _big_pairs_targets("vaswani"),
    "vaswani-prepare/1.45M": (
        ("first run: seconds to prepared", _run("first_run", "seconds_to_prepared"), 120, "<="),
        ("second run: seconds to prepared", _run("cached_run", "seconds_to_prepared"), 15, "<="),
        (*PEAK, 3.0, "<="),
    ),
    "vaswani-prepare/4.5M": ((*PREPARED_IN, 360, "<="), (*PREPARED_PEAK, 4.0, "<=")),
    "luong-2proc/1.45M": (
        ("first run: preparations of one prepared folder", _one_preparation, 1, "<="),
        ("first run: peak RSS of each process (GB)", _ranks_peak, 3.0, "<="),
    ),
    "char-rnn-model/100MB": _saved_model_targets(),
    "chollet-model/1M": _saved_model_targets(),
}
"""The targets of the large-corpora issues ("Done when", on a 2-core, 24 GB machine), by case:
name, value (from the case's record and every case's), target, comparison. A ``model`` case
reaches its saved model with its final evaluation announced and under 2 minutes."""


def targets_of(name: str, cases: dict) -> list[dict]:
    """The targets of the case ``name`` met or not by its record in ``cases``: ``met`` is
    ``None`` for a figure not measured, and false for every figure of a case whose first run
    made no step (killed, failed, out of time)."""
    out = []
    failed = ready_seconds(cases[name].get("first_run", {})) is None
    for label, value_of, target, comparison in TARGETS.get(name, ()):
        value = value_of(cases[name], cases)
        met = False if failed else is_met(value, target, comparison)
        out.append({"name": label, "value": value, "target": target, "comparison": comparison,
                    "met": met})  # fmt: skip
    return out


# ---------------------------------------------------------------------------- the file


def previous_cases(out: Path, quick: bool, machine: dict) -> dict:
    """The cases of the results file ``out`` (``--update``), when it was measured on this
    machine in the same mode.

    Raises:
        SystemExit: the file names another machine or mode.
    """
    if not out.is_file():
        return {}
    data = json.loads(out.read_text("utf-8"))
    if data.get("quick", False) != quick or data["provenance"]["machine"] != machine:
        raise SystemExit(f"--update: {out} was measured on {data['provenance']['machine']} "
                         f"(quick: {data.get('quick', False)}), not here: its cases cannot be "
                         "kept")  # fmt: skip
    return data["cases"]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line, with the defaults that depend on ``--quick`` filled in."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", choices=list(CASES), metavar="NAME",
                        help=f"cases to run (default all: {', '.join(CASES)})")  # fmt: skip
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK,
                        help="where the corpora, caches, runs and logs go (corpora are reused)")  # fmt: skip
    parser.add_argument("--out", type=Path, help=f"results file (default {DEFAULT_OUT}; with "
                        f"--quick {QUICK_OUT.name})")  # fmt: skip
    parser.add_argument("--update", action="store_true",
                        help="keep the cases of --out that are not run now")  # fmt: skip
    parser.add_argument("--quick", action="store_true",
                        help=f"tiny corpora, {QUICK_STEPS} steps: checks that it runs")  # fmt: skip
    parser.add_argument("--steps", type=int, help="steps watched in every case")
    parser.add_argument("--steady-from", type=int, help="first step of the steps/s (default 10)")
    parser.add_argument("--poll-s", type=float, default=0.1, help="RSS and metrics polling")
    parser.add_argument("--timeout-s", type=float, default=3600.0, help="limit of one run")
    parser.add_argument("--rss-limit-gb", type=float, default=12.0,
                        help="stop a run whose process tree holds more (a shared machine)")  # fmt: skip
    add_json_argument(parser)
    args = parser.parse_args(argv)
    args.out = args.out or (QUICK_OUT if args.quick else DEFAULT_OUT)
    args.quick_steps = QUICK_STEPS if args.quick and args.steps is None else None
    args.steady_from = args.steady_from or (QUICK_STEADY_FROM if args.quick else 10)
    return args


def bible_missing() -> str | None:
    """Why the Bible cases cannot run here, or ``None``."""
    from hfattn.data.bible import BibleNotInstalledError, module_versions

    try:
        module_versions()
    except BibleNotInstalledError as error:
        return f"the Bible is not installed ({error}; `make sword`)"
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the cases, write ``--out`` and the ``--json`` report; exit status 0 (a missed
    target is a figure, not a failure)."""
    args = parse_args(argv)
    settings = Settings(args.steps, args.steady_from, args.poll_s, args.timeout_s,
                        args.rss_limit_gb, args.quick_steps)  # fmt: skip
    shown = sys.argv[1:] if argv is None else argv
    origin = provenance(None, argv=["python", "-m", "benchmarks.bench_data_scale", *shown])
    cases = previous_cases(args.out, args.quick, origin["machine"]) if args.update else {}
    corpora_table = QUICK_CORPORA if args.quick else CORPORA
    work = args.work.resolve()
    missing = bible_missing()
    not_run, corpora = {}, {}
    for name in args.cases or list(CASES):
        case = CASES[name]
        corpus = corpora_table[case.corpus]
        if corpus.pairs and missing:
            not_run[name] = missing
            print(f"{name}: not run: {missing}")
            continue
        if case.corpus not in corpora:
            corpora[case.corpus] = make_corpus(corpus, work)
        cases[name] = run_case(case, corpora[case.corpus], settings, work)
    cases = {name: cases[name] for name in CASES if name in cases}  # kept ones in their place
    report = BenchReport("data_scale")
    for name, record in cases.items():
        record["targets"] = targets_of(name, cases)
        for target in record["targets"]:
            if target["value"] is not None:
                report.add(f"{name}: {target['name']}", target["value"], "", target["target"],
                           target["comparison"])  # fmt: skip
    results = {"benchmark": "data_scale", "quick": args.quick, "provenance": origin,
               "settings": {"steps": args.steps or args.quick_steps,
                            "steady_from": args.steady_from,
                            "poll_s": args.poll_s, "timeout_s": args.timeout_s,
                            "rss_limit_gb": args.rss_limit_gb, "work": str(work)},
               "cases": cases, "not_run": not_run}  # fmt: skip
    write_atomically(args.out, json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")
    if not cases and not_run:
        report.not_run = "; ".join(sorted(set(not_run.values())))
    report.write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
