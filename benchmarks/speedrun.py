"""Time to quality: a recipe trained as a user trains it, timed from the command to the saved
model, with the validation BLEU at each periodic evaluation against the wall seconds.

    .venv/bin/python -m benchmarks.speedrun recipes/vaswani_bible_en_es_base.yaml \
        [--set KEY=VALUE ...] [--eager-minutes 1] [--out benchmarks/results]

What modded-nanoGPT's speedrun and DAWNBench's time-to-accuracy measure, for a translation
recipe: ``hfattn train RECIPE`` runs in a child process, exactly as a user types it (the
recipe as shipped, plus any ``--set``), into a fresh folder. From its files:

- ``wall_s``: seconds from starting the command to its exit, the model folder saved (set-up,
  data, tokenizer, compile, training, periodic and final evaluations, the saved folder);
  ``run_wall_time_s`` is the run's own count (``eval_results.json``), from its process's start
  to the final results;
- ``first_step_wall_s``, ``compile_s``, ``compiles``: from ``eval_results.json``;
- ``curve``: ``{wall_s, step, bleu, chrf}`` of every validation record of ``metrics.jsonl``
  (the recipe's periodic evaluations: the whole validation split, decoded as its
  ``evaluation:`` section says, greedy for the GPU recipes), ``wall_s`` counted from the
  command's start;
- ``tokens_per_s`` / ``mfu``: the median of the train records whose interval compiled nothing
  (the steady speed); ``eager_tokens_per_s``: the same recipe with ``training.compile=false``,
  the run itself when it compiled nothing, else a second run of ``--eager-minutes`` on the
  training clock (its evaluations left out);
- ``test_bleu`` / ``test_chrf``: the final evaluation of the test split, every test verse
  decoded with the model's saved generation settings (beam 4 for the GPU recipes).

Writes ``speedrun_<recipe>_<device>.json`` (``--name NAME``: ``NAME_<device>.json``) (with provenance: commit, command, machine) and
``speedrun_<recipe>_<device>.png`` (BLEU against wall seconds) into ``--out``; ``<device>`` is
the GPU's name, or ``cpu``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.lib.benchlib import load_average, write_atomically
from hfattn.common.machine import provenance
from hfattn.storage.file_io import atomic_path
from hfattn.storage.run_folder import EVAL_RESULTS_FILE, METRICS_FILE

ROOT = Path(__file__).resolve().parent.parent


def device_tag(gpu: str | None) -> str:
    """A file-name tag for the device: the GPU's name with ``_`` for other characters, or
    ``cpu``."""
    if not gpu:
        return "cpu"
    return "_".join("".join(c if c.isalnum() else " " for c in gpu).split())


def file_stem(recipe: str, gpu: str | None, name: str | None = None) -> str:
    """The results files' name without its suffix: ``<name>_<device>``, ``name`` by default
    ``speedrun_<recipe>`` (a candidate setting's run has a name of its own)."""
    return f"{name or 'speedrun_' + recipe}_{device_tag(gpu)}"


def train(recipe: Path, run_dir: Path, settings: list[str]) -> float:
    """Run ``hfattn train recipe`` into ``run_dir`` with ``settings`` (``KEY=VALUE``) in a
    child process; return the seconds from its start to its exit.

    Raises:
        RuntimeError: the command failed (its exit status).
    """
    command = [sys.executable, "-m", "hfattn", "train", str(recipe),
               "--set", f"output_dir={run_dir}"]  # fmt: skip
    for setting in settings:
        command += ["--set", setting]
    began = time.monotonic()
    status = subprocess.run(command, cwd=ROOT).returncode
    seconds = time.monotonic() - began
    if status:
        raise RuntimeError(f"{' '.join(command)} exited with status {status}")
    return seconds


def records(run_dir: Path) -> list[dict]:
    """The records of the run's ``metrics.jsonl``."""
    lines = (run_dir / METRICS_FILE).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def steady(train_records: list[dict], key: str) -> float | None:
    """The median of ``key`` over the train records whose interval compiled no graph (the
    first record's interval holds the run's first steps and is left out)."""
    values, compiles = [], 0
    for index, record in enumerate(train_records):
        compiled = record.get("compiles", 0) != compiles
        compiles = record.get("compiles", 0)
        if index and not compiled and record.get(key) is not None:
            values.append(record[key])
    return statistics.median(values) if values else None


def curve(run_records: list[dict]) -> list[dict]:
    """``{wall_s, step, bleu, chrf}`` of each validation record, in order."""
    return [
        {key: record.get(key) for key in ("wall_s", "step", "bleu", "chrf")}
        for record in run_records
        if record.get("split") == "validation"
    ]


def measure(recipe: Path, settings: list[str], eager_minutes: float, work: Path) -> dict:
    """Train ``recipe`` with ``settings`` and, when it compiled, its eager twin: the speedrun
    record (see the module docstring)."""
    run_dir = work / "run"
    wall_s = train(recipe, run_dir, settings)
    results = json.loads((run_dir / EVAL_RESULTS_FILE).read_text(encoding="utf-8"))
    training, metrics = results["training"], results["all_metrics"]
    run_records = records(run_dir)
    train_records = [r for r in run_records if r.get("split") == "train"]
    speed = {"tokens_per_s": steady(train_records, "tokens_per_s"),
             "mfu": steady(train_records, "mfu")}  # fmt: skip
    eager = dict(speed, command=None)
    if training.get("compiles"):
        eager_dir = work / "eager"
        quick = ["training.compile=false", f"training.max_minutes={eager_minutes}",
                 "training.eval_every=null", "training.save_every=null",
                 "evaluation.splits=[validation]", "evaluation.max_examples=64"]  # fmt: skip
        train(recipe, eager_dir, settings + quick)
        eager_train = [r for r in records(eager_dir) if r.get("split") == "train"]
        eager = {"tokens_per_s": steady(eager_train, "tokens_per_s"),
                 "mfu": steady(eager_train, "mfu"), "command": settings + quick}  # fmt: skip
    test = metrics.get("test", {})
    return {
        "recipe": recipe.stem,
        "settings": settings,
        "gpu": training["provenance"]["machine"].get("gpu"),
        "hardware": training.get("hardware"),
        "wall_s": round(wall_s, 1),
        "run_wall_time_s": training.get("wall_time_s"),
        "first_step_wall_s": training.get("first_step_wall_s"),
        "compile_s": training.get("compile_s"),
        "compiles": training.get("compiles"),
        "steps": training.get("global_step"),
        "stop_reason": training.get("stop_reason"),
        "train_runtime_s": training.get("train_runtime_s"),
        "tokens_per_s": speed["tokens_per_s"],
        "mfu": speed["mfu"],
        "eager_tokens_per_s": eager["tokens_per_s"],
        "eager_mfu": eager["mfu"],
        "eager_settings": eager["command"],
        "test_bleu": test.get("bleu"),
        "test_chrf": test.get("chrf"),
        "validation_bleu": metrics.get("validation", {}).get("bleu"),
        "curve": curve(run_records),
    }


def plot(record: dict, path: Path) -> None:
    """BLEU against wall seconds: the validation curve, and the test score at ``wall_s``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    points = [p for p in record["curve"] if p["bleu"] is not None]
    ax.plot([p["wall_s"] for p in points], [p["bleu"] for p in points], "o-",
            label="validation (periodic)")  # fmt: skip
    if record["test_bleu"] is not None:
        ax.plot([record["wall_s"]], [record["test_bleu"]], "s", label="test (saved model)")
    ax.set_xlabel("wall seconds from the command")
    ax.set_ylabel("BLEU")
    ax.set_title(f"{record['recipe']} on {record['gpu'] or record['hardware']}", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """Measure the speedrun of a recipe and write its files (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recipe", type=Path, help="a recipe file (recipes/NAME.yaml)")
    parser.add_argument("--set", dest="settings", action="append", default=[],
                        metavar="KEY=VALUE", help="a recipe override, as hfattn train takes")  # fmt: skip
    parser.add_argument("--eager-minutes", type=float, default=1.0,
                        help="training clock of the eager twin of a compiled run")  # fmt: skip
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--name", help="the files' name before the device (default: "
                        "speedrun_<recipe>; a candidate's settings get a name of their own)")  # fmt: skip
    args = parser.parse_args(argv)
    if not args.recipe.is_file():
        print(f"error: recipe: no file {args.recipe}", file=sys.stderr)
        return 2
    load = load_average()
    with tempfile.TemporaryDirectory(prefix="speedrun-") as work:
        record = measure(args.recipe.resolve(), args.settings, args.eager_minutes, Path(work))
    record["load_average_before"] = load
    record["provenance"] = provenance(record["gpu"], argv)
    stem = file_stem(record["recipe"], record["gpu"], args.name)
    write_atomically(args.out / f"{stem}.json", json.dumps(record, indent=2) + "\n")
    plot(record, args.out / f"{stem}.png")
    print(json.dumps({k: v for k, v in record.items() if k != "curve"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
