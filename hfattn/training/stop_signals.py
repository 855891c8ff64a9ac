"""Clean stops on Ctrl-C and SIGTERM.

During training (:func:`stop_on_signals`) the first signal asks the loop to checkpoint and stop
after the current step (a validation in progress ends after its current batch); a second one
aborts at once. Once the checkpoint of the last step is on disk, what follows (the final
validation, checkpoint averaging, the final evaluation, saving the model folder) runs under
:func:`stop_at_once`: the first signal stops it there (:class:`Interrupted`), since
``--resume`` redoes the phase from that checkpoint and nothing is lost; the few file writes
that must land together run under :func:`signals_held`. Every first signal is also recorded
(:func:`~hfattn.common.stop_request.request_stop`): the batches of an evaluation check it
(:func:`~hfattn.common.stop_request.raise_if_stop_requested`), so that no long loop outlives
it by more than a batch.
"""

from __future__ import annotations

import logging
import signal
import threading
from contextlib import contextmanager

from ..common.stop_request import Interrupted, clear_stop_request, request_stop

logger = logging.getLogger(__name__)

SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that stop a run (Ctrl-C, and what schedulers and ``kill`` send)."""


@contextmanager
def _handling(handler, phase: bool = True):
    """``handler`` for :data:`SIGNALS` while in this context (the previous handlers are put
    back after it); nothing outside the main thread, where signals cannot be caught. A
    ``phase`` (training, or what follows it) starts and ends with no stop requested."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if phase:
        clear_stop_request()
    previous = {s: signal.signal(s, handler) for s in SIGNALS}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        if phase:
            clear_stop_request()


@contextmanager
def stop_on_signals(progress):
    """While in this context, the first SIGINT/SIGTERM requests a stop (``progress.stop``) and
    marks it ``interrupted`` (reason ``"interrupted"`` unless the run is already stopping for
    another one, such as its time budget: the loop checkpoints and stops), a second one
    raises ``KeyboardInterrupt``. Outside the main thread it does nothing."""

    def handler(signum, frame):
        stop = progress.stop
        if stop.interrupted or stop.reason == "interrupted":
            raise KeyboardInterrupt
        stop.request("interrupted")
        stop.interrupted = True
        request_stop()
        logger.warning("%s received: saving a checkpoint and stopping", signal.Signals(signum).name)

    with _handling(handler):
        yield


@contextmanager
def stop_at_once(step: int):
    """While in this context, a SIGINT/SIGTERM raises :class:`Interrupted` at once: for the
    phases after the checkpoint of the last step (``step``), which ``--resume`` redoes.
    Outside the main thread it does nothing."""

    def handler(signum, frame):
        logger.warning("%s received: stopping; the checkpoint of step %d holds the trained "
                       "weights", signal.Signals(signum).name, step)  # fmt: skip
        request_stop()  # should this raise be lost, the next batch's check stops the phase
        raise Interrupted

    with _handling(handler):
        yield


@contextmanager
def signals_held():
    """A block that a first SIGINT/SIGTERM does not cut (writes that must land together, such
    as a validation's record, its best weights and the progress that names them): the signal
    is raised as :class:`Interrupted` when the block ends; a second one raises
    ``KeyboardInterrupt`` at once. Outside the main thread it does nothing."""
    received = []

    def handler(signum, frame):
        if received:
            raise KeyboardInterrupt
        received.append(signum)
        request_stop()
        logger.warning("%s received: stopping once this write is done",
                       signal.Signals(signum).name)  # fmt: skip

    with _handling(handler, phase=False):
        yield
    if received:
        raise Interrupted


__all__ = ["Interrupted", "SIGNALS", "signals_held", "stop_at_once", "stop_on_signals"]
