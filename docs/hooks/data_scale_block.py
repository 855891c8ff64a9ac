"""The "Large corpora" tables of ``docs/tasks/causal-lm.md`` and ``docs/tasks/translation.md``:
the time to the first step, the memory and the steps/s of ``hfattn train`` on large corpora,
and the cases run to the saved model (``benchmarks/bench_data_scale.py``).

Standard library only, as :mod:`docs.hooks.results_tables`.
"""

from __future__ import annotations

import json
from pathlib import Path

if __package__:  # docs.hooks.data_scale_block (tests, python -m)
    from .results_figures import shared_machine
    from .results_pages import CAUSAL_LM_PAGE, RESULTS, TRANSLATION_PAGE
else:  # MkDocs loads a hook with its folder on the path
    from results_figures import shared_machine
    from results_pages import CAUSAL_LM_PAGE, RESULTS, TRANSLATION_PAGE


DATA_SCALE = "data_scale.json"
"""Time to the first step and memory on large corpora (``benchmarks/bench_data_scale.py``):
optional, a page says it has no measurement while the file is missing."""
DATA_SCALE_NONE = (
    "The time to the first step and the memory of `hfattn train` on large corpora have no "
    "measurement in this release (`python -m benchmarks.bench_data_scale`; how it measures: "
    "[benchmark notes](../../benchmarks/NOTES.md))."
)
DATA_SCALE_TEXT = (
    "`hfattn train` as a user runs it on {machine} (`python -m benchmarks.bench_data_scale`, "
    "{date}): each corpus twice, first with an empty prepared-data cache, then with the cache "
    "the first run left; the peak RSS is the whole process tree's, sampled every {poll_s:g} s; "
    "steps/s are the second run's, from step {steady_from} to the last of the {steps} steps "
    "watched. How the figures are measured: [benchmark notes](../../benchmarks/NOTES.md)."
)
DATA_SCALE_MODEL_TEXT = (
    "To the saved model: the same command with `--set training.max_steps={steps}`, run to its "
    "exit, its final evaluation included (each held-out split as hfattn carves or the corpus "
    "brings it, scored as the recipe bounds it)."
)
DATA_SCALE_FAMILIES = {
    CAUSAL_LM_PAGE: ("char-rnn", "char-rnn-model"),
    TRANSLATION_PAGE: ("luong", "vaswani", "vaswani-prepare", "luong-2proc", "chollet-model"),
}
"""The cases of each page (the part of a case's name before ``/``)."""


def _scale_corpus(corpus: dict) -> str:
    """A case's corpus in words: its size, what it is made of and, when measured, the
    milliseconds of its preparation key (``key_ms``: a sample of its bytes, not all of them)."""
    key = f"; its key in {corpus['key_ms']:g} ms" if "key_ms" in corpus else ""
    if "pairs" in corpus:
        held_out = f"; {corpus['held_out']}" if "held_out" in corpus else ""
        return (
            f"{corpus['pairs']:,} pairs ({corpus['made_of']}, {corpus['repeats']:g}×{held_out}"
            f"{key})"
        )
    if "bytes" in corpus:
        return f"{corpus['bytes'] / 1e6:,.1f} MB ({corpus['made_of']}, {corpus['copies']:g}×{key})"
    return corpus["made_of"]


def _scale_run(run: dict, first: bool) -> str:
    """One run of a case: seconds to the first step (the preparation's), peak RSS."""
    if run["status"] == "not run":
        return "not run"
    peak = f"peak {run['peak_rss_gb']:.2f} GB"
    if run.get("seconds_to_prepared") is not None:  # `hfattn prepare`: the data path alone
        how = "prepared" if first else run["preparation"]
        return f"`hfattn prepare`: {run['seconds_to_prepared']:,.1f} s ({how}), {peak}"
    if run["seconds_to_first_step"] is None:
        return f"{run['status']} after {run['seconds']:,.0f} s, no step; {peak}"
    how = run["preparation"]
    if first and run["preparation_seconds"] is not None:
        how = f"prepared in {run['preparation_seconds']:,.1f} s"
    return f"{run['seconds_to_first_step']:,.1f} s ({how}), {peak}"


def _scale_saved(run: dict) -> str:
    """One run of a ``model`` case: seconds to the saved model, the final evaluation's."""
    if run["status"] == "not run":
        return "not run"
    if run.get("seconds_to_saved_model") is None:
        return f"{run['status']} after {run['seconds']:,.0f} s, no saved model"
    return (
        f"{run['seconds_to_saved_model']:,.1f} s (final evaluation "
        f"{run['final_evaluation_s']:,.1f} s), peak {run['peak_rss_gb']:.2f} GB"
    )


def _scale_scored(run: dict) -> str:
    """The examples a ``model`` case's final evaluation scored, per split."""
    parts = []
    for split, scored in run.get("scored", {}).items():
        part = f"{split} {scored['num_examples']:,}"
        if "sampled_from" in scored:
            part += f" of {scored['sampled_from']:,}"
        parts.append(part)
    return ", ".join(parts) or "—"


def _scale_targets(targets: list[dict]) -> str:
    """The targets of a case: how many are met, then each one missed or not measured."""
    if not targets:
        return "—"
    parts = [f"{sum(t['met'] is True for t in targets)} of {len(targets)} met"]
    for t in targets:
        if t["met"] is False:
            value = "none" if t["value"] is None else t["value"]
            parts.append(f"missed: {t['name']} {value} (target {t['comparison']} {t['target']})")
        elif t["met"] is None:
            parts.append(f"not measured: {t['name']}")
    return "; ".join(parts)


def data_scale_block(page: Path, root: Path = RESULTS) -> str:
    """The "Large corpora" tables of ``page`` (:data:`DATA_SCALE_FAMILIES`): per case the
    recipe, the corpus, both runs (seconds to the first step, how the data was come by, peak
    RSS), the steady steps/s and the targets; then the cases run to the saved model (``model``
    cases: seconds to the saved model and of its final evaluation, the examples scored);
    :data:`DATA_SCALE_NONE` without the file or without a case of the page.

    Raises:
        ValueError: the file holds a ``--quick`` run's figures (tiny corpora).
        KeyError: the file lacks a figure, or records no provenance.
    """
    path = root / DATA_SCALE
    if not path.is_file():
        return DATA_SCALE_NONE
    data = json.loads(path.read_text("utf-8"))
    if data.get("quick"):
        raise ValueError(f"{DATA_SCALE}: the figures of a --quick run (tiny corpora)")
    families = DATA_SCALE_FAMILIES[page]
    cases = {n: c for n, c in data["cases"].items() if n.split("/")[0] in families}
    if not cases:
        return DATA_SCALE_NONE
    settings = data["settings"]
    model_cases = {n: c for n, c in cases.items() if n.split("/")[0].endswith("-model")}
    steps = {c["steps_watched"] for n, c in cases.items() if n not in model_cases}
    lines = [
        DATA_SCALE_TEXT.format(
            machine=shared_machine([DATA_SCALE], root),
            date=data["provenance"]["date"][:10],
            poll_s=settings["poll_s"],
            steady_from=settings["steady_from"],
            steps=" or ".join(str(n) for n in sorted(steps)),
        ),
        "",
        "| recipe | corpus | first run: to the first step, peak RSS | second run | "
        "steps/s | targets |",
        "|---|---|---|---|---|---|",
    ]
    for name, case in cases.items():
        if name in model_cases:
            continue
        processes = f", {case['processes']} processes" if case["processes"] > 1 else ""
        speed = case["steps_per_s"]
        lines.append(
            f"| `{case['recipe']}`{processes} | {_scale_corpus(case['corpus'])} "
            f"| {_scale_run(case['first_run'], True)} | {_scale_run(case['cached_run'], False)} "
            f"| {'—' if speed is None else f'{speed:.2f}'} | {_scale_targets(case['targets'])} |"
        )
    if model_cases:
        steps = sorted({c["steps_watched"] for c in model_cases.values()})
        lines += [
            "",
            DATA_SCALE_MODEL_TEXT.format(steps=" or ".join(map(str, steps))),
            "",
            "| recipe | corpus | first run: to the saved model, peak RSS | second run | "
            "examples scored at the end | targets |",
            "|---|---|---|---|---|---|",
        ]
        for case in model_cases.values():
            lines.append(
                f"| `{case['recipe']}` | {_scale_corpus(case['corpus'])} "
                f"| {_scale_saved(case['first_run'])} | {_scale_saved(case['cached_run'])} "
                f"| {_scale_scored(case['cached_run'])} | {_scale_targets(case['targets'])} |"
            )
    return "\n".join(lines)
