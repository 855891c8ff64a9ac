"""``hfattn plot NAME --out FILE``: draw one of the theses' figures as a PNG."""

from __future__ import annotations

import argparse

from hfattn.plotting import PLOTS


def run(args: argparse.Namespace) -> int:
    """Write the figure ``args.name`` to ``args.out`` (default ``<name>.png``)."""
    from hfattn.plotting import plot

    out = args.out or f"{args.name}.png"
    path = plot(args.name, out)
    print(f"wrote {path}")
    return 0


def register(subparsers) -> argparse.ArgumentParser:
    """Add the ``plot`` sub-command to ``subparsers``."""
    parser = subparsers.add_parser(
        "plot",
        help="draw a figure (positional encodings, Noam, warmups, sigmoid, attention scores)",
        description="Draw one of the figures of the seed theses as a PNG file.",
    )
    parser.add_argument("name", metavar="NAME", choices=list(PLOTS), help=", ".join(PLOTS))
    parser.add_argument("--out", metavar="FILE", help="output PNG path (default: NAME.png)")
    parser.set_defaults(func=run)
    return parser
