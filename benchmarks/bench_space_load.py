"""Space load: each Space app under 50 concurrent clients, and its memory over 1,000 requests.

The three apps (text generation, translation, classification), each under 50 concurrent
``gradio_client`` clients, and the memory of each over 1,000 sequential requests.

    .venv/bin/python -m benchmarks.bench_space_load [--quick] [--clients 50]
        [--memory-calls 100 1000] [--memory-via handler client]
        [--text-generation RUN] [--translation RUN] [--classification RUN]
        [--out benchmarks/results/space_load.json] [--json PATH]

Each app is served in this process on 127.0.0.1 with the frame's queue settings
(``HFATTN_CONCURRENCY_LIMIT``, ``HFATTN_QUEUE_SIZE``; defaults 1 and 100). The load is
``--clients`` threads, each with its own ``gradio_client.Client``, connected first and then
submitting one request together (300 s timeout per request, 400 s deadline); an answer counts
only if it equals the app's answer to the same input with no load (the requests of
``space_scenarios.SCENARIOS``: 8 greedy new tokens, two-beam translations of dates, Reber
strings).

Memory: RSS of this process (after ``gc.collect()`` and ``malloc_trim``) after the first and
after all ``--memory-calls`` sequential requests, made by calling the app's handler directly
(``handler``: the model and the app's code, measured before the load) and through one client
(``client``: Gradio's server, queue and the client too, measured after the load).
``--quick`` (``make bench``) measures through the handler only; the sizes stay those of the
targets.

Without run folders it trains the tiny runs of the tests (``tests/helpers/tiny_runs.py``): a GRU
char-RNN, a Bahdanau date normaliser, an attention-pooling GRU Reber classifier. Writes the
figures as JSON to ``--out`` and a markdown table next to it (``.md``), prints the table, and
with ``--json`` the records of ``benchmarks/lib/benchlib.py`` (failed requests: target 0; memory
growth: target ≤ 5 %).

Engines (``--engines``, instead of the three apps): the translation Space on a Vaswani model of
the Bible recipe's layers (``recipes/vaswani_bible_en_es.yaml``: 2+2 post-LN layers, d 256, 4
heads, FFN 1024), a shared vocabulary of 8,000 and random weights (``bench_export.py``'s), with
its CTranslate2 export in ``ct2/`` (``--quantization``, default int8), or the ``--translation`` run
given (it must hold ``ct2/``). The app is staged and run twice as a Space runs it, each in its
own process (``python app.py``), with ``HFATTN_ENGINE=generate`` and
``HFATTN_ENGINE=ctranslate2`` (the page's engine line is checked), both with the same torch and
CTranslate2 threads (``--threads``). Each answers ``--sequential`` requests one at a time (the
latency without load), then takes the 50-client load of the translation scenario (beam width
and new tokens: ``--beams`` / ``--new-tokens``, default the load test's 2 and 16; with random
weights every translation runs to the cap) for ``--rounds`` rounds, the engines taking turns
(the order flipped every round). The clients are concurrent requests on Gradio's REST API from
one asyncio loop in this process (``space_load.run_http_clients``): 50 ``gradio_client``
threads cost more CPU than the Space itself and, on a 2-core machine, would measure
themselves. Reports p50 / p95 per engine (the median over the rounds), the server's CPU
milliseconds per request under the load, and generate / CTranslate2 at p95 (target ≥ 2×,
issue 23) and p50; no memory readings.

    .venv/bin/python -m benchmarks.bench_space_load --engines [--rounds 3] [--clients 50]
        [--quantization int8] [--beams 2] [--new-tokens 16] [--sequential 20]
        [--out benchmarks/results/space_load_engines.json] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.lib.benchlib import BenchReport, add_json_argument, write_atomically
from benchmarks.lib.space_engines import (
    bible_size_run,
    engine_records,
    engines_table,
    measure_engines,
)
from benchmarks.lib.space_load import load_scenario
from benchmarks.lib.space_memory import memory_growth, scenario_memory
from benchmarks.lib.space_scenarios import SCENARIOS
from hfattn.common.machine import provenance

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent


MAX_GROWTH_PERCENT = 5.0
MEMORY_WAYS = ("handler", "client")
RESULTS = BENCH_DIR / "results"
QUANTIZATIONS = ("float32", "int8", "int8_float32", "float16", "int8_float16")
"""``hfattn.export.QUANTIZATIONS`` (repeated: ``--help`` imports no torch)."""


def tiny_run(app: str, out: Path) -> Path:
    """The tests' tiny run folder for ``app``, trained into ``out``."""
    from tests.helpers import tiny_runs

    if app == "text_generation":
        return tiny_runs.build_char_rnn_run(out)
    if app == "translation":
        return tiny_runs.build_translation_run(out)
    return tiny_runs.build_classification_run(
        out, "rnn_classifier_reber.yaml", "model.pooling=attention"
    )


def client_memory(url: str, scenario, first: int, total: int):
    """:func:`space_memory.memory_growth` of ``scenario``'s requests sent in sequence through one
    ``gradio_client.Client``."""
    from gradio_client import Client

    client = Client(url, verbose=False)
    try:
        inputs = scenario.inputs
        return memory_growth(
            lambda i: client.predict(*inputs[i % len(inputs)], api_name=scenario.api_name),
            first,
            total,
        )
    finally:
        client.close()


def measure(app: str, run: Path, work: Path, args: argparse.Namespace) -> dict:
    """Serve ``app`` for ``run``; measure its memory through the handler, put the load on it,
    then measure its memory through a client (as ``--memory-via`` asks)."""
    from tests.helpers.space_helpers import launch_space

    scenario = SCENARIOS[app]
    first, total = args.memory_calls
    start = time.perf_counter()
    space = launch_space(run, work / f"space_{app}")
    memory = {}
    try:
        queue = space.demo._queue
        if "handler" in args.memory_via:
            memory["handler"] = scenario_memory(space.demo, scenario, first, total).summary()
        load, _ = load_scenario(
            space.url, scenario, args.clients, request_timeout_s=300, deadline_s=400
        )
        if "client" in args.memory_via:
            memory["client"] = client_memory(space.url, scenario, first, total).summary()
    finally:
        space.close()
    return {
        "app": app,
        "run": str(run),
        "queue": {"concurrency_limit": queue.default_concurrency_limit, "max_size": queue.max_size},
        "load": load.summary(),
        "memory": memory,
        "seconds": round(time.perf_counter() - start, 1),
    }


def markdown_table(results: list[dict]) -> str:
    """One row per app: the load's outcome, and the RSS growth of each memory way."""
    calls = next((m["calls"] for r in results for m in r["memory"].values()), ["?", "?"])
    lines = [
        "| Space | clients | failed | p50 s | p95 s | max s | "
        + " | ".join(f"RSS via {way}, MiB after {calls[0]} → {calls[1]}" for way in MEMORY_WAYS)
        + " |",
        "|---|---:|---:|---:|---:|---:|" + "---|" * len(MEMORY_WAYS),
    ]
    for r in results:
        load, memory = r["load"], r["memory"]
        cells = [
            f"{memory[way]['rss_mib'][0]:.1f} → {memory[way]['rss_mib'][1]:.1f} "
            f"(**{memory[way]['growth_percent']:+.2f} %**)"
            if way in memory
            else "—"
            for way in MEMORY_WAYS
        ]
        lines.append(
            f"| {r['app']} | {load['clients']} | **{load['failed']}** | {load['p50_s']:.2f} "
            f"| {load['p95_s']:.2f} | {load['max_s']:.2f} | " + " | ".join(cells) + " |"
        )
    lines.append(
        f"\nTargets: 0 failed requests; memory growth ≤ {MAX_GROWTH_PERCENT:g} % between the two "
        "readings."
    )
    return "\n".join(lines)


def report_records(results: list[dict]) -> BenchReport:
    """The ``--json`` records: per app, failed requests (target 0), p50 / p95 latency and
    memory growth of each way (target ≤ 5 %)."""
    report = BenchReport("space_load")
    for r in results:
        app, load = r["app"], r["load"]
        report.add(
            f"{app}: failed requests of {load['clients']} concurrent clients",
            load["failed"],
            "requests",
            target=0,
            comparison="<=",
            detail="; ".join(load["errors"][:2]) or None,
        )
        report.add(f"{app}: latency p50 under load", load["p50_s"], "s")
        report.add(f"{app}: latency p95 under load", load["p95_s"], "s")
        for via, m in r["memory"].items():
            first, total = m["calls"]
            report.add(
                f"{app}: memory growth, {first} → {total} requests (via {via})",
                m["growth_percent"],
                "%",
                target=MAX_GROWTH_PERCENT,
                comparison="<=",
                detail=f"RSS {m['rss_mib'][0]} → {m['rss_mib'][1]} MiB",
            )
    report.markdown.append("### Space load\n\n" + markdown_table(results))
    return report


def run_provenance(argv: list[str] | None) -> dict:
    """The results file's ``provenance``, its command this script with ``argv`` (the command
    line's arguments when ``None``)."""
    arguments = sys.argv[1:] if argv is None else argv
    return provenance(argv=["benchmarks/bench_space_load.py", *arguments])


def main_engines(args: argparse.Namespace, argv: list[str] | None) -> int:
    """``--engines``: measure, write ``--out`` (+ ``.md``) and ``--json``."""
    import torch

    torch.set_num_threads(args.threads)  # the Space gives CTranslate2 torch's thread count
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-space-engines-") as tmp:
        work = Path(tmp)
        run = args.translation or bible_size_run(work / "bible_size", args.quantization)
        if not (run / "ct2" / "model.bin").is_file():
            raise SystemExit(f"--translation {run} has no CTranslate2 export in ct2/")
        result = measure_engines(run, work, args)
    import ctranslate2

    meta = {
        "provenance": run_provenance(argv),
        "model": "given run"
        if args.translation
        else "Bible recipe size: 2+2 layers, d 256, 4 heads, FFN 1024, vocab 8000, random "
        f"weights; export {args.quantization}",
        "load_average_1min": {"before": load_before, "after": os.getloadavg()[0]},
        "cpus": os.cpu_count(),
        "threads": args.threads,
        "versions": {"torch": torch.__version__, "ctranslate2": ctranslate2.__version__},
    }
    table = engines_table(result)
    write_atomically(args.out, json.dumps({**meta, **result}, indent=2) + "\n")
    write_atomically(args.out.with_suffix(".md"), table + "\n")
    print("\n" + table)
    engine_records(result).write(args.json)
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line, with the defaults that depend on ``--quick`` and ``--engines`` filled
    in.

    Raises:
        SystemExit: an option out of its range, or one ``--engines`` does not take.
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="memory through the handler only (not a client)"
    )
    parser.add_argument("--clients", type=int, default=50, help="concurrent clients (50)")
    parser.add_argument(
        "--memory-calls",
        type=int,
        nargs=2,
        metavar=("FIRST", "TOTAL"),
        help="read RSS after FIRST and after TOTAL sequential requests (100 1000)",
    )
    parser.add_argument(
        "--memory-via",
        nargs="+",
        choices=MEMORY_WAYS,
        metavar="WAY",
        help="handler and/or client (default both; handler with --quick)",
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="torch (and CTranslate2) threads (default 1)"
    )
    engines = parser.add_argument_group("engines (the translation Space: generate vs CTranslate2)")
    engines.add_argument(
        "--engines",
        action="store_true",
        help="compare the translation Space's engines under the load instead of measuring "
        "the three apps",
    )
    engines.add_argument(
        "--rounds", type=int, help="load rounds per engine (default 3; 1 with --quick)"
    )
    engines.add_argument(
        "--quantization",
        choices=QUANTIZATIONS,
        default="int8",
        help="the Bible-size model's export (default int8)",
    )
    engines.add_argument(
        "--beams", type=int, default=2, help="beam width of the requests (default 2)"
    )
    engines.add_argument(
        "--new-tokens", type=int, default=16, help="new tokens of the requests (default 16)"
    )
    engines.add_argument(
        "--sequential",
        type=int,
        help="requests timed one at a time, without load (default 20; 5 with --quick)",
    )
    for app in SCENARIOS:
        parser.add_argument(f"--{app.replace('_', '-')}", type=Path, metavar="RUN")
    parser.add_argument(
        "--out",
        type=Path,
        help="the results' JSON (default benchmarks/results/space_load.json, with --engines "
        "space_load_engines.json; with --quick space_load_quick.json / "
        "space_load_engines_quick.json: make bench leaves the full run's file alone)",
    )
    add_json_argument(parser)
    args = parser.parse_args(argv)
    args.memory_calls = args.memory_calls or (100, 1000)
    name = "space_load_engines" if args.engines else "space_load"
    args.out = args.out or RESULTS / (f"{name}_quick.json" if args.quick else f"{name}.json")
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.sequential = args.sequential or (5 if args.quick else 20)
    if args.engines and (args.text_generation or args.classification or args.memory_via):
        parser.error("--engines measures the translation Space only, without memory readings")
    for name, value, low, high in (
        ("--rounds", args.rounds, 1, 20),
        ("--beams", args.beams, 1, 8),
        ("--new-tokens", args.new_tokens, 1, 500),
        ("--sequential", args.sequential, 1, 1000),
    ):
        if not low <= value <= high:
            parser.error(f"{name}: between {low} and {high}, got {value}")
    args.memory_via = args.memory_via or (["handler"] if args.quick else ["handler", "client"])
    first, total = args.memory_calls
    if not 0 < first < total:
        parser.error(f"--memory-calls: need 0 < FIRST < TOTAL, got {first} {total}")
    if not 1 <= args.clients <= 200:
        parser.error(f"--clients: between 1 and 200, got {args.clients}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Measure every app; write ``--out`` (+ ``.md``) and ``--json``. Exit status 0 when
    everything was measured, whether the targets were met or not (the records say)."""
    args = parse_args(argv)
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    if args.engines:
        return main_engines(args, argv)
    import torch

    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()[0]
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-space-load-") as tmp:
        work = Path(tmp)
        for app in SCENARIOS:
            run = getattr(args, app) or tiny_run(app, work / "runs" / app)
            results.append(measure(app, run, work, args))
            print(json.dumps(results[-1]), flush=True)
    table = markdown_table(results)
    meta = {
        "provenance": run_provenance(argv),
        "load_average_1min": {"before": load_before, "after": os.getloadavg()[0]},
        "cpus": os.cpu_count(),
        "torch_threads": args.threads,
    }
    write_atomically(args.out, json.dumps({**meta, "results": results}, indent=2) + "\n")
    write_atomically(args.out.with_suffix(".md"), table + "\n")
    print("\n" + table)
    report_records(results).write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
