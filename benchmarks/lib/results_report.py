"""The report ``benchmarks/run_all.py`` writes, ``benchmarks/RESULTS.md``: the machine, a
summary, a table per benchmark of each measure against its target, the extra tables the
scripts emit, the charts of their series (PNG) and the hand-written block carried over from the
previous report."""

from __future__ import annotations

import io
import math
import os
from pathlib import Path

from benchmarks.lib.bench_runs import PACKAGES, Outcome
from benchmarks.lib.benchlib import write_atomically
from hfattn.common.machine import machine_words

KEEP_BEGIN = "<!-- hand-written: begin -->"
KEEP_END = "<!-- hand-written: end -->"


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
    """A record's target as the report prints it (``≥ 1×``), ``""`` without one."""
    if record.get("target") is None:
        return ""
    sign = {">=": "≥ ", "<=": "≤ "}.get(record.get("comparison") or "", "")
    return sign + format_value(record["target"], record.get("unit", ""))


def format_met(met: bool | None) -> str:
    """The verdict cell: ``met``, ``**not met**`` or ``—`` (no target)."""
    return "—" if met is None else "met" if met else "**not met**"


def value_cell(record: dict) -> str:
    """A record's value as the report prints it, with its detail in brackets."""
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
    """The PNG file name of a series (``BENCHMARK_SERIES_DEVICE.png``)."""
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
