"""The training loop shared by every recipe, on Accelerate (one CPU, one GPU, many of either).

Features: mixed precision, gradient accumulation, gradient clipping, named optimizers and
schedules, a wall-clock budget, periodic evaluation with best-model tracking, tqdm progress,
metrics as JSON lines plus a loss-curve PNG, atomic checkpoints every N steps, exact resume
(data position, optimizer, scheduler, RNG and carried recurrent state), and clean stops on
Ctrl-C / SIGTERM that leave a resumable checkpoint. Stateful jobs carry the recurrent state
(detached) from batch to batch and reset it at every epoch.
"""

from __future__ import annotations

import json
import logging
import math
import os
import platform
import shutil
import signal
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from accelerate import Accelerator, PartialState
from accelerate.state import AcceleratorState
from accelerate.utils import broadcast_object_list, set_seed
from safetensors.torch import load_file, save_file
from tqdm.auto import tqdm

from ..fileio import atomic_path, atomic_write_json
from .optim import build_optimizer
from .schedules import build_lr_scheduler

logger = logging.getLogger(__name__)

CHECKPOINT_PREFIX = "step-"


@dataclass
class TrainingJob:
    """Everything task-specific the loop needs.

    Attributes:
        model: the ``PreTrainedModel`` to train.
        tokenizer: saved next to the model.
        batches: ``len()``, ``epoch(e, start)`` yielding global batches (a tensor, or a dict of
            tensors, dim 0 = examples), ``batch_size`` and a ``stateful`` flag.
        compute_loss: ``(model, batch, state, stateful) -> (loss, new_state)``; ``model`` may
            be wrapped (DDP), so statefulness is passed in, not read from the model. A stateful
            task returns the state already detached (truncated BPTT); it is a tensor or a tuple
            of tensors (saved with checkpoints).
        evaluate: ``(model, split) -> {metric: value}`` with a ``loss`` entry.
        eval_splits: splits scored at the end (``validation`` is also scored periodically).
        sample: optional ``model -> str`` shown at the end of training.
        card_metadata: task / dataset names recorded in ``eval_results.json``.
    """

    model: Any
    tokenizer: Any
    batches: Any
    compute_loss: Callable
    evaluate: Callable[[Any, str], dict]
    eval_splits: Sequence[str] = ("validation", "test")
    sample: Callable[[Any], str] | None = None
    card_metadata: dict = field(default_factory=dict)


class NonFiniteLossError(ValueError):
    """The training loss became NaN or infinite; nothing after the last checkpoint is saved."""


@dataclass
class Progress:
    """Where training stands; saved in every checkpoint as ``progress.json``."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    elapsed_s: float = 0.0
    best_loss: float | None = None
    best_step: int | None = None
    should_stop: bool = False
    stop_reason: str | None = None

    def state_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k not in ("should_stop", "stop_reason")}


@dataclass
class TrainResult:
    """What :func:`train` returns."""

    output_dir: Path
    progress: Progress
    metrics: dict[str, dict] = field(default_factory=dict)
    sample: str | None = None
    interrupted: bool = False


def latest_checkpoint(output_dir: str | Path) -> Path | None:
    """The newest complete checkpoint folder under ``output_dir/checkpoints`` (or ``None``)."""
    root = Path(output_dir) / "checkpoints"
    if not root.is_dir():
        return None
    done = [p for p in root.iterdir() if p.name.startswith(CHECKPOINT_PREFIX) and p.is_dir()]
    return max(done, key=lambda p: int(p.name[len(CHECKPOINT_PREFIX) :]), default=None)


@contextmanager
def _stop_on_signals(progress: Progress):
    """First SIGINT/SIGTERM asks the loop to checkpoint and stop; a second one aborts."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        if progress.should_stop and progress.stop_reason == "interrupted":
            raise KeyboardInterrupt
        progress.should_stop, progress.stop_reason = True, "interrupted"
        logger.warning("%s received: saving a checkpoint and stopping", signal.Signals(signum).name)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _hardware(accelerator: Accelerator) -> str:
    if accelerator.device.type == "cuda":
        name = torch.cuda.get_device_name(accelerator.device)
        return f"{accelerator.num_processes}× {name}"
    return f"{accelerator.num_processes} process(es) on a {os.cpu_count()}-core {platform.machine()} CPU"


class _Run:
    """One training run: owns the accelerator, the optimizer and the files of ``output_dir``."""

    def __init__(self, job: TrainingJob, cfg, output_dir: Path, callbacks):
        self.job, self.cfg, self.output_dir, self.callbacks = job, cfg, output_dir, callbacks
        # A second run in the same process (a notebook, the tests) may ask for another
        # precision: forget the previous run's settings, keep the distributed set-up.
        AcceleratorState._reset_state(reset_partial_state=False)
        self.accelerator = Accelerator(
            mixed_precision=cfg.mixed_precision,
            gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        )
        acc = self.accelerator
        if cfg.mixed_precision == "fp16" and acc.device.type == "cpu":
            logger.warning("training.mixed_precision=fp16 has no effect on CPU; use bf16 there")
        if job.batches.batch_size % acc.num_processes:
            raise ValueError(
                f"training.batch_size={job.batches.batch_size} must be divisible by the "
                f"number of processes ({acc.num_processes})"
            )
        per_process = job.batches.batch_size // acc.num_processes
        self.rows = slice(acc.process_index * per_process, (acc.process_index + 1) * per_process)
        steps_per_epoch = max(1, len(job.batches) // cfg.gradient_accumulation_steps)
        self.total_steps = cfg.epochs * steps_per_epoch
        if cfg.max_steps is not None:
            self.total_steps = min(self.total_steps, cfg.max_steps)
        optimizer = build_optimizer(
            cfg.optimizer,
            job.model.parameters(),
            lr=cfg.learning_rate,
            weight_decay=cfg.weight_decay,
            betas=tuple(cfg.betas),
        )
        config = job.model.config
        self.scheduler = build_lr_scheduler(
            cfg.schedule,
            optimizer,
            warmup_steps=cfg.warmup_steps,
            total_steps=self.total_steps,
            d_model=getattr(config, "d_model", None) or getattr(config, "hidden_size", None),
        )
        self.model, self.optimizer = acc.prepare(job.model, optimizer)
        acc.register_for_checkpointing(self.scheduler)
        self.progress = Progress()
        self.state = None
        self.metrics_path = output_dir / "metrics.jsonl"
        self.checkpoint_root = output_dir / "checkpoints"

    # ---- files -------------------------------------------------------------------------
    def log(self, record: dict) -> None:
        if self.accelerator.is_main_process:
            with open(self.metrics_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")

    def save_checkpoint(self) -> None:
        """Write ``checkpoints/step-N`` atomically (temp folder, then rename) and prune; a
        write cut short (a second Ctrl-C / SIGTERM, a full disk) removes its temp folder."""
        tmp = self.checkpoint_root / f".tmp-{CHECKPOINT_PREFIX}{self.progress.step}"
        try:
            self._write_checkpoint(tmp)
        except BaseException:
            if self.accelerator.is_main_process:
                shutil.rmtree(tmp, ignore_errors=True)
            raise

    def _write_checkpoint(self, tmp: Path) -> None:
        acc, step = self.accelerator, self.progress.step
        final = self.checkpoint_root / f"{CHECKPOINT_PREFIX}{step}"
        if acc.is_main_process and tmp.exists():
            shutil.rmtree(tmp)
        acc.wait_for_everyone()
        acc.save_state(str(tmp))
        if self.state is not None:
            tensors = self.state if isinstance(self.state, tuple) else (self.state,)
            save_file(
                {f"state_{i}": t.detach().cpu().contiguous() for i, t in enumerate(tensors)},
                str(tmp / f"recurrent_state_{acc.process_index}.safetensors"),
            )
        if acc.is_main_process:
            atomic_write_json(tmp / "progress.json", self.progress.state_dict())
        acc.wait_for_everyone()
        if acc.is_main_process:
            if final.exists():
                shutil.rmtree(final)
            os.replace(tmp, final)
            kept = sorted(
                (p for p in self.checkpoint_root.iterdir() if p.name.startswith(CHECKPOINT_PREFIX)),
                key=lambda p: int(p.name[len(CHECKPOINT_PREFIX) :]),
            )
            for old in kept[: -self.cfg.keep_checkpoints]:
                shutil.rmtree(old)
        acc.wait_for_everyone()

    def load_checkpoint(self, path: Path) -> None:
        acc = self.accelerator
        acc.load_state(str(path))
        saved = json.loads((path / "progress.json").read_text())
        self.progress = Progress(**saved)
        state_file = path / f"recurrent_state_{acc.process_index}.safetensors"
        if state_file.exists():
            tensors = load_file(str(state_file))
            parts = tuple(tensors[f"state_{i}"].to(acc.device) for i in range(len(tensors)))
            self.state = parts if len(parts) > 1 else parts[0]
        logger.info("resumed from %s at step %d", path, self.progress.step)

    def save_best(self) -> None:
        if self.accelerator.is_main_process:
            weights = self.accelerator.unwrap_model(self.model).state_dict()
            with atomic_path(self.checkpoint_root / "best" / "model.safetensors") as tmp:
                save_file(
                    {k: v.detach().cpu().clone().contiguous() for k, v in weights.items()}, str(tmp)
                )

    # ---- evaluation --------------------------------------------------------------------
    def evaluate(self, split: str) -> dict:
        """Score ``split`` on the main process and share the result with every process."""
        acc = self.accelerator
        result = [None]
        if acc.is_main_process:
            result[0] = self.job.evaluate(acc.unwrap_model(self.model), split)
        broadcast_object_list(result)
        return result[0]

    def periodic_eval(self) -> None:
        scores = self.evaluate("validation")
        p = self.progress
        self.log({"step": p.step, "epoch": p.epoch, "split": "validation", **scores})
        if p.best_loss is None or scores["loss"] < p.best_loss:
            p.best_loss, p.best_step = scores["loss"], p.step
            self.save_best()

    # ---- the loop ----------------------------------------------------------------------
    def train_step(self, batch) -> float:
        acc, cfg = self.accelerator, self.cfg
        with acc.accumulate(self.model):
            stateful = self.job.batches.stateful
            loss, state = self.job.compute_loss(self.model, batch, self.state, stateful)
            if not torch.isfinite(loss.detach()).all():
                p = self.progress
                kept = latest_checkpoint(self.output_dir)
                raise NonFiniteLossError(
                    f"training loss is {loss.item()} at step {p.step + 1} (epoch {p.epoch}, "
                    f"batch {p.batch_in_epoch}); stopped without saving it"
                    + (f"; the last good checkpoint is {kept}" if kept else "")
                    + ". Lower training.learning_rate or set training.max_grad_norm"
                )
            acc.backward(loss)
            if acc.sync_gradients and cfg.max_grad_norm:
                acc.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
            self.optimizer.step()
            self.optimizer.zero_grad()
        self.state = state if stateful else None
        return loss.detach().float().item()

    def follow_time_budget(self, elapsed_s: float) -> None:
        """With ``max_minutes``, run the schedule on the share of the run already done,
        ``max(step / total_steps, elapsed / budget)``: a run that the clock stops before its
        last step still ends with the schedule's last learning rate (annealed), whatever the
        machine's speed. The schedule counter jumps ahead when time leads; all processes take
        the largest counter, so they keep one learning rate."""
        if self.cfg.max_minutes is None:
            return
        by_time = int(self.total_steps * elapsed_s / (60 * self.cfg.max_minutes))
        if self.accelerator.num_processes > 1:
            t = torch.tensor([float(by_time)], device=self.accelerator.device)
            by_time = int(self.accelerator.reduce(t, reduction="max").item())
        by_time = min(by_time, self.total_steps)
        if by_time > self.scheduler.last_epoch:
            self.scheduler.last_epoch = by_time - 1
            self.scheduler.step()

    def run(self) -> bool:
        """Train until the step budget, the time budget or a stop request. Returns True when
        the run was interrupted (a checkpoint has been written)."""
        acc, cfg, p = self.accelerator, self.cfg, self.progress
        start, last_saved, losses = time.monotonic() - p.elapsed_s, p.step, []
        bar = tqdm(
            total=self.total_steps,
            initial=p.step,
            disable=not acc.is_local_main_process,
            desc="train",
        )
        with _stop_on_signals(p):
            while p.epoch < cfg.epochs and p.step < self.total_steps and not p.should_stop:
                for batch in self.job.batches.epoch(p.epoch, start=p.batch_in_epoch):
                    losses.append(self.train_step(_rows_of(batch, self.rows, acc.device)))
                    p.batch_in_epoch += 1
                    if not acc.sync_gradients:
                        continue
                    self.scheduler.step()
                    p.step += 1
                    p.elapsed_s = time.monotonic() - start
                    self.follow_time_budget(p.elapsed_s)
                    bar.update(1)
                    if p.step % cfg.log_every == 0 or p.step == self.total_steps:
                        record = {"step": p.step, "epoch": p.epoch, "split": "train",
                                  "loss": sum(losses) / len(losses),
                                  "learning_rate": self.scheduler.get_last_lr()[0],
                                  "elapsed_s": round(p.elapsed_s, 2)}  # fmt: skip
                        self.log(record)
                        bar.set_postfix(loss=f"{record['loss']:.4f}")
                        losses.clear()
                    if cfg.eval_every and p.step % cfg.eval_every == 0:
                        self.periodic_eval()
                    for callback in self.callbacks:
                        callback(p)
                    over_time = cfg.max_minutes is not None and p.elapsed_s >= 60 * cfg.max_minutes
                    if over_time and not p.should_stop:
                        p.should_stop, p.stop_reason = True, "time budget"
                    stop = p.step >= self.total_steps or _any_process(acc, p.should_stop)
                    if cfg.save_every and p.step % cfg.save_every == 0:
                        self.save_checkpoint()
                        last_saved = p.step
                    if stop:
                        break
                else:
                    p.epoch += 1
                    p.batch_in_epoch = 0
                    self.state = None  # a new epoch starts every stream from the beginning
        bar.close()
        p.elapsed_s = time.monotonic() - start
        finished = p.stop_reason != "interrupted"
        if finished and cfg.eval_every and p.step % cfg.eval_every:
            self.periodic_eval()  # best-model tracking also sees the last steps
        if p.step != last_saved:  # the last state is always resumable
            self.save_checkpoint()
        return p.stop_reason == "interrupted"


def _rows_of(batch, rows: slice, device):
    """This process' share of a global batch (a tensor or a dict of tensors), on ``device``."""
    if isinstance(batch, dict):
        return {key: value[rows].to(device) for key, value in batch.items()}
    return batch[rows].to(device)


def _any_process(accelerator: Accelerator, flag: bool) -> bool:
    if accelerator.num_processes == 1:
        return flag
    t = torch.tensor([float(flag)], device=accelerator.device)
    return bool(accelerator.reduce(t, reduction="sum").item() > 0)


def train(
    job: TrainingJob,
    cfg,
    output_dir: str | Path,
    *,
    resume: bool = False,
    overwrite: bool = False,
    recipe_yaml: str | None = None,
    recipe_name: str | None = None,
    generation_defaults: dict | None = None,
    callbacks: Sequence[Callable[[Progress], None]] = (),
) -> TrainResult:
    """Train ``job.model`` with the ``training:`` section ``cfg`` and save it to ``output_dir``.

    ``output_dir`` ends up a complete model folder (``save_pretrained`` + tokenizer), with
    ``eval_results.json``, ``metrics.jsonl``, ``loss_curve.png``, ``recipe.yaml`` and
    ``checkpoints/``. With ``resume`` the newest checkpoint is loaded and training continues
    exactly where it stopped. ``callbacks`` run after every optimizer step and may set
    ``progress.should_stop``.

    A fresh run owns its folder: one that already holds a run (checkpoints or a saved model)
    is refused unless ``resume`` (continue it) or ``overwrite`` (its checkpoints, log and
    model files are removed first), so an old run's checkpoints can never be mistaken for
    the new run's.

    Raises:
        FileExistsError: ``output_dir`` holds another run and neither flag is set.
    """
    output_dir = Path(output_dir)
    if not resume:
        _claim_output_dir(output_dir, overwrite)
    set_seed(cfg.seed)
    run = _Run(job, cfg, output_dir, callbacks)
    acc = run.accelerator
    if acc.is_main_process:
        output_dir.mkdir(parents=True, exist_ok=True)
        if recipe_yaml is not None:
            with atomic_path(output_dir / "recipe.yaml") as tmp:
                tmp.write_text(recipe_yaml, encoding="utf-8")
    checkpoint = latest_checkpoint(output_dir) if resume else None
    if resume and checkpoint is None:
        raise FileNotFoundError(f"--resume: no checkpoint under {output_dir / 'checkpoints'}")
    if checkpoint is not None:
        run.load_checkpoint(checkpoint)
    elif acc.is_main_process and run.metrics_path.exists():
        run.metrics_path.unlink()  # a fresh run starts a fresh log
    acc.wait_for_everyone()

    interrupted = run.run()
    result = TrainResult(output_dir=output_dir, progress=run.progress, interrupted=interrupted)
    if interrupted:
        logger.warning("stopped at step %d; continue with --resume", run.progress.step)
        return result

    model = acc.unwrap_model(run.model)
    best = run.checkpoint_root / "best" / "model.safetensors"
    if cfg.load_best_at_end and run.progress.best_step is not None and best.exists():
        model.load_state_dict(load_file(str(best)))
    for split in dict.fromkeys(job.eval_splits):
        result.metrics[split] = run.evaluate(split)
    if acc.is_main_process:
        _export(model, job, result, run, recipe_name, generation_defaults or {})
        if job.sample is not None:
            result.sample = job.sample(model)
    acc.wait_for_everyone()
    return result


RUN_FILES = ("metrics.jsonl", "eval_results.json", "loss_curve.png", "recipe.yaml")


def _claim_output_dir(output_dir: Path, overwrite: bool) -> None:
    """Refuse (or, with ``overwrite``, clear) a folder that already holds a training run."""
    previous = [p.name for p in (output_dir / "checkpoints", *output_dir.glob("*.safetensors"))]
    previous = [name for name in previous if (output_dir / name).exists()]
    if not previous:
        return
    if not overwrite:
        raise FileExistsError(
            f"output_dir {output_dir} already holds a run ({', '.join(previous)}); continue it "
            "with --resume, replace it with --overwrite, or pick another output_dir "
            "(--set output_dir=runs/NAME)"
        )
    if PartialState().is_main_process:
        shutil.rmtree(output_dir / "checkpoints", ignore_errors=True)
        for path in [*output_dir.glob("*.safetensors"), *(output_dir / n for n in RUN_FILES)]:
            path.unlink(missing_ok=True)
    PartialState().wait_for_everyone()


def _export(
    model, job: TrainingJob, result: TrainResult, run: _Run, recipe_name, generation_defaults
):
    """Final folder: weights + config + generation config + tokenizer + results + curve."""
    for key, value in generation_defaults.items():
        setattr(model.generation_config, key, value)
    model.save_pretrained(result.output_dir)
    job.tokenizer.save_pretrained(result.output_dir)
    p, acc = run.progress, run.accelerator
    meta = job.card_metadata
    atomic_write_json(
        result.output_dir / "eval_results.json",
        {
            "task_type": meta.get("task_type"),
            "task_name": meta.get("task_name"),
            "dataset_name": meta.get("dataset_name"),
            "dataset_type": meta.get("dataset_type"),
            "results": [
                {
                    "split": split,
                    "metric_type": name,
                    "metric_name": meta.get("metric_names", {}).get(name, name),
                    "value": value,
                }  # fmt: skip
                for split, scores in result.metrics.items()
                for name, value in scores.items()
                if name in meta.get("reported_metrics", scores) and isinstance(value, float)
            ],
            "all_metrics": result.metrics,
            "training": {
                "recipe": recipe_name,
                "global_step": p.step,
                "epochs_completed": p.epoch,
                "best_step": p.best_step,
                "train_runtime_s": round(p.elapsed_s, 1),
                "stop_reason": p.stop_reason or "completed",
                "hardware": _hardware(acc),
                "num_processes": acc.num_processes,
                "mixed_precision": acc.mixed_precision,
            },
        },
    )
    plot_loss_curve(run.metrics_path, result.output_dir / "loss_curve.png")


def plot_loss_curve(metrics_path: Path, out_path: Path) -> None:
    """Train and validation loss against the optimizer step, from ``metrics.jsonl``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = (
        [json.loads(line) for line in metrics_path.read_text().splitlines()]
        if metrics_path.exists()
        else []
    )
    fig, ax = plt.subplots(figsize=(7, 4))
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
    ax.legend()
    fig.tight_layout()
    with atomic_path(out_path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)


__all__ = [
    "NonFiniteLossError",
    "Progress",
    "TrainResult",
    "TrainingJob",
    "latest_checkpoint",
    "plot_loss_curve",
    "train",
]
