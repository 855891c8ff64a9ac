"""The model commands fail fast and say what to do (issue 21), and ``hfattn classify``.

``hfattn generate``, ``translate`` and ``classify`` take a model folder or a Hub repo id:

- a folder that does not exist is ``model folder not found: runs/nope`` at once, before torch
  is imported (``runs/nope`` is a local path when ``runs/`` is a local folder; any name while
  the Hub is offline and not cached), never a minute of Hub retries;
- an existing folder that holds no model says what it lacks, and an interrupted training run
  its step and how to continue it;
- a model of another task is refused from its ``config.json``, before its weights are read,
  naming the command that runs it;
- what the tokenizer cannot represent (``<unk>``) is named, by one function for every command;
- ``hfattn classify`` prints each text's labels and probabilities, the softmax of the model's
  logits, which the tests compute here one text at a time (no padding, no batching);
- the Reber-grammar recipe reads one token per symbol, however the string is spaced.

The models are tiny and untrained (saved with ``save_pretrained``), except one few-second
training run of ``recipes/rnn_classifier_reber.yaml``.
"""

from __future__ import annotations

import json
import logging
import math
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

from hfattn.cli import main
from hfattn.commands.inputs import ModelLoadError, locate_model
from hfattn.storage.run_folder import CHECKPOINT_PREFIX, RECIPE_FILE, checkpoints_dir
from tests.helpers.bad_input import one_error_line
from tests.helpers.network import RECORD_CONNECTIONS

ROOT = Path(__file__).resolve().parents[2]
REBER_RECIPE = ROOT / "recipes" / "rnn_classifier_reber.yaml"
REBER_LABELS = ["invalid", "valid"]
GENRES = ["comedy", "history", "tragedy"]
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


# ---- tiny model folders -------------------------------------------------------------------------
def save(folder: Path, model, tokenizer) -> Path:
    """``save_pretrained`` of both into ``folder``."""
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """Untrained tiny folders: a char-RNN LM, a Bahdanau translator over a word tokenizer, an
    RNN classifier of Reber symbols (the recipe's tokenizer), a DistilBERT genre classifier and
    a DistilBERT masked LM (a base model without a classification head)."""
    from transformers import (
        DistilBertConfig,
        DistilBertForMaskedLM,
        DistilBertForSequenceClassification,
    )

    import hfattn
    from hfattn.tasks.classification.encoding import build_text_tokenizer, label_maps
    from hfattn.tasks.classification.recipe import ClassificationTokenizerSection
    from hfattn.tokenization.characters import build_char_tokenizer
    from hfattn.tokenization.translation import build_translation_tokenizer
    from tests.helpers.tiny_pretrained import tiny_distilbert_tokenizer

    root = tmp_path_factory.mktemp("models")
    torch.manual_seed(0)
    chars = build_char_tokenizer("ROMEO: abcdefghijklmnopqrstuvwxyz\n")
    words = build_translation_tokenizer([("lunes martes", "monday tuesday")], kind="word")
    symbols = build_text_tokenizer(
        ClassificationTokenizerSection(type="char", whitespace="ignore"), ["B P T S X V E"], 96
    )
    wordpiece = tiny_distilbert_tokenizer(vocab_size=200, model_max_length=32, chars=5000)
    bert = {
        "vocab_size": len(wordpiece),
        "n_layers": 1,
        "n_heads": 2,
        "dim": 16,
        "hidden_dim": 32,
        "max_position_embeddings": 32,
        "pad_token_id": wordpiece.pad_token_id,
    }
    built = {
        "lm": (hfattn.CharRNNForCausalLM, hfattn.CharRNNConfig, chars, {}),
        "translator": (
            hfattn.BahdanauForConditionalGeneration,
            hfattn.BahdanauConfig,
            words,
            {"encoder_hidden_size": 8, "decoder_hidden_size": 16},
        ),
        "classifier": (
            hfattn.RNNForSequenceClassification,
            hfattn.RNNClassifierConfig,
            symbols,
            {"cell": "gru", **label_maps(REBER_LABELS)},
        ),
    }
    folders = {
        name: save(
            root / name,
            model(config(vocab_size=len(tokenizer), embedding_dim=8, hidden_size=16, **extra)),
            tokenizer,
        )
        for name, (model, config, tokenizer, extra) in built.items()
    }
    classifier = DistilBertConfig(**bert, **label_maps(GENRES), seq_classif_dropout=0.0)
    folders["distilbert"] = save(
        root / "distilbert", DistilBertForSequenceClassification(classifier), wordpiece
    )
    folders["masked-lm"] = save(
        root / "masked-lm", DistilBertForMaskedLM(DistilBertConfig(**bert)), wordpiece
    )
    return folders


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


# ---- 4. hfattn classify ------------------------------------------------------------------------
def softmax(logits: list[float]) -> list[float]:
    """exp(z_i - max z) / Σ_j exp(z_j - max z), written out."""
    top = max(logits)
    exps = [math.exp(z - top) for z in logits]
    return [e / sum(exps) for e in exps]


def expected_labels(folder: Path, texts: list[str], k: int, max_length: int = 10_000):
    """Each text's ``k`` most probable ``(label, probability)`` under the classifier saved in
    ``folder``, one text at a time."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    return top_labels(model, AutoTokenizer.from_pretrained(folder), texts, k, max_length)


@torch.no_grad()
def top_labels(model, tokenizer, texts: list[str], k: int, max_length: int = 10_000):
    """Each text's ``k`` most probable ``(label, probability)``, one text at a time."""
    rows = []
    for text in texts:
        inputs = tokenizer(text, return_tensors="pt", truncation=True, max_length=max_length)
        probabilities = softmax(model(**inputs).logits[0].tolist())
        order = sorted(range(len(probabilities)), key=lambda i: -probabilities[i])[:k]
        rows.append([(model.config.id2label[i], probabilities[i]) for i in order])
    return rows


def printed_labels(out: str) -> list[list[tuple[str, float]]]:
    """``label<TAB>probability`` pairs of each printed line."""
    rows = []
    for line in out.splitlines():
        fields = line.split("\t")
        rows.append([(fields[i], float(fields[i + 1])) for i in range(0, len(fields), 2)])
    return rows


def assert_same_labels(printed, expected) -> None:
    assert len(printed) == len(expected)
    for got, want in zip(printed, expected, strict=True):
        assert [label for label, _ in got] == [label for label, _ in want]
        for (_, p), (_, q) in zip(got, want, strict=True):
            assert abs(p - q) <= 1e-6, (got, want)


def test_classify_prints_each_texts_labels_and_probabilities(models, tmp_path, capsys):
    """Batched (2 a batch, padded to the longest) as the model reads one text alone; texts
    first, then the lines of --file, in order."""
    folder = models["classifier"]
    file = tmp_path / "strings.txt"
    file.write_text("BTXXVPSE\nB T B P V V E T E\n", encoding="utf-8")
    texts = ["BPBTXSEPE", "BTBTSSXXTVVETE", "BPBPVVETE", "BTXXVPSE", "B T B P V V E T E"]
    argv = ["classify", str(folder), *texts[:3], "--file", str(file), "--batch-size", "2"]
    assert main([*argv, "--top-k", "2"]) == 0
    assert_same_labels(printed_labels(capsys.readouterr().out), expected_labels(folder, texts, 2))
    assert main(argv) == 0  # the default: the most probable label only
    assert_same_labels(printed_labels(capsys.readouterr().out), expected_labels(folder, texts, 1))
    assert main([*argv, "--top-k", "5"]) == 0  # more than the 2 labels: all of them
    assert all(len(row) == 2 for row in printed_labels(capsys.readouterr().out))


def test_classify_a_fine_tuned_encoder_cutting_a_long_text(models, capsys, caplog):
    folder = models["distilbert"]
    texts = ["To be, or not to be", "the king is dead " * 20, "O Romeo, Romeo"]
    assert main(["classify", str(folder), *texts, "--top-k", "3"]) == 0
    printed = printed_labels(capsys.readouterr().out)
    assert_same_labels(printed, expected_labels(folder, texts, 3, max_length=32))
    assert [math.fsum(p for _, p in row) for row in printed] == pytest.approx([1.0] * 3, abs=3e-6)
    assert "1 text(s) longer than 32 tokens were cut to 32 (first: text 1)" in caplog.text


def test_classify_a_lora_adapter_with_its_labels(models, tmp_path, capsys):
    """An adapter folder (what a ``lora:`` recipe saves) runs on its base model, whose head is
    built for the labels of its ``labels.json`` (once: ``ignore_mismatched_sizes``)."""
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from hfattn.tasks.classification.encoding import label_maps

    base = models["masked-lm"]
    torch.manual_seed(1)
    model = AutoModelForSequenceClassification.from_pretrained(base, **label_maps(GENRES))
    config = LoraConfig(
        task_type="SEQ_CLS", r=2, target_modules=["q_lin", "v_lin"], modules_to_save=["classifier"]
    )
    adapter = tmp_path / "adapter"
    get_peft_model(model, config).save_pretrained(adapter)
    AutoTokenizer.from_pretrained(base).save_pretrained(adapter)
    (adapter / "labels.json").write_text(json.dumps({"labels": GENRES}))
    texts = ["To be, or not to be", "O Romeo, Romeo"]
    assert main(["classify", str(adapter), *texts, "--top-k", "3"]) == 0
    printed = printed_labels(capsys.readouterr().out)

    head = AutoModelForSequenceClassification.from_pretrained(base, **label_maps(GENRES))
    model = PeftModel.from_pretrained(head, str(adapter)).eval()
    tokenizer = AutoTokenizer.from_pretrained(adapter)
    assert_same_labels(printed, top_labels(model, tokenizer, texts, 3))
    assert main(["generate", str(adapter)]) == 2
    assert one_error_line(capsys).endswith(
        f"holds a text classifier (SEQ_CLS adapter), not a text-generation model: use "
        f"`hfattn classify {adapter} TEXT...`"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--top-k", "0"], "--top-k must be >= 1, got 0"),
        (["--batch-size", "-1"], "--batch-size must be >= 1, got -1"),
        (["BPB", " "], "text 1 is blank: there is nothing to classify"),
        (["caf\udce9"], "text 0 is not valid text: byte 0xe9 is not UTF-8 (at character 3)"),
        (["--file", "/no/such/file.txt"], "--file: [Errno 2] No such file or directory: "),
        ([], "give texts to classify or --file"),
    ],
)
def test_classify_refuses_bad_input_in_one_line(models, capsys, options, message):
    assert main(["classify", str(models["classifier"]), *options]) == 2
    assert one_error_line(capsys).startswith(message)


@pytest.mark.parametrize("engine", ["torch", "ctranslate2"])
@pytest.mark.parametrize(
    ("texts", "message"),
    [
        ([""], "source 0 is blank: there is nothing to translate"),
        (["lunes", " \t"], "source 1 is blank: there is nothing to translate"),
    ],
)
def test_translate_refuses_blank_text_in_one_line(models, capsys, engine, texts, message):
    """Once ``hfattn translate RUN ""`` printed an empty line and exited 0."""
    argv = ["translate", str(models["translator"]), *texts, "--engine", engine]
    assert main(argv) == 2
    assert one_error_line(capsys) == message
    assert capsys.readouterr().out == ""


# ---- 5. what the tokenizer cannot represent ----------------------------------------------------
def unknown_warnings(caplog) -> list[str]:
    """The warnings of :func:`hfattn.tokenization.characters.warn_unknown`, the one function that
    names
    ``<unk>`` input for every command."""
    return [
        r.getMessage()
        for r in caplog.records
        if (r.name, r.funcName, r.levelno) == ("hfattn.tokenization.characters", "warn_unknown", 30)
    ]


def test_every_command_names_what_became_unk(models, capsys, caplog):
    caplog.set_level(logging.WARNING, logger="hfattn")
    assert main(["translate", str(models["translator"]), "lunes 😀 日本", "日本"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert unknown_warnings(caplog) == [
        "source 0 words not in the vocabulary, mapped to <unk>: '😀', '日本'",
        "source 1 is all <unk>: none of its words is in the model's vocabulary ('日本'); the "
        "model sees nothing of it",
    ]
    caplog.clear()
    assert main(["classify", str(models["classifier"]), "BPB 😀 Z", "日本", "BPBTXSEPE"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3
    assert unknown_warnings(caplog) == [
        "text 0 characters not in the vocabulary, mapped to <unk>: '😀', 'Z'",
        "text 1 is all <unk>: none of its characters is in the model's vocabulary ('日', '本'); "
        "the model sees nothing of it",
    ]
    caplog.clear()
    lm = str(models["lm"])
    assert main(["generate", lm, "--prompt", "ROMEO: 日本", "--max-new-tokens", "2"]) == 0
    assert capsys.readouterr().out.startswith("ROMEO: 日本")
    assert unknown_warnings(caplog) == [
        "prompt characters not in the vocabulary, mapped to <unk>: '日', '本'"
    ]


# ---- 6. the Reber classifier reads symbols ----------------------------------------------------
def test_the_reber_recipe_reads_one_token_per_symbol_however_spaced():
    """Once a word tokenizer read ``BPBTXSEPE`` as one ``<unk>`` (and answered "invalid")."""
    from hfattn.data.reber import load_reber
    from hfattn.recipes import load_recipe
    from hfattn.tasks.classification.encoding import build_text_tokenizer

    recipe = load_recipe(REBER_RECIPE)
    assert (recipe.tokenizer.type, recipe.tokenizer.whitespace) == ("char", "ignore")
    texts = load_reber(0).texts("train")[:500]
    tokenizer = build_text_tokenizer(recipe.tokenizer, texts, recipe.data.max_length)
    assert sorted(tokenizer.get_vocab()) == sorted(["<pad>", "<unk>", "<bos>", "<eos>", *"BEPSTVX"])
    symbols = [tokenizer.convert_tokens_to_ids(c) for c in "BPBTXSEPE"]
    for spelling in ("BPBTXSEPE", "B P B T X S E P E", " BPB\tTXS EPE\n"):
        assert tokenizer(spelling)["input_ids"] == [*symbols, tokenizer.eos_token_id]


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("tokenizer.whitespace=drop", "tokenizer.whitespace: 'drop' is not one of keep, ignore"),
        ("tokenizer.type=word", "tokenizer.whitespace: ignore applies to type: char only (type "
         "is 'word')"),
    ],
)  # fmt: skip
def test_tokenizer_whitespace_is_checked_before_anything_loads(capsys, override, message):
    assert main(["train", str(REBER_RECIPE), "--set", override]) == 2
    assert one_error_line(capsys) == message


def test_a_trained_reber_classifier_reads_the_string_as_typed(tmp_path, capsys, caplog):
    """A few-step run of the recipe: the saved tokenizer drops spaces too."""
    from tests.helpers.tiny_runs import build_classification_run

    run = build_classification_run(tmp_path, "rnn_classifier_reber.yaml")
    capsys.readouterr()
    caplog.clear()
    assert main(["classify", str(run), "BPBTXSEPE", "B P B T X S E P E", "--top-k", "2"]) == 0
    first, second = capsys.readouterr().out.splitlines()
    assert first == second
    assert unknown_warnings(caplog) == []


def test_generate_samples_with_a_fresh_seed_that_it_prints(models, capsys):
    lm = str(models["lm"])
    args = ["generate", lm, "--prompt", "ROMEO:", "--max-new-tokens", "60", "--temperature", "2"]
    samples, seeds = [], []
    for _ in range(2):
        assert main(args) == 0
        captured = capsys.readouterr()
        samples.append(captured.out)
        match = re.fullmatch(r"seed (\d+) \(repeat this sample with --seed \1\)\n", captured.err)
        assert match, captured.err
        seeds.append(match.group(1))
    assert seeds[0] != seeds[1] and samples[0] != samples[1]
    # the printed seed repeats the sample, and a given seed is not printed
    assert main([*args, "--seed", seeds[0]]) == 0
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == (samples[0], "")
    # greedy decoding draws nothing: no seed to print
    assert main([*args, "--greedy"]) == 0
    assert capsys.readouterr().err == ""


def test_the_training_log_says_what_a_classification_tokenizer_is(caplog):
    """Once the log called it a ``joint char tokenizer (text→none)``, as if it translated."""
    from hfattn.tasks.classification.encoding import build_text_tokenizer
    from hfattn.tasks.classification.recipe import ClassificationTokenizerSection

    caplog.set_level(logging.INFO, logger="hfattn")
    section = ClassificationTokenizerSection(type="char", whitespace="ignore")
    tokenizer = build_text_tokenizer(section, ["B P T", "S X V E"], 32)
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        (
            "hfattn.tasks.classification.encoding",
            f"char tokenizer of the texts to classify: {len(tokenizer)} tokens",
        )
    ]


def test_a_translation_tokenizer_is_logged_by_the_translation_task(caplog):
    """The tokenizer builder logs nothing: each task names what it built in its own log (the
    classifier's once logged as ``hfattn.tokenization.translation``)."""
    from hfattn.tasks.translation.prepared import build_tokenizer
    from hfattn.tasks.translation.recipe import Seq2SeqTokenizerSection, TranslationRecipe

    caplog.set_level(logging.INFO, logger="hfattn")
    recipe = TranslationRecipe(tokenizer=Seq2SeqTokenizerSection(type="char"))
    tokenizer = build_tokenizer(recipe, ["ab c", "d"], ["x yz", "w"], "es")
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        (
            "hfattn.tasks.translation.prepared",
            f"joint char tokenizer (en→es): {len(tokenizer)} tokens",
        )
    ]


def test_a_blank_line_of_a_file_gives_a_blank_output_line(models, capsys, tmp_path):
    """``translate --file`` keeps one output line per input line: a blank line among the
    sources is a blank line among the translations, not a refusal of the whole file."""
    folder = str(models["translator"])
    file = tmp_path / "in.txt"
    file.write_text("lunes\n\n  \nmartes\n", encoding="utf-8")
    assert main(["translate", folder, "lunes", "martes"]) == 0
    alone = capsys.readouterr().out.split("\n")[:2]
    assert main(["translate", folder, "--file", str(file)]) == 0
    assert capsys.readouterr().out.split("\n")[:4] == [alone[0], "", "", alone[1]]


def test_a_blank_line_of_a_file_gives_a_blank_label_line(models, capsys, tmp_path):
    folder = str(models["classifier"])
    file = tmp_path / "in.txt"
    file.write_text("BPB\n\nBTB\n", encoding="utf-8")
    assert main(["classify", folder, "BPB", "BTB"]) == 0
    alone = capsys.readouterr().out.split("\n")[:2]
    assert main(["classify", folder, "--file", str(file)]) == 0
    assert capsys.readouterr().out.split("\n")[:3] == [alone[0], "", alone[1]]
