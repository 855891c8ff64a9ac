"""Corpora of any size: the time from ``hfattn train`` to its first optimizer step, and the peak
memory of its processes, on texts of 4.4 MB to 1 GB and on 31 k to 4.5 M sentence pairs,
the first time (an empty prepared-data cache) and the second (the cache the first left).

    .venv/bin/python -m benchmarks.bench_data_scale [--cases NAME ...] [--work DIR]
        [--out benchmarks/results/data_scale.json] [--update] [--quick] [--steps N]
        [--timeout-s 3600] [--rss-limit-gb 12] [--json PATH]

The cases (:data:`~benchmarks.lib.scale_cases.CASES`): ``recipes/char_rnn_shakespeare.yaml`` on the Shakespeare plays as
the recipe ships them (``data.source: shakespeare``, 4.4 MB of training plays) and on texts of
100 MB and 1 GB made of the training plays repeated; ``recipes/bahdanau_bible_en_es.yaml``
(Luong attention, the CPU recipe) and ``recipes/vaswani_bible_en_es_base.yaml`` (the paper's
base Transformer) on ``save_to_disk`` folders whose ``train`` split is the Bible's training
books repeated to 31 k (once), 290 k, 1.45 M and 4.5 M pairs (WMT14 en-de's size), with the
Bible's own validation and test books; and the Luong recipe on 1.45 M pairs in two processes
(``ACCELERATE_USE_CPU=1 torchrun --standalone --nproc_per_node 2 -m hfattn train ...``). The
corpora are made under ``--work`` (``benchmarks/lib/scale_corpora.py``) and reused from there.

Each case runs its recipe twice as a user runs it, ``python -m hfattn train RECIPE --set
data.source=CORPUS --set output_dir=... --overwrite``, as shipped but for
``training.log_every=1``, in a child process whose ``HFATTN_PREPARED_DIR`` is the case's own
folder: empty for the first run, as the first left it for the second. A run is watched
(``benchmarks/lib/process_tree.py``) until its ``metrics.jsonl`` holds the record of step
:attr:`~benchmarks.lib.scale_cases.Case.steps`, then killed (the rest of the run, its final evaluation included, is not
measured). Per run:

- ``seconds_to_first_step``: from starting the command to the first train record of
  ``metrics.jsonl`` (written after the first optimizer step; polled every ``--poll-s``);
  ``first_step_wall_s``: the run's own count in that record (``wall_s``, from its process's
  start);
- ``peak_rss_gb``: the highest sum of the RSS of every process of the command's tree, sampled
  every ``--poll-s``; ``peak_rss_training_gb`` the same from the first step on;
  ``peak_rss_per_process_gb`` each process's own peak (``command``, ``rank N``);
- ``preparation``: ``prepared`` (a folder of prepared data appeared in the cache),
  ``reused`` (the log says ``reusing prepared data``) or ``not reported``;
  ``preparation_seconds`` and ``prepared_by`` from the ``manifest.json`` of the folders
  prepared (``hfattn/data/prepared.py``); ``preparing_lines`` / ``reusing_lines``: those log
  lines (under several processes only the first prints them);
- ``steps_per_s``: steps ``--steady-from`` to the last one over the ``wall_s`` between their
  records.

A ``prepare`` case (``hfattn prepare RECIPE --set data.source=CORPUS``) runs to its exit instead
and records ``seconds_to_prepared``. A ``model`` case (``...-model/``) trains to the saved model:
the same command with ``--set training.max_steps=STEPS``, run to its exit, final evaluation
included, and records ``seconds_to_saved_model`` (from the command's start to its exit with the
model folder's ``eval_results.json`` written), ``final_evaluation_s`` (the run's own count of
its final evaluation, ``eval_results.json``), ``scored`` (each split's examples scored, and out
of how many when sampled), ``evaluation_lines`` (the log's ``evaluating the ... split`` lines
and progress-bar updates of the evaluation) and ``split_sizes`` (the log's line of the split
sizes). Its corpora include ``1M``, a JSON Lines file of a million pairs with no held-out split
of its own (:func:`~benchmarks.lib.scale_corpora.bible_jsonl`): the held-out splits are the
ones hfattn carves. A run that makes no step (killed over ``--rss-limit-gb``,
failed, out of time) keeps its peak
RSS and the end of its output (``log_tail``), and its case's second run is not made. A case's
``targets`` are the issue's (:data:`~benchmarks.lib.scale_targets.TARGETS`), each with ``met`` true, false (every target of
a case whose first run made no step) or ``null`` (not measured). The results file holds the
provenance, the settings and the cases (each with its corpus, command, load average at its
start and commit); ``--update`` keeps the cases of the previous file that are not run now.
``--quick`` runs the cases on tiny corpora (:data:`~benchmarks.lib.scale_cases.QUICK_CORPORA`) for a few steps and writes
``data_scale_quick.json`` (not published).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from benchmarks.lib.benchlib import BenchReport, add_json_argument, write_atomically
from benchmarks.lib.scale_cases import CASES, CORPORA, QUICK_CORPORA, ROOT, make_corpus
from benchmarks.lib.scale_run import Settings, run_case
from benchmarks.lib.scale_targets import targets_of
from hfattn.common.machine import provenance

RESULTS = ROOT / "benchmarks" / "results"
DEFAULT_OUT = RESULTS / "data_scale.json"
QUICK_OUT = RESULTS / "data_scale_quick.json"
DEFAULT_WORK = Path(tempfile.gettempdir()) / "hfattn-bench-data-scale"
QUICK_STEPS, QUICK_STEADY_FROM = 4, 2


def previous_cases(out: Path, quick: bool, machine: dict) -> dict:
    """The cases of the results file ``out`` (``--update``), when it was measured on this
    machine in the same mode.

    Raises:
        SystemExit: the file names another machine or mode.
    """
    if not out.is_file():
        return {}
    data = json.loads(out.read_text("utf-8"))
    if data.get("quick", False) != quick or data["provenance"]["machine"] != machine:
        raise SystemExit(f"--update: {out} was measured on {data['provenance']['machine']} "
                         f"(quick: {data.get('quick', False)}), not here: its cases cannot be "
                         "kept")  # fmt: skip
    return data["cases"]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line, with the defaults that depend on ``--quick`` filled in."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", choices=list(CASES), metavar="NAME",
                        help=f"cases to run (default all: {', '.join(CASES)})")  # fmt: skip
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK,
                        help="where the corpora, caches, runs and logs go (corpora are reused)")  # fmt: skip
    parser.add_argument("--out", type=Path, help=f"results file (default {DEFAULT_OUT}; with "
                        f"--quick {QUICK_OUT.name})")  # fmt: skip
    parser.add_argument("--update", action="store_true",
                        help="keep the cases of --out that are not run now")  # fmt: skip
    parser.add_argument("--quick", action="store_true",
                        help=f"tiny corpora, {QUICK_STEPS} steps: checks that it runs")  # fmt: skip
    parser.add_argument("--steps", type=int, help="steps watched in every case")
    parser.add_argument("--steady-from", type=int, help="first step of the steps/s (default 10)")
    parser.add_argument("--poll-s", type=float, default=0.1, help="RSS and metrics polling")
    parser.add_argument("--timeout-s", type=float, default=3600.0, help="limit of one run")
    parser.add_argument("--rss-limit-gb", type=float, default=12.0,
                        help="stop a run whose process tree holds more (a shared machine)")  # fmt: skip
    add_json_argument(parser)
    args = parser.parse_args(argv)
    args.out = args.out or (QUICK_OUT if args.quick else DEFAULT_OUT)
    args.quick_steps = QUICK_STEPS if args.quick and args.steps is None else None
    args.steady_from = args.steady_from or (QUICK_STEADY_FROM if args.quick else 10)
    return args


def bible_missing() -> str | None:
    """Why the Bible cases cannot run here, or ``None``."""
    from hfattn.data.bible import BibleNotInstalledError, module_versions

    try:
        module_versions()
    except BibleNotInstalledError as error:
        return f"the Bible is not installed ({error}; `make sword`)"
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the cases, write ``--out`` and the ``--json`` report; exit status 0 (a missed
    target is a figure, not a failure)."""
    args = parse_args(argv)
    settings = Settings(args.steps, args.steady_from, args.poll_s, args.timeout_s,
                        args.rss_limit_gb, args.quick_steps)  # fmt: skip
    shown = sys.argv[1:] if argv is None else argv
    origin = provenance(None, argv=["python", "-m", "benchmarks.bench_data_scale", *shown])
    cases = previous_cases(args.out, args.quick, origin["machine"]) if args.update else {}
    corpora_table = QUICK_CORPORA if args.quick else CORPORA
    work = args.work.resolve()
    missing = bible_missing()
    not_run, corpora = {}, {}
    for name in args.cases or list(CASES):
        case = CASES[name]
        corpus = corpora_table[case.corpus]
        if corpus.pairs and missing:
            not_run[name] = missing
            print(f"{name}: not run: {missing}")
            continue
        if case.corpus not in corpora:
            corpora[case.corpus] = make_corpus(corpus, work)
        cases[name] = run_case(case, corpora[case.corpus], settings, work)
    cases = {name: cases[name] for name in CASES if name in cases}  # kept ones in their place
    report = BenchReport("data_scale")
    for name, record in cases.items():
        record["targets"] = targets_of(name, cases)
        for target in record["targets"]:
            if target["value"] is not None:
                report.add(f"{name}: {target['name']}", target["value"], "", target["target"],
                           target["comparison"])  # fmt: skip
    results = {"benchmark": "data_scale", "quick": args.quick, "provenance": origin,
               "settings": {"steps": args.steps or args.quick_steps,
                            "steady_from": args.steady_from,
                            "poll_s": args.poll_s, "timeout_s": args.timeout_s,
                            "rss_limit_gb": args.rss_limit_gb, "work": str(work)},
               "cases": cases, "not_run": not_run}  # fmt: skip
    write_atomically(args.out, json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")
    if not cases and not_run:
        report.not_run = "; ".join(sorted(set(not_run.values())))
    report.write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
