"""What a finished run leaves in its folder besides the checkpoints: the model and tokenizer
(``save_pretrained``), ``eval_results.json`` (the scores in the model-index form the model card
reads, plus how training went) and the loss curve (``loss_curve.png``, from ``metrics.jsonl``)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..common.machine import machine_words, provenance
from ..storage.file_io import atomic_files, atomic_path, atomic_write_json
from ..storage.run_folder import EVAL_RESULTS_FILE, LOSS_CURVE_FILE
from .throughput import mfu


def gpu_name(accelerator) -> str | None:
    """The name of the GPU the run trains on (``"NVIDIA H100 80GB HBM3"``), ``None`` on CPU."""
    if accelerator.device.type != "cuda":
        return None
    import torch

    return torch.cuda.get_device_name(accelerator.device)


def hardware(accelerator, machine: dict) -> str:
    """What the run trained on, in words: ``"2× NVIDIA H100 80GB HBM3"`` or ``"1 process(es)
    on a 2-core AMD EPYC 7B13, AVX2"`` (``machine``:
    :func:`hfattn.common.machine.describe_machine`)."""
    if machine.get("gpu"):
        return f"{accelerator.num_processes}× {machine['gpu']}"
    return f"{accelerator.num_processes} process(es) on a {machine_words(machine)}"


def training_summary(
    progress,
    schedule_steps: int | None,
    accelerator,
    recipe_name,
    max_minutes: float | None = None,
    *,
    flops_per_token: float | None = None,
    peak_flops: tuple[float | None, str] = (None, "not given"),
    final_eval_s: float | None = None,
    wall_s: float | None = None,
) -> dict:
    """How a run trained, for ``eval_results.json``'s ``training``: the steps done, scheduled
    and planned by the recipe file, the best step, the runtime and its clock (``max_minutes``,
    and the recipe file's), the seconds apart from training (``eval_runtime_s``: the
    evaluations during training, ``progress.eval_s``; ``final_eval_runtime_s``: the final
    evaluation of every split, ``final_eval_s``; ``wall_time_s``: the whole run, ``wall_s``,
    ``None`` when not given), the tokens trained on (and per second), its MFU (tokens/s ×
    ``flops_per_token`` over the processes' peak; ``peak_flops`` is one device's
    ``(FLOP/s, source)`` of :func:`~hfattn.training.throughput.device_peak_flops`, ``None`` on
    CPUs), why it stopped, the hardware, and the run's :func:`hfattn.common.machine.provenance`
    (commit, the command that started it and those that resumed it, date, machine)."""
    tokens_per_s = progress.train_tokens / progress.elapsed_s if progress.elapsed_s else None
    peak, peak_source = peak_flops
    utilisation = (
        mfu(tokens_per_s * flops_per_token, 1.0, peak * accelerator.num_processes)
        if None not in (tokens_per_s, flops_per_token, peak)
        else None
    )
    origin = provenance(gpu_name(accelerator), commands=progress.commands)
    return {
        "recipe": recipe_name,
        "global_step": progress.step,
        "schedule_steps": schedule_steps,
        "planned_steps": progress.planned_steps,
        "epochs_completed": progress.epoch,
        "best_step": progress.best_step,
        "best_averaged_steps": progress.best_averaged_steps,
        "skipped_steps": progress.skipped_steps,
        "train_runtime_s": round(progress.elapsed_s, 1),
        "eval_runtime_s": round(progress.eval_s, 1),
        "final_eval_runtime_s": _rounded(final_eval_s),
        "wall_time_s": _rounded(wall_s),
        "first_step_wall_s": _rounded(progress.first_step_wall_s),
        "compile_s": progress.compile_s,
        "compiles": progress.compiles,
        "max_minutes": max_minutes,
        "planned_minutes": progress.planned_minutes,
        "train_tokens": progress.train_tokens,
        "train_tokens_per_s": round(tokens_per_s, 1) if tokens_per_s is not None else None,
        "train_flops_per_token": round(flops_per_token) if flops_per_token else None,
        "mfu": round(utilisation, 4) if utilisation is not None else None,
        "peak_flops_per_device": peak,
        "peak_flops_source": peak_source,
        "stop_reason": progress.stop.reason or "completed",
        "hardware": hardware(accelerator, origin["machine"]),
        "num_processes": accelerator.num_processes,
        "mixed_precision": accelerator.mixed_precision,
        "provenance": origin,
    }


def _rounded(seconds: float | None) -> float | None:
    return round(seconds, 1) if seconds is not None else None


def eval_results(
    metrics: dict[str, dict], card_metadata: dict, training: dict, data_preparation: dict
) -> dict:
    """The content of ``eval_results.json``: the task and dataset names of
    ``card_metadata``, one ``results`` row per (split, reported metric) with a float value,
    every metric under ``all_metrics``, ``training`` (steps, runtime, stop reason...) and
    ``data_preparation`` (the prepared data's folder, whether it was reused, the seconds it
    took this run)."""
    reported = card_metadata.get("reported_metrics")
    names = card_metadata.get("metric_names", {})
    return {
        **{key: card_metadata.get(key) for key in ("task_type", "task_name")},
        **{key: card_metadata.get(key) for key in ("dataset_name", "dataset_type")},
        "results": [
            {
                "split": split,
                "metric_type": name,
                "metric_name": names.get(name, name),
                "value": value,
            }  # fmt: skip
            for split, scores in metrics.items()
            for name, value in scores.items()
            if name in (reported if reported is not None else scores) and isinstance(value, float)
        ],
        "all_metrics": metrics,
        "training": training,
        "data_preparation": data_preparation,
    }


def save_run_results(output_dir: Path, model, tokenizer, results: dict, metrics_path: Path):
    """Save the model folder of a finished run: weights, config and generation config,
    tokenizer, the loss curve drawn from ``metrics_path`` and, last, ``eval_results.json``
    (``results``, see :func:`eval_results`): a folder that has it is a finished run
    (:func:`hfattn.storage.run_folder.run_state`), one cut short before it is resumed."""
    with atomic_files(output_dir) as staged:  # each file renamed in whole, with a plain mode
        model.save_pretrained(staged)
        tokenizer.save_pretrained(staged)
    plot_loss_curve(metrics_path, output_dir / LOSS_CURVE_FILE)
    atomic_write_json(output_dir / EVAL_RESULTS_FILE, results)


def plot_loss_curve(metrics_path: Path, out_path: Path) -> None:
    """Train and validation loss against the optimizer step, from ``metrics.jsonl``.

    Drawn on a bare :class:`~matplotlib.figure.Figure` (no pyplot state) with fixed margins:
    a layout pass would draw the figure once more before it is saved."""
    from matplotlib.figure import Figure

    records = (
        [json.loads(line) for line in metrics_path.read_text().splitlines()]
        if metrics_path.exists()
        else []
    )
    fig = Figure(figsize=(7, 4))
    fig.subplots_adjust(left=0.1, right=0.97, top=0.92, bottom=0.12)
    ax = fig.add_subplot()
    for split, style in (("train", "-"), ("validation", "o-")):
        points = [
            (r["step"], r["loss"])
            for r in records
            if r["split"] == split and math.isfinite(r["loss"])
        ]
        if points:
            ax.plot(*zip(*points, strict=True), style, label=split)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("loss (nats / token)")
    ax.set_title("Training curve")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    with atomic_path(out_path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)


__all__ = [
    "eval_results",
    "hardware",
    "plot_loss_curve",
    "save_run_results",
    "training_summary",
]
