"""Batches made ahead on a background thread, for a GPU fed from the host.

When the training batches are built on the host (padded from lists, or gathered from a split
that does not fit on the device), :func:`prefetched` builds the next ``depth`` of them on a
daemon thread while the GPU runs the current step, pinned (page-locked) so that the engine's
copy to the device does not wait (``non_blocking=True``). Torch's tensor ops release the GIL,
so the thread's padding and gathering overlap the main thread's launches. Batches come out in
order; an exception of the producer is raised in the consumer; closing the generator (a run
that stops mid-epoch) stops the thread.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator

import torch

_DONE = object()


def _pinned(batch):
    """``batch`` (a dict of tensors, or a tensor) in pinned host memory, its type kept."""
    if isinstance(batch, torch.Tensor):
        return batch.pin_memory()
    if isinstance(batch, dict):
        for key, value in batch.items():
            batch[key] = value.pin_memory()
    return batch


def prefetched(batches: Iterable, depth: int = 2, pin: bool = True) -> Iterator:
    """Yield the items of ``batches`` as a background thread makes them, at most ``depth``
    ahead (pinned when ``pin``)."""
    ready: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for batch in batches:
                item = _pinned(batch) if pin else batch
                while not stop.is_set():
                    try:
                        ready.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            ready.put(_DONE)
        except BaseException as error:  # handed to the consumer
            ready.put(error)

    thread = threading.Thread(target=produce, name="hfattn-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item = ready.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()


__all__ = ["prefetched"]
