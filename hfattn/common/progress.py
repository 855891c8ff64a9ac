"""The progress bar of every long phase: training, preparing data, bucketing, counting a
tokenizer's sample, decoding a split. A phase shows its bar only once it has run
:data:`PROGRESS_DELAY_S` (a phase that ends sooner prints nothing), and only in the first
process of a launch.

On a terminal a bar redraws itself in place, and a bar opened while another is open (a
validation's decoding within the training bar) takes the line below it. On a stream that is no
terminal (stderr redirected to a log file) a bar writes plain lines instead, with no cursor
movement (:class:`LogLines`): the training bar's first state at once, then a line at most every
:data:`LOG_INTERVAL_S` (a phase shorter than that writes none), one when its label changes and
its last state when it closes. A notebook's bar is the widget that ``tqdm.auto`` makes.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable

from .launch import process_rank

PROGRESS_DELAY_S = 2.0
"""A phase shows its bar (:func:`progress_bar`) once it has taken this long."""
LOG_INTERVAL_S = 30.0
"""On a stream that is no terminal, a bar writes a line at most this often (and one when its
label changes or it closes)."""


class LogLines:
    """What a bar writes to ``stream``, a stream that is no terminal: each state that tqdm
    prints (``\\r`` and the bar, padded with spaces over the previous one) becomes a line of its
    own, and what erases a bar (a blank state, a bare ``\\r`` or newline) writes nothing."""

    def __init__(self, stream):
        self.stream = stream
        self.encoding = getattr(stream, "encoding", None)  # tqdm draws with █ on UTF-8 only

    def write(self, text: str) -> None:
        """Write each non-blank state in ``text`` as a line."""
        for state in re.split(r"[\r\n]", text):
            if state.strip():
                self.stream.write(state.rstrip() + "\n")

    def flush(self) -> None:
        """Flush ``stream``."""
        self.stream.flush()


def _log_options() -> dict:
    """The options of a bar on the current ``sys.stderr``: ``{}`` on a terminal or in a
    notebook; else plain lines (:class:`LogLines`) at most every :data:`LOG_INTERVAL_S`, each
    bar on the current line (``position=0``: no cursor movement) and its last state left in the
    log (``leave``: a log keeps every line)."""
    # what tqdm.auto chose (imported by it first, with its notebook warning silenced)
    from tqdm.autonotebook import tqdm as chosen  # the notebook's widget, or the console's bar
    from tqdm.std import tqdm as console

    stream = sys.stderr
    isatty = getattr(stream, "isatty", None)
    if chosen is not console or (isatty is not None and isatty()):
        return {}
    return {
        "file": LogLines(stream),
        "position": 0,
        "leave": True,
        "mininterval": LOG_INTERVAL_S,
        "maxinterval": LOG_INTERVAL_S,
    }


def progress_bar(
    iterable: Iterable | None = None,
    *,
    total: int | None = None,
    desc: str,
    unit: str,
    shown: bool = True,
    leave: bool = True,
    initial: int = 0,
    bar_format: str | None = None,
    delay: float | None = None,
):
    """The ``tqdm`` bar of a long phase over ``iterable`` (or updated by hand up to
    ``total``, from ``initial``), counting ``unit`` s with their rate (or as ``bar_format``
    says): shown once the phase has run ``delay`` seconds (default :data:`PROGRESS_DELAY_S`), by
    the first process only (and never when not ``shown``); erased once done unless ``leave``.
    On stderr; plain lines, every state kept, when stderr is no terminal (:class:`LogLines`)."""
    from tqdm.auto import tqdm  # on use: tqdm.auto looks for a notebook

    options = {"leave": leave, **_log_options()}
    return tqdm(iterable, total=total, desc=desc, unit=unit, initial=initial,
                bar_format=bar_format, delay=PROGRESS_DELAY_S if delay is None else delay,
                disable=not shown or process_rank() != 0, **options)  # fmt: skip


__all__ = ["LOG_INTERVAL_S", "PROGRESS_DELAY_S", "LogLines", "progress_bar"]
