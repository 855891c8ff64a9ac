"""A run's evaluations are bounded by its recipe: each periodic validation scores at most
``evaluation.max_examples`` examples, the end of training ``evaluation.final_max_examples``
(the scores of a validation are not taken for the final ones when the two bounds differ), and
a recipe that scores no split at the end says so in one line instead of an empty table.

Tiny char-RNN runs on 6,000 characters of Macbeth; an example of a causal LM is a window of
``evaluation.seq_len`` (64) tokens."""

from __future__ import annotations

import json

from hfattn.cli import main
from tests.helpers.recipe_helpers import small_recipe

SEQ_LEN = 64


def test_validations_score_max_examples_and_the_end_final_max_examples(tmp_path):
    recipe = small_recipe(
        tmp_path,
        training={"max_steps": 2, "eval_every": 2, "save_every": None},
        evaluation={"splits": ["validation"], "max_examples": 3, "final_max_examples": 2},
    )
    assert main(["train", str(recipe)]) == 0
    run = tmp_path / "run"
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    validation = [r for r in records if r["split"] == "validation"]
    assert [(r["step"], r["num_examples"], r["num_tokens"]) for r in validation] == [
        (2, 3, 3 * SEQ_LEN)
    ]
    final = json.loads((run / "eval_results.json").read_text())["all_metrics"]["validation"]
    assert (final["num_examples"], final["num_tokens"]) == (2, 2 * SEQ_LEN)  # scored again


def test_a_run_that_scores_no_split_says_so_in_one_line(tmp_path, capsys):
    recipe = small_recipe(
        tmp_path,
        training={"max_steps": 1, "eval_every": None, "save_every": None},
        evaluation={"splits": []},
    )
    assert main(["train", str(recipe)]) == 0
    out = capsys.readouterr().out
    assert "tiny: evaluation (step 1): no split is scored (evaluation.splits is empty)\n" in out
    assert "metric" not in out  # no table, not even its header
    assert json.loads((tmp_path / "run" / "eval_results.json").read_text())["all_metrics"] == {}
