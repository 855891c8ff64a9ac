"""``hfattn prepare RECIPE.yaml [--set key=value ...]``: prepare a recipe's data ahead of
training, as ``fairseq-preprocess`` does, into the prepared-data cache
(:mod:`hfattn.data.prepared`) that ``hfattn train`` then maps."""

from __future__ import annotations

import argparse

from .arguments import add_recipe_arguments
from .inputs import load_recipe_or_report, report_error


def register(subparsers) -> None:
    """Add the ``prepare`` sub-command."""
    parser = subparsers.add_parser(
        "prepare",
        help="prepare a recipe's data (tokenizer, token ids) without training",
        description=(
            "Prepare the data a recipe trains on (its tokenizer and the token ids of every "
            "split) into the prepared-data cache ($HFATTN_PREPARED_DIR, else "
            "$HF_HOME/hfattn/prepared), or find it there; `hfattn train` with the same data "
            "and tokenizer settings then maps it. Prints the folder, its size and whether it "
            "was prepared before."
        ),
    )
    add_recipe_arguments(
        parser,
        recipe_help="a recipe YAML, or the name of a shipped one (hfattn recipes)",
        set_example="data.source=big.txt",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load and check the recipe as ``hfattn train`` does (:func:`~hfattn.recipes.load_recipe`
    and the ``data.source`` check; the run folder and the Hub push, which a preparation does
    not touch, are not checked), prepare its data and print one line: the folder, its size,
    whether it was reused."""
    from .logging_setup import configure_logging

    configure_logging()
    recipe = load_recipe_or_report(args)
    if recipe is None:
        return 2
    from ..data.prepared import folder_size, human_size
    from ..recipes import RecipeError
    from ..storage.file_io import FileWriteError
    from ..tasks import get_task

    task = get_task(recipe.task)
    try:
        task.check_data_source(recipe.data.source)
        prepared = task.prepare_data(recipe)
    except NotImplementedError:
        return report_error(
            f"task {recipe.task}: hfattn prepare cannot prepare its data ahead yet; "
            "`hfattn train` prepares it when it starts"
        )
    except (RecipeError, FileNotFoundError, ValueError, FileWriteError) as err:
        return report_error(err)
    how = "reused" if prepared.reused else f"prepared in {prepared.seconds:.1f} s"
    print(f"{prepared.folder} ({human_size(folder_size(prepared.folder))}, {how})")
    return 0
