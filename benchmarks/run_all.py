"""Run every benchmark of ``benchmarks/`` and write one report, ``benchmarks/RESULTS.md``.

    .venv/bin/python -m benchmarks.run_all [--full] [--only NAME ...] [--skip NAME ...] [--update]
        [--out benchmarks/RESULTS.md] [--charts benchmarks/results] [--no-cuda]

(``make bench`` runs it in its default, quick mode.) Every ``bench_*.py`` script of the folder
runs in its own process with ``--json PATH`` (the format of ``benchlib.py``), so a benchmark that
fails or times out is a "failed" row of the report, not the end of the run. Known scripts get
the arguments of :data:`REGISTRY` for the mode; a script the registry does not know gets
``--quick`` in quick mode when its source mentions that option, and no other argument.

Modes: *quick* (the default, 20–30 minutes on a 2-core CPU) keeps the sizes that the targets
are written for and the repeats of the ratios that need them (char-RNN, Bahdanau, Vaswani:
their own defaults), and cuts what only costs time: the multi-head attention calls and memory
runs, the attention-variant seeds (seed 0), the fault recipes (char-RNN), the translation beams
(greedy) and the Space requests. *full* (``--full``) runs every script with its own defaults,
the Vaswani one with more steps and generation repeats (``--steps 20 --gen-repeats 9``).

On a machine where ``torch.cuda.is_available()``, the scripts that take ``--device`` run a
second time with ``--device cuda``, and the report gains a column per device.

The report gives the machine (CPU, cores, RAM, GPU), the versions, the date, a table per
benchmark of each measure against its target (met / not met) with the command that reruns it,
the extra tables a script emits (the translation table with Apertium), the charts drawn from
the scripts' series (time against sequence length and against batch size, PNG under
``--charts``) and every record as JSON (``bench_results.json`` there). Each file is written to
a temp name and renamed. ``--update`` (with ``--only`` or ``--skip``) keeps the previous
results of the benchmarks not run now, each with its own date. A block of the previous
report between :data:`~benchmarks.lib.results_report.KEEP_BEGIN` and
:data:`~benchmarks.lib.results_report.KEEP_END` is carried over; how each published figure is
measured is in ``benchmarks/NOTES.md``.

Exit status: 0 when every benchmark run now ran (whatever its targets), 1 when one failed.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.lib.bench_runs import (
    ROOT,
    Outcome,
    benchmark_name,
    load_average,
    machine,
    now,
    probe,
    run_bench,
)
from benchmarks.lib.benchlib import write_atomically
from benchmarks.lib.results_report import chart_name, draw_chart, kept_block, render
from hfattn.common.machine import provenance

BENCH_DIR = Path(__file__).resolve().parent


def bible_runs() -> list[str]:
    """Trained Bible translation run folders under ``runs/`` (for ``bench_translation.py``)."""
    runs = sorted((ROOT / "runs").glob("*bible*/config.json"))
    return [str(path.parent.relative_to(ROOT)) for path in runs]


@dataclass(frozen=True)
class Bench:
    """How ``run_all.py`` runs one script."""

    quick: tuple[str, ...] = ()
    """Arguments in quick mode (the default of ``make bench``)."""
    full: tuple[str, ...] = ()
    """Arguments in full mode (``--full``)."""
    cuda: tuple[str, ...] | None = None
    """Arguments of the extra GPU run (``None``: the script runs on the CPU only)."""
    positional: Callable[[], list[str]] | None = None
    """Arguments found at run time (e.g. the run folders to score)."""
    env: dict[str, str] = field(default_factory=dict)
    timeout_s: int = 1800


ONE_THREAD = {"OMP_NUM_THREADS": "1"}
"""For the scripts that would use every core: on a shared CPU, threads that wait for each other
at every barrier stall whenever another process holds a core (60 s for a 0.3 s step seen)."""

REGISTRY: dict[str, Bench] = {
    "bench_char_rnn.py": Bench(cuda=("--device", "cuda"), env=ONE_THREAD),
    "bench_attention.py": Bench(
        quick=("--quick", "--lengths", "128", "256", "512", "1024", "2048"),
        full=("--lengths", "128", "256", "512", "1024", "2048"),
        cuda=("--device", "cuda"),
    ),
    "bench_bahdanau.py": Bench(cuda=("--device", "cuda"), env=ONE_THREAD),
    "bench_vaswani.py": Bench(
        full=("--steps", "20", "--gen-repeats", "9"),
        cuda=("--device", "cuda", "--dtype", "bf16"),
    ),
    "bench_translation.py": Bench(
        quick=("--num-beams", "1"), full=("--num-beams", "4"), positional=bible_runs
    ),
    "bench_decoding.py": Bench(
        quick=("--num-beams", "1", "4", "--limit", "200"), positional=lambda: bible_runs()[:1]
    ),
    "bench_scores.py": Bench(quick=("--seeds", "0"), timeout_s=3600),
    "bench_space.py": Bench(quick=("--requests", "10"), env=ONE_THREAD),
    "bench_faults.py": Bench(quick=("--quick",), env=ONE_THREAD),
    "bench_export.py": Bench(full=("--repeats", "9", "--engine-repeats", "50")),
    "bench_compile.py": Bench(quick=("--quick",), timeout_s=3 * 3600),
    "bench_rnn_export.py": Bench(quick=("--quick",)),
    # builds both GPU recipes' jobs (Bible, BPE) and compiles a small Transformer per bucket
    # with inductor: about 15 minutes on 2 CPU cores
    "bench_feed.py": Bench(timeout_s=3600),
    # quick: a few hundred kB and a few thousand pairs, no paper-base Transformer (a minute a
    # step on 2 cores), into data_scale_quick.json; full: every case at its size (1.5-2 h estimated)
    "bench_data_scale.py": Bench(
        quick=("--quick", "--cases", "char-rnn/100MB", "luong/31k", "luong-2proc/1.45M"),
        timeout_s=4 * 3600,
    ),
}
"""Arguments per script; anything else found in the folder runs as :func:`bench_for` says."""


def bench_for(script: Path) -> Bench:
    """The registry's entry, or for an unknown script ``--quick`` in quick mode where its
    source mentions the option."""
    if script.name in REGISTRY:
        return REGISTRY[script.name]
    return Bench(quick=("--quick",) if "--quick" in script.read_text() else ())


def carried_over(previous: Path, outcomes: list[Outcome]) -> list[Outcome]:
    """``outcomes`` and the previous run's outcomes of the other benchmarks, by name."""
    ran = {o.benchmark for o in outcomes}
    kept = [Outcome(**run) for run in json.loads(previous.read_text())["runs"]]
    merged = outcomes + [o for o in kept if o.benchmark not in ran]
    return sorted(merged, key=lambda o: (o.benchmark, o.device != "cpu", o.device))


def selected_scripts(folder: Path, only: list[str] | None, skip: list[str]) -> list[Path]:
    """The ``bench_*.py`` scripts of ``folder`` that ``--only`` and ``--skip`` select.

    Raises:
        SystemExit: a name given is no benchmark of the folder.
    """
    scripts = sorted(folder.glob("bench_*.py"))
    names = {benchmark_name(s) for s in scripts}
    for name in [*(only or []), *skip]:
        if name not in names:
            raise SystemExit(
                f"run_all.py: no benchmark {name!r} in {folder}; known: {', '.join(sorted(names))}"
            )
    return [
        s
        for s in scripts
        if (only is None or benchmark_name(s) in only) and benchmark_name(s) not in skip
    ]


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks, write the charts, the JSON and the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="the scripts' own (longer) defaults")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="these benchmarks only")
    parser.add_argument("--skip", nargs="+", default=[], metavar="NAME")
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "RESULTS.md")
    parser.add_argument("--charts", type=Path, default=BENCH_DIR / "results")
    parser.add_argument("--bench-dir", type=Path, default=BENCH_DIR, help=argparse.SUPPRESS)
    parser.add_argument("--python", default=sys.executable, help="interpreter of the scripts")
    parser.add_argument("--no-cuda", action="store_true", help="no GPU runs even with a GPU")
    parser.add_argument(
        "--update",
        action="store_true",
        help="keep the previous results (bench_results.json) of the benchmarks not run now",
    )
    args = parser.parse_args(argv)
    scripts = selected_scripts(args.bench_dir, args.only, args.skip)
    mode = "full" if args.full else "quick"
    started = time.perf_counter()
    context = {
        "mode": mode,
        "no_cuda": args.no_cuda,
        "date": now(),
        "machine": machine(),
        "versions": probe(args.python, cuda=not args.no_cuda),
        "provenance": provenance(
            argv=["benchmarks/run_all.py", *(argv if argv is not None else sys.argv[1:])]
        ),
    }
    use_cuda = context["versions"]["cuda"]
    jobs = []
    for script in scripts:
        bench = bench_for(script)
        arguments = [*(bench.positional() if bench.positional else []), *getattr(bench, mode)]
        jobs.append((script, arguments, bench))
        if use_cuda and bench.cuda is not None:
            jobs.append((script, [*arguments, *bench.cuda], bench))
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="hfattn-bench-") as work:
        print(f"{len(jobs)} benchmark runs ({mode} mode); logs in {work}", flush=True)
        for number, (script, arguments, bench) in enumerate(jobs, 1):
            print(f"[{number}/{len(jobs)}] {shlex.join([script.name, *arguments])} ...", flush=True)
            outcome = run_bench(
                script, arguments, bench.env, bench.timeout_s, args.python, Path(work)
            )
            met = [r["met"] for r in outcome.records if r["met"] is not None]
            print(
                f"    {outcome.status} in {outcome.seconds:.0f} s: {len(outcome.records)} "
                f"measures, {sum(met)} of {len(met)} targets met"
                + (f"; {outcome.reason.splitlines()[0]}" if outcome.reason else ""),
                flush=True,
            )
            outcomes.append(outcome)
    failed = any(o.status in ("failed", "timed out") for o in outcomes)
    results_json = args.charts / "bench_results.json"
    if args.update and results_json.is_file():
        outcomes = carried_over(results_json, outcomes)
    charts: dict[str, list[str]] = {}
    for outcome in outcomes:
        for series in outcome.series:
            path = args.charts / chart_name(series, outcome.benchmark)
            draw_chart(series, path)
            charts.setdefault(outcome.benchmark, []).append(str(path))
    context["seconds"], context["runs"] = time.perf_counter() - started, len(jobs)
    context["load_after"] = load_average()
    everything = {**context, "runs": [o.__dict__ for o in outcomes]}
    write_atomically(results_json, json.dumps(everything, indent=2) + "\n")
    report = render(outcomes, context, charts, kept_block(args.out), args.out)
    write_atomically(args.out, report)
    print(f"wrote {args.out} ({context['seconds'] / 60:.1f} min)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
