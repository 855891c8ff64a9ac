"""Run every benchmark of ``benchmarks/`` and write one report, ``benchmarks/RESULTS.md``.

    .venv/bin/python -m benchmarks.run_all [--full] [--only NAME ...] [--skip NAME ...] [--update]
        [--out benchmarks/RESULTS.md] [--charts benchmarks/results] [--no-cuda]

(``make bench`` runs it in its default, quick mode.) Every ``bench_*.py`` script of the folder
runs in its own process with ``--json PATH`` (the format of ``benchlib.py``), so a benchmark that
fails or times out is a "failed" row of the report, not the end of the run. Known scripts get
the arguments of :data:`REGISTRY` for the mode; a script the registry does not know gets
``--quick`` in quick mode when its source mentions that option, and no other argument.

Modes: *quick* (the default, 20–30 minutes on a 2-core CPU) keeps the sizes that the targets
are written for and the repeats of the ratios that need them (char-RNN, Bahdanau, Vaswani:
their own defaults), and cuts what only costs time: the multi-head attention calls and memory
runs, the attention-variant seeds (seed 0), the fault recipes (char-RNN), the translation beams
(greedy) and the Space requests. *full* (``--full``) runs every script with its own defaults,
the Vaswani one with more steps and generation repeats (``--steps 20 --gen-repeats 9``).

On a machine where ``torch.cuda.is_available()``, the scripts that take ``--device`` run a
second time with ``--device cuda``, and the report gains a column per device.

The report gives the machine (CPU, cores, RAM, GPU), the versions, the date, a table per
benchmark of each measure against its target (met / not met) with the command that reruns it,
the extra tables a script emits (the translation table with Apertium), the charts drawn from
the scripts' series (time against sequence length and against batch size, PNG under
``--charts``) and every record as JSON (``bench_results.json`` there). Each file is written to
a temp name and renamed. ``--update`` (with ``--only`` or ``--skip``) keeps the previous
results of the benchmarks not run now, each with its own date. A block of the previous
report between :data:`KEEP_BEGIN` and :data:`KEEP_END` is carried over; how each published
figure is measured is in ``benchmarks/NOTES.md``.

Exit status: 0 when every benchmark run now ran (whatever its targets), 1 when one failed.
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.lib.benchlib import is_met, write_atomically
from hfattn.common.machine import describe_machine, machine_words, provenance

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
KEEP_BEGIN = "<!-- hand-written: begin -->"
KEEP_END = "<!-- hand-written: end -->"
PACKAGES = ("torch", "transformers", "accelerate", "peft", "gradio", "hfattn")
LOG_TAIL_LINES = 15


def bible_runs() -> list[str]:
    """Trained Bible translation run folders under ``runs/`` (for ``bench_translation.py``)."""
    runs = sorted((ROOT / "runs").glob("*bible*/config.json"))
    return [str(path.parent.relative_to(ROOT)) for path in runs]


@dataclass(frozen=True)
class Bench:
    """How ``run_all.py`` runs one script."""

    quick: tuple[str, ...] = ()
    """Arguments in quick mode (the default of ``make bench``)."""
    full: tuple[str, ...] = ()
    """Arguments in full mode (``--full``)."""
    cuda: tuple[str, ...] | None = None
    """Arguments of the extra GPU run (``None``: the script runs on the CPU only)."""
    positional: Callable[[], list[str]] | None = None
    """Arguments found at run time (e.g. the run folders to score)."""
    env: dict[str, str] = field(default_factory=dict)
    timeout_s: int = 1800


ONE_THREAD = {"OMP_NUM_THREADS": "1"}
"""For the scripts that would use every core: on a shared CPU, threads that wait for each other
at every barrier stall whenever another process holds a core (60 s for a 0.3 s step seen)."""

REGISTRY: dict[str, Bench] = {
    "bench_char_rnn.py": Bench(cuda=("--device", "cuda"), env=ONE_THREAD),
    "bench_attention.py": Bench(
        quick=("--quick", "--lengths", "128", "256", "512", "1024", "2048"),
        full=("--lengths", "128", "256", "512", "1024", "2048"),
        cuda=("--device", "cuda"),
    ),
    "bench_bahdanau.py": Bench(cuda=("--device", "cuda"), env=ONE_THREAD),
    "bench_vaswani.py": Bench(
        full=("--steps", "20", "--gen-repeats", "9"),
        cuda=("--device", "cuda", "--dtype", "bf16"),
    ),
    "bench_translation.py": Bench(
        quick=("--num-beams", "1"), full=("--num-beams", "4"), positional=bible_runs
    ),
    "bench_decoding.py": Bench(
        quick=("--num-beams", "1", "4", "--limit", "200"), positional=lambda: bible_runs()[:1]
    ),
    "bench_scores.py": Bench(quick=("--seeds", "0"), timeout_s=3600),
    "bench_space.py": Bench(quick=("--requests", "10"), env=ONE_THREAD),
    "bench_faults.py": Bench(quick=("--quick",), env=ONE_THREAD),
    "bench_export.py": Bench(full=("--repeats", "9", "--engine-repeats", "50")),
    "bench_compile.py": Bench(quick=("--quick",), timeout_s=3 * 3600),
    "bench_rnn_export.py": Bench(quick=("--quick",)),
    # builds both GPU recipes' jobs (Bible, BPE) and compiles a small Transformer per bucket
    # with inductor: about 15 minutes on 2 CPU cores
    "bench_feed.py": Bench(timeout_s=3600),
    # quick: a few hundred kB and a few thousand pairs, no paper-base Transformer (a minute a
    # step on 2 cores), into data_scale_quick.json; full: every case at its size (1.5-2 h estimated)
    "bench_data_scale.py": Bench(
        quick=("--quick", "--cases", "char-rnn/100MB", "luong/31k", "luong-2proc/1.45M"),
        timeout_s=4 * 3600,
    ),
}
"""Arguments per script; anything else found in the folder runs as :func:`bench_for` says."""


def bench_for(script: Path) -> Bench:
    """The registry's entry, or for an unknown script ``--quick`` in quick mode where its
    source mentions the option."""
    if script.name in REGISTRY:
        return REGISTRY[script.name]
    return Bench(quick=("--quick",) if "--quick" in script.read_text() else ())


def benchmark_name(script: Path) -> str:
    return script.stem.removeprefix("bench_")


# ---------------------------------------------------------------------------- running


@dataclass
class Outcome:
    """One run of one script: its status and what it emitted."""

    benchmark: str
    script: str
    device: str
    command: str
    status: str = "ok"
    """``ok``, ``not run``, ``failed`` or ``timed out``."""
    reason: str = ""
    seconds: float = 0.0
    records: list[dict] = field(default_factory=list)
    series: list[dict] = field(default_factory=list)
    markdown: list[str] = field(default_factory=list)
    date: str = ""
    """When it ran (a run carried over by ``--update`` keeps its own)."""


def module_of(script: Path) -> str:
    """The module name a script runs as (``python -m benchmarks.bench_x``, from the folder above
    its own): its imports name the repository's packages (``benchmarks.lib``,
    ``tests.helpers``)."""
    return f"{script.parent.name}.{script.stem}"


def display_command(python: str, script: Path, args: list[str], env: dict[str, str]) -> str:
    """The command that reruns a benchmark by hand, from the repository root."""

    def relative(path: str) -> str:
        try:
            return os.path.relpath(path, ROOT) if Path(path).is_absolute() else path
        except ValueError:
            return path

    prefix = [f"{k}={v}" for k, v in env.items()]
    return shlex.join([*prefix, relative(python), "-m", module_of(script), *args])


def normalise(data: dict | list, benchmark: str, device: str) -> dict:
    """A script's JSON as ``benchlib.BenchReport.to_dict`` writes it; a bare list of records
    (``{"name", "value", "target", "met"}`` at least) is accepted too, the missing fields
    filled in (``met`` kept where the script computed it)."""
    if isinstance(data, list):
        data = {"records": data}
    if not isinstance(data, dict):
        raise ValueError(f"expected a JSON object or list, got {type(data).__name__}")
    records = []
    for record in data.get("records", []):
        missing = {"name", "value"} - set(record)
        if missing:
            raise ValueError(f"a record lacks {', '.join(sorted(missing))}: {record}")
        record = {"benchmark": benchmark, "unit": "", "target": None, "device": device} | record
        record.setdefault("comparison", None)
        if "met" not in record:
            comparison = record["comparison"] or ">="
            record["met"] = is_met(record["value"], record["target"], comparison)
        records.append(record)
    return {
        "records": records,
        "series": data.get("series", []),
        "markdown": data.get("markdown", []),
        "not_run": data.get("not_run"),
    }


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def run_bench(
    script: Path, args: list[str], env: dict[str, str], timeout_s: float, python: str, work: Path
) -> Outcome:
    """Run one script in its own process group with ``--json`` and collect what it wrote."""
    device = args[args.index("--device") + 1] if "--device" in args else "cpu"
    name = benchmark_name(script)
    outcome = Outcome(name, script.name, device, display_command(python, script, args, env))
    json_path = work / f"{name}-{device}.json"
    log_path = work / f"{name}-{device}.log"
    command = [python, "-m", module_of(script), *args, "--json", str(json_path)]
    child_env = {**os.environ, "MPLBACKEND": "Agg", **env}
    start = time.perf_counter()
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            command,
            cwd=script.parent.parent,
            env=child_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its children (servers, training runs) go with it
        )
        try:
            code = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            code = None
        finally:  # a timeout, Ctrl-C, or servers it left behind: the whole group goes
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait()
    outcome.seconds = time.perf_counter() - start
    outcome.date = now()
    tail = f"last lines of its output:\n{log_tail(log_path)}"
    data, problem = None, "it wrote no --json output"
    if json_path.is_file():
        try:
            data = normalise(json.loads(json_path.read_text()), name, device)
        except ValueError as error:  # json.JSONDecodeError is one
            problem = f"unreadable --json output: {error}"
    if code is None:
        outcome.status, outcome.reason = "timed out", f"killed after {timeout_s:.0f} s; {tail}"
    elif data is None:
        outcome.status = "failed"
        outcome.reason = f"exit status {code}; {tail}" if code else problem
    else:  # what it measured stands, even where it exits non-zero on a target it missed
        outcome.records, outcome.series = data["records"], data["series"]
        outcome.markdown = data["markdown"]
        if data["not_run"]:
            outcome.status, outcome.reason = "not run", data["not_run"]
        elif code:
            outcome.reason = f"exit status {code} after writing its measures; {tail}"
    return outcome


def probe(python: str, cuda: bool = True) -> dict:
    """Versions and GPU as the benchmarks' interpreter sees them (``cuda=False``: no GPU
    look-up, which spares the import of torch)."""
    code = f"""
import importlib.metadata as metadata, json, platform
info = {{"python": platform.python_version(), "cuda": False, "gpu": None}}
for name in {PACKAGES!r}:
    try:
        info[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        info[name] = None
try:
    if {cuda!r}:
        import torch
        info["cuda"] = torch.cuda.is_available()
        info["gpu"] = torch.cuda.get_device_name() if info["cuda"] else None
except ImportError:
    pass
print(json.dumps(info))
"""
    result = subprocess.run(
        [python, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def machine() -> dict:
    """This machine (:func:`hfattn.common.machine.describe_machine`: CPU model, cores, instruction
    set) with its RAM (Linux ``/proc/meminfo``) and load."""
    ram = None
    try:
        meminfo = Path("/proc/meminfo").read_text()
        found = re.search(r"^MemTotal:\s*(\d+) kB", meminfo, re.MULTILINE)
        ram = int(found.group(1)) / 2**20 if found else None
    except OSError:
        pass
    return {**describe_machine(), "ram_gib": ram, "load": load_average()}


def load_average() -> str:
    try:
        return ", ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


# ---------------------------------------------------------------------------- report


def format_value(value: float | None, unit: str = "") -> str:
    """A measure as the report prints it (``1.01×``, ``0.42 s``, ``23.7 BLEU``)."""
    if value is None or not math.isfinite(value):
        return "—" if value is None else str(value)
    size = abs(value)
    if value == int(value) and size < 1e6:
        text = f"{int(value):,}"
    elif size >= 100:
        text = f"{value:,.0f}"
    elif size >= 10:
        text = f"{value:.1f}"
    elif size >= 0.01:
        text = f"{value:.3g}" if size < 1 else f"{value:.3f}".rstrip("0").rstrip(".")
    else:
        text = f"{value:.2g}"
    if unit == "x":
        return f"{text}×"
    return f"{text} {unit}" if unit else text


def format_target(record: dict) -> str:
    if record.get("target") is None:
        return ""
    sign = {">=": "≥ ", "<=": "≤ "}.get(record.get("comparison") or "", "")
    return sign + format_value(record["target"], record.get("unit", ""))


def format_met(met: bool | None) -> str:
    return "—" if met is None else "met" if met else "**not met**"


def value_cell(record: dict) -> str:
    text = format_value(record["value"], record.get("unit", ""))
    return f"{text} ({record['detail']})" if record.get("detail") else text


def results_table(outcomes: list[Outcome], devices: list[str]) -> list[str]:
    """One table for one benchmark: a value and a verdict per device."""
    rows: dict[str, dict[str, dict]] = {}
    for outcome in outcomes:
        for record in outcome.records:
            rows.setdefault(record["name"], {})[outcome.device] = record
    if not rows:
        return []
    if devices == ["cpu"]:
        header = ["measure", "value", "target", "met"]
    else:
        header = ["measure", "target"] + [f"{d} {h}" for d in devices for h in ("value", "met")]
    lines = [table_row(header), "|---" * len(header) + "|"]
    for name, by_device in rows.items():
        first = next(iter(by_device.values()))
        cells = {d: by_device.get(d) for d in devices}
        if devices == ["cpu"]:
            row = [name, value_cell(first), format_target(first), format_met(first["met"])]
        else:
            row = [name, format_target(first)]
            for record in cells.values():
                row += [value_cell(record), format_met(record["met"])] if record else ["", ""]
        lines.append(table_row(row))
    return lines


def table_row(cells: list[str]) -> str:
    """A markdown table row (``|`` inside a cell escaped)."""
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def chart_name(series: dict, benchmark: str) -> str:
    return f"{benchmark}_{series['name']}_{series['device']}.png"


def draw_chart(series: dict, path: Path) -> None:
    """One PNG of a series (matplotlib, Agg), written to a temp name and renamed."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure, axes = plt.subplots(figsize=(7, 4.5))
    for label, values in series["lines"].items():
        axes.plot(series["x"], values, marker="o", label=label)
    if series.get("log"):
        axes.set_xscale("log", base=2)
        axes.set_yscale("log")
    axes.set_xlabel(series["x_label"])
    axes.set_ylabel(series["y_label"])
    axes.set_title(series["title"], fontsize=10)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    write_atomically(path, buffer.getvalue())


def kept_block(previous: Path) -> str:
    """The hand-written block of the previous report (between the markers), or ``""``."""
    if not previous.is_file():
        return ""
    text = previous.read_text()
    start, end = text.find(KEEP_BEGIN), text.find(KEEP_END)
    if start < 0 or end < start:
        return ""
    return text[start : end + len(KEEP_END)]


def render(
    outcomes: list[Outcome],
    context: dict,
    charts: dict[str, list[str]],
    kept: str,
    out: Path,
) -> str:
    """The markdown report."""
    devices = sorted({o.device for o in outcomes}, key=lambda d: d != "cpu")
    records = [r for o in outcomes for r in o.records]
    judged = [r for r in records if r["met"] is not None]
    failed = [o for o in outcomes if o.status in ("failed", "timed out")]
    info, host = context["versions"], context["machine"]
    ram = f"{host['ram_gib']:.1f} GiB RAM" if host["ram_gib"] else "RAM unknown"
    versions = ", ".join(f"{name} {info.get(name) or 'not installed'}" for name in PACKAGES)
    gpu_absent = (
        "not looked for (--no-cuda)"
        if context["no_cuda"]
        else "none (torch.cuda.is_available() is False)"
    )
    lines = [
        "# Benchmark results",
        "",
        f"Generated by `make bench` (`{context['provenance']['command']}`, {context['mode']} mode) on "
        f"{context['date']}; rewritten by every run, so edits here are lost (except between "
        f"the `hand-written` markers). How each published figure is measured is in "
        f"[NOTES.md](NOTES.md).",
        "",
        "## Machine",
        "",
        f"- CPU: {machine_words(host)}, {ram}",
        f"- GPU: {info['gpu'] or gpu_absent}",
        f"- Python {info['python']}; {versions}",
        f"- Load average (1, 5, 15 min) before: {host['load']}; after: {context['load_after']}",
        f"- Wall time of this run: {context['seconds'] / 60:.1f} min ({context['runs']} "
        "benchmark runs)",
        "",
        "## Summary",
        "",
        f"{sum(bool(r['met']) for r in judged)} of {len(judged)} targets met"
        f"{f', {len(failed)} benchmark run(s) failed' if failed else ''}.",
        "",
        "| benchmark | device | status | measures | targets met | seconds | measured |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for o in outcomes:
        met = [r["met"] for r in o.records if r["met"] is not None]
        status = o.status if o.status == "ok" else f"**{o.status}**"
        lines.append(
            f"| [{o.benchmark}](#{o.benchmark}) | {o.device} | {status} | {len(o.records)} | "
            f"{sum(met)} / {len(met)} | {o.seconds:.0f} | {o.date} |"
        )
    header = ["benchmark", "device", "measure", "value", "target", "met"]
    lines += ["", "Every measure with a target:", "", table_row(header), "|---" * len(header) + "|"]
    for r in judged:
        cells = [r["benchmark"], r["device"], r["name"], value_cell(r), format_target(r)]
        lines.append(table_row([*cells, format_met(r["met"])]))
    by_benchmark: dict[str, list[Outcome]] = {}
    for o in outcomes:
        by_benchmark.setdefault(o.benchmark, []).append(o)
    for name, group in by_benchmark.items():
        lines += ["", f"## {name}", ""]
        for o in group:
            lines.append(f"Rerun ({o.device}): `{o.command}`")
            lines.append("")
            if o.reason:
                reason = o.reason.splitlines()
                label = "note" if o.status == "ok" else f"**{o.status}**"
                lines.append(f"{label}: {reason[0]}")
                if len(reason) > 1:
                    lines += ["", "```", *reason[1:], "```"]
                lines.append("")
        lines += results_table(group, [d for d in devices if any(o.device == d for o in group)])
        for o in group:
            for section in o.markdown:
                lines += ["", f"{o.device}: {section}" if len(devices) > 1 else section]
        for chart in charts.get(name, []):
            relative = os.path.relpath(chart, out.parent)
            lines += ["", f"![{Path(chart).stem}]({relative})"]
    if kept:
        lines += ["", kept]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- main


def now() -> str:
    return datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")


def carried_over(previous: Path, outcomes: list[Outcome]) -> list[Outcome]:
    """``outcomes`` and the previous run's outcomes of the other benchmarks, by name."""
    ran = {o.benchmark for o in outcomes}
    kept = [Outcome(**run) for run in json.loads(previous.read_text())["runs"]]
    merged = outcomes + [o for o in kept if o.benchmark not in ran]
    return sorted(merged, key=lambda o: (o.benchmark, o.device != "cpu", o.device))


def selected_scripts(folder: Path, only: list[str] | None, skip: list[str]) -> list[Path]:
    scripts = sorted(folder.glob("bench_*.py"))
    names = {benchmark_name(s) for s in scripts}
    for name in [*(only or []), *skip]:
        if name not in names:
            raise SystemExit(
                f"run_all.py: no benchmark {name!r} in {folder}; known: {', '.join(sorted(names))}"
            )
    return [
        s
        for s in scripts
        if (only is None or benchmark_name(s) in only) and benchmark_name(s) not in skip
    ]


def main(argv: list[str] | None = None) -> int:
    """Run the benchmarks, write the charts, the JSON and the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="the scripts' own (longer) defaults")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="these benchmarks only")
    parser.add_argument("--skip", nargs="+", default=[], metavar="NAME")
    parser.add_argument("--out", type=Path, default=BENCH_DIR / "RESULTS.md")
    parser.add_argument("--charts", type=Path, default=BENCH_DIR / "results")
    parser.add_argument("--bench-dir", type=Path, default=BENCH_DIR, help=argparse.SUPPRESS)
    parser.add_argument("--python", default=sys.executable, help="interpreter of the scripts")
    parser.add_argument("--no-cuda", action="store_true", help="no GPU runs even with a GPU")
    parser.add_argument(
        "--update",
        action="store_true",
        help="keep the previous results (bench_results.json) of the benchmarks not run now",
    )
    args = parser.parse_args(argv)
    scripts = selected_scripts(args.bench_dir, args.only, args.skip)
    mode = "full" if args.full else "quick"
    started = time.perf_counter()
    context = {
        "mode": mode,
        "no_cuda": args.no_cuda,
        "date": now(),
        "machine": machine(),
        "versions": probe(args.python, cuda=not args.no_cuda),
        "provenance": provenance(
            argv=["benchmarks/run_all.py", *(argv if argv is not None else sys.argv[1:])]
        ),
    }
    use_cuda = context["versions"]["cuda"]
    jobs = []
    for script in scripts:
        bench = bench_for(script)
        arguments = [*(bench.positional() if bench.positional else []), *getattr(bench, mode)]
        jobs.append((script, arguments, bench))
        if use_cuda and bench.cuda is not None:
            jobs.append((script, [*arguments, *bench.cuda], bench))
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="hfattn-bench-") as work:
        print(f"{len(jobs)} benchmark runs ({mode} mode); logs in {work}", flush=True)
        for number, (script, arguments, bench) in enumerate(jobs, 1):
            print(f"[{number}/{len(jobs)}] {shlex.join([script.name, *arguments])} ...", flush=True)
            outcome = run_bench(
                script, arguments, bench.env, bench.timeout_s, args.python, Path(work)
            )
            met = [r["met"] for r in outcome.records if r["met"] is not None]
            print(
                f"    {outcome.status} in {outcome.seconds:.0f} s: {len(outcome.records)} "
                f"measures, {sum(met)} of {len(met)} targets met"
                + (f"; {outcome.reason.splitlines()[0]}" if outcome.reason else ""),
                flush=True,
            )
            outcomes.append(outcome)
    failed = any(o.status in ("failed", "timed out") for o in outcomes)
    results_json = args.charts / "bench_results.json"
    if args.update and results_json.is_file():
        outcomes = carried_over(results_json, outcomes)
    charts: dict[str, list[str]] = {}
    for outcome in outcomes:
        for series in outcome.series:
            path = args.charts / chart_name(series, outcome.benchmark)
            draw_chart(series, path)
            charts.setdefault(outcome.benchmark, []).append(str(path))
    context["seconds"], context["runs"] = time.perf_counter() - started, len(jobs)
    context["load_after"] = load_average()
    everything = {**context, "runs": [o.__dict__ for o in outcomes]}
    write_atomically(results_json, json.dumps(everything, indent=2) + "\n")
    report = render(outcomes, context, charts, kept_block(args.out), args.out)
    write_atomically(args.out, report)
    print(f"wrote {args.out} ({context['seconds'] / 60:.1f} min)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
