"""The Space apps under load: 50 concurrent ``gradio_client`` clients per app, all answered
correctly because the queue makes the excess wait; a queue sized below the load refuses the
excess (so the settings are what makes the difference); no memory growth over repeated
requests (``benchmarks/lib/space_load.py`` and ``benchmarks/lib/space_memory.py`` do the
measuring, ``benchmarks/bench_space_load.py`` the full 100 vs 1,000 requests)."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest

from benchmarks.lib.space_load import (
    call_once,
    load_scenario,
    run_clients,
    run_http_clients,
    serve_space,
)
from benchmarks.lib.space_memory import memory_growth, rss_bytes, scenario_memory
from benchmarks.lib.space_scenarios import SCENARIOS
from tests.helpers.space_helpers import launch_space

CLIENTS = 50
QUEUE_ENV = ("HFATTN_CONCURRENCY_LIMIT", "HFATTN_QUEUE_SIZE")
MEMORY_CALLS = {
    "text_generation": (50, 300),  # 8 ms a call
    "translation": (50, 150),  # 25 ms a call (two beams and the attention map)
    "classification": (100, 600),  # 1 ms a call
}
"""Handler calls before the first and the second RSS reading, per app (the benchmark makes
100 and 1,000): the warm-up (the caches the first requests fill; each input asked at least
ten times), then at least 100 calls between the readings."""
MAX_GROWTH = 0.05
TIMEOUTS = {"request_timeout_s": 300, "deadline_s": 400}
"""Generous: the 50th request waits for the 49 before it, on a machine others share."""


@pytest.fixture(scope="module")
def runs(char_rnn_run, reber_attention_run, tmp_path_factory) -> dict[str, Path]:
    """A tiny trained run folder per Space app."""
    from tests.helpers.tiny_runs import build_translation_run

    tmp = tmp_path_factory.mktemp("load_runs")
    return {
        "text_generation": char_rnn_run,
        "translation": build_translation_run(tmp / "translation"),
        "classification": reber_attention_run,
    }


@pytest.fixture
def default_queue(monkeypatch):
    """The frame's default queue settings, whatever the environment says."""
    for name in QUEUE_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.slow
@pytest.mark.parametrize("app", list(SCENARIOS))
def test_fifty_concurrent_clients_all_answered(app, runs, default_queue, tmp_path):
    scenario = SCENARIOS[app]
    space = launch_space(runs[app], tmp_path / "space")
    try:
        assert space.demo._queue.max_size >= CLIENTS  # the excess waits instead of failing
        assert space.demo._queue.default_concurrency_limit == 1
        memory = scenario_memory(space.demo, scenario, *MEMORY_CALLS[app])
        result, reference = load_scenario(space.url, scenario, CLIENTS, **TIMEOUTS)
    finally:
        space.close()
    print(f"\n{app}: {result.summary()}\n{app} memory: {memory.summary()}")
    assert result.errors == []
    assert (result.ok, result.failed) == (CLIENTS, 0)
    assert len(set(reference.values())) > 1  # different inputs got different answers
    assert 0 < result.p50_s <= result.p95_s <= max(result.latencies_s) <= result.wall_s
    assert memory.growth <= MAX_GROWTH, memory.summary()


def test_a_queue_smaller_than_the_load_refuses_the_excess(runs, tmp_path):
    """The same load against a queue of 2 with one worker: some clients are refused with
    Gradio's "Queue is full", and the driver counts them as failed."""
    space = launch_space(
        runs["text_generation"],
        tmp_path / "space",
        env={"HFATTN_QUEUE_SIZE": "2", "HFATTN_CONCURRENCY_LIMIT": "1"},
    )
    try:
        assert space.demo._queue.max_size == 2
        scenario = SCENARIOS["text_generation"]
        result = run_clients(space.url, scenario.api_name, scenario.requests(CLIENTS), **TIMEOUTS)
    finally:
        space.close()
    assert result.failed > 0 and result.ok > 0
    assert result.ok + result.failed == CLIENTS
    assert all("Queue is full" in error for error in result.errors), result.errors[:3]


@pytest.mark.slow
def test_a_space_in_its_own_process_answers_concurrent_rest_requests(runs, tmp_path):
    """The translation Space run as a Space runs it (``python app.py``), under 50 requests
    on Gradio's REST API from one asyncio loop: all answered as the unloaded request is, the
    left-out inputs (layer, head) filled with the page's defaults; a wrong answer and a
    refused input are counted as failures, and the server's process ends with the block."""
    from hfattn.hub import inspect_folder, stage_space

    run, scenario = runs["translation"], SCENARIOS["translation"]
    staged = stage_space(inspect_folder(run), str(run), tmp_path / "space")
    with serve_space(staged, str(run)) as (url, process):
        reference = {
            a: scenario.summary(a, call_once(url, scenario.api_name, a)) for a in scenario.inputs
        }
        result = run_http_clients(
            url,
            scenario.api_name,
            scenario.requests(CLIENTS),
            expected=lambda a, answer: scenario.summary(a, answer) == reference[a],
            **TIMEOUTS,
        )
        assert process.is_running()
        picky = run_http_clients(
            url,
            scenario.api_name,
            [scenario.inputs[0], ("April 22, 2019", 99, 16)],  # beam width above the page's 8
            expected=lambda a, answer: scenario.summary(a, answer) == reference[scenario.inputs[1]],
            **TIMEOUTS,
        )
    assert result.errors == [] and (result.ok, result.failed) == (CLIENTS, 0)
    assert len(set(reference.values())) > 1  # different inputs got different answers
    assert 0 < result.p50_s <= result.p95_s <= max(result.latencies_s) <= result.wall_s
    assert picky.ok == 0 and len(picky.errors) == 2
    assert "wrong answer" in picky.errors[0] or "wrong answer" in picky.errors[1]
    assert any("the app answered with an error" in error for error in picky.errors)
    assert not process.is_running()


def test_memory_check_catches_a_leak():
    """A call that keeps a little memory each time (500 calls: 20 % of the process) fails the
    5 % check; one that frees it passes."""
    per_call = int(0.2 * rss_bytes() / 500)
    kept = []
    leak = memory_growth(lambda i: kept.append(bytearray(per_call)), 100, 600)
    assert leak.bytes_per_call == pytest.approx(per_call, rel=0.25)
    assert leak.growth > MAX_GROWTH
    kept.clear()
    clean = memory_growth(lambda i: bytearray(per_call), 100, 600)
    assert abs(clean.bytes_per_call) < 0.05 * per_call and clean.growth < 0.01


def test_memory_check_leaves_the_collector_as_it_found_it():
    """What the process froze itself (the test session: ``tests/conftest.py``) stays frozen
    after a memory check; a process that froze nothing has nothing frozen after it."""
    assert gc.get_freeze_count() > 0
    memory_growth(lambda i: None, 1, 2)
    assert gc.get_freeze_count() > 0
    gc.unfreeze()
    try:
        memory_growth(lambda i: None, 1, 2)
        assert gc.get_freeze_count() == 0
    finally:
        gc.collect()
        gc.freeze()


def test_queue_settings_from_env(monkeypatch):
    from tests.helpers.space_helpers import load_space_frame

    frame = load_space_frame()
    for name in QUEUE_ENV:
        monkeypatch.delenv(name, raising=False)
    assert frame.QueueSettings.from_env() == frame.QueueSettings(1, 100)
    monkeypatch.setenv("HFATTN_CONCURRENCY_LIMIT", "2")
    monkeypatch.setenv("HFATTN_QUEUE_SIZE", "0")
    assert frame.QueueSettings.from_env() == frame.QueueSettings(2, None)  # 0: unbounded
    monkeypatch.setenv("HFATTN_QUEUE_SIZE", "-1")
    with pytest.raises(ValueError, match="HFATTN_QUEUE_SIZE must be an integer >= 0, got -1"):
        frame.QueueSettings.from_env()
    monkeypatch.setenv("HFATTN_QUEUE_SIZE", "many")
    with pytest.raises(ValueError, match="HFATTN_QUEUE_SIZE must be an integer >= 0, got 'many'"):
        frame.QueueSettings.from_env()
    monkeypatch.setenv("HFATTN_CONCURRENCY_LIMIT", "0")
    with pytest.raises(ValueError, match="HFATTN_CONCURRENCY_LIMIT must be a positive integer"):
        frame.QueueSettings.from_env()


@pytest.mark.parametrize("driver", [run_clients, run_http_clients])
def test_load_only_against_loopback(driver):
    with pytest.raises(ValueError, match="loopback addresses only"):
        driver("http://example.com:7860/", "/generate", [("x",)])
    with pytest.raises(ValueError, match="between 1 and 200 clients, got 0"):
        driver("http://127.0.0.1:7860/", "/generate", [])


def test_benchmark_records_judge_the_targets(tmp_path):
    """``bench_space_load.py``'s ``--json`` records: 0 failed requests and ≤ 5 % growth are met,
    one failure or 6 % growth are not; the table has one row per app."""
    from benchmarks.bench_space_load import markdown_table, report_records

    def result(app, failed, growth):
        load = {"clients": 50, "failed": failed, "p50_s": 1.0, "p95_s": 2.0, "max_s": 2.5}
        memory = {"calls": [100, 1000], "rss_mib": [800.0, 800.0 * (1 + growth / 100)]}
        return {
            "app": app,
            "load": {**load, "errors": ["request 3: Queue is full"] * failed},
            "memory": {"handler": {**memory, "growth_percent": growth}},
        }

    results = [result("translation", 0, 4.9), result("classification", 1, 6.0)]
    report = report_records(results)
    met = {r["name"]: r["met"] for r in report.records}
    assert met == {
        "translation: failed requests of 50 concurrent clients": True,
        "translation: latency p50 under load": None,
        "translation: latency p95 under load": None,
        "translation: memory growth, 100 → 1000 requests (via handler)": True,
        "classification: failed requests of 50 concurrent clients": False,
        "classification: latency p50 under load": None,
        "classification: latency p95 under load": None,
        "classification: memory growth, 100 → 1000 requests (via handler)": False,
    }
    report.write(tmp_path / "records.json")
    written = json.loads((tmp_path / "records.json").read_text())["records"]
    assert [(r["name"], r["target"], r["met"]) for r in written][:4:3] == [
        ("translation: failed requests of 50 concurrent clients", 0, True),
        ("translation: memory growth, 100 → 1000 requests (via handler)", 5.0, True),
    ]
    rows = markdown_table(results).splitlines()
    assert rows[2].startswith("| translation | 50 | **0** | 1.00 | 2.00 | 2.50 | 800.0 → 839.2")
    assert rows[3].endswith("| 800.0 → 848.0 (**+6.00 %**) | — |")
