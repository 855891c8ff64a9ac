"""Freed host memory kept for the next training step (glibc's ``malloc`` on Linux).

glibc serves an allocation at or above its mmap threshold (raised as large blocks are freed,
up to 32 MiB on 64-bit systems) with a fresh ``mmap`` and gives it back with ``munmap`` when
freed. A CPU training step allocates several buffers larger than that: the logits of a batch
over the vocabulary, their log-softmax and their gradients (a Luong step of 32 verses over
8,000 BPE pieces: about 1,100 target positions × 8,000 floats, 35 MB each). Each step then
maps them anew, and the kernel zero-fills every 4 KiB page at its first touch: tens of
thousands of page faults a step.

:func:`freed_memory_kept` sets glibc's ``M_MMAP_MAX`` to 0 (every block comes from the heap)
and ``M_TRIM_THRESHOLD`` to its largest value (freed heap space is not handed back), so that
the next step reuses the pages of the last one; on leaving it restores glibc's defaults and
returns the free heap to the system (``malloc_trim``). It is ``MALLOC_MMAP_MAX_=0
MALLOC_TRIM_THRESHOLD_=…`` for the training loop alone. The process keeps its peak heap while
it trains.

:func:`cap_primitive_cache` bounds the other store that grows while a CPU run trains in bf16:
oneDNN, which runs the bf16 matrix products, keeps the kernel it builds for each new shape in
a cache of 1,024 primitives. Batches grouped by length take hundreds of shapes, and the cache
grew a Luong run's RSS by 0.9 GB in 250 steps; :data:`BF16_PRIMITIVE_CACHE` primitives hold
the shapes of the steps in flight.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
from contextlib import contextmanager

logger = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1
"""``mallopt`` parameter: free heap above this many bytes at the top is given back."""
M_MMAP_MAX = -4
"""``mallopt`` parameter: the most blocks served by ``mmap`` at once (0: none)."""
DEFAULT_MMAP_MAX = 65536
"""glibc's default ``M_MMAP_MAX``."""
DEFAULT_TRIM_THRESHOLD = 128 * 1024
"""glibc's default ``M_TRIM_THRESHOLD`` (128 KiB)."""
KEEP_ALL = 2**31 - 1
"""The largest ``M_TRIM_THRESHOLD`` ``mallopt`` takes (an ``int``)."""
PRIMITIVE_CACHE_VARIABLE = "ONEDNN_PRIMITIVE_CACHE_CAPACITY"
"""The environment variable oneDNN reads its primitive cache's capacity from, once a process."""
BF16_PRIMITIVE_CACHE = 64
"""The primitives a CPU run in bf16 keeps (oneDNN's default: 1,024)."""


def glibc():
    """The C library as a ``ctypes`` handle when it is glibc (Linux), else ``None``."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


@contextmanager
def freed_memory_kept(enabled: bool = True):
    """While in this context (and ``enabled``), freed blocks stay in the heap for reuse (see
    the module docstring). Yields whether the setting is in force: ``False`` when not
    ``enabled``, or, with a warning, where the C library is not glibc."""
    libc = glibc() if enabled else None
    if enabled and libc is None:
        logger.warning(
            "training.reuse_freed_memory needs glibc (Linux); this system's C library is %s: "
            "training with its default allocator",
            platform.libc_ver()[0] or platform.system(),
        )
    if libc is None:
        yield False
        return
    libc.mallopt(M_MMAP_MAX, 0)
    libc.mallopt(M_TRIM_THRESHOLD, KEEP_ALL)
    try:
        yield True
    finally:
        libc.mallopt(M_MMAP_MAX, DEFAULT_MMAP_MAX)
        libc.mallopt(M_TRIM_THRESHOLD, DEFAULT_TRIM_THRESHOLD)
        libc.malloc_trim(0)


def cap_primitive_cache(capacity: int = BF16_PRIMITIVE_CACHE) -> bool:
    """Bound oneDNN's primitive cache to ``capacity`` (see the module docstring) unless the
    user set :data:`PRIMITIVE_CACHE_VARIABLE`; returns whether it set it. oneDNN reads the
    variable when it builds its first primitive, so this acts before the process's first bf16
    matrix product on the CPU (the start of ``hfattn train``'s first run), and does nothing
    to a process that has built one."""
    if PRIMITIVE_CACHE_VARIABLE in os.environ:
        return False
    os.environ[PRIMITIVE_CACHE_VARIABLE] = str(capacity)
    logger.debug("oneDNN's primitive cache capped at %d for bf16 on the CPU", capacity)
    return True


__all__ = [
    "BF16_PRIMITIVE_CACHE",
    "PRIMITIVE_CACHE_VARIABLE",
    "cap_primitive_cache",
    "freed_memory_kept",
    "glibc",
]
