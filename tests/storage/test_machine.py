"""Every results file says where it comes from: hfattn.common.machine describes the machine by what
it is (CPU model, cores, instruction set, GPU) and records the commit, command and date; the
training summary, the baselines and the benchmark reports carry that block."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

from benchmarks.lib import benchlib
from hfattn.common.machine import (
    command_line,
    cpu_isa,
    cpu_model,
    describe_machine,
    hfattn_commit,
    machine_words,
    provenance,
)
from hfattn.training.checkpoints import Progress
from hfattn.training.results import training_summary

ROOT = Path(__file__).resolve().parents[2]


def cpuinfo(model: str, flags: str, key: str = "flags") -> str:
    return f"processor\t: 0\nmodel name\t: {model}\n{key}\t\t: fpu sse2 {flags}\n\n"


def test_the_best_instruction_set_is_named():
    assert cpu_isa(cpuinfo("AMD EPYC 7B13", "avx avx2 fma")) == "AVX2"
    assert cpu_isa(cpuinfo("AMD EPYC 9B14", "avx2 avx512f avx512_bf16")) == "AVX-512 BF16"
    assert cpu_isa(cpuinfo("Intel Xeon", "avx2 avx512f")) == "AVX-512"
    assert cpu_isa(cpuinfo("Intel Xeon", "avx2 avx512f avx512_bf16 amx_tile")) == "AMX"
    assert cpu_isa("processor\t: 0\nFeatures\t: fp asimd evtstrm\n") == "NEON"
    assert cpu_isa(cpuinfo("old", "sse4_2")) is None


def test_the_model_and_the_words_of_a_table():
    text = cpuinfo("AMD EPYC 7B13 64-Core Processor", "avx2")
    assert cpu_model(text) == "AMD EPYC 7B13 64-Core Processor"
    machine = describe_machine(cpuinfo=text)
    assert machine["isa"] == "AVX2" and machine["gpu"] is None
    cpu = {"cpu": "AMD EPYC 7B13", "cores": 2, "isa": "AVX2", "gpu": None}
    assert machine_words(cpu) == "2-core AMD EPYC 7B13, AVX2"
    assert machine_words({**cpu, "isa": None}) == "2-core AMD EPYC 7B13"
    intel = {**cpu, "cpu": "Intel(R) Xeon(R) Platinum(TM) 8480+", "isa": "AMX"}
    assert machine_words(intel) == "2-core Intel Xeon Platinum 8480+, AMX"
    assert machine_words({**cpu, "gpu": "NVIDIA H100 80GB HBM3"}) == "NVIDIA H100 80GB HBM3"


def test_provenance_names_the_commit_the_command_and_the_date():
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    hfattn_commit.cache_clear()
    assert hfattn_commit().split("+")[0] == head
    block = provenance(gpu="NVIDIA H200", argv=["/x/bin/hfattn", "train", "my recipe.yaml"])
    assert block["command"] == "hfattn train 'my recipe.yaml'"
    assert block["machine"]["gpu"] == "NVIDIA H200" and block["machine"]["cores"] >= 1
    assert block["date"][:2] == "20" and block["date"].endswith("+00:00")
    assert command_line(["/p/hfattn/__main__.py", "evaluate", "runs/x"]) == "hfattn evaluate runs/x"
    # a training run of two sessions: the command that started it, then the resume
    run = provenance(commands=["hfattn train r.yaml", "hfattn train --resume runs/r"])
    assert run["command"] == "hfattn train r.yaml"
    assert run["resume_commands"] == ["hfattn train --resume runs/r"]
    assert "resume_commands" not in block  # not a training run's


def test_the_training_summary_records_its_provenance():
    progress = Progress(step=3, planned_steps=3, epoch=1, elapsed_s=2.0, train_tokens=10)
    accelerator = SimpleNamespace(
        device=SimpleNamespace(type="cpu"), num_processes=1, mixed_precision="no"
    )
    summary = training_summary(progress, 3, accelerator, "r")
    machine = summary["provenance"]["machine"]
    assert summary["hardware"] == f"1 process(es) on a {machine_words(machine)}"
    assert machine == describe_machine()


def test_a_benchmark_report_records_its_provenance():
    report = benchlib.BenchReport("demo")
    report.add("x", 1.0)
    block = report.to_dict()["provenance"]
    assert block["machine"] == describe_machine() and block["hfattn_commit"]


def test_the_commit_is_read_once_so_a_long_run_records_the_code_it_started_with(monkeypatch):
    hfattn_commit.cache_clear()
    first = hfattn_commit()

    def moved_on(*args, **kwargs):
        raise AssertionError("git read again")

    monkeypatch.setattr(subprocess, "run", moved_on)
    assert hfattn_commit() == first
    assert provenance()["hfattn_commit"] == first
