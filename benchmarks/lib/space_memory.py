"""The memory of a Space app over repeated requests (used by ``tests/spaces/test_space_load.py``
and ``benchmarks/bench_space_load.py``): :func:`memory_growth` reads the resident memory (RSS)
of this process after ``first`` and after ``total`` sequential calls, each read after
``gc.collect()`` and ``malloc_trim(0)`` (freed heap given back to the OS, so that only memory
still held counts; what was alive before the first reading is frozen out of these collections,
``gc.freeze``, and unfrozen after unless the process had frozen objects before);
:func:`scenario_memory` calls an app's handler directly with a scenario's inputs."""

from __future__ import annotations

import collections
import ctypes
import ctypes.util
import gc
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psutil

from benchmarks.lib.space_scenarios import Scenario

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
    # the unfreeze, so the second reading can come out higher, never hide growth. A process
    # that froze its objects itself (the test session) keeps them frozen afterwards.
    frozen_before = gc.get_freeze_count() > 0
    gc.collect()
    gc.freeze()
    try:
        rss_first = rss_bytes()
        for i in range(first, total):
            call(i)
        rss_total = rss_bytes()
    finally:
        if not frozen_before:
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
