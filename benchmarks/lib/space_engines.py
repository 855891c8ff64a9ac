"""The translation Space's engines under load (``benchmarks/bench_space_load.py --engines``): a
model of the Bible recipe's size with its CTranslate2 export, its Space served once per engine
(``HFATTN_ENGINE=generate`` / ``ctranslate2``) each in its own process, timed without load and
under rounds of concurrent requests, and the results as a table and as ``--json`` records
(generate / CTranslate2 at p95, target ≥ 2×, issue 23)."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import statistics
import time
import urllib.request
from pathlib import Path

from benchmarks.lib.benchlib import BenchReport
from benchmarks.lib.space_load import call_once, endpoint_defaults, run_http_clients, serve_space
from benchmarks.lib.space_scenarios import SCENARIOS

ENGINES = ("generate", "ctranslate2")
"""The translation Space's engines (its ``HFATTN_ENGINE`` values) that ``--engines`` compares."""
ENGINE_P95_TARGET = 2.0
"""generate's p95 / CTranslate2's p95 under the load (issue 23)."""


def bible_size_run(out: Path, quantization: str) -> Path:
    """A translation model folder of the Bible recipe's layers (``bench_export.BIBLE``, vocab
    8,000, random weights) and decoding defaults (4 beams, ``early_stopping``), with its
    CTranslate2 export (``quantization``) in ``ct2/``."""
    from benchmarks.bench_export import BIBLE, MAX_POSITIONS, VOCAB
    from benchmarks.lib.vaswani_marian import make_models
    from hfattn.export.export_folder import export_ctranslate2
    from hfattn.storage.run_folder import CTRANSLATE2_DIR

    model = make_models(BIBLE, VOCAB, MAX_POSITIONS, "cpu")[0].eval()
    model.generation_config.num_beams = 4  # the Bible recipe's decoding defaults
    model.generation_config.early_stopping = True
    words = sorted({w for args in SCENARIOS["translation"].inputs for w in args[0].split()})
    from benchmarks.bench_export import word_tokenizer  # torch: --help stays without it

    tokenizer = word_tokenizer(VOCAB, words=words)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    export_ctranslate2(
        model, tokenizer, out / CTRANSLATE2_DIR, quantization=quantization, source=str(out)
    )
    return out


def engine_line(config: dict) -> str:
    """The translation page's engine line (``engine: ...``), from the app's ``/config``."""
    lines = [
        c["props"]["value"]
        for c in config["components"]
        if c.get("props", {}).get("elem_id") == "engine"
    ]
    if len(lines) != 1:
        raise RuntimeError("the translation page has no engine line (elem_id 'engine')")
    return lines[0]


def sequential_latency(url: str, scenario, requests: int) -> list[float]:
    """Seconds of ``requests`` requests sent one at a time on Gradio's REST API (after one
    warm-up request per distinct input)."""
    defaults = endpoint_defaults(url, scenario.api_name)
    for args in scenario.inputs:
        call_once(url, scenario.api_name, args, defaults)
    times = []
    for args in scenario.requests(requests):
        start = time.perf_counter()
        call_once(url, scenario.api_name, args, defaults)
        times.append(time.perf_counter() - start)
    return times


def cpu_seconds(process) -> float:
    """User + system CPU seconds of ``process`` (a ``psutil.Process``) and its threads."""
    times = process.cpu_times()
    return times.user + times.system


def measure_engines(run: Path, work: Path, args: argparse.Namespace) -> dict:
    """Serve the translation Space on ``run`` once per engine, each in its own process; time
    each without load and under ``args.rounds`` rounds of the load (engines taking turns),
    and read the server's CPU seconds per request under the load."""
    from hfattn.hub import inspect_folder, stage_space

    base = SCENARIOS["translation"]
    scenario = dataclasses.replace(
        base, inputs=tuple((a[0], args.beams, args.new_tokens) for a in base.inputs)
    )
    threads = str(args.threads)
    rounds = {engine: [] for engine in ENGINES}
    cpu = {engine: [] for engine in ENGINES}
    references, lines, unloaded = {}, {}, {}
    start = time.perf_counter()
    with contextlib.ExitStack() as stack:
        servers = {}
        for engine in ENGINES:
            staged = stage_space(inspect_folder(run), str(run), work / f"space_{engine}")
            env = {"HFATTN_ENGINE": engine, "OMP_NUM_THREADS": threads}
            servers[engine] = stack.enter_context(serve_space(staged, str(run), env))
            url = servers[engine][0]
            config = json.loads(urllib.request.urlopen(url + "config", timeout=30).read())
            lines[engine] = engine_line(config)
            if (engine == "ctranslate2") != ("CTranslate2" in lines[engine]):
                raise RuntimeError(f"HFATTN_ENGINE={engine} serves {lines[engine]!r}")
            references[engine] = {
                a: scenario.summary(a, call_once(url, scenario.api_name, a))
                for a in scenario.inputs
            }
        for engine in ENGINES:
            times = sequential_latency(servers[engine][0], scenario, args.sequential)
            unloaded[engine] = {
                "requests": len(times),
                "median_s": round(statistics.median(times), 4),
                "max_s": round(max(times), 4),
            }
            print(f"{engine}: unloaded {json.dumps(unloaded[engine])}", flush=True)
        for number in range(args.rounds):
            for engine in ENGINES if number % 2 == 0 else ENGINES[::-1]:
                url, process = servers[engine]
                before = cpu_seconds(process)
                load = run_http_clients(
                    url,
                    scenario.api_name,
                    scenario.requests(args.clients),
                    expected=lambda a, answer, e=engine: (
                        scenario.summary(a, answer) == references[e][a]
                    ),
                    request_timeout_s=300,
                    deadline_s=400,
                )
                cpu[engine].append((cpu_seconds(process) - before) / args.clients)
                rounds[engine].append(load.summary())
                print(f"{engine}: round {number + 1} {json.dumps(rounds[engine][-1])}", flush=True)
    engines = {}
    for engine in ENGINES:
        summaries = rounds[engine]
        engines[engine] = {
            "engine_line": lines[engine],
            "unloaded": unloaded[engine],
            "p50_s": statistics.median(r["p50_s"] for r in summaries),
            "p95_s": statistics.median(r["p95_s"] for r in summaries),
            "server_cpu_ms_per_request": round(1000 * statistics.median(cpu[engine]), 1),
            "failed": sum(r["failed"] for r in summaries),
            "rounds": summaries,
        }
    generate, fast = engines["generate"], engines["ctranslate2"]
    same = [references["generate"][a] == references["ctranslate2"][a] for a in scenario.inputs]
    return {
        "run": str(run),
        "scenario": {"inputs": [list(a) for a in scenario.inputs], "clients": args.clients},
        "engines": engines,
        "p95_ratio": round(generate["p95_s"] / fast["p95_s"], 3),
        "p50_ratio": round(generate["p50_s"] / fast["p50_s"], 3),
        "unloaded_ratio": round(generate["unloaded"]["median_s"] / fast["unloaded"]["median_s"], 3),
        "server_cpu_ratio": round(
            generate["server_cpu_ms_per_request"] / fast["server_cpu_ms_per_request"], 3
        ),
        "same_translations": f"{sum(same)}/{len(same)}",
        "seconds": round(time.perf_counter() - start, 1),
    }


def engines_table(result: dict) -> str:
    """One row per engine (p50 / p95 under load, unloaded latency), then the ratios."""
    lines = [
        "| engine | page says | clients | rounds | failed | p50 s | p95 s | unloaded median s "
        "| server CPU ms / request |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, e in result["engines"].items():
        lines.append(
            f"| {name} | {e['engine_line']} | {result['scenario']['clients']} | "
            f"{len(e['rounds'])} | **{e['failed']}** | {e['p50_s']:.2f} | {e['p95_s']:.2f} | "
            f"{e['unloaded']['median_s']:.3f} | {e['server_cpu_ms_per_request']:.1f} |"
        )
    lines.append(
        f"\ngenerate / CTranslate2: **p95 {result['p95_ratio']:.2f}×** (target ≥ "
        f"{ENGINE_P95_TARGET:g}×), p50 {result['p50_ratio']:.2f}×, unloaded "
        f"{result['unloaded_ratio']:.2f}×, server CPU per request "
        f"{result['server_cpu_ratio']:.2f}×; identical translations on "
        f"{result['same_translations']} inputs."
    )
    return "\n".join(lines)


def engine_records(result: dict) -> BenchReport:
    """The ``--json`` records of ``--engines``: p50 / p95 per engine, failed requests (target
    0) and generate / CTranslate2 at p95 (target ≥ 2)."""
    report = BenchReport("space_load_engines")
    for name, e in result["engines"].items():
        report.add(
            f"translation Space, {name}: failed requests of {result['scenario']['clients']} "
            f"concurrent clients x {len(e['rounds'])} rounds",
            e["failed"],
            "requests",
            target=0,
            comparison="<=",
        )
        report.add(f"translation Space, {name}: latency p50 under load", e["p50_s"], "s")
        report.add(f"translation Space, {name}: latency p95 under load", e["p95_s"], "s")
    report.add(
        "translation Space: p95 under load, generate / CTranslate2",
        result["p95_ratio"],
        "x",
        target=ENGINE_P95_TARGET,
        detail=f"p50 {result['p50_ratio']}x, unloaded {result['unloaded_ratio']}x",
    )
    report.markdown.append("### Translation Space engines under load\n\n" + engines_table(result))
    return report
