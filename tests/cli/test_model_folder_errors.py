"""The model commands fail fast and say what to do (issue 21).

``hfattn generate``, ``translate`` and ``classify`` take a model folder or a Hub repo id:

- a folder that does not exist is ``model folder not found: runs/nope`` at once, before torch
  is imported (``runs/nope`` is a local path when ``runs/`` is a local folder; any name while
  the Hub is offline and not cached), never a minute of Hub retries;
- an existing folder that holds no model says what it lacks, and an interrupted training run
  its step and how to continue it;
- a model of another task is refused from its ``config.json``, before its weights are read,
  naming the command that runs it.

The models are tiny and untrained (saved with ``save_pretrained``: ``models`` of
``conftest.py``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from hfattn.cli import main
from hfattn.commands.inputs import ModelLoadError, locate_model
from hfattn.storage.run_folder import CHECKPOINT_PREFIX, RECIPE_FILE, checkpoints_dir
from tests.helpers.bad_input import one_error_line
from tests.helpers.network import RECORD_CONNECTIONS

ROOT = Path(__file__).resolve().parents[2]


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def copy_of(folder: Path, tmp_path: Path, *, without: tuple[str, ...] = ()) -> Path:
    """A copy of ``folder`` in ``tmp_path`` less the files named in ``without``."""
    copy = Path(shutil.copytree(folder, tmp_path / folder.name))
    for name in without:
        (copy / name).unlink()
    return copy


# ---- 1. a missing folder: one line, at once ----------------------------------------------------
@pytest.fixture
def workdir(tmp_path, monkeypatch) -> Path:
    """A working directory with a ``runs/`` folder (holding ``char_rnn/``), the Hub online."""
    from huggingface_hub import constants

    (tmp_path / "runs" / "char_rnn").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    return tmp_path


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("runs/nope", "model folder not found: runs/nope"),  # runs/ is here: a path
        ("runs/char_rn", "model folder not found: runs/char_rn; did you mean runs/char_rnn?"),
        ("./nope", "model folder not found: ./nope"),
        ("~/hfattn-no-such-folder", "model folder not found: ~/hfattn-no-such-folder"),
        ("a/b/c", "model folder not found: a/b/c"),
        ("not a repo id!", "model folder not found: not a repo id!"),
        ("", "model folder not found: the name is empty"),
    ],
)
def test_a_name_meant_as_a_folder_that_does_not_exist_is_refused_at_once(workdir, name, message):
    with pytest.raises(ModelLoadError) as err:
        locate_model(name)
    assert str(err.value) == message


def test_owner_name_is_a_hub_id_unless_owner_is_a_local_folder_or_the_hub_is_offline(
    workdir, monkeypatch
):
    from huggingface_hub import constants

    assert locate_model("someone/model") is None  # a Hub id: from_pretrained downloads it
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(workdir / "empty-cache"))
    with pytest.raises(ModelLoadError, match=r"^model folder not found: someone/model \(and th"):
        locate_model("someone/model")


FAST_CLI = (
    RECORD_CONNECTIONS
    + """
import json
from hfattn.cli import main
code = main(sys.argv[1:])
heavy = [m for m in ("torch", "transformers", "hfattn.models") if m in sys.modules]
print(json.dumps({"code": code, "heavy": heavy, "connections": connections}))
"""
)


@pytest.mark.parametrize(
    ("argv", "offline", "message"),
    [
        (["translate", "runs/nope", "hi"], False, "model folder not found: runs/nope"),
        (["generate", "runs/nope"], False, "model folder not found: runs/nope"),
        (["classify", "someone/nope", "hi"], True, "model folder not found: someone/nope (and"),
        (["plot", "attention", "runs/nope", "hi"], False, "model folder not found: runs/nope"),
    ],
)
def test_a_missing_folder_fails_at_once_without_torch(tmp_path, argv, offline, message):
    """Once ``hfattn translate runs/nope hi`` spent ~50 s on Hub retries, then said nothing of
    the folder: now it fails before importing torch or trying the network."""
    (tmp_path / "runs").mkdir()
    env = {"PATH": "", "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1" if offline else "0"}
    result = subprocess.run(
        [sys.executable, "-c", FAST_CLI, *argv],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert (report["code"], report["heavy"], report["connections"]) == (2, [], [])
    assert result.stderr.startswith(f"error: {message}") and result.stderr.count("\n") == 1


@pytest.fixture
def local_hub(hub_server, tmp_path, monkeypatch):
    """:func:`hub_server` for this process too (``huggingface_hub`` read its endpoint and
    cache folder when it was imported), online."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", hub_server.url)
    monkeypatch.setattr(
        constants,
        "HUGGINGFACE_CO_URL_TEMPLATE",
        hub_server.url + "/{repo_id}/resolve/{revision}/{filename}",
    )
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    return hub_server


def test_a_hub_id_that_is_no_hub_model_says_both(local_hub, models, capsys):
    """An ``owner/name`` with no folder ``owner`` here is tried on the Hub; a Hub model runs as
    a local one would."""
    from huggingface_hub import HfApi

    api = HfApi(endpoint=local_hub.url)
    api.create_repo("someone/classifier")
    api.upload_folder(repo_id="someone/classifier", folder_path=str(models["classifier"]))
    assert main(["classify", "someone/nope", "BPBTXSEPE"]) == 2
    assert one_error_line(capsys).startswith(
        "model folder not found: someone/nope, and it cannot be loaded as a Hub model id ("
    )
    assert main(["classify", "someone/classifier", "BPBTXSEPE"]) == 0
    hub = capsys.readouterr().out
    assert main(["classify", str(models["classifier"]), "BPBTXSEPE"]) == 0
    assert capsys.readouterr().out == hub
    assert main(["generate", "someone/classifier"]) == 2
    assert one_error_line(capsys) == (
        "someone/classifier holds a text classifier (RNNForSequenceClassification), not a "
        "text-generation model: use `hfattn classify someone/classifier TEXT...`"
    )


# ---- 2. a folder that holds no model -----------------------------------------------------------
COMMANDS = (["generate"], ["translate", "hi"], ["classify", "hi"])


def refusals(folder: Path, capsys) -> set[str]:
    """The error line of each model command on ``folder`` (each must refuse with status 2)."""
    lines = set()
    for command, *texts in COMMANDS:
        assert main([command, str(folder), *texts]) == 2
        lines.add(one_error_line(capsys))
    return lines


def test_a_folder_without_a_model_says_what_it_lacks(models, tmp_path, capsys):
    """Once: ``Couldn't instantiate the backend tokenizer from one of: ...`` for every case."""
    empty = tmp_path / "empty"
    empty.mkdir()
    assert refusals(empty, capsys) == {f"{empty} holds no model: config.json is missing"}

    no_weights = copy_of(models["classifier"], tmp_path, without=("model.safetensors",))
    assert refusals(no_weights, capsys) == {
        f"{no_weights} holds no model weights: model.safetensors is missing"
    }
    no_tokenizer = copy_of(models["lm"], tmp_path, without=TOKENIZER_FILES)
    assert refusals(no_tokenizer, capsys) == {
        f"{no_tokenizer} holds no tokenizer: tokenizer.json is missing (save the tokenizer next "
        "to the model with tokenizer.save_pretrained)"
    }
    file = tmp_path / "model.safetensors"
    file.write_bytes(b"")
    assert refusals(file, capsys) == {f"{file} is a file, not a model folder"}


def test_a_ctranslate2_export_says_which_engine_reads_it(tmp_path, capsys):
    """Once ``--engine torch`` on an export said only "model.safetensors is missing"."""
    from hfattn.export.export_folder import EXPORT_FILES

    export = tmp_path / "ct2"
    export.mkdir()
    for name in ("config.json", *EXPORT_FILES):
        (export / name).write_text("{}")
    assert refusals(export, capsys) == {
        f"{export} is a CTranslate2 export, not a PyTorch model folder: translate with it by "
        f"`hfattn translate {export} TEXT... --engine ctranslate2`; the other commands (and "
        "--engine torch) read the model folder it was exported from"
    }


def test_an_interrupted_run_gives_its_step_and_how_to_continue(tmp_path, capsys):
    from hfattn.storage.run_status import interrupted_run_message

    run = tmp_path / "run"
    (checkpoints_dir(run) / f"{CHECKPOINT_PREFIX}40").mkdir(parents=True)
    (checkpoints_dir(run) / f"{CHECKPOINT_PREFIX}20").mkdir()
    (run / RECIPE_FILE).write_text("name: x\n")
    message = interrupted_run_message(run)
    assert "interrupted at step 40" in message and f"hfattn train --resume {run}" in message
    assert refusals(run, capsys) == {message}


def test_an_unfinished_run_is_refused_by_every_command_once_its_model_is_written(
    models, tmp_path, capsys
):
    """Interrupted while it saved its model folder (weights and config renamed in, no
    ``eval_results.json`` yet), a run was translated with exit status 0 and no word that it is
    unfinished; every command that loads a model now refuses it with the line that finishes
    it, and the same model folder without its run still loads."""
    from hfattn.storage.run_folder import PROGRESS_FILE

    run = copy_of(models["translator"], tmp_path)
    checkpoint = checkpoints_dir(run) / f"{CHECKPOINT_PREFIX}40"
    checkpoint.mkdir(parents=True)
    (checkpoint / PROGRESS_FILE).write_text(json.dumps({"step": 40, "training_end": "completed"}))
    (run / RECIPE_FILE).write_text("name: x\n")
    message = (
        f"{run} is a training run interrupted after its last step (40): its checkpoint holds "
        "the trained weights, the model folder is not finished yet. Finish it with "
        f"`hfattn train --resume {run}`"
    )
    commands = [
        ["translate", "{}", "lunes"],
        ["generate", "{}"],
        ["classify", "{}", "hi"],
        ["evaluate", "{}"],
        ["export", "{}", str(tmp_path / "ct2"), "--format", "ctranslate2"],
        ["plot", "attention", "{}", "lunes"],
        ["demo", "{}", "--port", "0"],
        ["push", "{}", "--repo-id", "me/x", "--dry-run", str(tmp_path / "dry")],
    ]
    for command in commands:
        assert main([str(run) if a == "{}" else a for a in command]) == 2, command
        assert one_error_line(capsys).removesuffix("; then push it") == message, command
    shutil.rmtree(checkpoints_dir(run))  # the model folder alone: no run
    assert main(["translate", str(run), "lunes"]) == 0


@pytest.mark.parametrize(
    "command", [["plot", "attention", "{}", "lunes"], ["demo", "{}", "--port", "0"]]
)
def test_a_damaged_weights_file_is_one_line_for_plot_and_demo(
    models, tmp_path, monkeypatch, capsys, command
):
    """Once a 24-26 line traceback ending in ``SafetensorError``; the demo's staged Space is
    removed too."""
    folder = copy_of(models["translator"], tmp_path)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    argv = [part.format(folder) for part in command] + ["--out", str(tmp_path / "a.png")]
    assert main(argv if command[0] == "plot" else argv[:-2]) == 2
    assert one_error_line(capsys).startswith(
        f"cannot load the model in '{folder}': {weights} is truncated or corrupt ("
    )
    assert list((tmp_path / "tmp").iterdir()) == []
    assert not (tmp_path / "a.png").exists()


@pytest.fixture
def progress_bars_on():
    """``transformers``' progress bars on, as in a fresh process, for the block; restored after."""
    from transformers.utils import logging as transformers_logging

    was_on = transformers_logging.is_progress_bar_enabled()
    transformers_logging.enable_progress_bar()
    yield
    if not was_on:
        transformers_logging.disable_progress_bar()


@pytest.mark.parametrize("command", ["plot", "demo"])
def test_plot_and_demo_show_no_loading_bar(
    models, tmp_path, monkeypatch, capfd, progress_bars_on, command
):
    """Once "Loading weights" bars of transformers showed through (``-v`` still shows them)."""
    import gradio

    monkeypatch.setattr(gradio.Blocks, "launch", lambda self, **kwargs: None)  # serve nothing
    monkeypatch.setattr("hfattn.commands.demo.wait_for_interrupt", lambda: None)
    folder = str(models["translator"])
    argv = {
        "plot": ["plot", "attention", folder, "lunes", "--out", str(tmp_path / "a.png")],
        "demo": ["demo", folder],
    }[command]
    capfd.readouterr()
    assert main(argv) == 0
    assert "Loading weights" not in capfd.readouterr().err


# ---- 3. the wrong command for the model --------------------------------------------------------
WRONG = [
    ("generate", "translator", "a translation model (BahdanauForConditionalGeneration)",
     "text-generation model", "hfattn translate {} TEXT..."),
    ("translate", "lm", "a text-generation model (CharRNNForCausalLM)", "translation model",
     "hfattn generate {} --prompt TEXT"),
    ("translate", "classifier", "a text classifier (RNNForSequenceClassification)",
     "translation model", "hfattn classify {} TEXT..."),
    ("classify", "lm", "a text-generation model (CharRNNForCausalLM)", "text classifier",
     "hfattn generate {} --prompt TEXT"),
    ("generate", "distilbert", "a text classifier (DistilBertForSequenceClassification)",
     "text-generation model", "hfattn classify {} TEXT..."),
]  # fmt: skip


@pytest.mark.parametrize(("command", "model", "holds", "wanted", "fits"), WRONG)
def test_the_wrong_command_names_the_one_that_fits(
    models, tmp_path, capsys, command, model, holds, wanted, fits
):
    """Read from config.json before any weight: the weights of the copy are cut short, and the
    message is still about the command (once: ``Unrecognized configuration class``)."""
    folder = copy_of(models[model], tmp_path)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    text = [] if command == "generate" else ["hi"]
    assert main([command, str(folder), *text]) == 2
    assert one_error_line(capsys) == (
        f"{folder} holds {holds}, not a {wanted}: use `{fits.format(folder)}`"
    )


def test_classify_refuses_a_model_without_a_classification_head(models, capsys):
    """A base model would get a random head: its labels would mean nothing."""
    folder = models["masked-lm"]
    assert main(["classify", str(folder), "hi"]) == 2
    assert one_error_line(capsys) == (
        f"{folder} holds a DistilBertForMaskedLM, not a text classifier: it has no trained "
        "classification head; fine-tune it with a classification recipe first"
    )
