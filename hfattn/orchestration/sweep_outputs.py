"""What a sweep writes into its folder and says as it goes (``hfattn sweep``).

As each trial starts, :func:`write_tables` writes the table of trials (the new one RUNNING);
after each trial :func:`write_outputs` (re)writes, each file atomically (the figures, which take
a second or so, when the sweep's loop ends)
(:mod:`hfattn.storage.file_io`):

- ``trials.csv`` and ``trials.json``: a row per trial (:func:`trial_rows`): its number, state,
  the metric, its steps, its run folder and its parameters;
- ``best_recipe.yaml``: the recipe (with the sweep's ``--set`` items) and the best trial's
  parameters, ready for ``hfattn train``;
- the study's figures (:mod:`hfattn.plotting.study`).

:func:`progress_line` and :func:`outcome_line` are the lines logged as trials start and end.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from ..plotting.study import write_study_plots
from ..recipes import check_recipe_values
from ..recipes.search_space import set_item
from ..storage.file_io import atomic_write_json, atomic_write_text
from .sweep_study import FOLDER_ATTR, RETRY_ATTR, counted

TRIALS_CSV, TRIALS_JSON, BEST_RECIPE = "trials.csv", "trials.json", "best_recipe.yaml"
"""The sweep's tables and best recipe, in its folder."""


def best_trial(study):
    """The best COMPLETE trial of ``study``, or ``None`` before one completes."""
    from optuna.trial import TrialState

    if not study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        return None
    return study.best_trial


def trial_rows(study, sweep) -> list[dict]:
    """A row per trial of ``study``: ``number``, ``state`` (``COMPLETE``, ``PRUNED``,
    ``RUNNING``, ``FAIL``, ``WAITING``), the metric (the last value reported for a pruned
    trial), ``steps``, ``run_folder``, ``retry_of``, each parameter by its dotted name and the
    ``error`` of a trial that failed."""
    rows = []
    for trial in study.get_trials(deepcopy=False):
        value = trial.value
        # a queued (WAITING) trial has its values as Optuna's fixed parameters, not yet params
        params = trial.params or trial.system_attrs.get("fixed_params") or {}
        if value is None and trial.intermediate_values:
            value = trial.intermediate_values[max(trial.intermediate_values)]
        rows.append(
            {
                "number": trial.number,
                "state": trial.state.name,
                sweep.metric: value,
                "steps": trial.user_attrs.get("steps"),
                "run_folder": trial.user_attrs.get(FOLDER_ATTR),
                "retry_of": trial.user_attrs.get(RETRY_ATTR),
                **{p.name: params.get(p.name) for p in sweep.params},
                "error": trial.user_attrs.get("error"),
            }
        )
    return rows


def _csv_text(rows: list[dict]) -> str:
    """``rows`` as CSV with a header (empty cells for ``None``)."""
    out = io.StringIO()
    if rows:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return out.getvalue()


def best_recipe_yaml(study, sweep) -> str | None:
    """The recipe of the best trial, resolved as ``hfattn train`` stores a run's recipe, with
    a comment naming the sweep and the trial; ``None`` before a trial completes."""
    best = best_trial(study)
    if best is None:
        return None
    items = [*sweep.overrides, *(set_item(k, v) for k, v in best.params.items())]
    recipe = check_recipe_values(sweep.recipe, items)
    header = (
        f"# The best trial ({best.number}, {sweep.metric} {best.value:.6g} on validation) of "
        f"the sweep in {sweep.folder}\n# (study {sweep.study}). Train it with:\n"
        f"#   hfattn train {sweep.folder / BEST_RECIPE}\n"
    )
    return header + recipe.to_yaml()


def write_tables(study, sweep) -> list[Path]:
    """Write the trials' tables (:func:`trial_rows`) into the sweep folder; returns the files
    written."""
    rows = trial_rows(study, sweep)
    folder = Path(sweep.folder)
    atomic_write_text(folder / TRIALS_CSV, _csv_text(rows))
    atomic_write_json(folder / TRIALS_JSON, rows)
    return [folder / TRIALS_CSV, folder / TRIALS_JSON]


def write_outputs(study, sweep, *, figures: bool = True) -> list[Path]:
    """Write the trials' tables, the best recipe and (with ``figures``) the figures into the
    sweep folder; returns the files written."""
    folder = Path(sweep.folder)
    written = write_tables(study, sweep)
    best = best_recipe_yaml(study, sweep)
    if best is not None:
        atomic_write_text(folder / BEST_RECIPE, best)
        written.append(folder / BEST_RECIPE)
    if figures:
        written += write_study_plots(study, folder, len(sweep.params), sweep.metric)
    return written


def _best_so_far(study, sweep) -> str:
    best = best_trial(study)
    if best is None:
        return "no trial completed yet"
    return f"best so far: trial {best.number}, {sweep.metric} {best.value:.4f}"


def progress_line(study, sweep, trial, folder: str) -> str:
    """``trial 3 of 12 (trial-0003): training.learning_rate=0.0012, ...; best so far: ...``
    (the count is the trials that are results or running, this one included)."""
    retry = trial.user_attrs.get(RETRY_ATTR)
    what = f"retries trial {retry}, resumed from {folder}" if retry is not None else folder
    params = ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                       for k, v in trial.params.items())  # fmt: skip
    params = f": {params}" if params else ""
    return (
        f"trial {counted(study)} of {sweep.trials} (number {trial.number}, {what}){params}; "
        f"{_best_so_far(study, sweep)}"
    )


def outcome_line(study, sweep, number: int) -> str:
    """``trial 3: loss 1.2345 at step 400 (pruned); best so far: ...``."""
    row = next(r for r in trial_rows(study, sweep) if r["number"] == number)
    value = row[sweep.metric]
    shown = "no value" if value is None else f"{sweep.metric} {value:.4f}"
    return (
        f"trial {number}: {shown} at step {row['steps']} ({row['state'].lower()}); "
        f"{_best_so_far(study, sweep)}"
    )


__all__ = [
    "BEST_RECIPE",
    "TRIALS_CSV",
    "TRIALS_JSON",
    "best_recipe_yaml",
    "best_trial",
    "outcome_line",
    "progress_line",
    "trial_rows",
    "write_outputs",
    "write_tables",
]
