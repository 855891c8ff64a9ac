"""A sweep: the settings of a recipe chosen on its validation split by Optuna trials, each an
ordinary run trained by :func:`~hfattn.orchestration.run.run_recipe` (``hfattn sweep``).

:func:`~hfattn.orchestration.sweep_setup.check_sweep` reads the recipe and the search space
and checks both before anything slow is loaded. :func:`run_sweep` then asks the study
(:mod:`~hfattn.orchestration.sweep_study`) for trials until ``--trials`` of them are results:
each trial trains the recipe with its parameters as ``--set`` items into its own run folder in
the sweep folder (``trial-0003/``: ``hfattn train --resume``, ``hfattn evaluate`` and
``hfattn push`` take it as any run), scored on the validation split only
(``evaluation.splits=[validation]``: choices are made on validation) and never pushed. At each
validation the trial reports ``training.metric_for_best_model`` to Optuna
(:class:`~hfattn.orchestration.sweep_trial.TrialReporter`); a trial the pruner stops ends as a
run stopped by its clock does (the checkpoint of its last step, its final validation, its model
folder) and is marked PRUNED. A finished trial's result is its saved model's validation score
(``eval_results.json``), compared in the direction the recipe compares checkpoints
(``training.greater_is_better``, else by the metric's name:
:attr:`~hfattn.recipes.schema.TrainingSection.larger_metric_is_better`).

Trials with the same data settings share one prepared-data folder (the cache of
:mod:`hfattn.data.prepared` keys on those settings). The sweep's outputs are written by
:mod:`~hfattn.orchestration.sweep_outputs`: the tables as each trial starts and ends, the best
recipe after each trial, the figures when the loop ends.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import yaml

from ..recipes import RecipeError
from ..storage.file_io import FileWriteError
from ..storage.resume_checks import recipe_differences
from .sweep_outputs import outcome_line, progress_line, write_outputs, write_tables
from .sweep_setup import OPTUNA_MISSING, Sweep
from .sweep_study import (
    RETRY_ATTR,
    SETTINGS_ATTR,
    StudyStorageError,
    claim,
    counted,
    fail_dead_trials,
    heartbeat,
    open_storage,
    open_study,
    retry_later,
    storage_url,
    suggest,
)
from .sweep_trial import TrialInterrupted, train_trial

try:
    from optuna.exceptions import ExperimentalWarning
    from optuna.trial import TrialState
except ImportError:
    raise ImportError(OPTUNA_MISSING) from None

logger = logging.getLogger(__name__)

FAILURES_IN_A_ROW = 3
"""Trials of one process that fail in a row (a refused recipe, a non-finite loss) before it
stops: a space whose every trial fails is not tried forever."""


def check_continuation(study, sweep: Sweep) -> None:
    """A study that already holds trials must search what ``sweep`` searches: the same space,
    metric and direction and the same recipe (its searched fields aside); the first study
    records them.

    Raises:
        RecipeError: ``--study mysweep (sqlite:///...) searches another space: ...``.
    """
    mine, stored = sweep.settings(), study.user_attrs.get(SETTINGS_ATTR)
    if stored is None:
        study.set_user_attr(SETTINGS_ATTR, mine)
        return
    for key in ("space", "metric", "direction"):
        if stored.get(key) != mine[key]:
            raise RecipeError(
                f"--study {sweep.study}: the study searches another {key} ({stored.get(key)} vs "
                f"{mine[key]}); continue it with its own, or give another --study / --output-dir"
            )
    changes = recipe_differences(yaml.safe_load(stored["recipe"]), yaml.safe_load(mine["recipe"]))
    if changes:
        raise RecipeError(
            f"--study {sweep.study}: the study searches another recipe ({changes[0]}); continue "
            "it with its own, or give another --study / --output-dir"
        )


def check_folder_of(study, sweep: Sweep) -> None:
    """A study with no trial yet starts in a sweep folder that holds no trial folders (another
    study's, or a study database removed since): they are never overwritten.

    Raises:
        RecipeError: ``--output-dir runs/x-sweep holds trial folders (trial-0000, ...) of
            another study ...``.
    """
    found = sorted(p.name for p in sweep.folder.glob("trial-*"))
    if found and not study.get_trials(deepcopy=False):
        raise RecipeError(
            f"--output-dir {sweep.folder} holds trial folders ({', '.join(found[:3])}"
            f"{', ...' if len(found) > 3 else ''}) of another study than {sweep.study}; they "
            "are left as they are: give the sweep another --output-dir (or the --study and "
            "--storage of those trials)"
        )


def run_sweep(sweep: Sweep):
    """Run trials of ``sweep`` until :attr:`Sweep.trials` of them are results (with other
    processes on the same study, until the study has them), writing the tables and the best
    recipe after each and the figures at the end
    (:func:`~hfattn.orchestration.sweep_outputs.write_outputs`). Returns the study.

    Raises:
        TrialInterrupted: a signal stopped a trial (it is queued again: the same command
            resumes it; :class:`~hfattn.orchestration.sweep_trial.TrialInterrupted`).
        RecipeError: the study searches another space or recipe (:func:`check_continuation`),
            or its folder holds another study's trials (:func:`check_folder_of`);
            :data:`FAILURES_IN_A_ROW` trials failed in a row; the study's database cannot be
            opened (:class:`~hfattn.orchestration.sweep_study.StudyStorageError`).
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=ExperimentalWarning)
        # the heartbeat is this module's (sweep_study.heartbeat), for ask-and-tell trials
        warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")
        created = not sweep.folder.exists()
        sweep.folder.mkdir(parents=True, exist_ok=True)  # the default study's database is there
        try:
            storage = open_storage(storage_url(sweep.storage, sweep.folder))
        except StudyStorageError:
            if created:
                sweep.folder.rmdir()  # nothing of the sweep's is left behind
            raise
        study = open_study(storage, sweep.study, sweep.direction, sweep.seed)
        check_continuation(study, sweep)
        check_folder_of(study, sweep)
        _run_trials(study, storage, sweep)
    return study


def _run_trials(study, storage, sweep: Sweep) -> None:
    """:func:`run_sweep`'s loop: trials until the study has its results (or
    :data:`FAILURES_IN_A_ROW` failed), then the outputs."""
    failures = []  # the errors of this process's last trials, while they fail in a row
    while len(failures) < FAILURES_IN_A_ROW:
        fail_dead_trials(study, storage)
        if counted(study) >= sweep.trials:
            break
        trial = study.ask()
        folder = claim(trial)
        params = {p.name: suggest(trial, p) for p in sweep.params}
        logger.info(progress_line(study, sweep, trial, folder))
        write_tables(study, sweep)
        try:
            error = _run_trial(study, storage, sweep, trial, params, sweep.folder / folder)
        except TrialInterrupted:
            write_tables(study, sweep)  # the trial FAIL, its retry WAITING
            raise
        failures = [*failures, error] if error is not None else []
        write_outputs(study, sweep, figures=False)  # the figures once, at the end
    write_outputs(study, sweep)
    if failures:
        raise RecipeError(
            f"{len(failures)} trials in a row failed, the sweep stops (the last: {failures[-1]}); "
            f"their errors are in {sweep.folder / 'trials.json'}"
        )


def _run_trial(study, storage, sweep: Sweep, trial, params: dict, folder: Path) -> str | None:
    """Train ``trial`` with its ``params`` in ``folder`` under its heartbeat and tell the study
    how it ended; returns the error of a trial that failed, else ``None``."""
    try:
        with heartbeat(storage, trial):
            retry = RETRY_ATTR in trial.user_attrs
            outcome = train_trial(sweep, trial, params, folder, retry=retry)
    except KeyboardInterrupt:  # a signal: queued again, the same command resumes it
        study.tell(trial, state=TrialState.FAIL)
        retry_later(study, storage.get_trial(trial._trial_id))
        raise TrialInterrupted from None
    except (ValueError, FileWriteError) as err:  # a refusal, a non-finite loss: not a result
        trial.set_user_attr("error", str(err))
        study.tell(trial, state=TrialState.FAIL)
        logger.warning("trial %d failed: %s", trial.number, err)
        return str(err)
    trial.set_user_attr("steps", outcome.steps)
    value = outcome.scores.get(sweep.metric)
    if outcome.pruned or value is None:
        study.tell(trial, state=TrialState.PRUNED)
    else:
        study.tell(trial, float(value))
    logger.info(outcome_line(study, sweep, trial.number))
    return None


__all__ = ["FAILURES_IN_A_ROW", "check_continuation", "check_folder_of", "run_sweep"]
