"""What the model commands print (issue 21): ``hfattn classify`` prints each text's labels
and probabilities, the softmax of the model's logits, which the tests compute here one text at
a time (no padding, no batching), and refuses bad input in one line, as ``translate`` refuses
a blank text; ``generate`` samples with a fresh seed that it prints; a blank line of a
``--file`` gives a blank output line.

The models are tiny and untrained (saved with ``save_pretrained``: ``models`` of
``conftest.py``).
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch

from hfattn.cli import main
from tests.helpers.bad_input import one_error_line
from tests.helpers.command_models import GENRES


# ---- hfattn classify ---------------------------------------------------------------------------
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


# ---- hfattn generate, and blank lines of a file --------------------------------------------------
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


@pytest.mark.parametrize(
    ("model", "command", "lines"),
    [("translator", "translate", ["lunes", "", "  ", "martes"]),
     ("classifier", "classify", ["BPB", "", "BTB"])],
)  # fmt: skip
def test_a_blank_line_of_a_file_gives_a_blank_output_line(
    models, capsys, tmp_path, model, command, lines
):
    """``translate --file`` and ``classify --file`` keep one output line per input line: a
    blank line among the inputs is a blank line among the outputs, not a refusal of the whole
    file; the other lines get what the same texts get as arguments."""
    folder = str(models[model])
    file = tmp_path / "in.txt"
    file.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    texts = [line for line in lines if line.strip()]
    assert main([command, folder, *texts]) == 0
    alone = iter(capsys.readouterr().out.split("\n")[: len(texts)])
    expected = [next(alone) if line.strip() else "" for line in lines]
    assert main([command, folder, "--file", str(file)]) == 0
    assert capsys.readouterr().out.split("\n")[: len(lines)] == expected
