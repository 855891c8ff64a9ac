"""Load on a Space app (used by ``tests/spaces/test_space_load.py`` and
``benchmarks/bench_space_load.py``; what each app is sent: ``benchmarks/lib/space_scenarios.py``;
its memory over repeated requests: ``benchmarks/lib/space_memory.py``).

- :func:`run_clients`: N ``gradio_client.Client`` threads against a loopback URL, one request
  each, all released at once so that the Space's queue really holds them; every request has a
  timeout and the whole run a deadline. Returns the counts of answered and failed requests and
  the latency percentiles (from submit to the final answer).
- :func:`load_scenario`: a scenario's reference answers with no load, then its load checked
  against them.
- :func:`serve_space` and :func:`run_http_clients`: a staged Space run as its own process
  (``python app.py``, as a Space runs it) and N concurrent requests on Gradio's REST API
  from one asyncio loop, so that the load measures the server and not the clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from benchmarks.lib.space_scenarios import Scenario

LOOPBACK = {"127.0.0.1", "localhost", "::1"}
MAX_CLIENTS = 200
"""The most client threads :func:`run_clients` starts."""


# ------------------------------------------------------------------------------- clients
@dataclass
class LoadResult:
    """The outcome of :func:`run_clients`: one entry per client."""

    clients: int
    latencies_s: list[float] = field(default_factory=list)
    """Submit-to-answer time of each valid answer."""
    errors: list[str] = field(default_factory=list)
    """One line per failed request: refused, raised, timed out or answered wrongly."""
    wall_s: float = 0.0

    @property
    def ok(self) -> int:
        """Requests answered correctly."""
        return len(self.latencies_s)

    @property
    def failed(self) -> int:
        """Requests that failed (everything not answered correctly by the deadline)."""
        return self.clients - self.ok

    def percentile_s(self, q: float) -> float:
        """The ``q``-th percentile (0..100) of the answered requests' latency (NaN: none)."""
        return float(np.percentile(self.latencies_s, q)) if self.latencies_s else float("nan")

    @property
    def p50_s(self) -> float:
        """Median latency."""
        return self.percentile_s(50)

    @property
    def p95_s(self) -> float:
        """95th-percentile latency."""
        return self.percentile_s(95)

    def summary(self) -> dict:
        """The figures as a JSON-ready dict."""
        return {
            "clients": self.clients,
            "ok": self.ok,
            "failed": self.failed,
            "p50_s": round(self.p50_s, 3),
            "p95_s": round(self.p95_s, 3),
            "max_s": round(max(self.latencies_s), 3) if self.latencies_s else float("nan"),
            "wall_s": round(self.wall_s, 2),
            "errors": self.errors[:5],
        }


def check_loopback(url: str) -> None:
    """Refuse a URL that is not on this machine (the load is for local servers only)."""
    host = urllib.parse.urlsplit(url).hostname
    if host not in LOOPBACK:
        raise ValueError(
            f"load runs against loopback addresses only ({sorted(LOOPBACK)}), got {url}"
        )


def _needs_tls(url: str) -> bool:
    """Whether ``url`` is served over TLS: the ``verify`` / ``ssl_verify`` of the clients
    here. Verifying is httpx's (and ``gradio_client``'s) default, and every HTTP client made
    with it loads the whole CA bundle (~50 ms of CPU; a ``gradio_client.Client`` makes a few
    per request, so 50 of them spent more CPU on it than the Space on its answers), which a
    plain ``http://`` server never asks for: the clients verify only where there is TLS."""
    return urllib.parse.urlsplit(url).scheme == "https"


def check_load(url: str, requests: Sequence[tuple]) -> None:
    """Refuse a load that is not on this machine (:func:`check_loopback`) or has no request
    or more than :data:`MAX_CLIENTS`."""
    check_loopback(url)
    if not 1 <= len(requests) <= MAX_CLIENTS:
        raise ValueError(f"requests: between 1 and {MAX_CLIENTS} clients, got {len(requests)}")


def run_clients(
    url: str,
    api_name: str,
    requests: Sequence[tuple],
    *,
    expected: Callable[[tuple, Any], bool] | None = None,
    request_timeout_s: float = 60.0,
    deadline_s: float = 120.0,
) -> LoadResult:
    """Send ``requests`` (argument tuples for ``api_name``) to the Gradio app at ``url``, one
    per client thread, each thread with its own ``gradio_client.Client``; the threads first
    connect, then submit together.

    ``expected(args, answer)`` judges each answer (``False`` or an exception: failed). Each
    request may take ``request_timeout_s``; whatever is unanswered ``deadline_s`` after the
    start counts as failed.

    Raises:
        ValueError: ``url`` is not a loopback address, or no request or more than
            :data:`MAX_CLIENTS`.
    """
    from gradio_client import Client

    check_load(url, requests)
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    start_together = threading.Barrier(len(requests))
    connect_timeout = min(request_timeout_s, deadline_s / 2)

    def one(index: int, args: tuple) -> None:
        client, error, latency = None, None, None
        try:
            client = Client(
                url,
                verbose=False,
                ssl_verify=_needs_tls(url),
                httpx_kwargs={"timeout": request_timeout_s},
            )
        except Exception as exc:  # counted below; the others still start together
            error = f"connect: {type(exc).__name__}: {exc}"
        try:
            start_together.wait(timeout=connect_timeout)
        except threading.BrokenBarrierError:
            pass  # some client did not connect in time: go on without it
        try:
            if client is not None:
                t0 = time.perf_counter()
                answer = client.submit(*args, api_name=api_name).result(timeout=request_timeout_s)
                latency = time.perf_counter() - t0
                if expected is not None and not expected(args, answer):
                    error, latency = f"wrong answer to {args!r}: {str(answer)[:200]!r}", None
        except Exception as exc:
            error = f"{type(exc).__name__}: {str(exc)[:200]}"
        finally:
            if client is not None:
                client.close()
        with lock:
            if latency is not None:
                latencies.append(latency)
            else:
                errors.append(f"request {index}: {error}")

    started = time.perf_counter()
    pool = ThreadPoolExecutor(max_workers=len(requests), thread_name_prefix="space-load")
    try:
        futures = [pool.submit(one, i, args) for i, args in enumerate(requests)]
        wait(futures, timeout=deadline_s)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    with lock:  # a snapshot: threads still running past the deadline no longer count
        return _load_result(len(requests), latencies, errors, started, deadline_s)


def _load_result(
    clients: int, latencies: list[float], errors: list[str], started: float, deadline_s: float
) -> LoadResult:
    """The :class:`LoadResult` of a load begun at ``started``: the answers and failures so
    far, and one more failure line for the requests still unanswered at the deadline."""
    result = LoadResult(clients, list(latencies), list(errors))
    result.wall_s = time.perf_counter() - started
    unanswered = result.clients - len(result.latencies_s) - len(result.errors)
    if unanswered:
        result.errors.append(f"deadline: {unanswered} requests unanswered after {deadline_s}s")
    return result


# ------------------------------------------------------------------- a Space in its own process
@contextlib.contextmanager
def serve_space(
    staged: Path, model_id: str, env: dict[str, str] | None = None, start_timeout_s: float = 180
) -> Iterator[tuple[str, psutil.Process]]:
    """Run the staged Space ``staged`` (``python app.py`` in its folder, as a Space runs it,
    with this Python: ``tests/fresh_env.start_space``) for ``model_id`` on 127.0.0.1 in its
    own process, with ``env`` added to its environment; yield ``(url, process)`` once it
    answers, stop it on exit.

    Raises:
        RuntimeError: the app exited or did not answer within ``start_timeout_s`` (with the
            end of its output).
    """
    from tests.helpers.fresh_env import (  # tests/: on the path of the tests and benchmarks
        start_space,
        stop,
    )

    process, url = start_space(
        Path(sys.executable),
        staged,
        {"HFATTN_MODEL_ID": model_id, **(env or {})},
        timeout=start_timeout_s,
    )
    try:
        yield url, psutil.Process(process.pid)
    finally:
        stop(process)


def endpoint_defaults(url: str, api_name: str) -> list:
    """The default of every parameter of the endpoint ``api_name`` (``"/translate"``), in
    order, from the app's ``gradio_api/info`` (what ``gradio_client`` fills in for the
    arguments a call leaves out)."""
    import httpx

    info_url = urllib.parse.urljoin(url, "gradio_api/info")
    info = httpx.get(info_url, timeout=30, verify=_needs_tls(url)).json()
    parameters = info["named_endpoints"][api_name]["parameters"]
    return [p.get("parameter_default") for p in parameters]


async def _rest_call(client, url: str, api_name: str, data: list) -> Any:
    """One call of Gradio's REST API: ``POST gradio_api/call/<name>``, then read its event
    stream to the ``complete`` event; the outputs (a list, one per output component)."""
    name = api_name.lstrip("/")
    posted = await client.post(
        urllib.parse.urljoin(url, f"gradio_api/call/{name}"), json={"data": data}
    )
    posted.raise_for_status()
    event_id = posted.json()["event_id"]
    stream_url = urllib.parse.urljoin(url, f"gradio_api/call/{name}/{event_id}")
    async with client.stream("GET", stream_url) as stream:
        event = None
        async for line in stream.aiter_lines():
            if line.startswith("event:"):
                event = line.partition(":")[2].strip()
            elif line.startswith("data:") and event in ("complete", "error"):
                payload = line.partition(":")[2].strip()
                if event == "error":
                    raise RuntimeError(f"the app answered with an error: {payload[:200]}")
                return json.loads(payload)
    raise RuntimeError("the event stream ended without an answer")


def run_http_clients(
    url: str,
    api_name: str,
    requests: Sequence[tuple],
    *,
    expected: Callable[[tuple, Any], bool] | None = None,
    request_timeout_s: float = 60.0,
    deadline_s: float = 120.0,
) -> LoadResult:
    """Send ``requests`` to the Gradio app at ``url`` all at once, each its own connection
    and event stream on Gradio's REST API, from one asyncio loop (the arguments a request
    leaves out take the endpoint's defaults, :func:`endpoint_defaults`). The same contract as
    :func:`run_clients`, whose ``gradio_client`` threads cost the machine more CPU than a
    small Space's own work: use this one when the app runs in another process.

    Raises:
        ValueError: ``url`` is not a loopback address, or no request or more than
            :data:`MAX_CLIENTS`.
    """
    import httpx

    check_load(url, requests)
    defaults = endpoint_defaults(url, api_name)
    latencies: list[float] = []
    errors: list[str] = []

    async def one(client, index: int, args: tuple) -> None:
        t0 = time.perf_counter()
        try:
            data = [*args, *defaults[len(args) :]]
            answer = await asyncio.wait_for(
                _rest_call(client, url, api_name, data), request_timeout_s
            )
            latency = time.perf_counter() - t0
            if expected is not None and not expected(args, answer):
                errors.append(f"request {index}: wrong answer to {args!r}: {str(answer)[:200]!r}")
                return
            latencies.append(latency)
        except Exception as exc:
            errors.append(f"request {index}: {type(exc).__name__}: {str(exc)[:200]}")

    async def everything() -> None:
        limits = httpx.Limits(max_connections=len(requests) + 1)
        async with httpx.AsyncClient(
            timeout=request_timeout_s, limits=limits, verify=_needs_tls(url)
        ) as client:
            tasks = [asyncio.create_task(one(client, i, a)) for i, a in enumerate(requests)]
            done, pending = await asyncio.wait(tasks, timeout=deadline_s)
            for task in pending:
                task.cancel()

    started = time.perf_counter()
    asyncio.run(everything())
    return _load_result(len(requests), latencies, errors, started, deadline_s)


def call_once(url: str, api_name: str, args: tuple, defaults: list | None = None) -> Any:
    """One request on Gradio's REST API, as :func:`run_http_clients` sends it (``defaults``:
    the endpoint's, :func:`endpoint_defaults`, read when not given); the outputs."""
    import httpx

    defaults = endpoint_defaults(url, api_name) if defaults is None else defaults

    async def call() -> Any:
        async with httpx.AsyncClient(timeout=300, verify=_needs_tls(url)) as client:
            return await _rest_call(client, url, api_name, [*args, *defaults[len(args) :]])

    return asyncio.run(call())


def load_scenario(
    url: str, scenario: Scenario, clients: int, **kwargs
) -> tuple[LoadResult, dict[tuple, Hashable]]:
    """Ask each distinct input of ``scenario`` once with no load (the reference answers), then
    run ``clients`` concurrent clients (:func:`run_clients`, ``kwargs`` passed on) whose
    answers must be well formed and equal the reference. Returns the result and the
    references."""
    from gradio_client import Client

    check_loopback(url)
    client = Client(url, verbose=False, ssl_verify=_needs_tls(url))
    try:
        reference = {
            args: scenario.summary(args, client.predict(*args, api_name=scenario.api_name))
            for args in scenario.inputs
        }
    finally:
        client.close()

    def expected(args: tuple, answer: Any) -> bool:
        return scenario.summary(args, answer) == reference[args]

    requests = scenario.requests(clients)
    return run_clients(url, scenario.api_name, requests, expected=expected, **kwargs), reference
