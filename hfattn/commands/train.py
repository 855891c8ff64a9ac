"""``hfattn train RECIPE.yaml [--set key=value ...] [--resume]``."""

from __future__ import annotations

import argparse

from .loading import add_recipe_arguments, load_recipe_or_report, report_error


def register(subparsers) -> None:
    """Add the ``train`` sub-command."""
    parser = subparsers.add_parser(
        "train",
        help="train a recipe (also under `accelerate launch -m hfattn train ...`)",
        description="Train the experiment described by a recipe YAML file.",
    )
    add_recipe_arguments(
        parser,
        recipe_help="path to a recipe YAML (see recipes/)",
        set_example="training.max_minutes=2",
    )
    parser.add_argument("--resume", action="store_true", help="continue from the newest checkpoint")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the run already in output_dir (default: refuse to touch it)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Validate the recipe, train, then print the evaluation table and a sample."""
    import sys

    recipe = load_recipe_or_report(args)
    if recipe is None:
        return 2

    from ..logging_setup import configure_logging
    from ..recipes import RecipeError, run_recipe
    from .report import print_metrics

    configure_logging()
    try:
        result = run_recipe(recipe, resume=args.resume, overwrite=args.overwrite)
    except (RecipeError, FileNotFoundError, FileExistsError, ValueError) as err:
        return report_error(err)
    from accelerate import PartialState

    if not PartialState().is_main_process:
        return 0
    if result.interrupted:
        print(
            f"interrupted at step {result.progress.step}; checkpoint saved. Continue with:\n"
            f"  hfattn train {args.recipe} --resume",
            file=sys.stderr,
        )
        return 130
    print_metrics(result.metrics, title=f"{recipe.name}: evaluation (step {result.progress.step})")
    if result.sample is not None:
        print(f"\n--- sample ---\n{result.sample}\n---")
    print(f"model saved to {result.output_dir}")
    return 0
