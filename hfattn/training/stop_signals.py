"""Clean stops on Ctrl-C and SIGTERM: the first asks the training loop to checkpoint and stop
after the current step, a second one aborts at once."""

from __future__ import annotations

import logging
import signal
import threading
from contextlib import contextmanager

logger = logging.getLogger(__name__)


@contextmanager
def stop_on_signals(progress):
    """While in this context, the first SIGINT/SIGTERM sets ``progress.should_stop`` (reason
    ``"interrupted"``: the loop checkpoints and stops), a second one raises
    ``KeyboardInterrupt``. Outside the main thread (where signals cannot be caught) it does
    nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        if progress.should_stop and progress.stop_reason == "interrupted":
            raise KeyboardInterrupt
        progress.should_stop, progress.stop_reason = True, "interrupted"
        logger.warning("%s received: saving a checkpoint and stopping", signal.Signals(signum).name)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


__all__ = ["stop_on_signals"]
