"""Logging set-up for the command line (library code only creates loggers).

By default a command shows hfattn's own messages (INFO and up: its warnings, e.g. a truncated
text or a non-finite loss, included) and its training progress bar, and quiets the other
libraries: the progress bars of ``transformers`` (``Loading weights``, ``Writing model
shards``), ``huggingface_hub`` and ``datasets``, and their INFO / WARNING chatter
(``transformers``' "Token indices sequence length is longer than ...", accelerate's "Removed
shared tensor ... while saving"); their errors still show. ``hfattn -v`` (:func:`set_verbose`)
leaves those libraries at their own defaults and shows hfattn's DEBUG messages too.

A library that is not imported yet is set up the moment it is (a post-import hook,
:mod:`hfattn._post_import`): configuring never imports ``datasets`` for a command that does not
use it.
"""

from __future__ import annotations

import logging
import sys

from ._post_import import PostImportHook

_verbose = False
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
    for module, set_up in _SET_UP.items():
        if module in sys.modules:
            set_up()
    _HOOK.install()  # the libraries imported later


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

_HOOK = PostImportHook(_SET_UP, lambda module: _SET_UP[module]())
"""Sets up each library right after it is imported (installed by :func:`configure_logging`)."""


__all__ = ["QUIET_LOGGERS", "configure_logging", "set_verbose"]
