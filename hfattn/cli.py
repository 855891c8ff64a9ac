"""The ``hfattn`` command line: ``hfattn train|evaluate|generate|translate|classify|push|demo|plot|baseline``.

Each sub-command lives in ``hfattn/commands/<name>.py`` and exposes
``register(subparsers)``; heavy imports (torch, transformers, ...) happen inside the
command's handler so that ``hfattn --help`` stays fast. Importing the ``hfattn`` package
itself, which runs before this module, is cheap too (see ``hfattn/__init__.py``);
``tests/test_cli_startup.py`` checks that no ``--help`` imports torch or transformers.
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = (
    "train",
    "evaluate",
    "generate",
    "translate",
    "classify",
    "export",
    "push",
    "demo",
    "plot",
    "baseline",
)
LOADING_COMMANDS = ("evaluate", "generate", "translate", "classify")
"""Commands that load a model folder through :mod:`hfattn.commands.loading` (safetensors only,
unless ``--allow-pickle``)."""
VERBOSE_HELP = (
    "also show the other libraries' messages and progress bars (transformers, datasets, "
    "huggingface_hub, accelerate) and hfattn's debug messages"
)
"""``-v`` / ``--verbose``, before or after the command (:mod:`hfattn.commands.logging_setup`)."""


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level parser with one sub-parser per command in :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="hfattn",
        description="Train, evaluate, sample from and publish attention-era models.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"hfattn.commands.{name}").register(subparsers)
    for command in subparsers.choices.values():  # `hfattn train R.yaml -v` works too
        command.add_argument(
            "-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP
        )
    for name in LOADING_COMMANDS:
        subparsers.choices[name].add_argument(
            "--allow-pickle",
            action="store_true",
            help="also load pickle weights (pytorch_model.bin), which can run code: only for "
            "files you trust (default: safetensors only)",
        )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``hfattn`` console script and of ``python -m hfattn``."""
    args = build_parser().parse_args(argv)
    from .commands.loading import allow_pickle
    from .commands.logging_setup import set_verbose

    set_verbose(args.verbose)  # applied by the command's configure_logging()

    try:
        with allow_pickle(getattr(args, "allow_pickle", False)):
            result = args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
