"""Where a result comes from: the machine by what it is, the hfattn commit, the command, the date.

Every results file hfattn writes (``eval_results.json`` of ``hfattn train`` and ``hfattn
baseline``, the ``--json`` report of a benchmark script) carries a ``provenance`` block::

    {"hfattn_commit": "2a1f753…" | null, "command": "hfattn train recipes/x.yaml",
     "date": "2026-11-26T15:14:51+00:00",
     "machine": {"cpu": "AMD EPYC 7B13", "cores": 2, "isa": "AVX2", "gpu": null}}

A training run's ``eval_results.json`` also lists ``resume_commands``: the ``hfattn train
--resume ...`` lines that continued it after ``command`` started it (``[]`` when none did).

:func:`machine_words` turns the ``machine`` part into the words a results table prints
(``"2-core AMD EPYC 7B13, AVX2"``). The CPU is read from ``/proc/cpuinfo`` (``model name``
and the instruction-set ``flags``; ``Features`` on Arm); the GPU name is given by the caller
(``torch.cuda.get_device_name``), so this module imports nothing beyond the standard library.
"""

from __future__ import annotations

import datetime
import functools
import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")

ISA_FLAGS = (
    ("AMX", "amx_tile"),
    ("AVX-512 BF16", "avx512_bf16"),
    ("AVX-512", "avx512f"),
    ("AVX2", "avx2"),
    ("NEON", "asimd"),
)
"""The instruction sets that decide how fast torch runs on a CPU, best first, with the
``/proc/cpuinfo`` flag that announces each (AMX: Intel's tile matrix unit, which comes with
AVX-512 BF16; ``asimd``: Arm's NEON)."""


def _field(cpuinfo: str, *names: str) -> str | None:
    """The value of the first line of ``cpuinfo`` whose key is one of ``names``."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in names and value.strip():
            return value.strip()
    return None


def cpu_model(cpuinfo: str) -> str:
    """The CPU's model name (``model name`` on x86, ``Model name``/``Hardware`` on Arm), else
    what :mod:`platform` knows (``"aarch64"``)."""
    return (
        _field(cpuinfo, "model name", "Model name", "Hardware")
        or platform.processor()
        or platform.machine()
    )


def cpu_isa(cpuinfo: str) -> str | None:
    """The best instruction set of :data:`ISA_FLAGS` that ``cpuinfo``'s flags announce
    (``"AVX-512 BF16"``), or ``None`` when it announces none of them."""
    flags = set((_field(cpuinfo, "flags", "Features") or "").split())
    return next((name for name, flag in ISA_FLAGS if flag in flags), None)


def read_cpuinfo() -> str:
    """The text of ``/proc/cpuinfo`` (``""`` where there is none: macOS, Windows)."""
    try:
        return CPUINFO.read_text("utf-8", "replace")
    except OSError:
        return ""


def describe_machine(gpu: str | None = None, cpuinfo: str | None = None) -> dict:
    """This machine: CPU model, cores, best instruction set, and ``gpu`` (the name of the
    GPU the measure used, ``None`` on the CPU)."""
    cpuinfo = read_cpuinfo() if cpuinfo is None else cpuinfo
    return {"cpu": cpu_model(cpuinfo), "cores": os.cpu_count(), "isa": cpu_isa(cpuinfo), "gpu": gpu}


def machine_words(machine: dict) -> str:
    """A machine of :func:`describe_machine` in the words of a results table: the GPU's name
    when it used one (``"NVIDIA H100 80GB HBM3"``), else ``"2-core AMD EPYC 7B13, AVX2"``."""
    if machine.get("gpu"):
        return machine["gpu"]
    model = re.sub(r"\((R|TM)\)", "", machine["cpu"])  # "Intel(R) Xeon(R)" -> "Intel Xeon"
    cpu = f"{machine['cores']}-core {model}" if machine.get("cores") else model
    return f"{cpu}, {machine['isa']}" if machine.get("isa") else cpu


@functools.cache
def hfattn_commit() -> str | None:
    """The git commit of the hfattn checkout being run (``+dirty`` when tracked files differ
    from it), or ``None`` for an installed package or where git is missing.

    Read once a process: the first call names the code the process loaded, so a long run
    calls it when it starts (:func:`hfattn.orchestration.run.run_recipe`) and its results
    file records that commit even if the checkout moves on while it trains."""
    root = Path(__file__).resolve().parents[2]  # hfattn/common/machine.py -> the checkout
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
        clean = subprocess.run(
            ["git", "-C", str(root), "diff", "--quiet", "HEAD", "--"], timeout=10
        ).returncode
    except (OSError, subprocess.SubprocessError):
        return None
    return head if clean == 0 else f"{head}+dirty"


def command_line(argv: list[str] | None = None) -> str:
    """The command that is running, as a shell would take it (``hfattn train recipes/x.yaml``
    for the ``hfattn`` entry point and ``python -m hfattn``)."""
    argv = list(sys.argv if argv is None else argv)
    if argv and (Path(argv[0]).name in ("hfattn", "__main__.py")):
        argv[0] = "hfattn"
    return shlex.join(argv)


def provenance(
    gpu: str | None = None, argv: list[str] | None = None, commands: list[str] | None = None
) -> dict:
    """The ``provenance`` block of a results file (see the module docstring). ``commands``:
    the command lines of a training run's sessions (:func:`command_line` of each, the first
    first): ``command`` is the first, ``resume_commands`` the ``--resume`` ones after it."""
    origin = {
        "hfattn_commit": hfattn_commit(),
        "command": command_line(argv) if not commands else commands[0],
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": describe_machine(gpu),
    }
    if commands:
        origin["resume_commands"] = list(commands[1:])
    return origin


__all__ = [
    "cpu_isa",
    "cpu_model",
    "describe_machine",
    "hfattn_commit",
    "machine_words",
    "provenance",
]
