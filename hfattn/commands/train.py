"""``hfattn train RECIPE.yaml [--set key=value ...] [--resume | --overwrite]`` and
``hfattn train --resume RUN_FOLDER [--set training.max_steps=N ...]``."""

from __future__ import annotations

import argparse
import logging
import shlex
from contextlib import ExitStack
from pathlib import Path

from .arguments import add_recipe_arguments
from .inputs import report_error


def register(subparsers) -> None:
    """Add the ``train`` sub-command."""
    parser = subparsers.add_parser(
        "train",
        help="train a recipe (also under `accelerate launch ... -m hfattn train ...`)",
        description=(
            "Train the experiment described by a recipe YAML file, or continue a run: "
            "`hfattn train --resume RUN_FOLDER` resumes it from the recipe stored there."
        ),
    )
    add_recipe_arguments(
        parser,
        recipe_help="path to a recipe YAML (see recipes/); left out with --resume RUN_FOLDER",
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
        "--overwrite",
        action="store_true",
        help="replace the run already in output_dir (default: refuse to touch it)",
    )
    parser.set_defaults(func=run)


def _recipe_of(args: argparse.Namespace):
    """The recipe to train (checked early, :func:`_checked_early`; its model config not built
    yet), or ``None`` after reporting why there is none: ``args.recipe``, or the recipe stored
    in the run folder given to ``--resume``."""
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
        return _checked_early(args, args.recipe)
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
    return _checked_early(args, stored, output_dir=str(folder))


def _with_model_config(recipe):
    """``recipe`` with its model config built (:func:`~hfattn.recipes.with_model_config`:
    torch, seconds), or ``None`` after reporting why not (or when ``recipe`` is ``None``)."""
    if recipe is None:
        return None
    from ..recipes import RecipeError, with_model_config

    try:
        return with_model_config(recipe)
    except RecipeError as err:
        report_error(err)
        return None


def _checked_early(args: argparse.Namespace, path, output_dir: str | None = None):
    """The recipe file ``path`` (with ``args.overrides``; its run in ``output_dir`` when
    given), or ``None`` after reporting the first failure of every check that needs no data,
    model config or checkpoint, made before torch is imported, in a fraction of a second: its
    outline (:func:`~hfattn.recipes.recipe_outline`), the checks before training
    (:func:`hfattn.orchestration.run.check_before_training`), every field's value
    (:func:`~hfattn.recipes.check_recipe_values`) and, for a new run, a folder that already
    holds one (:func:`~hfattn.storage.run_folder.check_output_dir`). The recipe's model config
    is not built yet (:func:`_with_model_config`)."""
    from .. import tasks  # noqa: F401  (registers every task's recipe)
    from ..recipes import RecipeError, check_recipe_values, recipe_outline
    from ..storage.run_folder import check_output_dir

    try:
        outline = recipe_outline(path, args.overrides)
        if output_dir is not None:
            outline.output_dir = output_dir
        from ..orchestration.run import check_before_training  # after the outline's own checks

        check_before_training(outline, resume=bool(args.resume), overwrite=args.overwrite)
        recipe = check_recipe_values(path, args.overrides)
        recipe.output_dir = outline.output_dir  # a run folder given to --resume is the run
        if not args.resume:
            check_output_dir(recipe.output_dir, args.overwrite)
    except (RecipeError, FileNotFoundError, FileExistsError, ValueError) as err:
        report_error(err)
        return None
    return recipe


def run(args: argparse.Namespace) -> int:
    """Validate the recipe, train, then print the evaluation table and a sample.

    Each check is made once (:mod:`hfattn.orchestration.run`): on the recipe's outline, then the
    full load, then the run folder, then training. The run folder is held from before the
    recipe's model is built to the end (:func:`~hfattn.storage.run_folder.held_run_folder`, by
    the main process of a multi-process run): a second ``hfattn train`` into it is refused."""
    from ..common.launch import process_rank
    from ..storage.run_folder import held_run_folder
    from .logging_setup import configure_logging

    configure_logging()  # before the recipe is loaded: its warnings in hfattn's format
    recipe = _recipe_of(args)
    if recipe is None:
        return 2
    with ExitStack() as held:
        if process_rank() == 0:  # one process of a run holds its folder
            try:
                held.enter_context(held_run_folder(recipe.output_dir))
            except ValueError as err:  # another run holds it; it cannot be written
                return report_error(err)
        recipe = _with_model_config(recipe)
        return 2 if recipe is None else _train(args, recipe)


def _train(args: argparse.Namespace, recipe) -> int:
    """:func:`run` once the run folder is held: the run folder checked, training, the report."""
    import sys

    from ..orchestration.run import check_run_folder, run_recipe
    from ..recipes import RecipeError, recipe_outline
    from ..storage.file_io import FileWriteError
    from ..storage.run_folder import finished_run_message, resume_command

    resume = bool(args.resume)
    try:  # the run to resume, checked against the loaded recipe before the data load
        changes = check_run_folder(recipe, resume=True) if resume else []
    except (FileNotFoundError, FileExistsError, ValueError) as err:
        return report_error(err)
    if resume:
        finished = finished_run_message(recipe.output_dir, recipe.training)
        if finished is not None:  # nothing to train: no step, no evaluation, no file rewritten
            print(finished, file=sys.stderr)
            return 0
        for change in changes:
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
            recipe, resume=resume, overwrite=args.overwrite, planned=planned, checked=True
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
