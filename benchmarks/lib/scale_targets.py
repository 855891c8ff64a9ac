"""The targets of ``benchmarks/bench_data_scale.py``'s cases (the large-corpora issues' "Done
when"), and each case's record judged against them."""

from __future__ import annotations

from collections.abc import Callable

from benchmarks.lib.benchlib import is_met
from benchmarks.lib.scale_run import ready_seconds


def _run(name: str, key: str) -> Callable[[dict, dict], float | None]:
    return lambda record, cases: record[name][key]


def _peak(record: dict, cases: dict) -> float | None:
    return record["peak_rss_gb"]


def _first_peak(record: dict, cases: dict) -> float | None:
    return record["first_run"]["peak_rss_gb"]


def _steps_against(reference: str) -> Callable[[dict, dict], float | None]:
    def ratio(record: dict, cases: dict) -> float | None:
        other = cases.get(reference, {}).get("steps_per_s")
        mine = record["steps_per_s"]
        return round(mine / other, 3) if mine and other else None

    return ratio


def _training_rss_above(reference: str) -> Callable[[dict, dict], float | None]:
    def above(record: dict, cases: dict) -> float | None:
        other = cases.get(reference, {}).get("cached_run", {}).get("peak_rss_training_gb")
        mine = record["cached_run"]["peak_rss_training_gb"]
        return None if mine is None or other is None else round(mine - other, 3)

    return above


def _ranks_peak(record: dict, cases: dict) -> float | None:
    ranks = [v for k, v in record["first_run"]["peak_rss_per_process_gb"].items()
             if k.startswith("rank ")]  # fmt: skip
    return max(ranks, default=None)


def _one_preparation(record: dict, cases: dict) -> float | None:
    run = record["first_run"]
    if run["preparation"] != "prepared":
        return None
    return max(run["most_preparing_lines_for_one_folder"], 1)


FIRST = ("first run: seconds to the first step", _run("first_run", "seconds_to_first_step"))
SECOND = ("second run: seconds to the first step", _run("cached_run", "seconds_to_first_step"))
PEAK = ("peak RSS of the process tree (GB)", _peak)
PREPARED_IN = ("first run: preparation seconds", _run("first_run", "preparation_seconds"))
PREPARED_PEAK = ("first run: peak RSS of the process tree (GB)", _first_peak)


def _pairs_targets(first: float, second: float, peak: float) -> tuple:
    return ((*FIRST, first, "<="), (*SECOND, second, "<="), (*PEAK, peak, "<="))


def _big_pairs_targets(model: str) -> tuple:
    return (
        (*PREPARED_IN, 360, "<="),
        (*PREPARED_PEAK, 4.0, "<="),
        (f"second run: training RSS above {model}/31k's (GB)", _training_rss_above(f"{model}/31k"),
         1.0, "<="),
    )  # fmt: skip


def _splits_announced(record: dict, cases: dict) -> float | None:
    return len(record["first_run"].get("evaluation_lines", {}).get("evaluating", [])) or None


def _saved_model_targets() -> tuple:
    return (
        ("first run: final evaluation seconds", _run("first_run", "final_evaluation_s"), 120,
         "<="),
        ("second run: final evaluation seconds", _run("cached_run", "final_evaluation_s"), 120,
         "<="),
        ("first run: splits announced as they are scored", _splits_announced, 1, ">="),
    )  # fmt: skip


TARGETS = {
    "char-rnn/100MB": (
        (*FIRST, 60, "<="),
        (*SECOND, 10, "<="),
        (*PEAK, 2.5, "<="),
        ("steady steps/s over char-rnn/4.4MB's", _steps_against("char-rnn/4.4MB"), 0.9, ">="),
    ),
    "char-rnn/1GB": ((*PREPARED_IN, 600, "<="), (*PREPARED_PEAK, 3.0, "<=")),
    "luong/1.45M": _pairs_targets(120, 15, 3.0),
    "vaswani/1.45M": _pairs_targets(120, 15, 3.0),
    "luong/4.5M": _big_pairs_targets("luong"),
    "vaswani/4.5M": _big_pairs_targets("vaswani"),
    "vaswani-prepare/1.45M": (
        ("first run: seconds to prepared", _run("first_run", "seconds_to_prepared"), 120, "<="),
        ("second run: seconds to prepared", _run("cached_run", "seconds_to_prepared"), 15, "<="),
        (*PEAK, 3.0, "<="),
    ),
    "vaswani-prepare/4.5M": ((*PREPARED_IN, 360, "<="), (*PREPARED_PEAK, 4.0, "<=")),
    "luong-2proc/1.45M": (
        ("first run: preparations of one prepared folder", _one_preparation, 1, "<="),
        ("first run: peak RSS of each process (GB)", _ranks_peak, 3.0, "<="),
    ),
    "char-rnn-model/100MB": _saved_model_targets(),
    "chollet-model/1M": _saved_model_targets(),
}
"""The targets of the large-corpora issues ("Done when", on a 2-core, 24 GB machine), by case:
name, value (from the case's record and every case's), target, comparison. A ``model`` case
reaches its saved model with its final evaluation announced and under 2 minutes."""


def targets_of(name: str, cases: dict) -> list[dict]:
    """The targets of the case ``name`` met or not by its record in ``cases``: ``met`` is
    ``None`` for a figure not measured, and false for every figure of a case whose first run
    made no step (killed, failed, out of time)."""
    out = []
    failed = ready_seconds(cases[name].get("first_run", {})) is None
    for label, value_of, target, comparison in TARGETS.get(name, ()):
        value = value_of(cases[name], cases)
        met = False if failed else is_met(value, target, comparison)
        out.append({"name": label, "value": value, "target": target, "comparison": comparison,
                    "met": met})  # fmt: skip
    return out
