"""How ``benchmarks/run_all.py`` runs one benchmark script: in its own process group, as a
module from the repository root, with ``--json PATH``; what it wrote read back as an
:class:`Outcome` (ok, failed, timed out, not run), and the interpreter's versions and the
machine the scripts run on."""

from __future__ import annotations

import datetime
import json
import os
import re
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.lib.benchlib import is_met
from hfattn.common.machine import describe_machine

ROOT = Path(__file__).resolve().parents[2]
"""The repository root, where the scripts run from."""
PACKAGES = ("torch", "transformers", "accelerate", "peft", "gradio", "hfattn")
LOG_TAIL_LINES = 15


def benchmark_name(script: Path) -> str:
    """The benchmark a script measures: its name without ``bench_`` (``vaswani``)."""
    return script.stem.removeprefix("bench_")


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
    """The last ``lines`` lines of a script's log."""
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
    """The 1-, 5- and 15-minute load averages (``"unknown"`` where the OS has none)."""
    try:
        return ", ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def now() -> str:
    """The local time, as the report dates a run (``2026-11-26 21:59 UTC``)."""
    return datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
