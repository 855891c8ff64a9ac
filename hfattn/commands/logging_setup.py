"""Logging set-up for the command line (library code only creates loggers).

By default a command shows hfattn's own messages (INFO and up: its warnings, e.g. a truncated
text or a non-finite loss, included) and its training progress bar, and quiets the other
libraries: the progress bars of ``transformers`` (``Loading weights``, ``Writing model
shards``), ``huggingface_hub`` and ``datasets``, and their INFO / WARNING chatter
(``transformers``' "Token indices sequence length is longer than ...", accelerate's "Removed
shared tensor ... while saving"); their errors still show. ``hfattn -v`` (:func:`set_verbose`)
leaves those libraries at their own defaults and shows hfattn's DEBUG messages too.

A library that is not imported yet is set up through the environment variables it reads when
it is imported (``TRANSFORMERS_VERBOSITY``, ``DATASETS_VERBOSITY``, ``HF_HUB_VERBOSITY``,
``HF_HUB_DISABLE_PROGRESS_BARS``, ``HF_DATASETS_DISABLE_PROGRESS_BARS``; processes started by
``accelerate launch`` inherit them), a library already imported through its own functions:
configuring never imports a library. A variable the user set is left as it is.
"""

from __future__ import annotations

import logging
import os
import sys

_verbose = False
QUIET_ENVIRONMENT = {
    "TRANSFORMERS_VERBOSITY": "error",
    "DATASETS_VERBOSITY": "error",
    "HF_HUB_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",  # the Hub's bars, and transformers' (it follows them)
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
}
"""The environment that quiets the other libraries at their import (by default)."""
SET_BY_HFATTN = "HFATTN_QUIET_ENVIRONMENT"
"""Names the variables of :data:`QUIET_ENVIRONMENT` that hfattn set, not the user (a process
started by this one, e.g. under ``hfattn -v``, may then take them back)."""
QUIET_LOGGERS = ("accelerate", "huggingface_hub")
"""Loggers quieted to errors by default (``transformers`` and ``datasets`` are quieted through
their own verbosity settings)."""


def set_verbose(verbose: bool) -> None:
    """What ``hfattn -v`` sets: the other libraries keep their own log levels and progress bars
    (next :func:`configure_logging`), and hfattn logs at DEBUG."""
    global _verbose
    _verbose = bool(verbose)


def configure_logging(level: int | None = None) -> None:
    """hfattn's messages on stderr (``level``; default INFO, DEBUG under ``hfattn -v``); the
    other libraries quiet, or at their own defaults under ``hfattn -v``."""
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", level=logging.WARNING)
    if level is None:
        level = logging.DEBUG if _verbose else logging.INFO
    logging.getLogger("hfattn").setLevel(level)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.NOTSET if _verbose else logging.ERROR)
    ours = set(filter(None, os.environ.get(SET_BY_HFATTN, "").split(",")))
    for name, value in QUIET_ENVIRONMENT.items():  # for the libraries imported later
        if _verbose and name in ours:
            os.environ.pop(name, None)
            ours.discard(name)
        elif not _verbose and name not in os.environ:
            os.environ[name] = value
            ours.add(name)
    os.environ[SET_BY_HFATTN] = ",".join(sorted(ours))
    for module, set_up in _SET_UP.items():
        if module in sys.modules:
            set_up()


def _set_up_huggingface_hub() -> None:
    """The Hub's progress bars (downloads, uploads) off, or on under ``hfattn -v``."""
    from huggingface_hub.utils import disable_progress_bars, enable_progress_bars

    (enable_progress_bars if _verbose else disable_progress_bars)()


def _set_up_transformers() -> None:
    """``transformers``: errors only and no progress bars, or its defaults (warnings, bars)."""
    from transformers.utils import logging as library

    library.set_verbosity(logging.WARNING if _verbose else logging.ERROR)
    (library.enable_progress_bar if _verbose else library.disable_progress_bar)()


def _set_up_datasets() -> None:
    """``datasets``: errors only and no progress bars, or its defaults (warnings, bars)."""
    import datasets

    datasets.utils.logging.set_verbosity(logging.WARNING if _verbose else logging.ERROR)
    (datasets.enable_progress_bars if _verbose else datasets.disable_progress_bars)()


_SET_UP = {
    "huggingface_hub": _set_up_huggingface_hub,
    "transformers": _set_up_transformers,
    "datasets": _set_up_datasets,
}
"""How each library is set up, by module name (``huggingface_hub`` first: ``transformers``
reads its progress-bar setting when it is imported)."""

__all__ = [
    "QUIET_ENVIRONMENT",
    "QUIET_LOGGERS",
    "SET_BY_HFATTN",
    "configure_logging",
    "set_verbose",
]
