"""Faults survived: training SIGKILLed again and again, resumed each time with ``--resume``,
against the same recipe trained without interruption.

    .venv/bin/python -m benchmarks.bench_faults [--quick] [--kinds char-rnn seq2seq classification]
        [--json PATH]

The recipes, kill points and child processes are those of ``tests/training/test_faults.py``: tiny
recipes of three epochs (a stateful char-RNN with dropout, a Bahdanau encoder-decoder on
date pairs, a GRU classifier on Reber strings), each killed at six points (in each epoch once
between checkpoints and once in the middle of a checkpoint write, the last one in the final
checkpoint) by the test callback of ``tests/helpers/fault_injection.py``, then run once
more to the end. Each run is a child of a fork server that imported hfattn once, as in the
tests. Figures per recipe:

- kills survived: the SIGKILLs delivered, counted when the last run finished with weights
  bitwise equal to the uninterrupted run's (else 0); target: every kill point;
- weights bitwise equal, metrics log identical (``metrics.jsonl`` without the clock): 1 or 0;
- resume overhead per kill: (time of all the killed runs and the last one − time of the
  uninterrupted run) / kills: process start, checkpoint loading and the steps redone.

``--quick``: the char-RNN recipe only (about a minute here).
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.lib.benchlib import BenchReport, add_json_argument
from hfattn.storage.model_folder import WEIGHTS_FILE
from tests.helpers.crash_runs import RECIPES, kill_points, records, train_in_child, weights

ROOT = Path(__file__).resolve().parents[1]


EPOCHS = 3  # the test recipes' epochs


def timed_run(recipe: Path, fault: str | None = None) -> tuple[int, float]:
    """``(exit code, seconds)`` of one ``hfattn train`` child process."""
    start = time.perf_counter()
    code = train_in_child(recipe, fault=fault)
    return code, time.perf_counter() - start


def same_weights(a: Path, b: Path) -> bool:
    """Whether two runs saved bitwise-identical weights."""
    wa, wb = weights(a), weights(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def survive(kind: str, root: Path) -> dict:
    """Train recipe ``kind`` straight, then killed at every point and resumed; the figures."""
    straight = RECIPES[kind](root / kind / "straight")
    code, straight_s = timed_run(straight)
    if code != 0:
        raise RuntimeError(f"{kind}: the uninterrupted run exited with {code}")
    reference = straight.parent / "run"
    total = max(r["step"] for r in records(reference) if r["split"] == "train")
    killed = RECIPES[kind](root / kind / "killed")
    points = kill_points(total, epochs=EPOCHS)
    kills, seconds, other_exits = 0, 0.0, []
    for point in points:
        code, run_s = timed_run(killed, fault=point)
        seconds += run_s
        if code == -signal.SIGKILL:
            kills += 1
        else:
            other_exits.append(f"{point}: exit {code}")
    code, run_s = timed_run(killed)
    seconds += run_s
    run = killed.parent / "run"
    finished = code == 0 and (run / WEIGHTS_FILE).is_file()
    equal = finished and same_weights(reference, run)
    return {
        "points": points,
        "kills": kills,
        "not_killed": f"; not killed: {', '.join(other_exits)}" if other_exits else "",
        "survived": kills if equal else 0,
        "weights_equal": equal,
        "log_identical": finished and records(reference) == records(run),
        "straight_s": straight_s,
        "overhead_per_kill_s": (seconds - straight_s) / max(kills, 1),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the kinds asked for, print one line each and write the records."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="+", choices=sorted(RECIPES), default=sorted(RECIPES))
    parser.add_argument("--quick", action="store_true", help="the char-RNN recipe only")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    kinds = ["char-rnn"] if args.quick else args.kinds
    report = BenchReport("faults")
    with tempfile.TemporaryDirectory(prefix="bench-faults-") as tmp:
        for kind in kinds:
            r = survive(kind, Path(tmp))
            print(
                f"{kind}: {r['kills']} SIGKILLs at {', '.join(r['points'])}; survived "
                f"{r['survived']}; weights equal {r['weights_equal']}; log identical "
                f"{r['log_identical']}; uninterrupted {r['straight_s']:.1f} s; resume overhead "
                f"{r['overhead_per_kill_s']:.2f} s per kill" + r["not_killed"]
            )
            report.add(
                f"{kind}: SIGKILLs survived (killed at every point, then --resume)",
                r["survived"],
                "kills",
                len(r["points"]),
                detail=", ".join(r["points"]) + r["not_killed"],
            )
            report.add(
                f"{kind}: weights bitwise equal to an uninterrupted run", r["weights_equal"], "", 1
            )
            report.add(
                f"{kind}: metrics log identical to an uninterrupted run", r["log_identical"], "", 1
            )
            report.add(
                f"{kind}: resume overhead per kill",
                r["overhead_per_kill_s"],
                "s",
                detail=f"uninterrupted run {r['straight_s']:.1f} s",
            )
    report.write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
