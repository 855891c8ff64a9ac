"""One case of ``benchmarks/bench_data_scale.py`` run twice as a user runs it (an empty
prepared-data cache, then the cache the first run left), watched until its step (or its
exit), and what each run's files and log say: seconds to the first step, peak RSS, how the
data was come by, steady steps/s, and for a ``model`` case the saved model."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.lib.benchlib import load_average
from benchmarks.lib.process_tree import GB, Watch, Watched, run_watched
from benchmarks.lib.scale_cases import ROOT, Case
from hfattn.common.launch import cpu_processes_command
from hfattn.common.machine import hfattn_commit
from hfattn.data.prepared import MANIFEST_FILE, ROOT_VARIABLE
from hfattn.storage.run_folder import EVAL_RESULTS_FILE, METRICS_FILE

LOG_TAIL_LINES = 15


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
