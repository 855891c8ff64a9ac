"""Issue 49: an interrupt (Ctrl-C or SIGTERM) at any phase of a run after its first optimizer
step (a training step, a periodic validation, the final validation, checkpoint averaging, the
final evaluation, the sample, saving the model folder) exits with 130 and says how to continue;
``hfattn train --resume`` then finishes the run with the weights, log and scores of an
uninterrupted run, bit for bit on CPU. The checkpoint of the last step is on disk before
anything that follows training, and a resume of it trains no step again.

Signals are real: the job's own functions send them to this process (``os.kill``), and one
test sends SIGINT from outside to ``hfattn train`` in a child process.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sys
import time
from pathlib import Path

import pytest

import hfattn.training.results as results_module
from hfattn.cli import main
from hfattn.storage.run_folder import latest_checkpoint
from hfattn.tasks import get_task
from hfattn.training import stop_signals
from hfattn.training.checkpoints import Progress, StopRequest
from tests.helpers.crash_runs import assert_same_weights
from tests.helpers.recipe_helpers import corpus_file, write_recipe

LAST_STEP = 10
TRAINING = {
    "max_steps": LAST_STEP,
    "log_every": 2,
    "eval_every": 4,  # validations at 4 and 8 in the loop; the final one (step 10) after it
    "save_every": 4,  # checkpoints 4 and 8 in the loop; step 10's after it
    "keep_checkpoints": 2,
    "average_checkpoints": 2,  # steps 8 and 10, scored after the final validation
    "load_best_at_end": True,
}
EVALUATE_CALLS = {"periodic validation": 1, "final validation": 3, "checkpoint averaging": 4,
                  "final evaluation": 5}  # fmt: skip
"""The ``job.evaluate`` calls of an uninterrupted run: validations at steps 4 and 8, the final
validation of step 10, the averaged checkpoints, then the final scores of test (call 5); those
of validation are the ones already computed for the kept weights, not computed again."""
AFTER_TRAINING = ("final validation", "checkpoint averaging", "final evaluation", "sample",
                  "model folder")  # fmt: skip


def phase_recipe(folder: Path) -> Path:
    """A two-layer char-RNN with dropout (the RNG must come back too) on 6000 characters of
    Macbeth, scored on validation and test."""
    folder.mkdir(parents=True, exist_ok=True)
    corpus_file(folder, chars=6000)
    return write_recipe(
        folder,
        model={"dropout": 0.2, "num_layers": 2},
        training=TRAINING,
        evaluation={"splits": ["validation", "test"]},
    )


def records(run: Path) -> list[dict]:
    """``metrics.jsonl`` of ``run`` without the fields that depend on the clock."""
    clock = ("elapsed_s", "wall_s", "tokens_per_s", "mfu", "data_wait_s", "eval_s")
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in clock} for line in lines]


def summary(run: Path) -> dict:
    """The scores of ``eval_results.json`` and the facts of training that a resume keeps (the
    FLOPs per token too: over all the run's steps, not the last session's)."""
    saved = json.loads((run / "eval_results.json").read_text())
    kept = ("global_step", "best_step", "best_averaged_steps", "stop_reason", "train_tokens",
            "train_flops_per_token")  # fmt: skip
    return {"all_metrics": saved["all_metrics"], **{k: saved["training"][k] for k in kept}}


class Hooks:
    """Wraps the char-RNN job's functions (``compute_loss``, ``evaluate``, ``sample``) as
    ``hfattn train`` builds it, and ``plot_loss_curve`` (drawn while the model folder is
    saved): :meth:`signal_at` sends a signal to this process at a chosen call; every call is
    counted."""

    def __init__(self, monkeypatch):
        self.calls: dict[str, int] = {}
        self.at: tuple[str, int, int] | None = None
        task = get_task("causal-lm")
        build_job = task.build_job

        def hooked_build(recipe):
            job = build_job(recipe)
            for name in ("compute_loss", "evaluate", "sample"):
                setattr(job, name, self._hooked(name, getattr(job, name)))
            return job

        monkeypatch.setattr(task, "build_job", hooked_build)
        monkeypatch.setattr(
            results_module, "plot_loss_curve", self._hooked("plot", results_module.plot_loss_curve)
        )

    def _hooked(self, name, function):
        def hooked(*args, **kwargs):
            self.calls[name] = self.calls.get(name, 0) + 1
            if self.at is not None and self.at[:2] == (name, self.calls[name]):
                os.kill(os.getpid(), self.at[2])
            return function(*args, **kwargs)

        return hooked

    def signal_at(self, name: str, call: int, signum: int = signal.SIGINT) -> None:
        """Send ``signum`` to this process at call ``call`` of ``name``; counts restart."""
        self.at, self.calls = (name, call, signum), {}

    def clear(self) -> None:
        """No more signals; counts restart."""
        self.at, self.calls = None, {}


PHASES = {
    "training step": ("compute_loss", 6, signal.SIGTERM),  # the forward of step 6
    "periodic validation": ("evaluate", EVALUATE_CALLS["periodic validation"], signal.SIGTERM),
    "final validation": ("evaluate", EVALUATE_CALLS["final validation"], signal.SIGINT),
    "checkpoint averaging": ("evaluate", EVALUATE_CALLS["checkpoint averaging"], signal.SIGINT),
    "final evaluation": ("evaluate", EVALUATE_CALLS["final evaluation"], signal.SIGINT),
    "sample": ("sample", 1, signal.SIGINT),
    "model folder": ("plot", 1, signal.SIGINT),  # the weights renamed in, the rest not yet
}
STOPPED_AT = {"training step": 6, "periodic validation": 4}
"""The checkpoint an interrupt during training leaves (the step it came in); after training it
is the last step's."""


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The uninterrupted run (do not modify)."""
    recipe = phase_recipe(tmp_path_factory.mktemp("reference"))
    assert main(["train", str(recipe)]) == 0
    return recipe.parent / "run"


def test_the_reference_run_goes_through_every_phase(reference):
    logged = [(r["split"], r["step"]) for r in records(reference)]
    validations = [step for split, step in logged if split.startswith("validation")]
    assert validations == [4, 8, LAST_STEP, LAST_STEP]  # ..., the final one, the averaged one
    assert ("validation-averaged", LAST_STEP) in logged
    assert sorted(p.name for p in (reference / "checkpoints").iterdir()) == [
        "best", "step-10", "step-8"
    ]  # fmt: skip
    saved = json.loads((reference / "checkpoints/step-10/progress.json").read_text())
    assert saved["training_end"] == "completed" and saved["evaluated_step"] == LAST_STEP
    assert saved["averaged"] is True
    training = json.loads((reference / "eval_results.json").read_text())["training"]
    assert training["train_flops_per_token"] > 0 and training["provenance"]["resume_commands"] == []
    # the checkpoint of the last step records the log up to the averaged score: all of it
    assert saved["metrics_bytes"] == (reference / "metrics.jsonl").stat().st_size


@pytest.mark.parametrize("phase", list(PHASES))
def test_an_interrupt_at_any_phase_then_resume_matches_an_uninterrupted_run(
    reference, tmp_path, monkeypatch, capsys, phase
):
    hooks = Hooks(monkeypatch)
    recipe = phase_recipe(tmp_path)
    run = tmp_path / "run"
    hooks.signal_at(*PHASES[phase])
    monkeypatch.setattr(sys, "argv", ["hfattn", "train", str(recipe)])  # as a shell runs it
    assert main(["train", str(recipe)]) == 130
    err = capsys.readouterr().err
    step = STOPPED_AT.get(phase, LAST_STEP)
    assert latest_checkpoint(run) == run / "checkpoints" / f"step-{step}"
    assert not (run / "eval_results.json").exists()  # not a finished run
    assert f"  hfattn train --resume {run}\n" in err
    assert "Traceback" not in err
    if phase in AFTER_TRAINING:
        assert f"interrupted after training (step {LAST_STEP}); its checkpoint holds" in err
        assert hooks.calls["compute_loss"] == LAST_STEP  # trained to the end
        # the model commands say how to finish it, its model files written or not
        assert (run / "config.json").exists() == (phase == "model folder")
        assert main(["generate", str(run)]) == 2
        assert (
            f"{run} is a training run interrupted after its last step ({LAST_STEP}): its "
            f"checkpoint holds the trained weights, the model folder is not finished yet. "
            f"Finish it with `hfattn train --resume {run}`"
        ) in capsys.readouterr().err
    else:
        assert f"interrupted at step {step}; checkpoint saved. Continue with:" in err
    if phase == "periodic validation":  # stopped after its first batch: logged on resume
        assert ("validation", step) not in [(r["split"], r["step"]) for r in records(run)]

    hooks.clear()
    monkeypatch.setattr(sys, "argv", ["hfattn", "train", str(recipe), "--resume"])
    assert main(["train", str(recipe), "--resume"]) == 0
    # after training, the resume trains no step again
    assert hooks.calls.get("compute_loss", 0) == (0 if phase in AFTER_TRAINING else 10 - step)
    assert_same_weights(reference, run)  # bit for bit: the same best-model choice too
    assert records(run) == records(reference)  # every record once, values included
    assert summary(run) == summary(reference)
    provenance = json.loads((run / "eval_results.json").read_text())["training"]["provenance"]
    assert provenance["command"] == f"hfattn train {recipe}"  # the command that started it
    assert provenance["resume_commands"] == [f"hfattn train {recipe} --resume"]
    assert (run / "samples.md").read_text() == (reference / "samples.md").read_text()
    assert (run / "loss_curve.png").is_file()
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == sorted(
        p.name for p in (reference / "checkpoints").iterdir()
    )


def test_a_run_ended_by_its_time_budget_stays_ended_on_resume(tmp_path, monkeypatch, capsys):
    """Interrupted in its final evaluation, a run that its clock stopped resumes to the final
    phases: no step more, and it still says it stopped for its time budget."""
    hooks = Hooks(monkeypatch)
    recipe = phase_recipe(tmp_path)
    overrides = ["--set", "training.max_steps=100000", "--set", "training.epochs=1000",
                 "--set", "training.max_minutes=0.01", "--set", "training.average_checkpoints=null",
                 "--set", "training.eval_every=null"]  # fmt: skip
    hooks.signal_at("evaluate", 2)  # the final scores of test
    assert main(["train", str(recipe), *overrides]) == 130
    assert "interrupted after training" in capsys.readouterr().err
    trained = hooks.calls["compute_loss"]
    assert 0 < trained < 100000
    checkpoint = latest_checkpoint(tmp_path / "run")
    saved = json.loads((checkpoint / "progress.json").read_text())
    assert (saved["step"], saved["training_end"]) == (trained, "time budget")

    hooks.clear()
    assert main(["train", str(recipe), *overrides, "--resume"]) == 0
    assert hooks.calls.get("compute_loss", 0) == 0
    training = json.loads((tmp_path / "run" / "eval_results.json").read_text())["training"]
    assert (training["global_step"], training["stop_reason"]) == (trained, "time budget")


def test_an_ended_run_is_finished_with_a_smaller_evaluation_on_resume(
    tmp_path, monkeypatch, capsys
):
    """Interrupted in its final evaluation (whole splits), a run is finished by ``hfattn train
    --resume RUN --set evaluation.final_max_examples=2``: no training step, each split scored
    on its first 2 windows of 64 tokens, the model folder and ``eval_results.json`` written,
    the stored recipe updated."""
    hooks = Hooks(monkeypatch)
    recipe = phase_recipe(tmp_path)
    run = tmp_path / "run"
    quick = ["--set", "training.average_checkpoints=null", "--set", "training.eval_every=null",
             "--set", "training.max_steps=2"]  # fmt: skip
    hooks.signal_at("evaluate", 2)  # the final scores of test, after validation's
    assert main(["train", str(recipe), *quick]) == 130
    assert "interrupted after training" in capsys.readouterr().err
    hooks.clear()
    bound = ["--set", "evaluation.final_max_examples=2"]
    assert main(["train", "--resume", str(run), *bound]) == 0
    assert "--resume: evaluation.final_max_examples: null vs 2" in capsys.readouterr().err
    assert hooks.calls.get("compute_loss", 0) == 0
    saved = json.loads((run / "eval_results.json").read_text())
    for split in ("validation", "test"):
        scores = saved["all_metrics"][split]
        assert (scores["num_examples"], scores["num_tokens"]) == (2, 2 * 64)
    assert saved["training"]["global_step"] == 2
    assert (run / "model.safetensors").is_file()
    assert "final_max_examples: 2" in (run / "recipe.yaml").read_text()


def test_a_larger_budget_reopens_training_after_an_interrupt_at_the_end(
    reference, tmp_path, monkeypatch, capsys
):
    hooks = Hooks(monkeypatch)
    recipe = phase_recipe(tmp_path)
    hooks.signal_at("evaluate", EVALUATE_CALLS["final evaluation"])
    assert main(["train", str(recipe)]) == 130
    hooks.clear()
    assert main(["train", str(recipe), "--resume", "--set", "training.max_steps=12"]) == 0
    assert hooks.calls["compute_loss"] == 2  # steps 11 and 12
    saved = json.loads((tmp_path / "run" / "eval_results.json").read_text())["training"]
    assert saved["global_step"] == 12 and saved["stop_reason"] == "completed"
    logged = [(r["split"], r["step"]) for r in records(tmp_path / "run")]
    assert logged.count(("validation-averaged", 12)) == 1 and ("validation", 12) in logged


# ---- the signal guards themselves ----------------------------------------------------------


def _signal_self(signum=signal.SIGINT) -> None:
    os.kill(os.getpid(), signum)


def test_during_training_a_first_signal_asks_to_stop_a_second_aborts():
    progress = Progress()
    with stop_signals.stop_on_signals(progress):
        _signal_self(signal.SIGTERM)
        assert progress.stop.requested and progress.stop.interrupted
        assert progress.stop.reason == "interrupted"
        with pytest.raises(KeyboardInterrupt):
            _signal_self()


def test_a_signal_keeps_the_reason_a_run_is_already_stopping_for():
    progress = Progress(stop=StopRequest(requested=True, reason="time budget"))
    with stop_signals.stop_on_signals(progress):
        _signal_self()
    assert progress.stop.interrupted and progress.stop.reason == "time budget"


def test_after_the_last_checkpoint_a_first_signal_stops_at_once():
    """The handlers in place before are put back, whatever they were (Python's default, or
    ``SIG_IGN`` where the suite started with SIGINT ignored, as ``nohup`` or ``&`` start it)."""
    before = {s: signal.getsignal(s) for s in stop_signals.SIGNALS}
    reached = []
    with pytest.raises(stop_signals.Interrupted), stop_signals.stop_at_once(step=10):
        _signal_self(signal.SIGTERM)
        reached.append("after")
    assert reached == []
    assert {s: signal.getsignal(s) for s in stop_signals.SIGNALS} == before


def test_held_writes_finish_before_the_signal_stops_them():
    done = []
    with pytest.raises(stop_signals.Interrupted), stop_signals.stop_at_once(step=10):
        with stop_signals.signals_held():
            _signal_self()
            done.append("record")
            done.append("best weights")
        done.append("never")
    assert done == ["record", "best weights"]
    with pytest.raises(KeyboardInterrupt) as second, stop_signals.signals_held():
        _signal_self()
        _signal_self()  # a second Ctrl-C aborts at once
        done.append("never")
    assert second.type is KeyboardInterrupt and "never" not in done


# ---- a SIGINT from outside, to `hfattn train` in a child process -----------------------------

_SERVER = multiprocessing.get_context("forkserver")


def _train_waiting_in_final_evaluation(recipe: str, marker: str, log: str) -> None:
    """Body of the child: ``hfattn train recipe`` whose final evaluation of test touches
    ``marker`` and waits there (for the parent's SIGINT), touching ``marker.waited`` if the
    wait ends; stderr goes to ``log``."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 2)
    task = get_task("causal-lm")
    build_job = task.build_job

    def hooked_build(recipe):
        job = build_job(recipe)
        evaluate, calls = job.evaluate, [0]

        def waiting(model, split):
            calls[0] += 1
            if calls[0] == EVALUATE_CALLS["final evaluation"]:
                Path(marker).touch()
                time.sleep(120)
                Path(marker).with_suffix(".waited").touch()
            return evaluate(model, split)

        job.evaluate = waiting
        return job

    task.build_job = hooked_build
    sys.exit(main(["train", recipe]))


@pytest.mark.slow
def test_a_sigint_from_outside_in_the_final_evaluation_then_resume(reference, tmp_path):
    recipe = phase_recipe(tmp_path)
    marker, log = tmp_path / "evaluating", tmp_path / "stderr.txt"
    child = _SERVER.Process(
        target=_train_waiting_in_final_evaluation, args=(str(recipe), str(marker), str(log))
    )
    child.start()
    deadline = time.monotonic() + 300
    while not marker.exists() and child.is_alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists(), log.read_text()[-2000:]
    os.kill(child.pid, signal.SIGINT)
    child.join(timeout=300)  # a busy machine may be slow to stop it; the marker tells "at once"
    if child.is_alive():  # not stopped: do not leave it waiting
        child.kill()
        child.join()
    assert child.exitcode == 130, log.read_text()[-2000:]
    assert not marker.with_suffix(".waited").exists()  # at once, not after the 120 s wait
    err = log.read_text()
    assert f"hfattn train --resume {tmp_path / 'run'}" in err and "Traceback" not in err
    assert latest_checkpoint(tmp_path / "run").name == f"step-{LAST_STEP}"

    assert main(["train", str(recipe), "--resume"]) == 0
    assert_same_weights(reference, tmp_path / "run")
    assert records(tmp_path / "run") == records(reference)
    assert summary(tmp_path / "run") == summary(reference)
