"""Attention variants × exact match on Géron's date-normalisation task, several seeds each.

    .venv/bin/python -m benchmarks.bench_scores [--seeds 0 1 2] [--jobs 2] [--out DIR]
        [--set training.max_steps=600 ...] [--json PATH]

Every variant trains ``recipes/bahdanau_date_normalization.yaml`` with the same data, size
and schedule, changing only ``model.attention`` / ``model.score`` / ``model.distribution``
(and ``training.seed``); each run is a separate ``hfattn train`` process (``--jobs`` at a
time, one torch thread each). Prints a markdown table of test exact match (mean ± std over
seeds) and the mean training time; ``--json`` writes the same as records (no targets: these
are quality figures, not ratios).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from benchmarks.lib.benchlib import BenchReport, add_json_argument
from hfattn.storage.run_folder import eval_results_path

RECIPE = Path(__file__).resolve().parents[1] / "recipes" / "bahdanau_date_normalization.yaml"

VARIANTS: dict[str, list[str]] = {
    "no attention (Sutskever/Cho)": ["model.attention=null"],
    "Bahdanau, additive": ["model.attention=bahdanau", "model.score=additive"],
    "Luong, dot": ["model.attention=luong", "model.score=dot"],
    "Luong, general": ["model.attention=luong", "model.score=general"],
    "Luong, concat (additive)": ["model.attention=luong", "model.score=additive"],
    "Luong, location": ["model.attention=luong", "model.score=location"],
    "Luong, cosine": ["model.attention=luong", "model.score=cosine"],
    "Luong, gaussian kernel": ["model.attention=luong", "model.score=gaussian"],
    "Luong, general + sparsemax": [
        "model.attention=luong",
        "model.score=general",
        "model.distribution=sparsemax",
    ],
}
"""Row label → recipe overrides."""


def run_one(overrides: list[str], seed: int, out: Path) -> dict:
    """Train one variant/seed in a subprocess; return its test scores and runtime."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    command = [sys.executable, "-m", "hfattn", "train", str(RECIPE), "--set", f"output_dir={out}"]
    for item in [*overrides, f"training.seed={seed}"]:
        command += ["--set", item]
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(
            f"hfattn train with {' '.join(overrides)} seed {seed} exited with "
            f"{result.returncode}: {last}"
        )
    results = json.loads(eval_results_path(out).read_text())
    return {**results["all_metrics"]["test"], "seconds": results["training"]["train_runtime_s"]}


def main(argv: list[str] | None = None) -> int:
    """Run every variant × seed and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", help="keep the run folders here (default: a temp folder)")
    parser.add_argument("--set", dest="extra", action="append", default=[], metavar="KEY=VALUE")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    root = Path(args.out or tempfile.mkdtemp(prefix="bench-scores-"))
    jobs = [
        (label, seed, [*overrides, *args.extra])
        for label, overrides in VARIANTS.items()
        for seed in args.seeds
    ]
    start = time.perf_counter()
    with ThreadPoolExecutor(args.jobs) as pool:
        futures = {
            (label, seed): pool.submit(
                run_one, overrides, seed, root / f"{label.split(' (')[0]}-{seed}".replace(" ", "_")
            )
            for label, seed, overrides in jobs
        }
        results = {key: future.result() for key, future in futures.items()}
    print(f"\n{len(jobs)} runs in {time.perf_counter() - start:.0f} s ({args.jobs} at a time)\n")
    print("| attention | test exact match (mean ± std) | per seed | train s (mean) |")
    print("|---|---:|---|---:|")
    report = BenchReport("scores")
    for label in VARIANTS:
        scores = [results[(label, s)]["exact_match"] for s in args.seeds]
        seconds = statistics.mean(results[(label, s)]["seconds"] for s in args.seeds)
        spread = statistics.stdev(scores) if len(scores) > 1 else 0.0
        per_seed = ", ".join(f"{v:.3f}" for v in scores)
        print(
            f"| {label} | {statistics.mean(scores):.3f} ± {spread:.3f} | {per_seed} | {seconds:.0f} |"
        )
        seeds = ", ".join(map(str, args.seeds))
        report.add(
            f"date normalisation test exact match, {label}",
            statistics.mean(scores),
            detail=f"seed {seeds}; {seconds:.0f} s of training"
            if len(scores) == 1
            else f"mean ± {spread:.3f} over seeds {seeds}: {per_seed}; {seconds:.0f} s of training",
        )
    report.write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
