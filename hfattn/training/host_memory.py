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
"""

from __future__ import annotations

import ctypes
import logging
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


__all__ = ["freed_memory_kept", "glibc"]
