"""``hfattn sweep`` (issue 73): a bad search space is refused in one line before anything is
loaded; trials are ordinary run folders, losing trials are pruned and stop as a run stopped by
its clock; the outputs hold the numbers of the runs; two processes share one study; a killed
sweep continues, its cut trial resumed from its folder and counted once."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from hfattn.cli import main
from hfattn.training.training_job import TrainingCallback
from tests.helpers.crash_runs import seq2seq_recipe, start_cli_child
from tests.helpers.fault_injection import with_callbacks
from tests.helpers.recipe_helpers import write_recipe

ROOT = Path(__file__).resolve().parents[2]
SPACE = {
    "training.learning_rate": {"log_uniform": [1.0e-3, 1.0e-2]},
    "model.decoder_hidden_size": {"choice": [32, 64]},
}


def tiny_recipe(folder: Path) -> Path:
    """The tiny Bahdanau model of the crash tests on 400 date pairs, for 10 steps with a
    validation every 5 (40 pairs), scored on validation and test."""
    base = yaml.safe_load(seq2seq_recipe(folder).read_text())
    return write_recipe(
        folder,
        base=base,
        name="sweep_tiny",
        model={"bridge": "projection"},  # any decoder size
        training={"max_steps": 10, "epochs": 5, "log_every": 5, "eval_every": 5, "save_every": 5},
        evaluation={"splits": ["validation", "test"], "max_examples": 40, "final_max_examples": 40},
        hub={"push_to_hub": True, "repo_id": "me/sweep-tiny", "license": "mit"},  # not the trials
    )


def write_space(folder: Path, space: dict | str = SPACE) -> Path:
    path = Path(folder) / "space.yaml"
    path.write_text(space if isinstance(space, str) else yaml.safe_dump(space, sort_keys=False))
    return path


def sweep_args(recipe: Path, space: Path, out: Path, trials: int) -> list[str]:
    return [
        "sweep",
        str(recipe),
        "--space",
        str(space),
        "--trials",
        str(trials),
        "--output-dir",
        str(out),
    ]


def rows(out: Path) -> list[dict]:
    return json.loads((out / "trials.json").read_text())


def results(run: Path) -> dict:
    return json.loads((run / "eval_results.json").read_text())


def validation_records(run: Path) -> list[dict]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["split"] == "validation"]


# Each bad space in one fresh interpreter: its exit status, its stderr, and at the end whether
# torch was imported, whether a sweep folder or any prepared data appeared.
BAD_SPACES_CODE = """
import contextlib, io, json, os, sys
from pathlib import Path
from hfattn.cli import main
recipe, folder, cases = sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])
report = []
for index, space in enumerate(cases):
    path = folder / f"space{index}.yaml"
    path.write_text(space)
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["sweep", recipe, "--space", str(path), "--trials", "2",
                     "--output-dir", str(folder / "sweep")])
    report.append([code, err.getvalue()])
print(json.dumps({"report": report, "torch": "torch" in sys.modules,
                  "sweep": (folder / "sweep").exists(),
                  "prepared": Path(os.environ["HFATTN_PREPARED_DIR"]).exists()}))
"""

BAD_SPACES = {
    "training.lerning_rate: {log_uniform: [1.0e-4, 1.0e-2]}": "error: training.lerning_rate: not a field of training (",
    "model.dropout: {normal: [0.0, 0.1]}": "error: model.dropout: unknown distribution 'normal'; one of {uniform: [...]}, {log_uniform: [...]}, {int_uniform: [...]}, {choice: [...]}",
    "model.dropout: {uniform: [0.0, 1.5]}": "error: model.dropout: must be in [0, 1), got 1.5 (the high end of uniform [0.0, 1.5] in the search space)",
    "training.learning_rate: {log_uniform: [1.0e-4, 1.0e-2]}\ntraining.weight_decay: {uniform: [-0.1, 0.1]}": "error: training.weight_decay: must be >= 0 (the low end of uniform [-0.1, 0.1] in the search space)",
    "training.learning_rate: {uniform: [-0.1, 0.01]}": "error: training.learning_rate: must be > 0, got -0.1 (the low end of uniform [-0.1, 0.01] in the search space)",
    "model.decoder_hidden_size: {uniform: [16, 64]}": "error: model.decoder_hidden_size: 16.0 is not an integer or null; an integer field takes int_uniform or choice",
    "model.cell: {choice: [gru, rnn2]}": "error: model.cell: must be one of gru, lstm; got 'rnn2' (the choice 'rnn2' of choice ['gru', 'rnn2'] in the search space)",
    "training.warmup_steps: {int_uniform: [8, 4]}": "error: training.warmup_steps: int_uniform [low, high] needs low < high, got [8, 4]",
    "training.warmup_steps: {int_uniform: [0, 50]}": "error: training.warmup_steps: training.max_steps: 10 steps end the run within its 50 warmup steps",
    "output_dir: {choice: [a, b]}": "error: output_dir: not a field a sweep searches",
}


def test_bad_spaces_get_one_line_before_anything_loads(tmp_path):
    recipe = tiny_recipe(tmp_path)
    env = {**__import__("os").environ, "HFATTN_PREPARED_DIR": str(tmp_path / "prepared")}
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(BAD_SPACES_CODE),
            str(recipe),
            str(tmp_path),
            json.dumps(list(BAD_SPACES)),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    for (code, err), expected in zip(out["report"], BAD_SPACES.values(), strict=True):
        assert code == 2, err
        assert err.count("\n") == 1 and err.startswith(expected), err
    assert out == {**out, "torch": False, "sweep": False, "prepared": False}


def test_without_optuna_one_line_says_what_to_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "optuna", None)  # import optuna fails, as uninstalled
    recipe = tiny_recipe(tmp_path)
    assert main(sweep_args(recipe, write_space(tmp_path), tmp_path / "sweep", 2)) == 2
    err = capsys.readouterr().err
    assert err == "error: hfattn sweep needs Optuna: pip install 'hfattn[sweep]'\n"
    assert not (tmp_path / "sweep").exists()


def seed_study(out: Path, study: str, n: int, value: float) -> None:
    """``n`` finished trials of ``value`` at every validation step, as earlier trials left them."""
    import optuna
    from optuna.distributions import CategoricalDistribution, FloatDistribution

    out.mkdir(parents=True)
    seeded = optuna.create_study(
        storage=f"sqlite:///{out / 'study.db'}", study_name=study, direction="minimize"
    )
    distributions = {
        "training.learning_rate": FloatDistribution(1.0e-3, 1.0e-2, log=True),
        "model.decoder_hidden_size": CategoricalDistribution([32, 64]),
    }
    for _ in range(n):
        seeded.add_trial(optuna.trial.create_trial(
            params={"training.learning_rate": 0.005, "model.decoder_hidden_size": 64},
            distributions=distributions, value=value, intermediate_values={5: value, 10: value},
        ))  # fmt: skip


@pytest.mark.slow
def test_trials_are_runs_pruned_at_a_validation_and_tabled(tmp_path, capsys):
    """Two finished trials of loss 0.001 are in the study: the first real trial completes (the
    median rule waits for 3 finished trials), the second loses to the median at its first
    validation and stops there as its clock would stop it, a complete run folder."""
    recipe, space, out = tiny_recipe(tmp_path), write_space(tmp_path), tmp_path / "sweep"
    seed_study(out, "sweep_tiny", 2, 0.001)

    assert main(sweep_args(recipe, space, out, 4)) == 0
    table = capsys.readouterr().out
    assert "COMPLETE" in table and "PRUNED" in table and "best: trial 0" in table

    trials = rows(out)
    assert [(r["number"], r["state"], r["run_folder"]) for r in trials[2:]] == [
        (2, "COMPLETE", "trial-0002"),
        (3, "PRUNED", "trial-0003"),
    ]
    done, pruned = out / "trial-0002", out / "trial-0003"
    # a completed trial's value is its saved model's validation score, after all its steps
    assert trials[2]["loss"] == results(done)["all_metrics"]["validation"]["loss"]
    assert trials[2]["steps"] == results(done)["training"]["global_step"] == 10
    # the pruned trial stopped after its first validation, its value the one it reported
    assert trials[3]["steps"] == 5
    assert trials[3]["loss"] == validation_records(pruned)[0]["loss"] > 0.001
    assert [r["step"] for r in validation_records(pruned)] == [5]
    assert results(pruned)["training"]["stop_reason"] == "pruned"
    assert (pruned / "model.safetensors").is_file() and (pruned / "checkpoints" / "step-5").is_dir()
    # each trial is the recipe with its parameters, scored on validation only, never pushed
    stored = yaml.safe_load((pruned / "recipe.yaml").read_text())
    assert stored["training"]["learning_rate"] == trials[3]["training.learning_rate"]
    assert stored["model"]["decoder_hidden_size"] == trials[3]["model.decoder_hidden_size"]
    assert stored["evaluation"]["splits"] == ["validation"]
    assert (stored["hub"]["push_to_hub"], stored["hub"]["repo_id"]) == (False, None)
    assert list(results(pruned)["all_metrics"]) == ["validation"]
    # both trials mapped one prepared-data folder
    first, second = results(done)["data_preparation"], results(pruned)["data_preparation"]
    assert first["folder"] == second["folder"] and second["reused"] is True

    csv_lines = (out / "trials.csv").read_text().splitlines()
    assert (
        csv_lines[0]
        == "number,state,loss,steps,run_folder,retry_of,training.learning_rate,model.decoder_hidden_size,error"
    )
    assert len(csv_lines) == 5 and csv_lines[4].startswith("3,PRUNED,")
    # the best trial (a seeded one, loss 0.001) as a recipe for hfattn train
    from hfattn.recipes import check_recipe_values

    best = check_recipe_values(out / "best_recipe.yaml")
    assert (best.training.learning_rate, best.model["decoder_hidden_size"]) == (0.005, 64)
    assert best.evaluation.splits == ["validation", "test"]  # the recipe's, not a trial's
    assert (best.hub.push_to_hub, best.hub.repo_id) == (True, "me/sweep-tiny")
    assert best.output_dir == str(tmp_path / "run")
    for png in ("optimization_history.png", "param_importances.png", "parallel_coordinates.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"

    # the same command again: the study has its 4 results, nothing is trained or rewritten
    before = (pruned / "eval_results.json").stat().st_mtime_ns
    assert main(sweep_args(recipe, space, out, 4)) == 0
    assert len(rows(out)) == 4 and (pruned / "eval_results.json").stat().st_mtime_ns == before


def test_a_study_of_another_space_is_not_continued(tmp_path, capsys):
    recipe, out = tiny_recipe(tmp_path), tmp_path / "sweep"
    seed_study(out, "sweep_tiny", 1, 0.5)
    assert main(sweep_args(recipe, write_space(tmp_path), out, 1)) == 0  # seeded: done
    capsys.readouterr()
    other = write_space(tmp_path, {"training.learning_rate": {"log_uniform": [1.0e-4, 1.0e-2]}})
    assert main(sweep_args(recipe, other, out, 2)) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --study sweep_tiny: the study searches another space (")
    assert len(rows(out)) == 1
    # a new study in a folder that holds trial folders: they are not another study's to take
    (out / "trial-0000").mkdir()
    assert main([*sweep_args(recipe, other, out, 1), "--study", "another"]) == 2
    assert capsys.readouterr().err == (
        f"error: --output-dir {out} holds trial folders (trial-0000) of another study than "
        "another; they are left as they are: give the sweep another --output-dir (or the "
        "--study and --storage of those trials)\n"
    )


@pytest.mark.slow
def test_two_processes_run_disjoint_trials_of_one_study(tmp_path):
    recipe, space, out = tiny_recipe(tmp_path), write_space(tmp_path), tmp_path / "sweep"
    argv = sweep_args(recipe, space, out, 2)
    children = [start_cli_child(argv), start_cli_child(argv)]
    for child in children:
        child.join(timeout=600)
    assert [c.exitcode for c in children] == [0, 0]

    import optuna

    study = optuna.load_study(study_name="sweep_tiny", storage=f"sqlite:///{out / 'study.db'}")
    trials = study.get_trials()
    assert {t.state.name for t in trials} == {"COMPLETE"} and 2 <= len(trials) <= 3
    folders = [t.user_attrs["run_folder"] for t in trials]
    assert len(set(folders)) == len(trials)
    assert {t.user_attrs["owner"]["pid"] for t in trials} == {c.pid for c in children}
    for trial in trials:  # each trained once, from its first step to its last
        done = results(out / trial.user_attrs["run_folder"])
        assert done["training"]["provenance"]["resume_commands"] == []
        assert trial.value == done["all_metrics"]["validation"]["loss"]


@pytest.mark.slow
def test_a_killed_sweep_continues_and_resumes_its_trial(tmp_path):
    """SIGKILL in the middle of the only trial (step 7, after the checkpoint of step 5); the
    same command then fails that trial (never a result) and trains its retry from the
    checkpoint in the same folder to the end."""
    recipe, space, out = tiny_recipe(tmp_path), write_space(tmp_path), tmp_path / "sweep"
    argv = sweep_args(recipe, space, out, 1)
    child = start_cli_child(argv, fault="step:7")
    child.join(timeout=600)
    assert child.exitcode == -9
    assert [r["state"] for r in rows(out)] == ["RUNNING"]  # written when the trial started

    assert main(argv) == 0
    cut, retry = rows(out)
    assert (cut["state"], retry["state"]) == ("FAIL", "COMPLETE")
    assert retry["retry_of"] == 0 and retry["run_folder"] == cut["run_folder"] == "trial-0000"
    assert [retry[p] for p in SPACE] == [cut[p] for p in SPACE]
    assert not (out / "trial-0001").exists()
    run = out / "trial-0000"
    assert len(results(run)["training"]["provenance"]["resume_commands"]) == 1
    assert [r["step"] for r in validation_records(run)] == [5, 10]  # step 5 not validated twice
    assert (
        retry["steps"] == 10 and retry["loss"] == results(run)["all_metrics"]["validation"]["loss"]
    )


class StopAsSigtermAt(TrainingCallback):
    """Ask the run to stop after ``step`` as a first Ctrl-C or SIGTERM does."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, progress) -> None:
        if progress.step == self.step:
            progress.stop.request("interrupted")
            progress.stop.interrupted = True


def test_an_interrupted_trial_is_queued_again_and_resumed(tmp_path, monkeypatch, capsys):
    recipe, space, out = tiny_recipe(tmp_path), write_space(tmp_path), tmp_path / "sweep"
    argv = sweep_args(recipe, space, out, 1)
    with_callbacks(monkeypatch, StopAsSigtermAt(7))
    assert main(argv) == 130
    assert "Continue the sweep with the same command" in capsys.readouterr().err
    cut, queued = rows(out)
    assert (cut["state"], queued["state"], queued["retry_of"]) == ("FAIL", "WAITING", 0)
    assert [queued[p] for p in SPACE] == [cut[p] for p in SPACE]

    monkeypatch.undo()
    assert main(argv) == 0
    assert [(r["number"], r["state"], r["run_folder"]) for r in rows(out)] == [
        (0, "FAIL", "trial-0000"),
        (1, "COMPLETE", "trial-0000"),
    ]
    run = out / "trial-0000"
    assert len(results(run)["training"]["provenance"]["resume_commands"]) == 1
    assert rows(out)[1]["loss"] == results(run)["all_metrics"]["validation"]["loss"]


def test_a_study_database_that_cannot_be_opened_is_one_line(tmp_path, capsys):
    recipe, space, out = tiny_recipe(tmp_path), write_space(tmp_path), tmp_path / "sweep"
    url = f"sqlite:///{tmp_path / 'no-such-folder' / 'study.db'}"
    assert main([*sweep_args(recipe, space, out, 1), "--storage", url]) == 2
    assert capsys.readouterr().err == (
        f"error: --storage {url}: cannot open the study's database (unable to open database file)\n"
    )
    assert not out.exists()


def test_a_lost_machines_trial_is_failed_and_queued_once_its_heartbeat_is_stale(tmp_path):
    """A RUNNING trial of another host is left alone while it beats, and failed (never a
    result) with its retry queued once its last beat is older than the grace period."""
    import sqlite3

    from hfattn.orchestration import sweep_study

    storage = sweep_study.open_storage(f"sqlite:///{tmp_path / 'study.db'}")
    study = sweep_study.open_study(storage, "lost", "minimize")
    trial = study.ask()
    x = trial.suggest_float("x", 0.0, 1.0)
    trial.set_user_attr("owner", {"host": "another-machine", "pid": 1, "started": 0.0})
    trial.set_user_attr("run_folder", "trial-0000")
    storage.record_heartbeat(trial._trial_id)
    sweep_study.fail_dead_trials(study, storage)
    assert [t.state.name for t in study.trials] == ["RUNNING"]

    stale = f"-{sweep_study.GRACE_PERIOD_S + 1} seconds"  # its machine went silent then
    with sqlite3.connect(tmp_path / "study.db") as db:
        db.execute("UPDATE trial_heartbeats SET heartbeat = datetime('now', ?)", (stale,))
    sweep_study.fail_dead_trials(study, storage)
    lost, retry = study.trials
    assert (lost.state.name, retry.state.name) == ("FAIL", "WAITING")
    assert retry.user_attrs == {"run_folder": "trial-0000", "retry_of": 0}
    assert retry.system_attrs["fixed_params"] == {"x": x}
    assert sweep_study.counted(study) == 0  # neither is a result nor running


def test_a_seeded_sampler_draws_the_same_values_again(tmp_path):
    """``--seed``: two studies of the same space whose samplers have the same seed draw the same
    values trial after trial, past TPE's random start-up trials; another seed draws others."""
    from hfattn.orchestration import sweep_study
    from hfattn.recipes.search_space import SearchParam

    params = (SearchParam("training.learning_rate", "log_uniform", 1e-3, 1e-2),
              SearchParam("training.warmup_steps", "int_uniform", 0, 100),
              SearchParam("model.decoder_hidden_size", "choice", choices=(32, 64)))  # fmt: skip

    def draws(name: str, seed: int) -> list[tuple]:
        storage = sweep_study.open_storage(f"sqlite:///{tmp_path / name}.db")
        study = sweep_study.open_study(storage, name, "minimize", seed)
        values = []
        for number in range(8):  # 5 random start-up trials, then TPE's
            trial = study.ask()
            values.append(tuple(sweep_study.suggest(trial, p) for p in params))
            study.tell(trial, float(number % 3))
        return values

    assert draws("a", seed=7) == draws("b", seed=7)
    assert draws("c", seed=8) != draws("d", seed=7)


def test_the_validation_of_the_last_step_is_reported_and_never_pruned():
    """A losing trial is stopped at a validation before its last step; the validation of its
    last step is its value (pruning it would save no training and lose a result)."""
    from types import SimpleNamespace

    from hfattn.orchestration.sweep_trial import PRUNED, TrialReporter

    class Losing:
        def __init__(self):
            self.reported = []

        def report(self, value, step):
            self.reported.append((step, value))

        def should_prune(self):
            return True

    def progress(step):
        stop = SimpleNamespace(requested=False, reason=None)
        stop.request = lambda reason: (
            setattr(stop, "reason", reason) or setattr(stop, "requested", True)
        )
        return SimpleNamespace(step=step, training_end=None, stop=stop)

    trial = Losing()
    last = progress(600)
    TrialReporter(trial, "loss", last_step=600).on_evaluate(last, {"loss": 0.5})
    assert trial.reported == [] and not last.stop.requested
    earlier = progress(450)
    reporter = TrialReporter(trial, "loss", last_step=600)
    reporter.on_evaluate(earlier, {"loss": 0.7})
    assert trial.reported == [(450, 0.7)] and earlier.stop.reason == PRUNED and reporter.pruned


@pytest.mark.parametrize("space", sorted((ROOT / "recipes" / "sweeps").glob("*.yaml")), ids=str)
def test_each_shipped_space_fits_its_recipe_as_its_header_runs_it(space):
    """The command at the head of a shipped space (its indented ``#   hfattn sweep`` lines:
    the recipe, the ``--set`` items) passes every check a sweep makes before it loads
    anything: every value of every field."""
    from hfattn.recipes.search_space import load_search_space

    lines = space.read_text().splitlines()
    recipe = ROOT / lines[0].split("A search space for ", 1)[1].split()[0]
    command = " ".join(line[1:] for line in lines if line.startswith("#   ")).split()
    assert command[:2] == ["hfattn", "sweep"] and recipe.is_file(), lines[:4]
    sets = [command[i + 1] for i, word in enumerate(command) if word == "--set"]
    assert load_search_space(space, recipe, sets)
