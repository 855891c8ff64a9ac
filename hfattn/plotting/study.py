"""Figures of a sweep's Optuna study (``hfattn sweep``), drawn by
:mod:`optuna.visualization.matplotlib` and written as PNG files into the sweep folder.

- ``optimization_history.png``: each finished trial's value and the best so far;
- ``param_importances.png``: how much of the value's variance each parameter explains (fANOVA,
  Hutter et al. 2014, Optuna's default evaluator), with at least 2 finished trials and 2
  parameters;
- ``parallel_coordinates.png``: every finished trial's parameters and value as one line.

The caller chooses matplotlib's backend (``hfattn sweep`` uses Agg: files only, no display).
"""

from __future__ import annotations

import warnings
from pathlib import Path

from ..storage.file_io import atomic_path

HISTORY_FILE = "optimization_history.png"
IMPORTANCES_FILE = "param_importances.png"
PARALLEL_FILE = "parallel_coordinates.png"
STUDY_PLOTS = (HISTORY_FILE, IMPORTANCES_FILE, PARALLEL_FILE)
"""The names of the study's figures in the sweep folder."""


def study_plots(study, params: int) -> list[str]:
    """The figures that ``study`` (searching ``params`` parameters) can draw now: none before a
    trial completes; the importances from 2 completed trials and 2 parameters."""
    from optuna.trial import TrialState

    completed = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
    if completed == 0:
        return []
    plots = [HISTORY_FILE, PARALLEL_FILE]
    if completed >= 2 and params >= 2:
        plots.insert(1, IMPORTANCES_FILE)
    return plots


def write_study_plots(study, folder: str | Path, params: int, target_name: str) -> list[Path]:
    """Write :func:`study_plots` of ``study`` into ``folder`` (``target_name``: the metric's
    name on the value axis); returns the files written."""
    import matplotlib.pyplot as plt
    import optuna.visualization.matplotlib as vis
    from optuna.exceptions import ExperimentalWarning

    draw = {
        HISTORY_FILE: vis.plot_optimization_history,
        IMPORTANCES_FILE: vis.plot_param_importances,
        PARALLEL_FILE: vis.plot_parallel_coordinate,
    }
    written = []
    for name in study_plots(study, params):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ExperimentalWarning)
            warnings.simplefilter("ignore", UserWarning)  # an axis of one value is widened
            axes = draw[name](study, target_name=target_name)
        figure = axes.figure
        figure.set_size_inches(9, 6)
        figure.tight_layout()
        path = Path(folder) / name
        with atomic_path(path) as tmp:
            figure.savefig(tmp, format="png", dpi=100)
        plt.close(figure)
        written.append(path)
    return written


__all__ = ["STUDY_PLOTS", "study_plots", "write_study_plots"]
