"""Load and memory measurements of a Space app served in-process (used by
``tests/spaces/test_space_load.py`` and ``benchmarks/bench_space_load.py``).

- :func:`run_clients`: N ``gradio_client.Client`` threads against a loopback URL, one request
  each, all released at once so that the Space's queue really holds them; every request has a
  timeout and the whole run a deadline. Returns the counts of answered and failed requests and
  the latency percentiles (from submit to the final answer).
- :func:`memory_growth`: the resident memory (RSS) of this process after ``first`` and after
  ``total`` sequential calls, each read after ``gc.collect()`` and ``malloc_trim(0)`` (freed
  heap given back to the OS, so that only memory still held counts; what was alive before the
  first reading is frozen out of these collections, ``gc.freeze``).
- :data:`SCENARIOS`: what the load sends to each of the three apps, and how an answer under
  load is checked: it must equal the app's answer to the same input with no load.
- :func:`serve_space` and :func:`run_http_clients`: a staged Space run as its own process
  (``python app.py``, as a Space runs it) and N concurrent requests on Gradio's REST API
  from one asyncio loop, so that the load measures the server and not the clients.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ctypes
import ctypes.util
import gc
import inspect
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

LOOPBACK = {"127.0.0.1", "localhost", "::1"}
MAX_CLIENTS = 200
"""The most client threads :func:`run_clients` starts."""


# ---------------------------------------------------------------------------- scenarios
def _text_summary(args: tuple, answer: Any) -> Hashable:
    """A text-generation answer: the prompt and a continuation."""
    prompt = args[0]
    if not isinstance(answer, str) or not answer.startswith(prompt) or answer == prompt:
        raise ValueError(f"expected {prompt!r} and a continuation, got {answer!r}")
    return answer


def _translation_summary(args: tuple, answer: Any) -> Hashable:
    """A translation answer: one non-empty line per source line and the heatmap."""
    text, plot = answer
    lines = text.split("\n")
    if len(lines) != len(args[0].split("\n")) or not all(lines):
        raise ValueError(f"expected one translation per line of {args[0]!r}, got {text!r}")
    if not plot or plot.get("type") != "altair":
        raise ValueError(f"expected the attention heatmap, got {str(plot)[:80]!r}")
    return text


def _classification_summary(args: tuple, answer: Any) -> Hashable:
    """A classification answer: label probabilities summing to 1, the best one first, and the
    token weights (attention pooling) when the model has them."""
    scores, weights = answer
    confidences = [(c["label"], c["confidence"]) for c in scores["confidences"]]
    if abs(sum(p for _, p in confidences) - 1.0) > 1e-5 or scores["label"] != confidences[0][0]:
        raise ValueError(f"expected probabilities summing to 1, best first, got {scores!r}")
    tokens = tuple((w["token"], round(w["class_or_confidence"], 6)) for w in weights or ())
    return scores["label"], tuple((label, round(p, 6)) for label, p in confidences), tokens


@dataclass(frozen=True)
class Scenario:
    """What the load sends to one Space app (``spaces/<app>/``): its endpoint, the distinct
    inputs the clients cycle through, and ``summary(args, answer)``, the answer reduced to
    what must not change under load (raises ``ValueError`` on a malformed answer)."""

    app: str
    api_name: str
    inputs: tuple[tuple, ...]
    summary: Callable[[tuple, Any], Hashable]

    def requests(self, n: int) -> list[tuple]:
        """``n`` requests cycling through :attr:`inputs`."""
        return [self.inputs[i % len(self.inputs)] for i in range(n)]


NEW_TOKENS = 8
"""New tokens per request: the load measures the queue, not long generations."""
SCENARIOS = {
    "text_generation": Scenario(
        "text_generation",
        "/generate",
        tuple(
            (prompt, 0.0, 50, 0.95, NEW_TOKENS)  # greedy: the same prompt gives the same text
            for prompt in ("ROMEO:", "JULIET:", "HAMLET:", "KING LEAR:", "First Citizen:")
        ),
        _text_summary,
    ),
    "translation": Scenario(
        "translation",
        "/translate",
        tuple(
            (date, 2, 16)
            for date in ("April 22, 2019", "3 May 2001", "December 31, 1999", "June 5, 1987")
        ),
        _translation_summary,
    ),
    "classification": Scenario(
        "classification",
        "/classify",
        tuple(
            (text,)
            for text in ("B T B T S X S E T E", "B P B P T V V E P E", "B T B T S X S E P E")
        ),
        _classification_summary,
    ),
}
"""The three apps' load: short greedy generations, two-beam translations of dates, Reber
strings for a recurrent classifier."""


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


# -------------------------------------------------------------------------------- memory
_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or None)


def rss_bytes() -> int:
    """This process's resident memory after a full garbage collection, with the heap's free
    pages given back to the OS (``malloc_trim(0)``, glibc) so that only memory in use counts."""
    gc.collect()
    if hasattr(_LIBC, "malloc_trim"):
        _LIBC.malloc_trim(0)
    return psutil.Process().memory_info().rss


@dataclass
class MemoryResult:
    """RSS after ``first`` and after ``total`` sequential calls."""

    first: int
    total: int
    rss_first: int
    rss_total: int

    @property
    def growth(self) -> float:
        """``rss_total / rss_first - 1``."""
        return self.rss_total / self.rss_first - 1.0

    @property
    def bytes_per_call(self) -> float:
        """The growth spread over the calls between the two readings."""
        return (self.rss_total - self.rss_first) / (self.total - self.first)

    def summary(self) -> dict:
        """The figures as a JSON-ready dict (MiB, percent, KiB per call)."""
        return {
            "calls": [self.first, self.total],
            "rss_mib": [round(self.rss_first / 2**20, 1), round(self.rss_total / 2**20, 1)],
            "growth_percent": round(100 * self.growth, 2),
            "kib_per_call": round(self.bytes_per_call / 1024, 2),
        }


def memory_growth(call: Callable[[int], Any], first: int = 100, total: int = 1000) -> MemoryResult:
    """Call ``call(i)`` for i = 0 .. ``total``-1 in sequence and read :func:`rss_bytes` after
    the first ``first`` calls (the warm-up: caches, allocator pools) and after all of them."""
    if not 0 < first < total:
        raise ValueError(f"need 0 < first < total, got first={first}, total={total}")
    for i in range(first):
        call(i)
    # One full collection, then everything still alive is frozen out of the collector's
    # reach: the two readings' collections walk only what the calls made since (the objects
    # of torch, transformers and gradio cost ~0.5 s per full collection). A frozen object is
    # still freed when its last reference goes; only a frozen cycle turned garbage waits for
    # the unfreeze, so the second reading can come out higher, never hide growth.
    gc.collect()
    gc.freeze()
    try:
        rss_first = rss_bytes()
        for i in range(first, total):
            call(i)
        rss_total = rss_bytes()
    finally:
        gc.unfreeze()
    return MemoryResult(first, total, rss_first, rss_total)


def handler(demo, api_name: str) -> Callable[..., Any]:
    """The Python function behind the endpoint ``api_name`` of the Gradio app ``demo`` (what
    its queue calls; no server, no (de)serialisation): ``handler(demo, "/generate")(*args)``
    returns its final output (a streaming handler is run to its end)."""
    name = api_name.lstrip("/")
    matches = [f.fn for f in demo.fns.values() if f.api_name == name]
    if len(matches) != 1:
        raise ValueError(f"{api_name}: no such endpoint (or several) in this app")
    fn = matches[0]
    if not inspect.isgeneratorfunction(fn):
        return fn

    def run_to_end(*args):
        outputs = collections.deque(fn(*args), maxlen=1)  # keep only the last one
        return outputs[0] if outputs else None

    return run_to_end


def scenario_memory(demo, scenario: Scenario, first: int = 100, total: int = 1000) -> MemoryResult:
    """:func:`memory_growth` of ``scenario``'s handler, called directly with its inputs in
    turn."""
    fn = handler(demo, scenario.api_name)
    return memory_growth(lambda i: fn(*scenario.inputs[i % len(scenario.inputs)]), first, total)
