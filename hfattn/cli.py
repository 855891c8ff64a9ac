"""The ``hfattn`` command line: ``hfattn
train|sweep|evaluate|generate|translate|classify|push|demo|plot|baseline|prepare|cache|recipes``.

Each sub-command lives in ``hfattn/commands/<name>.py`` and exposes
``register(subparsers)``; heavy imports (torch, transformers, ...) happen inside the
command's handler so that ``hfattn --help`` stays fast. Importing the ``hfattn`` package
itself, which runs before this module, is cheap too (see ``hfattn/__init__.py``);
``tests/cli/test_cli_startup.py`` checks that no ``--help`` imports torch or transformers.

Under several processes (``torchrun``, ``accelerate launch``) the first prints the messages and
warnings; the others print only their errors (:func:`hfattn.common.launch.process_rank`).

A command's options and positional arguments mix in any order (:class:`CommandParser`):
``hfattn translate RUN --num-beams 4 "7/4/76"`` and ``hfattn translate RUN "7/4/76" --num-beams
4`` are the same command.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

COMMANDS = (
    "train",
    "sweep",
    "evaluate",
    "generate",
    "translate",
    "classify",
    "export",
    "push",
    "demo",
    "plot",
    "baseline",
    "prepare",
    "cache",
    "recipes",
)
LOADING_COMMANDS = ("evaluate", "generate", "translate", "classify")
"""Commands that load a model folder through :mod:`hfattn.commands.model_loading` (safetensors only,
unless ``--allow-pickle``)."""
VERBOSE_HELP = (
    "also show the other libraries' messages and progress bars (transformers, datasets, "
    "huggingface_hub, accelerate) and hfattn's debug messages"
)
"""``-v`` / ``--verbose``, before or after the command (:mod:`hfattn.commands.logging_setup`)."""


EXAMPLES = {
    "train": [
        "hfattn train char_rnn_shakespeare",
        "hfattn train recipes/bahdanau_bible_en_es.yaml --set training.max_steps=2000",
        "hfattn train --resume runs/char_rnn_shakespeare",
    ],
    "sweep": [
        "hfattn sweep bahdanau_date_normalization --space bahdanau_date_normalization "
        "--trials 12 --set training.eval_every=150",
        "hfattn sweep R.yaml --space S.yaml --trials 24 --storage postgresql://db/sweeps",
    ],
    "evaluate": [
        "hfattn evaluate runs/bahdanau_bible_en_es --split test --num-beams 4",
        "hfattn evaluate runs/bahdanau_bible_en_es --data heldout.tsv",
    ],
    "generate": ['hfattn generate runs/char_rnn_shakespeare --prompt "ROMEO:" --temperature 0.8'],
    "translate": [
        'hfattn translate runs/bahdanau_bible_en_es "In the beginning was the Word."',
        "hfattn translate runs/bahdanau_bible_en_es --file english.txt > spanish.txt",
    ],
    "classify": ['hfattn classify runs/rnn_classifier_genre "O, what a noble mind is here"'],
    "export": ["hfattn export runs/vaswani_bible_en_es vaswani-ct2 --format ctranslate2"],
    "push": ["hfattn push runs/char_rnn_shakespeare --repo-id me/char-rnn --space --dry-run out"],
    "demo": ["hfattn demo runs/char_rnn_shakespeare"],
    "plot": [
        "hfattn plot noam --out noam.png",
        'hfattn plot attention runs/bahdanau_bible_en_es "In the beginning was the Word."',
    ],
    "baseline": ["hfattn baseline recipes/baseline_reviews_es.yaml"],
    "prepare": ["hfattn prepare recipes/char_rnn_shakespeare.yaml --set data.source=big.txt"],
    "cache": ["hfattn cache list", "hfattn cache remove causal_lm-0123456789abcdef"],
    "recipes": ["hfattn recipes", "hfattn recipes --path"],
}
"""What each command's ``--help`` ends with."""


class CommandParser(argparse.ArgumentParser):
    """The parser of one command, whose options and positional arguments come in any order:
    its options are read first, then the positional arguments from what is left, as
    :meth:`argparse.ArgumentParser.parse_intermixed_args` does (a text that starts with ``-``
    goes after ``--``)."""

    _intermixing = False

    def parse_known_args(self, args=None, namespace=None):
        """``(namespace, unknown arguments)``, options and positional arguments intermixed
        (the top-level parser calls this for the command's arguments)."""
        if self._intermixing:  # the two passes of parse_known_intermixed_args
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False

    def error(self, message: str):
        """Exit with ``message`` (rc 2); a list of missing arguments leaves out the optional
        positional ones (``TEXT``, which ``--file`` replaces), and an unknown option names the
        closest known one."""
        optional = {a.metavar or a.dest for a in self._actions if a.nargs in ("*", "?")}
        required = "the following arguments are required: "
        if message.startswith(required):
            names = [n for n in message[len(required) :].split(", ") if n not in optional]
            message = required + ", ".join(names)
        super().error(message)

    def closest_option(self, given: str) -> str:
        """``; did you mean --split?`` for an unknown option ``given``, or ``""``."""
        from .common.field_checks import did_you_mean

        options = [o for a in self._actions for o in a.option_strings if o.startswith("--")]
        return did_you_mean(given.split("=", 1)[0], options, show=str)


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level parser with one sub-parser per command in :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="hfattn",
        description="Train, evaluate, sample from and publish attention-era models.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    subparsers = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=CommandParser
    )
    parser.command_parsers = subparsers.choices
    """Each command's own parser, by name."""
    for name in COMMANDS:
        importlib.import_module(f"hfattn.commands.{name}").register(subparsers)
        command = subparsers.choices[name]
        command.formatter_class = argparse.RawDescriptionHelpFormatter
        command.epilog = "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[name])
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
    """Entry point of the ``hfattn`` console script and of ``python -m hfattn`` (``argv``:
    the arguments of a command run inside a process that runs other things too)."""
    from .common.command_clock import mark_command_start

    mark_command_start(process_start=argv is None)
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # the command's own usage, and the option it likely means
        command = parser.command_parsers[args.command]
        command.error(f"unrecognized arguments: {' '.join(unknown)}"
                      + command.closest_option(unknown[0]))  # fmt: skip
    from .commands.logging_setup import set_verbose
    from .commands.model_loading import allow_pickle
    from .common.launch import process_rank

    set_verbose(args.verbose)  # applied by the command's configure_logging()
    if process_rank() != 0:  # one of several processes (torchrun, accelerate launch): the
        logging.disable(logging.WARNING)  # first prints the messages, the others errors only

    try:
        with allow_pickle(getattr(args, "allow_pickle", False)):
            result = args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
