"""An example sweep as a user runs it, and its best recipe trained again.

    .venv/bin/python -m benchmarks.bench_sweep [--processes 2] [--retrains 3] [--work DIR]

1. ``hfattn sweep RECIPE --space SPACE --trials N --set training.eval_every=150`` in
   ``--processes`` processes at once on one study (one torch thread each; sampler seeds
   ``--seed``, ``--seed`` + 1, ...), timed from their start to the last one's exit;
2. ``hfattn train best_recipe.yaml`` ``--retrains`` times, ``training.seed`` 0, 1, 2, ...
   (scored on the validation split, as the trials are), ``--processes`` at a time: the
   run-to-run spread of the best recipe, against which the best trial's value is read.

Writes ``sweep_<recipe>.json`` (``--out``, with provenance: commit, command, machine): every
trial (state, value, steps, parameters, its seconds), the counts by state, the best
trial, the retrained runs' values and whether the best trial's value lies within their range.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import hfattn.tasks  # noqa: F401  (registers the tasks that load_recipe parses)
from benchmarks.lib.benchlib import load_average, write_atomically
from hfattn.common.machine import provenance
from hfattn.orchestration.sweep_outputs import best_trial
from hfattn.recipes import load_recipe
from hfattn.storage.run_folder import EVAL_RESULTS_FILE

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "recipes" / "bahdanau_date_normalization.yaml"
SPACE = ROOT / "recipes" / "sweeps" / "bahdanau_date_normalization.yaml"
SETTINGS = ("training.eval_every=150",)
"""The example's ``--set``: a validation every 150 of the recipe's 600 steps, where losing
trials are pruned (the recipe as shipped validates at its end only)."""


def run_at_once(commands: list[list[str]]) -> float:
    """Run ``commands`` together, one torch thread each; the seconds until the last exits.

    Raises:
        RuntimeError: a command failed (its exit status).
    """
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    began = time.monotonic()
    children = [subprocess.Popen(command, cwd=ROOT, env=env) for command in commands]
    statuses = [child.wait() for child in children]
    seconds = time.monotonic() - began
    for command, status in zip(commands, statuses, strict=True):
        if status:
            raise RuntimeError(f"{' '.join(command)} exited with status {status}")
    return seconds


def hfattn(*args: str) -> list[str]:
    """The command line of ``hfattn ARGS`` in this interpreter."""
    return [sys.executable, "-m", "hfattn", *args]


def run_results(folder: Path) -> dict:
    """The ``eval_results.json`` of a run folder."""
    return json.loads((folder / EVAL_RESULTS_FILE).read_text(encoding="utf-8"))


def validation_score(results: dict, metric: str) -> float:
    """The saved model's validation ``metric`` (``loss`` included)."""
    return results["all_metrics"]["validation"][metric]


def trial_records(sweep: Path, study) -> list[dict]:
    """The sweep's ``trials.json`` rows, each with ``seconds``: the trial's own, from its start
    to its end as ``study`` records them (Optuna's ``duration``), and ``scores``: every
    validation metric of its saved model (a pruned trial's too), ``None`` for a trial that
    saved none."""
    rows = json.loads((sweep / "trials.json").read_text(encoding="utf-8"))
    durations = {t.number: t.duration.total_seconds() for t in study.trials if t.duration}
    for row in rows:
        seconds = durations.get(row["number"])
        row["seconds"] = None if seconds is None else round(seconds, 1)
        folder = row["run_folder"] and sweep / row["run_folder"]
        saved = folder and (folder / EVAL_RESULTS_FILE).is_file()
        row["scores"] = run_results(folder)["all_metrics"].get("validation") if saved else None
    return rows


def measure(args: argparse.Namespace, work: Path) -> dict:
    """Run the sweep and the retrains; the record (see the module docstring)."""
    sweep = work / "sweep"
    settings = [item for setting in args.settings for item in ("--set", setting)]
    sweep_command = hfattn("sweep", str(args.recipe), "--space", str(args.space), "--trials",
                           str(args.trials), "--output-dir", str(sweep), *settings)  # fmt: skip
    sampler_seeds = list(range(args.seed, args.seed + args.processes))  # one a process
    sweep_s = run_at_once([[*sweep_command, "--seed", str(seed)] for seed in sampler_seeds])
    import optuna

    recipe = load_recipe(args.recipe)
    study = optuna.load_study(study_name=recipe.name, storage=f"sqlite:///{sweep / 'study.db'}")
    trials = trial_records(sweep, study)
    metric = recipe.training.metric_for_best_model
    states = dict(Counter(row["state"] for row in trials))
    best = best_trial(study)  # the trial of the sweep's best_recipe.yaml
    retrains = []
    for first in range(0, args.retrains, args.processes):
        seeds = range(first, min(first + args.processes, args.retrains))
        run_at_once([hfattn("train", str(sweep / "best_recipe.yaml"),
                            "--set", f"output_dir={work / f'retrain-{seed}'}",
                            "--set", f"training.seed={seed}",
                            "--set", "evaluation.splits=[validation]") for seed in seeds])  # fmt: skip
        for seed in seeds:
            results = run_results(work / f"retrain-{seed}")
            retrains.append({"seed": seed, metric: validation_score(results, metric),
                             "scores": results["all_metrics"]["validation"],
                             "run_seconds": results["training"]["wall_time_s"]})  # fmt: skip
    values = [run[metric] for run in retrains]
    return {
        "recipe": args.recipe.stem,
        "space": str(args.space.relative_to(ROOT)),
        "settings": list(args.settings),
        "metric": metric,
        "larger_is_better": study.direction == optuna.study.StudyDirection.MAXIMIZE,
        "processes": args.processes,
        "sampler_seeds": sampler_seeds,
        "sweep_s": round(sweep_s, 1),
        "trials": trials,
        "states": states,
        "best": {"number": best.number, metric: best.value, "params": best.params},
        "retrains": retrains,
        "retrain_range": [min(values), max(values)],
        "best_within_retrain_range": min(values) <= best.value <= max(values),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the example sweep and write its results file (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipe", type=Path, default=RECIPE)
    parser.add_argument("--space", type=Path, default=SPACE)
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--set", dest="settings", action="append", default=None,
                        metavar="KEY=VALUE", help=f"the sweep's --set (default: {SETTINGS})")  # fmt: skip
    parser.add_argument("--processes", type=int, default=2, help="sweep processes at once")
    parser.add_argument("--seed", type=int, default=0, help="the first process's sampler seed "
                        "(the next process's is one more)")  # fmt: skip
    parser.add_argument("--retrains", type=int, default=3, help="trainings of the best recipe")
    parser.add_argument("--work", type=Path, help="keep the sweep and the runs here")
    parser.add_argument("--out", type=Path, help="default: benchmarks/results/sweep_<recipe>.json")
    args = parser.parse_args(argv)
    args.recipe, args.space = args.recipe.resolve(), args.space.resolve()
    args.settings = args.settings if args.settings is not None else list(SETTINGS)
    load = load_average()
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as scratch:
        work = args.work or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        record = measure(args, work)
    record["load_average_before"] = load
    record["provenance"] = provenance(None, argv)
    out = args.out or ROOT / "benchmarks" / "results" / f"sweep_{record['recipe']}.json"
    write_atomically(out, json.dumps(record, indent=2) + "\n")
    summary = {k: record[k] for k in ("sweep_s", "states", "best", "retrain_range",
                                      "best_within_retrain_range")}  # fmt: skip
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
