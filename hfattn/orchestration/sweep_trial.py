"""One trial of a sweep (:mod:`hfattn.orchestration.sweep`): the recipe with the trial's
parameters trained by :func:`~hfattn.orchestration.run.run_recipe` into the trial's run folder,
its validations reported to Optuna (:class:`TrialReporter`), and how it ended
(:class:`TrialOutcome`, read from the folder's ``eval_results.json``).

Imported when a trial trains (the training layer imports torch).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..recipes import RecipeError, Run, load_recipe
from ..recipes.search_space import set_item
from ..storage.run_folder import eval_results_path, latest_checkpoint, recipe_path, run_state
from ..training.training_job import TrainingCallback
from .sweep_setup import TRIAL_SETTINGS

PRUNED = "pruned"
"""The stop reason of a pruned trial (its run's ``training_end`` and ``stop_reason``)."""


class TrialReporter(TrainingCallback):
    """Reports each validation's ``metric`` to the Optuna ``trial`` at its step and stops the
    run, as its clock would, when the pruner says the trial is losing."""

    def __init__(self, trial, metric: str, last_step: int | None = None):
        self.trial, self.metric, self.pruned = trial, metric, False
        self.last_step = last_step
        """The run's ``training.max_steps``: its validation is the trial's value, not pruned."""

    def on_evaluate(self, progress, scores: dict) -> None:
        """``trial.report(scores[metric], step)``, then ``trial.should_prune()``; not once
        the run stops or its training has ended, nor at its last step (the validation of its
        last step is the trial's value: pruning it would save nothing and lose a result)."""
        if self.pruned or progress.stop.requested or progress.training_end is not None:
            return
        if self.last_step is not None and progress.step >= self.last_step:
            return
        self.trial.report(float(scores[self.metric]), progress.step)
        if self.trial.should_prune():
            self.pruned = True
            progress.stop.request(PRUNED)


class TrialInterrupted(KeyboardInterrupt):
    """A signal (Ctrl-C, SIGTERM) stopped a trial's run; its checkpoint holds the steps."""


@dataclass
class TrialOutcome:
    """How a trial's run ended: ``pruned`` or not, the validation ``scores`` of its saved
    model, and its optimizer ``steps``."""

    pruned: bool
    scores: dict = field(default_factory=dict)
    steps: int | None = None


def trial_overrides(sweep, params: dict, folder: Path) -> list[str]:
    """The ``--set`` items of a trial: the sweep's, the trial's ``params``, its run ``folder``
    and :data:`TRIAL_SETTINGS`."""
    searched = [set_item(name, value) for name, value in params.items()]
    return [*sweep.overrides, *searched, f"output_dir={folder}", *TRIAL_SETTINGS]


def train_trial(sweep, trial, params: dict, folder: Path, *, retry: bool) -> TrialOutcome:
    """Train the trial's run in ``folder`` and read its outcome. A ``retry`` of a trial cut
    short goes on from the folder: resumed from its newest checkpoint, read when it finished,
    started again when it has no checkpoint; a new trial's folder must not exist.

    Raises:
        TrialInterrupted: a signal stopped the run (a checkpoint is saved).
        RecipeError, ValueError, FileWriteError: the run refused, or failed (a non-finite loss);
            a new trial's folder exists (another study's trial, or a user's folder).
    """
    from .run import run_recipe  # the tasks and the hub: imported when a trial trains

    if not retry and folder.exists():
        raise RecipeError(
            f"{folder} exists and is no run of this study's trial {trial.number}: it is left as "
            "it is (another study's trial? give each study its own --output-dir)"
        )
    if run_state(folder) != "finished":
        resume = latest_checkpoint(folder) is not None
        overwrite = not resume and recipe_path(folder).is_file()  # cut short before a checkpoint
        run = Run(resume=resume, overwrite=overwrite)
        recipe = load_recipe(sweep.recipe, trial_overrides(sweep, params, folder), run=run)
        reporter = TrialReporter(trial, sweep.metric, last_step=recipe.training.max_steps)
        result = run_recipe(recipe, resume=resume, overwrite=overwrite, callbacks=[reporter])
        if result.interrupted:
            raise TrialInterrupted
    results = json.loads(eval_results_path(folder).read_text(encoding="utf-8"))
    training = results.get("training") or {}
    return TrialOutcome(
        pruned=training.get("stop_reason") == PRUNED,
        scores=(results.get("all_metrics") or {}).get("validation") or {},
        steps=training.get("global_step"),
    )


__all__ = [
    "PRUNED",
    "TrialInterrupted",
    "TrialOutcome",
    "TrialReporter",
    "train_trial",
    "trial_overrides",
]
