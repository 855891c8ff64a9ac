"""Several processes train and log as one: two CPU processes train the model one process trains,
the train records' loss is the mean over the processes, hfattn's messages print once, and an
``accelerate launch`` that started one process of several says so."""

import json
import logging
import os
import re
import shlex
import sys
from pathlib import Path

import pytest
import yaml

from hfattn.cli import main
from hfattn.common.launch import ACCELERATE_LAUNCH_OPTIONS, lone_launch_warning, process_rank
from tests.helpers.crash_runs import assert_same_weights
from tests.helpers.recipe_helpers import write_recipe

REBER = yaml.safe_load(
    (Path(__file__).parents[2] / "recipes" / "rnn_classifier_reber.yaml").read_text()
)
SHORT = {"max_steps": 12, "log_every": 4, "eval_every": None, "save_every": None}
"""A short run of the Reber classifier: 3 train records, one validation at the end."""
LAUNCH_WARNING = "accelerate launch was asked for several processes and started one"
ACCELERATE_DEFAULTS_WARNING = "were not passed to `accelerate launch`"
"""The first of the six lines that ``accelerate launch`` prints when it fills in defaults."""
REPO = Path(__file__).resolve().parents[2]


def _run(command, env=None):
    """``command`` run to its exit (it must succeed): its completed process."""
    import subprocess

    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _train_records(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["split"] == "train"]


def _recipe(folder: Path) -> Path:
    return write_recipe(folder, base=REBER, training=SHORT, evaluation={"splits": ["validation"]})


@pytest.mark.slow
def test_two_cpu_processes_match_one_process_and_log_as_one(tmp_path, caplog):
    """``torchrun`` of two CPU processes trains the model that one process trains (stateful
    streams split between them, checkpoints, the final evaluation), logs the same train
    records and prints hfattn's messages once. The one process is this one (``hfattn.cli``'s
    ``main``), its messages read from ``caplog``."""
    # SGD: Adam's first steps are ±lr·sign(g), which turns float-rounding differences of
    # near-zero gradients (another reduction order) into lr-sized ones.
    common = {"training": {"mode": "stateful", "max_steps": 10, "log_every": 5, "eval_every": 5,
                           "save_every": 5, "optimizer": "sgd", "learning_rate": 0.5},
              "evaluation": {"splits": ["test"]}}  # fmt: skip
    one = write_recipe(tmp_path / "one", **common)
    two = write_recipe(tmp_path / "two", **common)
    with caplog.at_level(logging.INFO, logger="hfattn"):
        assert main(["train", str(one)]) == 0
    single_err = caplog.text
    # the command docs/training.md gives for N CPU processes
    env = {**os.environ, "ACCELERATE_USE_CPU": "1", "OMP_NUM_THREADS": "1"}
    torchrun = [str(Path(sys.executable).parent / "torchrun"), "--standalone",
                "--nproc_per_node", "2", "-m", "hfattn", "train", str(two)]  # fmt: skip
    double_err = _run(torchrun, env).stderr
    results = json.loads((tmp_path / "two" / "run" / "eval_results.json").read_text())
    assert results["training"]["num_processes"] == 2
    # each process trained 4 of the 8 streams; averaged gradients give the same model
    assert_same_weights(tmp_path / "one" / "run", tmp_path / "two" / "run", exact=False)

    # Each process's loss is the mean over its 4 streams (as many tokens each), so the mean
    # of the two processes' losses is the mean over the whole batch, what the one process
    # logs (one process's own loss differs from it by far more than the tolerance).
    single, double = (
        _train_records(tmp_path / "one" / "run"),
        _train_records(tmp_path / "two" / "run"),
    )
    assert [r["step"] for r in double] == [r["step"] for r in single] == [5, 10]
    for a, b in zip(single, double, strict=True):
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-5)
        assert b["loss"] == pytest.approx(a["loss"], abs=1e-6)

    # hfattn's messages, once each: from the first process only
    for err in (single_err, double_err):
        assert err.count("char tokenizer: ") == 1, err[-3000:]
        assert err.count("evaluating the test split") == 1, err[-3000:]
    assert LAUNCH_WARNING not in double_err


PRINT_ENVIRONMENT = "import json, os; print(json.dumps(dict(os.environ)))"


@pytest.mark.slow
def test_accelerate_launch_of_two_processes_on_a_cpu_warns_once(tmp_path, monkeypatch, caplog):
    """``accelerate launch --num_processes 2`` on a CPU starts one process (a script that prints
    its environment, so only the launcher runs for real), quietly (its options as the docs give
    them); ``hfattn train`` in that environment warns once, naming the command that starts N
    CPU processes, and trains in one process."""
    script = tmp_path / "environment.py"
    script.write_text(PRINT_ENVIRONMENT)
    accelerate = str(Path(sys.executable).parent / "accelerate")
    command = [accelerate, "launch", "--num_processes", "2", *ACCELERATE_LAUNCH_OPTIONS.split(),
               str(script)]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "MASTER_ADDR")}
    launched = _run(command, env)
    assert ACCELERATE_DEFAULTS_WARNING not in launched.stderr  # the launcher's six lines
    environ = json.loads(launched.stdout.strip().splitlines()[-1])
    assert int(environ.get("WORLD_SIZE", "1")) == 1  # one process, not the two asked for

    recipe = _recipe(tmp_path)
    argv = ["train", str(recipe), "--set", "training.max_steps=4"]
    for name, value in environ.items():
        if name.startswith("ACCELERATE_") or name in ("MASTER_ADDR", "MASTER_PORT"):
            monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", ["hfattn", *argv])
    with caplog.at_level(logging.WARNING, logger="hfattn"):
        assert main(argv) == 0
    warnings = [r for r in caplog.records if LAUNCH_WARNING in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING, caplog.text[-3000:]
    assert (
        "`ACCELERATE_USE_CPU=1 torchrun --standalone --nproc_per_node N -m hfattn train "
        f"{recipe} --set training.max_steps=4`" in warnings[0].getMessage()
    )
    results = json.loads((tmp_path / "run" / "eval_results.json").read_text())
    assert results["training"]["num_processes"] == 1
    assert results["training"]["global_step"] == 4


LAUNCHED = {"ACCELERATE_DYNAMO_BACKEND": "NO", "ACCELERATE_USE_CPU": "False"}
"""What every ``accelerate launch`` sets (its one-process launcher, as run here)."""


@pytest.mark.parametrize(
    ("environ", "warns"),
    [
        ({**LAUNCHED, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}, True),  # asked for 2
        (LAUNCHED, False),  # `accelerate launch` of one process
        (
            {
                **LAUNCHED,
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": "29500",
                "WORLD_SIZE": "2",
                "RANK": "1",
            },
            False,
        ),  # several processes (its torchrun launcher)  # fmt: skip
        ({**LAUNCHED, "MASTER_ADDR": "h", "MASTER_PORT": "1", "PMI_SIZE": "4"}, False),  # MPI
        ({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}, False),  # not accelerate launch
        ({}, False),
    ],
)
def test_a_lone_accelerate_launch_is_told_from_the_environment(environ, warns):
    message = lone_launch_warning(environ, ["hfattn", "train", "r.yaml"])
    assert (message is not None) == warns
    if warns:
        assert message.startswith(LAUNCH_WARNING)
        assert message.endswith("--nproc_per_node N -m hfattn train r.yaml`")


def test_the_process_rank_is_read_as_accelerate_reads_it():
    assert process_rank({}) == 0
    assert process_rank({"RANK": "3", "PMI_RANK": "1"}) == 3
    assert process_rank({"OMPI_COMM_WORLD_RANK": "2"}) == 2
    assert process_rank({"RANK": "", "PMI_RANK": "1"}) == 1


def documented_accelerate_launches(hint: str) -> dict[str, list[str]]:
    """Every ``accelerate launch ... -m hfattn ...`` command of the README and the docs (their
    shell blocks, ``\\``-continued lines joined, and inline code) and of ``hint`` (a message
    of hfattn's), each as the argument list that follows ``accelerate launch`` (``N`` given as
    2, a comment cut off), by where it is."""
    found: dict[str, str] = {}
    pages = {p.relative_to(REPO).as_posix(): p.read_text(encoding="utf-8") for p in
             [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]}  # fmt: skip
    for where, text in {**pages, "hfattn's hint": hint}.items():
        lines = text.replace("\\\n", " ").splitlines()
        spans = re.findall(r"`(accelerate launch [^`]*)`", text)
        for line in [*lines, *spans]:
            command = line.strip().split("  #")[0]
            if command.startswith("accelerate launch ") and "-m hfattn" in command:
                found[f"{where}: {command}"] = command
    return {
        where: shlex.split(command.replace(" N ", " 2 "))[2:] for where, command in found.items()
    }


def test_the_documented_accelerate_launch_commands_leave_it_nothing_to_warn_about(
    tmp_path, monkeypatch, caplog
):
    """Without ``--num_processes``, ``--num_machines``, ``--mixed_precision`` and
    ``--dynamo_backend`` (and without ``accelerate config``) the launcher prints six lines
    of defaults it filled in (\"`--num_processes` was set to a value of `0`\"), in its own
    process, before hfattn starts: the documented commands give them. Each is checked by
    Accelerate's own parser and validation, as ``accelerate launch`` runs them."""
    from accelerate.commands import launch

    from hfattn.training.processes import check_process_group

    monkeypatch.setattr(launch, "default_config_file", str(tmp_path / "none.yaml"))
    monkeypatch.setenv("WORLD_SIZE", "2")  # torchrun without ACCELERATE_USE_CPU: refused
    with pytest.raises(ValueError) as refused:
        check_process_group()
    commands = documented_accelerate_launches(str(refused.value))
    assert len(commands) >= 5 and any(w.startswith("hfattn's hint") for w in commands), commands
    bare = launch.launch_command_parser().parse_args(["-m", "hfattn", "train", "r.yaml"])
    with caplog.at_level(logging.WARNING, logger=launch.logger.name):
        launch._validate_launch_command(bare)
    assert ACCELERATE_DEFAULTS_WARNING in caplog.text  # what the check would see
    noisy = {}
    for where, arguments in commands.items():
        caplog.clear()
        args = launch.launch_command_parser().parse_args(arguments)
        assert args.module and args.training_script == "hfattn", where
        with caplog.at_level(logging.WARNING, logger=launch.logger.name):
            launch._validate_launch_command(args)
        if caplog.records:
            noisy[where] = caplog.text
    assert noisy == {}
