"""The end of a run: the checkpoint of the last step, then the final validation, checkpoint
averaging, final evaluation and model folder.

The checkpoint of the last step comes first (:func:`save_last_step`) and says whether training
is over; each part after it is recorded in that checkpoint once done (its log record, best
weights and progress land together, :func:`~hfattn.training.stop_signals.signals_held`), so that
``resume=True`` goes on after the last part done; the model folder's ``eval_results.json`` is
written last (:func:`evaluate_and_save`).
"""

from __future__ import annotations

import logging

from ..storage.run_folder import checkpoint_step, complete_checkpoints
from .checkpoints import average_checkpoint_weights, load_best_weights, load_saved_weights
from .processes import any_process
from .results import eval_results, save_run_results, training_summary
from .session import TrainingSession
from .stop_signals import signals_held
from .training_job import TrainResult

logger = logging.getLogger(__name__)


def announce_evaluation(run: TrainingSession, split: str, weights: str) -> None:
    """Say, in one line on the main process, that ``split`` is being scored with ``weights``:
    once the progress bar is closed, an evaluation (seconds to minutes) shows nothing else."""
    if run.accelerator.is_main_process:
        logger.info("evaluating the %s split with %s...", split, weights)


def announce_reuse(run: TrainingSession, split: str) -> None:
    """Say, in one line on the main process, that the final scores of ``split`` are those
    already computed with the same weights and the same scoring (not computed again)."""
    if run.accelerator.is_main_process:
        kind, what = run.weights_key()
        weights = f"step {what}" if kind == "step" else f"the mean of steps {list(what)}"
        logger.info("the %s split with the final weights: the scores of %s, already computed "
                    "the same way", split, weights)  # fmt: skip


def save_last_step(run: TrainingSession, last_saved: int) -> bool:
    """Close the loop of ``run``: set ``progress.training_end`` when training is over (the stop
    reason, or ``completed``) and make the last state resumable: a checkpoint of the current
    step unless ``last_saved`` is it (then the end is recorded in it). Returns whether any
    process was interrupted."""
    p = run.progress
    interrupted = any_process(run.accelerator, p.stop.interrupted or p.stop.reason == "interrupted")
    reason = None if p.stop.reason == "interrupted" else p.stop.reason
    if reason is not None or not run.steps_left(p):
        p.training_end = reason or "completed"
    # written before the final validation, averaging, evaluation and model folder
    if p.step != last_saved or p.step == 0:
        run.save_checkpoint()
    elif p.training_end is not None:
        run.record_in_checkpoint()
    return interrupted


def finish_training(run: TrainingSession) -> None:
    """What follows the checkpoint of the last step before the final evaluation, each part
    recorded in that checkpoint once done, so that a resume goes on after the last part done:
    the validation of the last steps (best-model tracking sees them; with
    ``training.average_checkpoints`` also when ``eval_every`` is null) and, with
    ``training.average_checkpoints``, the score of the averaged checkpoints."""
    cfg, p = run.cfg, run.progress
    validated = cfg.eval_every or cfg.average_checkpoints  # the average competes with the last
    if validated and (p.evaluated_step or 0) != p.step:
        announce_evaluation(run, "validation", f"the weights of step {p.step}")
        scores, seconds = run.validate()
        with signals_held():
            run.keep_validation(scores, seconds)
            run.record_in_checkpoint()
    if cfg.average_checkpoints and not p.averaged:
        score_checkpoint_average(run)


def score_checkpoint_average(run: TrainingSession) -> None:
    """``training.average_checkpoints: N``: load the mean weights of the newest N
    checkpoints (:func:`~hfattn.training.checkpoints.average_checkpoint_weights`), score
    them on the validation split (logged as split ``validation-averaged``, with the
    checkpoint steps) and keep them as the best model when they beat it; the model's own
    weights are restored afterwards (an interrupt too). The record, the best weights and
    ``progress.averaged`` land together in the checkpoint of the current step
    (:func:`~hfattn.training.stop_signals.signals_held`)."""
    p = run.progress
    folders = complete_checkpoints(run.output_dir)[-run.cfg.average_checkpoints :]
    if len(folders) < 2:
        logger.info("training.average_checkpoints: only %d checkpoint, nothing to average",
                    len(folders))  # fmt: skip
        p.averaged = True
        run.record_in_checkpoint()
        return
    model = run.accelerator.unwrap_model(run.model)
    own = {k: v.detach().clone() for k, v in model.state_dict().items()}
    load_saved_weights(model, average_checkpoint_weights(folders))
    steps = [checkpoint_step(folder) for folder in folders]
    run.loaded_weights = ("averaged", tuple(steps))
    try:
        announce_evaluation(run, "validation", f"the mean weights of {len(folders)} checkpoints")
        scores, seconds = run.validate()
        with signals_held():
            run.log({"step": p.step, "epoch": p.epoch, "split": "validation-averaged",
                     "averaged_steps": steps, **scores,
                     "eval_s": round(seconds, 3)})  # fmt: skip
            if run.keep_if_best(scores):
                p.best_averaged_steps = steps
            p.averaged = True
            run.record_in_checkpoint()
    finally:
        model.load_state_dict(own)
        run.loaded_weights = None


def evaluate_and_save(
    run: TrainingSession,
    result: TrainResult,
    recipe_name: str | None,
    generation_defaults: dict | None,
) -> None:
    """The end of a run whose training is over: the best weights loaded (with
    ``training.load_best_at_end``), every split of ``job.eval_splits`` scored into
    ``result.metrics``, the sample drawn, and the model folder saved with
    ``eval_results.json`` written last (:func:`~hfattn.training.results.save_run_results`):
    a folder without it is not finished, and ``--resume`` does all of this again."""
    job, cfg, acc, p, output_dir = run.job, run.cfg, run.accelerator, run.progress, run.output_dir
    model = acc.unwrap_model(run.model)
    if cfg.load_best_at_end and p.best_step is not None:
        load_best_weights(model, output_dir)
        run.loaded_weights = run.best_weights_key()
    final_eval_s = 0.0
    for split in dict.fromkeys(job.eval_splits):
        earlier = run.scores_of(split, final=True)
        if earlier is not None:  # these weights, scored the same way: not decoded again
            announce_reuse(run, split)
            result.metrics[split] = earlier
            continue
        announce_evaluation(run, split, "the final weights")
        result.metrics[split], seconds = run.evaluate(split, final=True)
        final_eval_s += seconds
    if acc.is_main_process:
        for key, value in (generation_defaults or {}).items():
            setattr(model.generation_config, key, value)
        training = training_summary(
            p,
            run.total_steps,
            acc,
            recipe_name,
            cfg.max_minutes,
            flops_per_token=p.flops_per_token,
            peak_flops=(run.flops.peak_flops, run.flops.peak_source),
            final_eval_s=final_eval_s,
            wall_s=run.wall_seconds(),
        )
        results = eval_results(result.metrics, job.card_metadata, training, job.data_preparation)
        if job.sample is not None:
            result.sample = job.sample(model)
        save_run_results(output_dir, model, job.tokenizer, results, run.metrics_path)
    acc.wait_for_everyone()


__all__ = [
    "announce_evaluation",
    "announce_reuse",
    "evaluate_and_save",
    "finish_training",
    "save_last_step",
    "score_checkpoint_average",
]
