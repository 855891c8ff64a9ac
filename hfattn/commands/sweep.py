"""``hfattn sweep RECIPE --space SPACE.yaml --trials N [--study NAME] [--storage URL]
[--output-dir DIR] [--set KEY=VALUE ...]``: choose a recipe's settings on its validation split
with Optuna trials, each an ordinary run (:mod:`hfattn.orchestration.sweep`).

The recipe and the space are checked before anything slow is loaded (one ``error:`` line, exit
status 2); then each trial trains, and the table of trials is printed at the end.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import sys

from .arguments import add_recipe_arguments
from .inputs import report_error


def register(subparsers) -> None:
    """Add the ``sweep`` sub-command."""
    parser = subparsers.add_parser(
        "sweep",
        help="choose a recipe's settings with Optuna trials (each an ordinary run)",
        description=(
            "Search the settings of a recipe: each trial trains the recipe with values drawn "
            "from the search space into its own run folder in the sweep folder, is scored on "
            "the validation split by training.metric_for_best_model, and is pruned at a "
            "validation when it is losing. The same command continues an interrupted sweep; "
            "several processes given the same --storage share one study."
        ),
    )
    add_recipe_arguments(
        parser,
        recipe_help="a recipe YAML, or the name of a shipped one (hfattn recipes)",
        set_example="data.size=5000",
    )
    parser.add_argument(
        "--space",
        required=True,
        metavar="SPACE.yaml",
        help="the search space (a YAML file, or the name of a shipped one: hfattn recipes): "
        "dotted recipe fields (as --set takes them) mapped to "
        "{uniform|log_uniform|int_uniform: [low, high]} or {choice: [values]}",
    )
    parser.add_argument(
        "--trials",
        type=int,
        required=True,
        metavar="N",
        help="how many trials the study is to have finished (completed or pruned), those of "
        "other processes on it included",
    )
    parser.add_argument("--study", metavar="NAME", help="the study's name (default: the recipe's)")
    parser.add_argument(
        "--storage",
        metavar="URL",
        help="a database URL Optuna takes (sqlite:///..., postgresql://..., mysql://...), shared "
        "by several processes or machines (default: sqlite in the sweep folder)",
    )
    parser.add_argument(
        "--seed",
        type=int,
        metavar="N",
        help="the seed of this process's sampler: the same sweep with the same seed draws the "
        "same values (several processes on one study: a seed each); default: a fresh draw",
    )
    parser.add_argument(
        "--output-dir",
        metavar="DIR",
        help="the sweep folder (default: the recipe's output_dir + '-sweep'); an existing one is "
        "continued",
    )
    parser.set_defaults(func=run)


def optuna_installed() -> bool:
    """Whether Optuna can be imported (found without importing it: a fraction of a ms)."""
    try:
        return importlib.util.find_spec("optuna") is not None
    except (ImportError, ValueError):
        return False


def run(args: argparse.Namespace) -> int:
    """Check the recipe and the space, run the trials, print the table of trials."""
    from ..orchestration.sweep_setup import OPTUNA_MISSING
    from .logging_setup import configure_logging

    configure_logging()
    if not optuna_installed():
        return report_error(OPTUNA_MISSING)
    from .. import tasks  # noqa: F401  (registers every task's recipe)
    from ..orchestration.sweep_setup import check_sweep
    from ..recipes import RecipeError

    try:
        sweep = check_sweep(
            args.recipe,
            args.space,
            args.trials,
            overrides=tuple(args.overrides),
            folder=args.output_dir,
            study=args.study,
            storage=args.storage,
            seed=args.seed,
        )
    except (RecipeError, FileNotFoundError, ValueError) as err:
        return report_error(err)
    return _sweep(sweep)


def _sweep(sweep) -> int:
    """:func:`run` once the sweep is checked: the trials, then the table."""
    import matplotlib
    import optuna

    from ..orchestration.sweep import run_sweep
    from ..orchestration.sweep_trial import TrialInterrupted
    from ..recipes import RecipeError
    from ..storage.file_io import FileWriteError

    matplotlib.use("Agg")  # the study's figures are files
    if not logging.getLogger("hfattn").isEnabledFor(logging.DEBUG):
        optuna.logging.set_verbosity(optuna.logging.WARNING)  # hfattn says how trials end
    try:
        study = run_sweep(sweep)
    except TrialInterrupted:
        print(
            f"interrupted; the trial is queued again. Continue the sweep with the same command "
            f"(its study: {sweep.folder})",
            file=sys.stderr,
        )
        return 130
    except (RecipeError, FileWriteError, optuna.exceptions.StorageInternalError) as err:
        return report_error(err)
    print_trials(study, sweep)
    return 0


def print_trials(study, sweep) -> None:
    """Print the table of trials (:func:`~hfattn.orchestration.sweep_outputs.trial_rows`) and
    where the sweep's files are."""
    from rich.console import Console

    from ..orchestration.sweep_outputs import BEST_RECIPE, best_trial, trial_rows
    from .report import titled_table

    rows = trial_rows(study, sweep)
    table = titled_table(f"{sweep.study}: {len(rows)} trials ({sweep.direction} {sweep.metric})")
    columns = ["number", "state", sweep.metric, "steps", *(p.name for p in sweep.params)]
    for name in columns:  # a dotted field's header on two lines: training. / learning_rate
        header = name.replace(".", ".\n", 1)
        table.add_column(header, justify="left" if name == "state" else "right", overflow="fold")
    for row in rows:
        table.add_row(*(_cell(row[name]) for name in columns))
    console = Console()
    console.print(table)
    best = best_trial(study)
    if best is not None:
        folder = sweep.folder / best.user_attrs.get("run_folder", "")
        console.print(
            f"best: trial {best.number} ({folder}); its recipe: {sweep.folder / BEST_RECIPE}",
            highlight=False,
            markup=False,
        )


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)
