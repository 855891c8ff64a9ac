"""What the documentation claims of the code, checked against the code: the environment
variables it names are read by hfattn (a test's hook once stood in a user's page), the errors it
quotes are ones hfattn writes, and a blank line of ``--file`` does what the pages say (they once
said it was refused, while the commands answer it with an empty line)."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

from hfattn.cli import main

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
CODE = [REPO / "hfattn", REPO / "spaces", REPO / "docs" / "hooks"]
"""The code the pages speak of: the package, the Space apps it stages and the docs' build hooks."""
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
PLACEHOLDER = re.compile(r"\.\.\.|…|<[^<>]*>")
QUOTED_WORDS = 4
"""A quoted error must hold this many words of the code's own strings in a row."""


def words(text: str) -> str:
    """``text`` with each run of white space one space, as Markdown reads it."""
    return " ".join(text.split())


def code_spans(page: Path) -> list[str]:
    """The inline code spans of ``page`` (out of fenced blocks), white space as Markdown reads
    it."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return [words(match[2]) for match in CODE_SPAN.finditer(text)]


@cache
def code_strings() -> frozenset[str]:
    """Every string constant of :data:`CODE` but the docstrings, the literal parts of f-strings
    included, white space as :func:`words` reads it."""
    found = set()
    for root in CODE:
        for path in root.rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docstrings = {
                id(node.body[0].value)
                for node in ast.walk(tree)
                if isinstance(
                    node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
                )
                and node.body
                and isinstance(node.body[0], ast.Expr)
                and isinstance(node.body[0].value, ast.Constant)
            }
            found |= {
                words(node.value)
                for node in ast.walk(tree)
                if isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
            }
    return frozenset(found)


def longest_code_text(message: str) -> str:
    """The longest stretch of ``message`` made of the code's strings of words
    (:func:`code_strings` with a space: not a bare name such as ``training.batch_size``), each
    next to the other or a space apart: the literal parts of the f-strings that wrote it, with
    the values between them left out."""
    spans = sorted(
        (found.start(), found.end())
        for text in code_strings()
        if " " in text and text in message
        for found in re.finditer(re.escape(text), message)
    )
    longest, current = "", None
    for start, end in spans:
        if current and start <= current[1] + 1:
            current = (current[0], max(current[1], end))
        else:
            current = (start, end)
        stretch = message[current[0] : current[1]]
        longest = max(longest, stretch, key=lambda text: len(text.split()))
    return longest


def test_every_environment_variable_the_docs_name_is_read_by_the_code():
    """A page names an ``HFATTN_*`` variable only when the code reads it: the name is a string
    constant of the code (``os.environ.get("HFATTN_…")``), not in a docstring or a test."""
    named = {
        (page.relative_to(REPO).as_posix(), name)
        for page in PAGES
        for name in re.findall(r"HFATTN_[A-Z0-9_]+", page.read_text(encoding="utf-8"))
    }
    assert {name for _, name in named} >= {"HFATTN_MODEL_ID", "HFATTN_PREPARED_DIR"}
    assert sorted((page, name) for page, name in named if name not in code_strings()) == []


def test_the_variable_check_finds_a_test_hook():
    """``HFATTN_FAULT_AT`` is no variable that hfattn reads: the kill points of the fault tests
    are arguments of ``tests/helpers/fault_injection.py``."""
    assert "HFATTN_FAULT_AT" not in code_strings()
    assert "HFATTN_PREPARED_DIR" in code_strings()


def quoted_errors() -> list[tuple[str, str]]:
    """``(page, message)`` for each `` `error: message` `` that a page quotes, less the ones
    that only show the form of an error (``error: ...``, ``error: <dotted.key>: ...``)."""
    return [
        (page.relative_to(REPO).as_posix(), span.removeprefix("error: "))
        for page in PAGES
        for span in code_spans(page)
        if span.startswith("error: ") and re.search(r"\w", PLACEHOLDER.sub("", span[7:]))
    ]


def test_every_error_the_docs_quote_is_written_by_the_code():
    """Each error message a page quotes holds :data:`QUOTED_WORDS` words in a row of the strings
    the code writes it from (:func:`longest_code_text`; all of them when it has fewer): a message
    that the code does not write, or no longer writes in those words, has fewer."""
    quoted = quoted_errors()
    assert len(quoted) >= 20
    assert [
        (page, message)
        for page, message in quoted
        if len(longest_code_text(message).split()) < min(QUOTED_WORDS, len(message.split()))
    ] == []


@pytest.mark.parametrize(
    "message",
    [
        "source 0 is empty: nothing to translate",
        "the model folder is broken beyond repair",
        "training.batch_size: too small",
    ],
)
def test_the_error_check_finds_words_the_code_does_not_write(message):
    assert len(longest_code_text(message).split()) < QUOTED_WORDS


# ---- a blank line of --file ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """Untrained tiny model folders: a Bahdanau translator over a word tokenizer and an RNN
    classifier over a character tokenizer."""
    import torch

    import hfattn
    from hfattn.tasks.classification.encoding import build_text_tokenizer, label_maps
    from hfattn.tasks.classification.recipe import ClassificationTokenizerSection
    from hfattn.tokenization.translation import build_translation_tokenizer

    root = tmp_path_factory.mktemp("models")
    torch.manual_seed(0)
    words_ = build_translation_tokenizer([("lunes martes", "monday tuesday")], kind="word")
    symbols = build_text_tokenizer(
        ClassificationTokenizerSection(type="char", whitespace="ignore"), ["B P T S X V E"], 96
    )
    built = {
        "translate": (
            hfattn.BahdanauForConditionalGeneration(
                hfattn.BahdanauConfig(
                    vocab_size=len(words_),
                    embedding_dim=8,
                    encoder_hidden_size=8,
                    decoder_hidden_size=16,
                    max_new_tokens=4,
                )
            ),
            words_,
        ),
        "classify": (
            hfattn.RNNForSequenceClassification(
                hfattn.RNNClassifierConfig(
                    vocab_size=len(symbols),
                    embedding_dim=8,
                    hidden_size=16,
                    cell="gru",
                    **label_maps(["invalid", "valid"]),
                )
            ),
            symbols,
        ),
    }
    for command, (model, tokenizer) in built.items():
        model.save_pretrained(root / command)
        tokenizer.save_pretrained(root / command)
    return {command: root / command for command in built}


def test_the_pages_say_what_a_blank_line_of_a_file_gives(models, tmp_path, capsys):
    """Every page that speaks of a blank line of ``--file`` says that it gives an empty output
    line, and it does, for ``translate`` and ``classify``; the refusal of a blank sentence on
    the command line that the translation page quotes is the command's."""
    said = [
        (page.name, claim)
        for page in PAGES
        for claim in re.findall(
            r"blank line of `--file`\)? (\w+(?: \w+)*)", words(page.read_text(encoding="utf-8"))
        )
    ]
    assert {page for page, _ in said} >= {"translation.md", "classification.md", "quickstart.md"}
    assert [(page, claim) for page, claim in said if claim != "gives an empty output line"] == []

    texts = {"translate": ("lunes", "martes"), "classify": ("BPB", "BTB")}
    for command, (first, second) in texts.items():
        file = tmp_path / f"{command}.txt"
        file.write_text(f"{first}\n\n \n{second}\n", encoding="utf-8")
        assert main([command, str(models[command]), first, second]) == 0
        alone = capsys.readouterr().out.split("\n")[:2]
        assert all(alone)
        assert main([command, str(models[command]), "--file", str(file)]) == 0
        assert capsys.readouterr().out.split("\n")[:4] == [alone[0], "", "", alone[1]]

    page = words((REPO / "docs" / "tasks" / "translation.md").read_text(encoding="utf-8"))
    example, error = re.search(
        r'`hfattn translate MODEL ("[^`]*")`: `(error: [^`]*)`', page
    ).groups()
    argv = ["translate", str(models["translate"]), *re.findall(r'"([^"]*)"', example)]
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [error]
