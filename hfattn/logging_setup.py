"""Logging set-up for the command line (library code only creates loggers)."""

import logging


def configure_logging(level: int = logging.INFO) -> None:
    """INFO-level ``hfattn`` messages on stderr; quieter third-party libraries."""
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", level=logging.WARNING)
    logging.getLogger("hfattn").setLevel(level)
