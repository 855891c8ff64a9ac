"""The command-line arguments that several commands share, defined once.

A command that runs a recipe (``train``, ``baseline``) takes it as
:func:`add_recipe_arguments` defines; a command that runs a model on texts (``translate``,
``classify``) takes them as :func:`add_text_arguments` defines, and reads them back with
:func:`hfattn.commands.inputs.text_command_inputs`; an option that overrides a saved
generation setting says so in its help with :func:`saved_setting_help`. Only :mod:`argparse`
is imported here: every command registers its arguments for ``hfattn --help``, which must stay
fast.
"""

from __future__ import annotations

import argparse

ENGINES = ("torch", "ctranslate2")
"""What ``--engine`` runs a translation with (``translate``, ``evaluate``): the model's
``generate()``, or its CTranslate2 export."""
MODEL_HELP = "a model folder (or a Hub repo id)"
"""The help of the ``model_dir`` argument of the commands that run a saved model."""


def saved_setting_help(fallback) -> str:
    """The end of the help of an option that overrides one setting of the model's saved
    generation config (the saved-settings rule, :mod:`hfattn.tasks.decoding`): where its
    default comes from, and ``fallback``, the value used when the config sets none."""
    return f" (default: the model's saved generation config; {fallback} when it sets none)"


def add_recipe_arguments(
    parser: argparse.ArgumentParser,
    *,
    recipe_help: str,
    set_example: str,
    recipe_optional: bool = False,
) -> None:
    """Add the ``recipe`` path (described by ``recipe_help``; may be left out when
    ``recipe_optional``) and the repeatable ``--set KEY=VALUE`` overrides (``set_example`` is
    shown in their help) to ``parser``."""
    parser.add_argument("recipe", help=recipe_help, nargs="?" if recipe_optional else None)
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"override a recipe field, e.g. --set {set_example} (repeatable)",
    )


def add_text_arguments(parser: argparse.ArgumentParser, *, what: str, item: str) -> None:
    """Add ``model_dir``, the ``TEXT`` arguments (``what`` the command does with them, e.g.
    ``"texts to classify"``) and ``--file`` (one ``item`` per line, ``-`` for stdin) to
    ``parser``."""
    parser.add_argument("model_dir", help=MODEL_HELP)
    parser.add_argument("texts", nargs="*", metavar="TEXT", help=what)
    parser.add_argument(
        "--file",
        help=f"a UTF-8 file with one {item} per line ('-': stdin); a blank line gives an empty "
        "output line, so the output keeps one line per input line",
    )
