"""``hfattn train RECIPE.yaml [--set key=value ...] [--resume | --overwrite]`` and
``hfattn train --resume RUN_FOLDER [--set training.max_steps=N ...] [--allow-data-change]``."""

from __future__ import annotations

import argparse
import logging
import shlex
from pathlib import Path

from .arguments import add_recipe_arguments
from .inputs import report_error


def register(subparsers) -> None:
    """Add the ``train`` sub-command."""
    parser = subparsers.add_parser(
        "train",
        help="train a recipe (also under `accelerate launch -m hfattn train ...`)",
        description=(
            "Train the experiment described by a recipe YAML file, or continue a run: "
            "`hfattn train --resume RUN_FOLDER` resumes it from the recipe stored there."
        ),
    )
    add_recipe_arguments(
        parser,
        recipe_help=(
            "a recipe YAML, or the name of a shipped one (hfattn recipes); left out with "
            "--resume RUN_FOLDER"
        ),
        set_example="training.max_minutes=2",
        recipe_optional=True,
    )
    parser.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=False,
        metavar="RUN_FOLDER",
        help=(
            "continue a run from its newest checkpoint: the run in RUN_FOLDER (with the recipe "
            "stored there), or the recipe's output_dir (its recipe must match the stored one; "
            "only the step / time budget and the log / eval / save intervals may change)"
        ),
    )
    parser.add_argument(
        "--allow-data-change",
        action="store_true",
        help=(
            "with --resume: continue even when the recipe's data now gives other prepared data "
            "than the checkpoint was trained on (an edited data.source); refused by default, "
            "before anything is prepared"
        ),
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace the run already in output_dir (default: refuse to touch it)",
    )
    parser.set_defaults(func=run)


def _recipe_of(args: argparse.Namespace):
    """The recipe to train, checked for this run (:func:`~hfattn.recipes.load_recipe`), or
    ``None`` after reporting why there is none: ``args.recipe``, or the recipe stored in the
    run folder given to ``--resume``."""
    from ..storage.run_folder import recipe_path, resume_command

    folder = args.resume if isinstance(args.resume, str) else None
    if folder is not None and args.recipe is None and Path(folder).is_file():
        args.recipe, args.resume = folder, True  # `hfattn train --resume RECIPE.yaml`
        folder = None
    if folder is None:
        if args.recipe is None:
            report_error("give a recipe (hfattn train RECIPE) or a run to continue "
                         "(hfattn train --resume RUN_FOLDER)")  # fmt: skip
            return None
        return _loaded(args, args.recipe)
    if args.recipe is not None:
        report_error(
            f"give a recipe or a run folder, not both: `{resume_command(folder)}` continues "
            f"that run with its own recipe, `hfattn train {shlex.quote(args.recipe)} --resume` "
            "the run in the recipe's output_dir"
        )
        return None
    stored = recipe_path(folder)
    if not stored.is_file():
        what = "does not exist" if not Path(folder).is_dir() else f"has no {stored.name}"
        report_error(f"--resume {folder}: the folder {what}; it is not a run to continue")
        return None
    return _loaded(args, stored, folder=str(folder))


def _loaded(args: argparse.Namespace, path, folder: str | None = None):
    """The recipe file ``path`` with ``args.overrides``, loaded and checked for the run that
    ``args`` asks for (its run in ``folder`` when given): :func:`~hfattn.recipes.load_recipe`,
    whose checks that need no data, model config or checkpoint answer before torch is
    imported, in a fraction of a second. ``None`` after reporting the first failure."""
    from .. import tasks  # noqa: F401  (registers every task's recipe)
    from ..recipes import RecipeError, Run, load_recipe

    run = Run(resume=bool(args.resume), overwrite=args.overwrite, folder=folder)
    try:
        return load_recipe(path, args.overrides, run=run)
    except (RecipeError, FileNotFoundError, FileExistsError, ValueError) as err:
        report_error(err)
        return None


def run(args: argparse.Namespace) -> int:
    """Validate the recipe, train, then print the evaluation table and a sample.

    Each check is made once, by :func:`~hfattn.recipes.load_recipe`, before training. The run
    folder is then held to the end by :func:`~hfattn.orchestration.run.run_recipe`: a second
    ``hfattn train`` into it is refused."""
    from ..common.launch import end_process_group
    from .logging_setup import configure_logging

    configure_logging()  # before the recipe is loaded: its warnings in hfattn's format
    if args.allow_data_change and not args.resume:
        return report_error("--allow-data-change goes with --resume (a run to continue)")
    recipe = _recipe_of(args)
    if recipe is None:
        return 2
    try:
        return _train(args, recipe)
    finally:
        end_process_group()  # a launched run's processes exit with their status


def _train(args: argparse.Namespace, recipe) -> int:
    """:func:`run` once the recipe is loaded: training, then the report."""
    import sys

    from ..orchestration.run import run_recipe
    from ..recipes import RecipeError, recipe_outline
    from ..storage.file_io import FileWriteError
    from ..storage.run_folder import resume_command
    from ..storage.run_status import finished_run_message

    resume = bool(args.resume)
    if resume:
        finished = finished_run_message(recipe.output_dir, recipe.training)
        if finished is not None:  # nothing to train: no step, no evaluation, no file rewritten
            print(finished, file=sys.stderr)
            return 0
        for change in recipe.checks.changes:
            print(f"--resume: {change} (the run's recipe is updated)", file=sys.stderr)

    from ..common.launch import lone_launch_warning
    from .report import print_metrics

    lone_launch = lone_launch_warning()
    if lone_launch is not None:
        logging.getLogger(__name__).warning(lone_launch)
    try:
        # the steps the recipe file plans (its training section alone: the recipe was
        # loaded and its model checked once, above)
        planned = recipe_outline(args.recipe) if args.overrides and not resume else None
        result = run_recipe(
            recipe,
            resume=resume,
            overwrite=args.overwrite,
            planned=planned,
            allow_data_change=args.allow_data_change,
        )
    except (RecipeError, FileNotFoundError, FileExistsError, ValueError, FileWriteError) as err:
        return report_error(err)
    from accelerate import PartialState

    if not PartialState().is_main_process:
        return 0
    if result.interrupted:
        step = result.progress.step
        what = (
            f"interrupted after training (step {step}); its checkpoint holds the trained "
            "weights. Finish the run (validation, evaluation, model folder) with:"
            if result.progress.training_end is not None
            else f"interrupted at step {step}; checkpoint saved. Continue with:"
        )
        print(f"{what}\n  {resume_command(result.output_dir)}", file=sys.stderr)
        return 130
    from ..evaluation.language_modeling import explain_zero_state

    title = f"{recipe.name}: evaluation (step {result.progress.step})"
    print_metrics(result.metrics, title=title, note=explain_zero_state(result.metrics))
    if result.sample is not None:
        print(f"\n--- sample ---\n{result.sample}\n---")
    print(f"model saved to {result.output_dir}")
    return 0
