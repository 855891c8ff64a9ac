"""The measured sweeps, rendered from ``benchmarks/results/sweep_<recipe>.json`` (``python -m
benchmarks.bench_sweep``; registered in :data:`results_tables.BLOCKS`): for ``docs/sweeps.md``,
how long a sweep took, each trial, the best one and the best recipe trained again with other
seeds; for the translation page and NOTES, the completed trials' scores by each option's value.

Standard library only, as :mod:`docs.hooks.results_tables`.
"""

from __future__ import annotations

import json
from pathlib import Path

from hfattn.common.machine import machine_words

SWEEP_NONE = "This sweep has no measurement in this release."


def block_files(root: Path) -> list[str]:
    """The names of the sweep results files of ``root``."""
    return sorted(path.name for path in root.glob("sweep_*.json"))


def _value(value) -> str:
    return "—" if value is None else f"{value:.4g}"


def _params(params: dict) -> str:
    return ", ".join(f"`{name}={_value(v) if isinstance(v, float) else v}`"
                     for name, v in params.items())  # fmt: skip


def _settings(run: dict) -> str:
    """The ``--set`` options ``bench_sweep.py`` was given, as they are typed (one each)."""
    return " ".join(f"--set {setting}" for setting in run["settings"])


def _seeds(run: dict) -> str:
    seeds = run.get("sampler_seeds")
    return f" (`--seed` {', '.join(map(str, seeds))})" if seeds else ""


EXAMPLE_RECIPE = "bahdanau_date_normalization"
"""The recipe of the example of ``docs/sweeps.md``."""


def _sweep_file(root: Path, recipe: str) -> dict | None:
    """``sweep_<recipe>.json`` of ``root`` (``bench_sweep.py``'s results file), or ``None``."""
    path = root / f"sweep_{recipe}.json"
    return json.loads(path.read_text("utf-8")) if path.is_file() else None


def sweep_block(root: Path, recipe: str = EXAMPLE_RECIPE) -> str:
    """A paragraph and a table of trials for the sweep results file of ``recipe``."""
    run = _sweep_file(root, recipe)
    if run is None:
        return SWEEP_NONE
    metric, best = run["metric"], run["best"]
    states = ", ".join(f"{count} {state.lower()}" for state, count in run["states"].items())
    low, high = run["retrain_range"]
    retrains = ", ".join(_value(r[metric]) for r in run["retrains"])
    within = "within" if run["best_within_retrain_range"] else "outside"
    gap = min(abs(r[metric] - best[metric]) for r in run["retrains"])
    lines = [
        f"On a {machine_words(run['provenance']['machine'])} (`python -m "
        f"benchmarks.bench_sweep`: `recipes/{run['recipe']}.yaml` with the space "
        f"`{run['space']}`, `{_settings(run)}`), {run['processes']} "
        f"`hfattn sweep` processes on one study, one torch thread each{_seeds(run)}, ran "
        f"{len(run['trials'])} trials in {run['sweep_s']:.0f} s: {states}. The best, trial "
        f"{best['number']} (validation {metric} {_value(best[metric])}: "
        f"{_params(best['params'])}), trained again from `best_recipe.yaml` with "
        f"`training.seed` 0 to {len(run['retrains']) - 1}, scores {retrains} (range "
        f"{_value(low)} to {_value(high)}): the best trial's value is {within} that range, "
        f"{_value(gap)} from the nearest of those runs, which differ among themselves by "
        f"{_value(high - low)}.",
        "",
        f"| trial | state | validation {metric} | steps | seconds | settings |",
        "|---|---|---|---|---|---|",
    ]
    for trial in run["trials"]:
        params = {k: v for k, v in trial.items() if "." in k}
        seconds = trial.get("seconds")
        lines.append(
            f"| {trial['number']} | {trial['state'].lower()} | {_value(trial[metric])} "
            f"| {trial['steps'] or '—'} | {'—' if seconds is None else f'{seconds:.0f}'} "
            f"| {_params(params)} |"
        )
    return "\n".join(lines)


OPTION_EFFECTS_NONE = "The search of this recipe has no measurement in this release."


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _score(trial: dict, metric: str) -> float | None:
    """The trial's validation ``metric``: its sweep value, else from its saved scores."""
    if trial.get(metric) is not None:
        return trial[metric]
    return (trial.get("scores") or {}).get(metric)


def option_effects_block(root: Path, recipe: str) -> str:
    """The validation scores of ``sweep_<recipe>.json``'s completed trials by the value of
    each field that the space searched among a few values (a ``choice``): for each value, how
    many completed trials had it, and the median and best of the sweep's metric, and of BLEU
    when the sweep chose by another. A random search varies every field at once, so a value's
    median is taken over whatever the other fields were."""
    run = _sweep_file(root, recipe)
    if run is None:
        return OPTION_EFFECTS_NONE
    chosen_by = run["metric"]
    done = [t for t in run["trials"] if t["state"] == "COMPLETE"]
    metrics = [chosen_by] + [
        m for m in ("bleu",) if m != chosen_by and done and _score(done[0], m) is not None
    ]
    larger = {chosen_by: run.get("larger_is_better", True), "bleu": True}
    fields = [k for k in run["trials"][0] if "." in k]
    columns = " | ".join(f"{metric}: median, best" for metric in metrics)
    lines = [
        f"On a {machine_words(run['provenance']['machine'])} (`python -m benchmarks.bench_sweep "
        f"--recipe recipes/{recipe}.yaml --space {run['space']}` with "
        f"`{_settings(run)}`): the {len(done)} trials of "
        f"{len(run['trials'])} that trained to the end (the others were pruned), chosen by "
        f"validation {chosen_by}, by the value of each option. Every trial draws every option, "
        "so a value's median is taken over the others' values.",
        "",
        f"| option | value | trials | {columns} |",
        "|---|---|---|" + "---|" * len(metrics),
    ]
    for field in fields:
        values = sorted({t[field] for t in run["trials"]})
        if len(values) > 4:  # a range, not a choice
            continue
        for value in values:
            having = [t for t in done if t[field] == value]
            cells = []
            for metric in metrics:
                scores = [s for s in (_score(t, metric) for t in having) if s is not None]
                pick = max if larger[metric] else min
                cells.append(
                    f"{_value(_median(scores))}, {_value(pick(scores))}" if scores else "—"
                )
            lines.append(f"| `{field}` | {value} | {len(having)} | {' | '.join(cells)} |")
    return "\n".join(lines)
