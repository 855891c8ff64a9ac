"""``hfattn plot NAME --out FILE``: draw a figure of a method or of a trained model's
attention as a PNG."""

from __future__ import annotations

import argparse

from hfattn.plotting.figures import MODEL_PLOTS, PLOTS

from ..tasks.decoding import TRANSLATION_FALLBACK
from .arguments import saved_setting_help


def run(args: argparse.Namespace) -> int:
    """Write the figure ``args.name`` to ``args.out`` (default ``<name>.png``)."""
    import sys
    from functools import partial

    from hfattn.plotting.figures import plot

    from .inputs import locate_model, report_error
    from .logging_setup import configure_logging
    from .model_loading import load_model_and_tokenizer

    configure_logging()  # transformers' "Loading weights" bar and chatter stay quiet
    params = {}
    if args.name == "attention":
        if len(args.args) != 2:
            print('error: usage: hfattn plot attention DIR "source sentence"', file=sys.stderr)
            return 2
        try:  # a missing folder is one line at once, as for every command (no Hub retries)
            locate_model(args.args[0])
        except ValueError as err:
            return report_error(err)
        params = {
            "model_dir": args.args[0],
            "text": args.args[1],
            "num_beams": args.num_beams,
            "layer": args.layer,
            "head": args.head,
            "loader": partial(load_model_and_tokenizer, auto_class="AutoModelForSeq2SeqLM"),
        }
    else:
        if args.args:
            print(f"error: plot {args.name} takes no arguments, got {args.args}", file=sys.stderr)
            return 2
        if args.layer is not None or args.head is not None:
            print("error: --layer and --head apply to the attention plot only", file=sys.stderr)
            return 2
    out = args.out or f"{args.name}.png"
    try:
        path = plot(args.name, out, **params)
    except (OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {path}")
    return 0


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return number


def _head(value: str) -> int | None:
    """``mean`` (the mean over heads, ``None``) or a 1-based head number."""
    if value.strip().lower() == "mean":
        return None
    try:
        return _positive(value)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected 'mean' or a positive head number, got {value!r}"
        ) from None


def register(subparsers) -> argparse.ArgumentParser:
    """Add the ``plot`` sub-command to ``subparsers``."""
    parser = subparsers.add_parser(
        "plot",
        help="draw a figure (positional encodings, Noam, warmups, sigmoid, scores, an alignment)",
        description="Draw a figure of the attention-era models (positional encodings, schedules, "
        "scores, attention maps) as a PNG file.",
    )
    parser.add_argument(
        "name",
        metavar="NAME",
        choices=[*PLOTS, *MODEL_PLOTS],
        help=", ".join([*PLOTS, *MODEL_PLOTS]),
    )
    parser.add_argument("args", nargs="*", metavar="ARG", help='attention: DIR "source sentence"')
    parser.add_argument("--out", metavar="FILE", help="output PNG path (default: NAME.png)")
    parser.add_argument(
        "--num-beams",
        type=int,
        help="attention: beam width" + saved_setting_help(TRANSLATION_FALLBACK["num_beams"]),
    )
    parser.add_argument(
        "--layer",
        type=_positive,
        metavar="N",
        help="attention: decoder layer whose cross-attention to draw, 1-based (default: the last)",
    )
    parser.add_argument(
        "--head",
        type=_head,
        metavar="H|mean",
        help="attention: head to draw, 1-based, or 'mean' over heads (the default)",
    )
    parser.set_defaults(func=run)
    return parser
