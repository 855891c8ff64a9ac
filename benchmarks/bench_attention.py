"""Attention speed and memory: multi-head via sdpa / eager / a naive reference, and the
kernel (Performer) score's linear-time path against its quadratic form.

Convention: 8 heads of d = 64 per head (d_model = 512), batch 2, self-attention with
Tq = Tk = T in {128, 512, 2048}, float32, forward pass under ``torch.inference_mode``.
The kernel score runs on per-head tensors ``[2, 8, T, 64]`` with 128 random features.

- Time: the fastest of several forward calls after one warm-up, the variants of one T
  interleaved call by call in the same process; throughput is ``batch * T / time``.
- Peak memory: each (variant, T) runs once in a fresh child process; the figure is the
  growth of the process's peak resident set size during one forward pass, after the module
  and inputs were built (Linux ``VmHWM`` reset via ``/proc/self/clear_refs``). It counts
  every allocation (torch's CPU allocator has no peak counter; ``tracemalloc`` sees only
  Python objects).

On ``--device cuda`` the times are taken with the device synchronised and the peak memory is
``torch.cuda.max_memory_allocated`` above the memory held before the call, in this process.

Usage::

    .venv/bin/python -m benchmarks.bench_attention --out benchmarks/RESULTS_attention.md
        [--quick] [--lengths 128 512 2048] [--device cpu|cuda] [--json PATH]

``--quick`` takes a third of the multi-head calls (the kernel group keeps its count: its
time(2048) / time(512) ratio is a target) and measures the peak memory at the largest T only
(each measure is a fresh interpreter: slow on a loaded machine).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

from benchmarks.lib.benchlib import (
    BenchReport,
    add_device_argument,
    add_json_argument,
    synchronize,
    write_atomically,
)
from hfattn.models.attention import MultiHeadAttention, build_score

HEADS, HEAD_DIM, BATCH, FEATURES = 8, 64, 2, 128
D_MODEL = HEADS * HEAD_DIM
LENGTHS = (128, 512, 2048)
MHA_VARIANTS = ("mha-sdpa", "mha-eager", "naive")
KERNEL_VARIANTS = ("kernel-linear", "kernel-quadratic")
LINEAR_RATIO_TARGET = 5.0


def naive_multi_head(module: MultiHeadAttention, x: torch.Tensor) -> torch.Tensor:
    """Textbook reference: one head at a time, full ``Q K^T`` matrix, softmax, ``@ V``."""
    q, k, v = module.q_proj(x), module.k_proj(x), module.v_proj(x)
    heads = []
    for i in range(HEADS):
        part = slice(i * HEAD_DIM, (i + 1) * HEAD_DIM)
        energies = q[..., part] @ k[..., part].transpose(-1, -2) / math.sqrt(HEAD_DIM)
        heads.append(torch.softmax(energies, dim=-1) @ v[..., part])
    return module.o_proj(torch.cat(heads, dim=-1))


def make_case(variant: str, length: int, device: str = "cpu"):
    """Build the module and inputs of one case; return a zero-argument forward function."""
    torch.manual_seed(0)
    if variant in MHA_VARIANTS:
        implementation = "eager" if variant == "mha-eager" else "sdpa"
        module = MultiHeadAttention(D_MODEL, HEADS, attn_implementation=implementation)
        module = module.eval().to(device)
        x = torch.randn(BATCH, length, D_MODEL, device=device)
        if variant == "naive":
            return lambda: naive_multi_head(module, x)
        return lambda: module(x)[0]
    score = build_score("kernel", HEAD_DIM, HEAD_DIM, num_features=FEATURES).to(device)
    q, k, v = (torch.randn(BATCH, HEADS, length, HEAD_DIM, device=device) for _ in range(3))
    if variant == "kernel-linear":
        return lambda: score.linear_attention(q, k, v)

    def quadratic():
        weights = score(q, k)
        return (weights / weights.sum(-1, keepdim=True)) @ v

    return quadratic


def best_times(
    forwards: dict, repeats: int, interleave: bool = True, device: str = "cpu"
) -> dict[str, float]:
    """Fastest of ``repeats`` calls per variant, after one warm-up call each.

    ``interleave``: the variants take turns call by call, which makes the comparison robust
    to other processes sharing the CPU. Without it each variant runs its calls in one block,
    so that one variant's large temporaries (the quadratic kernel form allocates 0.5 GB at
    T = 2048) do not evict another's working set and fault its pages in again every call.
    """
    times = {name: [] for name in forwards}
    schedule = (
        [name for _ in range(repeats) for name in forwards]
        if interleave
        else [name for name in forwards for _ in range(repeats)]
    )
    with torch.inference_mode():
        for forward in forwards.values():
            forward()
        for name in schedule:
            synchronize(device)
            start = time.perf_counter()
            forwards[name]()
            synchronize(device)
            times[name].append(time.perf_counter() - start)
    return {name: min(values) for name, values in times.items()}


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def child_peak_memory(variant: str, length: int) -> None:
    """In a child process: print the peak-RSS growth (MiB) of one forward pass as JSON.

    Linux: writing 5 to ``/proc/self/clear_refs`` resets the peak RSS (``VmHWM``) to the
    current RSS, so ``VmHWM`` after the call minus ``VmRSS`` before it is the peak growth.
    Elsewhere falls back to ``ru_maxrss`` (whose high-water mark cannot be reset).
    """
    forward = make_case(variant, length)
    try:
        Path("/proc/self/clear_refs").write_text("5")
        before, read_peak = _status_kib("VmRSS"), lambda: _status_kib("VmHWM")
    except OSError:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        read_peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # noqa: E731
    with torch.inference_mode():
        forward()
    print(json.dumps({"peak_mib": (read_peak() - before) / 1024}))  # KiB -> MiB


def cuda_peak_memory(variant: str, length: int) -> float:
    """Peak CUDA memory (MiB) of one forward pass above what was allocated before it."""
    forward = make_case(variant, length, "cuda")
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    with torch.inference_mode():
        forward()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20


def peak_memory(variant: str, length: int, device: str = "cpu") -> float:
    """Run :func:`child_peak_memory` in a fresh interpreter and return its MiB figure (on
    CUDA: :func:`cuda_peak_memory` in this process)."""
    if device == "cuda":
        return cuda_peak_memory(variant, length)
    result = subprocess.run(
        [sys.executable, "-m", __spec__.name, "--child", variant, str(length), "--threads", "1"],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])["peak_mib"]


def repeats_for(length: int, group: str, quick: bool = False) -> int:
    """Calls per variant: more for the cheap kernel group, whose 2048/512 ratio is a check;
    ``quick``: a third of the multi-head calls."""
    base = {128: 30, 256: 20, 512: 15, 1024: 10, 2048: 8}.get(length, 8)
    if group == "kernel":
        return base * 3
    return max(3, base // 3) if quick else base


def _row(variant: str, length: int, seconds: float, device: str, memory: bool) -> dict:
    return {
        "variant": variant,
        "T": length,
        "seconds": seconds,
        "tokens_per_s": BATCH * length / seconds,
        "peak_mib": peak_memory(variant, length, device) if memory else None,
    }


def mib(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def run_benchmark(
    lengths: tuple[int, ...] = LENGTHS, device: str = "cpu", quick: bool = False
) -> dict:
    """Time every variant in this process and measure its memory in child processes."""
    results = {"mha": [], "kernel": []}
    for length in lengths:
        memory = not quick or length == max(lengths)
        forwards = {variant: make_case(variant, length, device) for variant in MHA_VARIANTS}
        with torch.inference_mode():
            outputs = {variant: forward() for variant, forward in forwards.items()}
        difference = max(
            (outputs[v] - outputs["naive"]).abs().max().item() for v in ("mha-sdpa", "mha-eager")
        )
        mha_times = best_times(forwards, repeats_for(length, "mha", quick), device=device)
        for variant, seconds in mha_times.items():
            row = _row(variant, length, seconds, device, memory) | {"max_abs_diff": difference}
            results["mha"].append(row)
        forwards = {variant: make_case(variant, length, device) for variant in KERNEL_VARIANTS}
        kernel_times = best_times(
            forwards, repeats_for(length, "kernel"), interleave=False, device=device
        )
        for variant, seconds in kernel_times.items():
            results["kernel"].append(_row(variant, length, seconds, device, memory))
    linear = {r["T"]: r["seconds"] for r in results["kernel"] if r["variant"] == "kernel-linear"}
    if 2048 in linear and 512 in linear:
        results["linear_ratio_2048_512"] = linear[2048] / linear[512]
    return results


def machine(device: str = "cpu") -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    threads = torch.get_num_threads()
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    gpu = torch.cuda.get_device_name() if device == "cuda" else "no GPU"
    return (
        f"{cpu}, {os.cpu_count()} CPU cores, torch {torch.__version__} ({threads} intra-op "
        f"thread{'s' if threads > 1 else ''}), Python {platform.python_version()}, {gpu}; "
        f"load average at the end of the run {load}"
    )


def linear_ratio_line(results: dict) -> str:
    """The verdict on the kernel's linear path (empty when 512 or 2048 was not measured)."""
    ratio = results.get("linear_ratio_2048_512")
    if ratio is None:
        return ""
    verdict = "PASS" if ratio <= LINEAR_RATIO_TARGET else "FAIL"
    return (
        f"Linear path scaling: time(2048) / time(512) = {ratio:.2f} (4.0 = exactly linear; "
        f"required <= {LINEAR_RATIO_TARGET:g}): **{verdict}**."
    )


def to_report(results: dict, device: str) -> BenchReport:
    """The measures against their targets and the time-against-T series."""
    report = BenchReport("attention", device)
    if "linear_ratio_2048_512" in results:
        linear = {r["T"]: r for r in results["kernel"] if r["variant"] == "kernel-linear"}
        report.add(
            "kernel score, linear path: time(T=2048) / time(T=512) (4 = linear)",
            results["linear_ratio_2048_512"],
            "x",
            LINEAR_RATIO_TARGET,
            "<=",
            detail=f"{linear[2048]['seconds'] * 1e3:.1f} ms / {linear[512]['seconds'] * 1e3:.1f} ms",
        )
    top = max(r["T"] for r in results["mha"])
    at_top = {r["variant"]: r for r in results["mha"] if r["T"] == top}
    for variant in ("mha-eager", "naive"):
        report.add(
            f"multi-head attention, T={top}: time {variant} / time sdpa",
            at_top[variant]["seconds"] / at_top["mha-sdpa"]["seconds"],
            "x",
            detail=f"{at_top[variant]['seconds'] * 1e3:.1f} ms vs "
            f"{at_top['mha-sdpa']['seconds'] * 1e3:.1f} ms; peak "
            f"{mib(at_top[variant]['peak_mib'], 0)} vs {mib(at_top['mha-sdpa']['peak_mib'], 0)} MiB",
        )
    report.add(
        "multi-head attention: max |sdpa or eager - naive| over all T",
        max(r["max_abs_diff"] for r in results["mha"]),
        "",
    )
    for group, variants in (("mha", MHA_VARIANTS), ("kernel", KERNEL_VARIANTS)):
        rows = results[group]
        lengths = sorted({r["T"] for r in rows})
        seconds = {(r["variant"], r["T"]): r["seconds"] for r in rows}
        report.add_series(
            f"{group}_seq_len",
            f"{'multi-head attention' if group == 'mha' else 'kernel score'}, batch {BATCH}, "
            f"{HEADS} heads x {HEAD_DIM}: forward time against T ({device})",
            "seq_len",
            "sequence length T",
            lengths,
            {v: [seconds[(v, t)] for t in lengths] for v in variants},
            log=True,
        )
    return report


def to_markdown(results: dict, command: str, device: str = "cpu") -> str:
    """The results as a markdown section (for benchmarks/RESULTS_attention.md)."""
    sdpa = {r["T"]: r for r in results["mha"] if r["variant"] == "mha-sdpa"}
    lines = [
        "## Attention: multi-head (sdpa / eager / naive) and the kernel score's linear path",
        "",
        f"Command: `{command}`",
        "",
        f"Machine: {machine(device)}.",
        "",
        f"Setup: batch {BATCH}, {HEADS} heads x d = {HEAD_DIM} per head (d_model = {D_MODEL}), "
        "self-attention Tq = Tk = T, float32, forward only (`torch.inference_mode`), "
        "the fastest of several calls after a warm-up, multi-head variants interleaved call by "
        "call, kernel variants timed one block each (see `best_times`). Peak "
        "memory = growth of the peak RSS (`VmHWM`, reset through `/proc/self/clear_refs`) "
        "during one forward pass in a fresh child process.",
        "",
        "| T | variant | time (ms) | tokens/s | vs sdpa (time) | peak memory (MiB) | max abs diff vs naive |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for row in results["mha"]:
        lines.append(
            f"| {row['T']} | {row['variant']} | {row['seconds'] * 1e3:.1f} | "
            f"{row['tokens_per_s']:,.0f} | {row['seconds'] / sdpa[row['T']]['seconds']:.2f}x | "
            f"{mib(row['peak_mib'])} | {row['max_abs_diff']:.1e} |"
        )
    lines += [
        "",
        f"Kernel (Performer, {FEATURES} positive random features) on [{BATCH}, {HEADS}, T, "
        f"{HEAD_DIM}]: linear path `KernelScore.linear_attention` vs the quadratic form "
        "(T x T weights, normalised, `@ V`).",
        "",
        "| T | variant | time (ms) | tokens/s | peak memory (MiB) |",
        "|---:|---|---:|---:|---:|",
    ]
    for row in results["kernel"]:
        lines.append(
            f"| {row['T']} | {row['variant']} | {row['seconds'] * 1e3:.2f} | "
            f"{row['tokens_per_s']:,.0f} | {mib(row['peak_mib'])} |"
        )
    lines += ["", linear_ratio_line(results), ""]
    return "\n".join(lines)


def print_tables(results: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"Multi-head attention, batch {BATCH}, {HEADS} heads x {HEAD_DIM}")
    for column in ("T", "variant", "ms", "tokens/s", "peak MiB", "max |diff| vs naive"):
        table.add_column(column, justify="right")
    for row in results["mha"]:
        table.add_row(
            str(row["T"]),
            row["variant"],
            f"{row['seconds'] * 1e3:.1f}",
            f"{row['tokens_per_s']:,.0f}",
            mib(row["peak_mib"]),
            f"{row['max_abs_diff']:.1e}",
        )
    console.print(table)
    table = Table(title=f"Kernel score, {FEATURES} random features")
    for column in ("T", "variant", "ms", "tokens/s", "peak MiB"):
        table.add_column(column, justify="right")
    for row in results["kernel"]:
        table.add_row(
            str(row["T"]),
            row["variant"],
            f"{row['seconds'] * 1e3:.2f}",
            f"{row['tokens_per_s']:,.0f}",
            mib(row["peak_mib"]),
        )
    console.print(table)
    console.print(linear_ratio_line(results))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the markdown section to this file")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads (default 1: on a shared CPU, multi-threaded kernels stall "
        "at their barriers whenever another process holds a core, which swamps the timings)",
    )
    parser.add_argument(
        "--lengths", type=int, nargs="+", default=list(LENGTHS), help="sequence lengths T"
    )
    parser.add_argument("--quick", action="store_true", help="a third of the multi-head calls")
    add_device_argument(parser)
    add_json_argument(parser)
    parser.add_argument("--child", nargs=2, metavar=("VARIANT", "T"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.child:
        child_peak_memory(args.child[0], int(args.child[1]))
        return 0
    results = run_benchmark(tuple(args.lengths), args.device, args.quick)
    print_tables(results)
    to_report(results, args.device).write(args.json)
    arguments = argv if argv is not None else sys.argv[1:]
    command = " ".join([os.path.relpath(sys.executable), "-m", __spec__.name, *arguments])
    markdown = to_markdown(results, command, args.device)
    if args.out:
        write_atomically(args.out, "# Attention benchmark results\n\n" + markdown)
        print(f"wrote {args.out}")
    return 0 if results.get("linear_ratio_2048_512", 0.0) <= LINEAR_RATIO_TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
