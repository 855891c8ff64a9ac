"""``hfattn recipes``: the recipes that come with hfattn, one line each (name and the first line
of its comment), and the search spaces ``hfattn sweep --space`` takes by name. Any of them runs
by name from any folder (``hfattn train char_rnn_shakespeare``: :mod:`hfattn.recipes.shipped`)."""

from __future__ import annotations

import argparse


def register(subparsers) -> None:
    """Add the ``recipes`` sub-command."""
    parser = subparsers.add_parser(
        "recipes",
        help="list the recipes that come with hfattn (train, prepare, sweep them by name)",
        description=(
            "List the shipped recipes, one line each: the name that `hfattn train NAME` (and "
            "prepare, baseline, sweep) takes, and the first line of the recipe's comment; then "
            "the search spaces that `hfattn sweep --space NAME` takes. A file NAME.yaml in the "
            "current folder is used instead of the shipped recipe of that name."
        ),
    )
    parser.add_argument("--path", action="store_true", help="also print each recipe's file")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the shipped recipes and search spaces; exit 2 when hfattn finds none."""
    from ..recipes.shipped import SWEEPS, recipe_description, shipped_recipes
    from .inputs import report_error

    recipes, spaces = shipped_recipes(), shipped_recipes(SWEEPS)
    if not recipes:
        return report_error("no shipped recipes found (is hfattn installed with its data?)")
    width = max(map(len, [*recipes, *spaces]))
    for title, found in (("recipes", recipes), ("search spaces (hfattn sweep --space)", spaces)):
        if found:
            print(f"{title}:")
        for name, path in found.items():
            where = f"  [{path}]" if args.path else ""
            print(f"  {name:<{width}}  {recipe_description(path)}{where}")
    return 0
