"""The network connections that code attempts, seen through Python's audit hooks (PEP 578).

"Fails at once" in a test means "makes no trip to the Hub" or "tries once, no retries": what a
test asserts with these instead of a wall-clock limit, which a busy machine breaks.
:func:`connections` records in this process (threads included); a child process records with
:data:`RECORD_CONNECTIONS` at the top of its script.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

EVENTS = ("socket.connect", "socket.getaddrinfo")
"""The audit events of a connection attempt: a name look-up, a connect."""

_recordings: list[list[tuple[str, object]]] = []
_installed = False


def _record(event: str, args: tuple) -> None:
    if _recordings and event in EVENTS:
        # socket.connect: (socket, address); socket.getaddrinfo: (host, port, ...)
        target = args[1] if event == "socket.connect" else args[0]
        for recording in _recordings:
            recording.append((event, target))


@contextmanager
def connections() -> Iterator[list[tuple[str, object]]]:
    """While in this block, every ``(event, target)`` of :data:`EVENTS` in this process, in
    order: the address of a ``socket.connect``, the host of a ``socket.getaddrinfo``."""
    global _installed
    if not _installed:  # an audit hook cannot be removed: one for the whole process
        sys.addaudithook(_record)
        _installed = True
    recording: list[tuple[str, object]] = []
    _recordings.append(recording)
    try:
        yield recording
    finally:
        _recordings.remove(recording)


def connects(recording: list[tuple[str, object]]) -> list[object]:
    """The addresses connected to, of a recording of :func:`connections`."""
    return [target for event, target in recording if event == "socket.connect"]


RECORD_CONNECTIONS = f"""
import sys
connections = []
sys.addaudithook(lambda event, args: connections.append(event) if event in {EVENTS!r} else None)
"""
"""Source that a child process's script starts with: its list ``connections`` then holds the
event of every connection attempt (to print with the child's report)."""
