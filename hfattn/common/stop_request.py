"""Whether this process has been asked to stop, for the long loops that stop between batches.

The signal handlers of :mod:`hfattn.training.stop_signals` record a first Ctrl-C / SIGTERM here
(:func:`request_stop`) while a run trains or finishes; a long loop (the decoding of a split,
an evaluation's batches) calls :func:`raise_if_stop_requested` between its batches, which raises
:class:`Interrupted`: the phase ends after the batch it is in, not minutes later at its end (a
periodic validation of 15,000 pairs once kept a SIGTERM waiting that long). The request lasts
while the run's signal handling is in place (the handlers clear it when it ends), so a later
command in the same process is not stopped by it; outside a run nothing requests a stop and the
check costs a flag read.
"""

from __future__ import annotations

import threading

_REQUESTED = threading.Event()


class Interrupted(KeyboardInterrupt):
    """A first SIGINT/SIGTERM ended a phase of a run (after the checkpoint of the last step, or
    between the batches of an evaluation): the run stops, and ``--resume`` goes on from its
    checkpoint."""


def request_stop() -> None:
    """Record that this process is asked to stop (a signal handler's first signal)."""
    _REQUESTED.set()


def clear_stop_request() -> None:
    """Forget the request (a run's signal handling begins or ends)."""
    _REQUESTED.clear()


def stop_requested() -> bool:
    """Whether a stop has been asked for since the run's signal handling began."""
    return _REQUESTED.is_set()


def raise_if_stop_requested() -> None:
    """Between the batches of a long loop: raise :class:`Interrupted` once a stop is asked
    for, so that the loop ends after the batch it was in."""
    if _REQUESTED.is_set():
        raise Interrupted


__all__ = [
    "Interrupted",
    "clear_stop_request",
    "raise_if_stop_requested",
    "request_stop",
    "stop_requested",
]
