"""What ``benchmarks/bench_vaswani.py`` prints and reports: the machine, the table of hfattn's
figures against the reference's with their targets, the checks behind it, and the records for
``run_all.py``."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass

import torch

from benchmarks.lib.benchlib import BenchReport

PARITY_TARGET, CACHE_TARGET = 1.0, 8.0
STATIC_CACHE_TARGET = 2.0
"""Static cache + compiled step / dynamic cache at batch 1, on a GPU (issue 23)."""


def load_average() -> list[float] | None:
    """The machine's 1-, 5- and 15-minute load averages (``None`` where the OS has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def machine(device: str) -> str:
    """The GPU's name, or the CPU's architecture, cores and torch threads."""
    if device == "cuda":
        return torch.cuda.get_device_name()
    return (
        f"{platform.machine()} CPU, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads"
    )


def spread(paired: dict) -> str:
    """The range of the back-to-back ratios, e.g. ``(pairs 0.93–1.05)``."""
    return f"(pairs {paired['min']:.2f}–{paired['max']:.2f})"


@dataclass(frozen=True)
class Row:
    """One line of the table: a ratio of hfattn's figure to the reference's, and its target."""

    measure: str
    ours: str
    reference: str
    ratio: float
    spread: str = ""
    target: float | None = None


def rows(results: dict, args) -> list[Row]:
    """The table's rows, in order (the hfattn/Marian training target applies to CPU fp32)."""
    out = []
    for train in results["training"]:
        s = train["size"]
        name = f"{s['name']} ({s['layers']}+{s['layers']}, d {s['d_model']}, batch {s['batch']})"
        h, m = train["hfattn"], train["marian"]
        target = PARITY_TARGET if args.device == "cpu" and args.dtype == "fp32" else None
        out.append(
            Row(
                f"training target tokens/s, {name}",
                f"{h['tokens_per_s']:,.0f}",
                f"{m['tokens_per_s']:,.0f}",
                train["tokens_per_s_ratio"],
                spread(train["paired_ratios"]),
                target,
            )
        )
        out.append(
            Row(
                f"saved activations per step (MiB), {name}",
                f"{h['saved_activation_bytes'] / 2**20:,.1f}",
                f"{m['saved_activation_bytes'] / 2**20:,.1f}",
                train["memory_ratio"],
            )
        )
        if "cuda_peak_ratio" in train:
            out.append(
                Row(
                    f"CUDA peak memory of a step (MiB), {name}",
                    f"{h['cuda_peak_step_bytes'] / 2**20:,.1f}",
                    f"{m['cuda_peak_step_bytes'] / 2**20:,.1f}",
                    train["cuda_peak_ratio"],
                )
            )
        out.append(
            Row(
                f"MFU (of the {results['peak']}), {name}",
                f"{h['mfu']:.1%}",
                f"{m['mfu']:.1%}",
                h["mfu"] / m["mfu"],
            )
        )
    gen = results["generation"] or {}
    for label in [k for k in gen if k.startswith(("greedy", "beam"))]:
        entry = gen[label]
        what = f"{label}, batch {gen['batch']} × {gen['new_tokens']} new tokens, tokens/s"
        if "ratio_cache_no_cache" in entry:
            out.append(
                Row(
                    f"{what}: KV cache vs use_cache=False",
                    f"{entry['hfattn']['tokens_per_s']:,.0f}",
                    f"{entry['hfattn_no_cache']['tokens_per_s']:,.0f} (hfattn, no cache)",
                    entry["ratio_cache_no_cache"],
                    target=CACHE_TARGET,
                )
            )
        out.append(
            Row(
                f"{what}: hfattn vs Marian, both cached",
                f"{entry['hfattn']['tokens_per_s']:,.0f}",
                f"{entry['marian']['tokens_per_s']:,.0f}",
                entry["ratio_hfattn_marian"],
                spread(entry["paired_ratios_hfattn_marian"]),
                PARITY_TARGET,
            )
        )
    static = results.get("static_cache")
    if static:
        out.append(
            Row(
                f"greedy, batch 1 × {static['new_tokens']} new tokens, tokens/s: static cache + "
                "torch.compile vs dynamic cache",
                f"{static['tokens_per_s']['static_compiled']:,.0f}",
                f"{static['tokens_per_s']['dynamic']:,.0f} (dynamic cache)",
                static["ratio"],
                spread(static["paired_ratios"]),
                STATIC_CACHE_TARGET if args.device == "cuda" else None,
            )
        )
    return out


def table(results: dict, args) -> str:
    """The Markdown table of :func:`rows`: each ratio with its spread, target and verdict."""
    lines = [
        "| measure | hfattn | Marian / reference | ratio | target | met |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for row in rows(results, args):
        digits = 2 if row.ratio >= 10 else 3
        ratio = f"{row.ratio:.{digits}f} {row.spread}".strip()
        target = f"≥ {row.target:g}" if row.target is not None else ""
        met = "" if row.target is None else "met" if row.ratio >= row.target else "not met"
        lines.append(
            f"| {row.measure} | {row.ours} | {row.reference} | {ratio} | {target} | {met} |"
        )
    return "\n".join(lines)


def to_report(results: dict, args) -> BenchReport:
    """The table's ratios as records for ``run_all.py``."""
    report = BenchReport("vaswani", args.device)
    for row in rows(results, args):
        detail = f"{row.ours} vs {row.reference} {row.spread}".strip()
        report.add(f"{row.measure} ({args.dtype})", row.ratio, "x", row.target, detail=detail)
    return report


def notes(results: dict) -> str:
    """The checks behind the table, one line each."""
    lines = []
    for train in results["training"]:
        lines.append(
            f"- {train['size']['name']}: max |logit difference| hfattn vs Marian (same weights, "
            f"eval) {train['max_abs_logit_difference']:.2e}; parameters {train['parameters']} "
            "(Marian counts its two frozen sinusoidal tables, hfattn its output bias); "
            f"{train['flops_per_step'] / 1e9:,.1f} GFLOP per training step"
        )
    gen = results["generation"] or {}
    for label in [k for k in gen if k.startswith(("greedy", "beam"))]:
        entry = gen[label]
        line = f"- {label}: identical sequences hfattn vs Marian {entry['same_output_hfattn_marian']:.0%}"
        if "same_output_cache_no_cache" in entry:
            line += f", cache vs no cache {entry['same_output_cache_no_cache']:.0%}"
        lines.append(line)
    static = results.get("static_cache")
    if static:
        lines.append(
            f"- static cache + compile: first call (compiling) {static['first_static_call_s']:.1f} s; "
            f"identical sequences to the dynamic cache: {static['same_output']}"
        )
    return "\n".join(lines)
