"""Space load: each Space app under 50 concurrent clients, and its memory over 1,000 requests.

The three apps (text generation, translation, classification), each under 50 concurrent
``gradio_client`` clients, and the memory of each over 1,000 sequential requests.

    .venv/bin/python benchmarks/bench_space_load.py [--quick] [--clients 50]
        [--memory-calls 100 1000] [--memory-via handler client]
        [--text-generation RUN] [--translation RUN] [--classification RUN]
        [--out benchmarks/results/space_load.json] [--json PATH]

Each app is served in this process on 127.0.0.1 with the frame's queue settings
(``HFATTN_CONCURRENCY_LIMIT``, ``HFATTN_QUEUE_SIZE``; defaults 1 and 100). The load is
``--clients`` threads, each with its own ``gradio_client.Client``, connected first and then
submitting one request together (300 s timeout per request, 400 s deadline); an answer counts
only if it equals the app's answer to the same input with no load (the requests of
``space_load.SCENARIOS``: 8 greedy new tokens, two-beam translations of dates, Reber strings).

Memory: RSS of this process (after ``gc.collect()`` and ``malloc_trim``) after the first and
after all ``--memory-calls`` sequential requests, made by calling the app's handler directly
(``handler``: the model and the app's code, measured before the load) and through one client
(``client``: Gradio's server, queue and the client too, measured after the load).
``--quick`` (``make bench``) measures through the handler only; the sizes stay those of the
targets.

Without run folders it trains the tiny runs of the tests (``tests/tiny_runs.py``): a GRU
char-RNN, a Bahdanau date normaliser, an attention-pooling GRU Reber classifier. Writes the
figures as JSON to ``--out`` and a markdown table next to it (``.md``), prints the table, and
with ``--json`` the records of ``benchmarks/benchlib.py`` (failed requests: target 0; memory
growth: target ≤ 5 %).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path.insert(0, str(ROOT / "tests"))

from benchlib import BenchReport, add_json_argument, write_atomically  # noqa: E402
from space_load import (  # noqa: E402
    SCENARIOS,
    load_scenario,
    memory_growth,
    scenario_memory,
)

MAX_GROWTH_PERCENT = 5.0
MEMORY_WAYS = ("handler", "client")
RESULTS = BENCH_DIR / "results"


def tiny_run(app: str, out: Path) -> Path:
    """The tests' tiny run folder for ``app``, trained into ``out``."""
    import tiny_runs

    if app == "text_generation":
        return tiny_runs.build_char_rnn_run(out)
    if app == "translation":
        return tiny_runs.build_translation_run(out)
    return tiny_runs.build_classification_run(
        out, "rnn_classifier_reber.yaml", "model.pooling=attention"
    )


def client_memory(url: str, scenario, first: int, total: int):
    """:func:`space_load.memory_growth` of ``scenario``'s requests sent in sequence through one
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
    from space_helpers import launch_space

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


def parse_args(argv: list[str] | None) -> argparse.Namespace:
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
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    for app in SCENARIOS:
        parser.add_argument(f"--{app.replace('_', '-')}", type=Path, metavar="RUN")
    parser.add_argument(
        "--out",
        type=Path,
        help="the results' JSON (default benchmarks/results/space_load.json, with --quick "
        "space_load_quick.json: make bench leaves the full run's file alone)",
    )
    add_json_argument(parser)
    args = parser.parse_args(argv)
    args.memory_calls = args.memory_calls or (100, 1000)
    args.out = args.out or RESULTS / ("space_load_quick.json" if args.quick else "space_load.json")
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
        "command": "benchmarks/bench_space_load.py " + " ".join(argv or sys.argv[1:]),
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
