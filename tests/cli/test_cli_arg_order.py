"""How the commands take their arguments: options and texts in any order (issue 49, item 3),
and a ``--file`` of texts that is not UTF-8 named by file, line and column (item 7).

``hfattn translate RUN --num-beams 4 "7/4/76"`` (the order the usage line shows) was
``unrecognized arguments: 7/4/76``: argparse gave every positional argument its value in the
first run of positionals. Each command's parser reads its options first, then its positional
arguments from what is left (``parse_intermixed_args``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hfattn.cli import build_parser, main
from tests.helpers.bad_input import one_error_line

LABELS = ["comedy", "history", "tragedy"]
TEXTS = ["BTSXSE", "BPVVE"]


def parsed(*argv: str) -> dict:
    """The arguments ``hfattn ARGV`` parses to (its handler left out)."""
    args = vars(build_parser().parse_args(list(argv)))
    args.pop("func")
    return args


@pytest.mark.parametrize(
    ("orders", "want"),
    [
        (
            [
                ["translate", "RUN", "--num-beams", "4", "7/4/76"],
                ["translate", "RUN", "7/4/76", "--num-beams", "4"],
                ["translate", "--num-beams", "4", "RUN", "7/4/76"],
            ],
            {"model_dir": "RUN", "texts": ["7/4/76"], "num_beams": 4},
        ),
        (
            [
                ["translate", "RUN", "a", "--max-new-tokens", "9", "b", "--num-beams", "2", "c"],
                ["translate", "--max-new-tokens", "9", "--num-beams", "2", "RUN", "a", "b", "c"],
            ],
            {"model_dir": "RUN", "texts": ["a", "b", "c"], "num_beams": 2, "max_new_tokens": 9},
        ),
        (
            [
                ["classify", "RUN", "--top-k", "2", "T1", "T2"],
                ["classify", "RUN", "T1", "--top-k", "2", "T2"],
                ["classify", "RUN", "T1", "T2", "--top-k", "2"],
            ],
            {"model_dir": "RUN", "texts": ["T1", "T2"], "top_k": 2},
        ),
        (
            [
                ["train", "--set", "training.max_steps=3", "R.yaml"],
                ["train", "R.yaml", "--set", "training.max_steps=3"],
            ],
            {"recipe": "R.yaml", "overrides": ["training.max_steps=3"]},
        ),
        (
            [
                ["plot", "attention", "--layer", "2", "RUN", "a b"],
                ["plot", "--layer", "2", "attention", "RUN", "a b"],
                ["plot", "attention", "RUN", "a b", "--layer", "2"],
            ],
            {"name": "attention", "args": ["RUN", "a b"], "layer": 2},
        ),
        (  # after `--`, a text that starts with "-" is a text
            [["translate", "RUN", "--num-beams", "2", "--", "-5 grados", "--x"]],
            {"model_dir": "RUN", "texts": ["-5 grados", "--x"], "num_beams": 2},
        ),
    ],
)
def test_options_and_positional_arguments_mix_in_any_order(orders, want):
    results = [parsed(*argv) for argv in orders]
    assert all(result == results[0] for result in results)
    assert {key: results[0][key] for key in want} == want


def test_a_wrong_option_is_still_refused(capsys):
    with pytest.raises(SystemExit) as stopped:
        parsed("translate", "RUN", "--beams", "4", "7/4/76")
    assert stopped.value.code == 2
    assert "unrecognized arguments: --beams" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parsed("translate", "RUN", "7/4/76", "--num-beams", "four")
    assert "argument --num-beams: invalid int value: 'four'" in capsys.readouterr().err


def run(capsys, *argv: str) -> list[str]:
    """The lines ``hfattn ARGV`` prints (its exit status must be 0)."""
    capsys.readouterr()
    assert main(list(argv)) == 0, capsys.readouterr().err
    return capsys.readouterr().out.splitlines()


def test_translate_with_the_beam_width_before_the_text(runs, capsys):
    from tests.helpers.saved_runs import translations

    folder = str(runs["bahdanau"])
    sources = ["7/4/76", "April 22, 2019"]
    want = translations(runs["bahdanau"], sources, 4, 7)
    assert run(capsys, "translate", folder, "--num-beams", "4", *sources) == want
    assert run(capsys, "translate", folder, sources[0], "--num-beams", "4", sources[1]) == want
    assert run(capsys, "translate", folder, *sources, "--num-beams", "4") == want


@pytest.fixture(scope="module")
def classifier(tmp_path_factory) -> Path:
    """An untrained GRU classifier of Reber symbols with three labels."""
    import hfattn
    from hfattn.tasks.classification.encoding import build_text_tokenizer, label_maps
    from hfattn.tasks.classification.recipe import ClassificationTokenizerSection

    folder = tmp_path_factory.mktemp("classifier")
    torch.manual_seed(0)
    tokenizer = build_text_tokenizer(
        ClassificationTokenizerSection(type="char", whitespace="ignore"), ["B P T S X V E"], 96
    )
    config = hfattn.RNNClassifierConfig(
        vocab_size=len(tokenizer), embedding_dim=8, hidden_size=16, cell="gru", **label_maps(LABELS)
    )
    hfattn.RNNForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_classify_with_top_k_before_the_texts(classifier, capsys):
    want = run(capsys, "classify", str(classifier), *TEXTS, "--top-k", "2")
    assert len(want) == len(TEXTS)
    for line in want:
        fields = line.split("\t")
        assert len(fields) == 4 and {fields[0], fields[2]} <= set(LABELS)
        assert float(fields[1]) >= float(fields[3])
    assert run(capsys, "classify", str(classifier), "--top-k", "2", *TEXTS) == want
    assert run(capsys, "classify", str(classifier), TEXTS[0], "--top-k", "2", TEXTS[1]) == want


# ---- --file that is not UTF-8 (item 7) ----------------------------------------------------------
@pytest.mark.parametrize("command", ["translate", "classify"])
def test_a_file_that_is_not_utf8_is_named_with_its_line_and_column(
    command,
    runs,
    classifier,
    tmp_path,
    capsys,
):
    latin1 = tmp_path / "dates.txt"
    latin1.write_bytes("7/4/76\nle 4 juillet 1976, l'été\n".encode("latin-1"))
    folder = runs["bahdanau"] if command == "translate" else classifier
    assert main([command, str(folder), "--file", str(latin1)]) == 2
    assert one_error_line(capsys) == (
        f"--file: {latin1}, line 2, column 22: byte 0xe9 is not UTF-8; text files must be UTF-8 "
        f"(convert it, e.g. `iconv -f latin1 -t utf-8 {latin1} > new.txt`)"
    )


def test_every_help_example_parses():
    """The examples that each command's ``--help`` ends with are commands the parser takes
    (their paths need not exist: nothing runs)."""
    import shlex

    from hfattn.cli import EXAMPLES, build_parser

    parser = build_parser()
    assert set(EXAMPLES) == set(parser.command_parsers)
    for name, lines in EXAMPLES.items():
        assert f"examples:\n  {lines[0]}" in parser.command_parsers[name].format_help()
        for line in lines:
            args, unknown = parser.parse_known_args(shlex.split(line.split(" > ")[0])[1:])
            assert args.command == name and unknown == [], line


def test_an_unknown_option_names_the_closest_and_the_command(capsys):
    from hfattn.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["evaluate", "runs/x", "--splits", "test"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("usage: hfattn evaluate ")
    assert err[-1] == (
        "hfattn evaluate: error: unrecognized arguments: --splits test; did you mean --split?"
    )


def test_a_missing_model_does_not_call_the_optional_text_required(capsys):
    from hfattn.cli import main

    with pytest.raises(SystemExit):
        main(["translate"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == "hfattn translate: error: the following arguments are required: model_dir"
