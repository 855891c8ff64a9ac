"""``docs/hooks/sweep_block.py``: the measured example sweep of ``docs/sweeps.md`` is read from
its results file: the sweep's seconds, each trial, the best one and the retrained runs."""

import json

from docs.hooks import sweep_block

MACHINE = {"cpu": "AMD EPYC 7B13", "cores": 2, "isa": "AVX2", "gpu": None}


def test_the_example_is_the_results_file(tmp_path):
    assert sweep_block.sweep_block(tmp_path) == sweep_block.SWEEP_NONE
    trial = {"number": 0, "state": "COMPLETE", "loss": 0.0123, "steps": 600, "seconds": 41.2,
             "training.learning_rate": 0.00572, "model.decoder_hidden_size": 256}  # fmt: skip
    pruned = {**trial, "number": 1, "state": "PRUNED", "loss": 0.9, "steps": 150,
              "seconds": None}  # fmt: skip
    run = {"recipe": "bahdanau_date_normalization", "space": "recipes/sweeps/x.yaml",
           "settings": ["training.eval_every=150", "training.max_steps=450"], "metric": "loss", "processes": 2, "sampler_seeds": [0, 1],
           "sweep_s": 301.4, "trials": [trial, pruned], "states": {"COMPLETE": 1, "PRUNED": 1},
           "best": {"number": 0, "loss": 0.0123, "params": {"training.learning_rate": 0.00572}},
           "retrains": [{"loss": 0.0129}, {"loss": 0.0157}], "retrain_range": [0.0129, 0.0157],
           "best_within_retrain_range": False, "provenance": {"machine": MACHINE}}  # fmt: skip
    (tmp_path / "sweep_bahdanau_date_normalization.json").write_text(json.dumps(run))
    block = sweep_block.sweep_block(tmp_path)
    assert "2-core AMD EPYC 7B13, AVX2" in block
    # the command as typed: bench_sweep.py takes one setting a --set
    assert "`--set training.eval_every=150 --set training.max_steps=450`" in block
    assert (
        "one torch thread each (`--seed` 0, 1), ran 2 trials in 301 s: 1 complete, 1 pruned"
        in block
    )
    assert "trial 0 (validation loss 0.0123: `training.learning_rate=0.00572`)" in block
    assert (
        "scores 0.0129, 0.0157 (range 0.0129 to 0.0157): the best trial's value is outside" in block
    )
    assert "0.0006 from the nearest of those runs, which differ among themselves by 0.0028" in block
    rows = [line for line in block.splitlines() if line.startswith("| ")]
    assert rows[1:] == [
        "| 0 | complete | 0.0123 | 600 | 41 | `training.learning_rate=0.00572`, "
        "`model.decoder_hidden_size=256` |",
        "| 1 | pruned | 0.9 | 150 | — | `training.learning_rate=0.00572`, "
        "`model.decoder_hidden_size=256` |",
    ]


def test_the_option_effects_are_the_completed_trials_by_each_chosen_value(tmp_path):
    recipe = "vaswani_bible_en_es"
    assert sweep_block.option_effects_block(tmp_path, recipe) == sweep_block.OPTION_EFFECTS_NONE

    def trial(number, state, loss, bleu, rate, dropout):
        return {"number": number, "state": state, "loss": loss, "steps": 900,
                "training.learning_rate": rate, "training.word_dropout": dropout,
                "scores": {"loss": loss, "bleu": bleu}}  # fmt: skip

    trials = [trial(0, "COMPLETE", 4.0, 10.0, 1e-3, 0.0), trial(1, "COMPLETE", 3.5, 12.0, 2e-3, 0.1),
              trial(2, "COMPLETE", 4.5, 8.0, 3e-3, 0.1), trial(3, "PRUNED", 6.0, 2.0, 4e-3, 0.0),
              trial(4, "COMPLETE", 3.9, 11.0, 5e-3, 0.1)]  # fmt: skip
    run = {"space": "recipes/sweeps/v.yaml", "settings": ["training.max_minutes=12"],
           "metric": "loss", "larger_is_better": False, "trials": trials,
           "provenance": {"machine": MACHINE}}  # fmt: skip
    (tmp_path / f"sweep_{recipe}.json").write_text(json.dumps(run))
    block = sweep_block.option_effects_block(tmp_path, recipe)
    assert "the 4 trials of 5 that trained to the end" in block
    assert "| option | value | trials | loss: median, best | bleu: median, best |" in block
    rows = [line for line in block.splitlines() if line.startswith("| `")]
    assert rows == [  # the learning rate took five values: a range, not an option
        "| `training.word_dropout` | 0.0 | 1 | 4, 4 | 10, 10 |",
        "| `training.word_dropout` | 0.1 | 3 | 3.9, 3.5 | 11, 12 |",
    ]


def test_a_completed_trial_without_saved_scores_counts_only_where_it_has_a_score(tmp_path):
    """A trial whose run folder kept no scores (``scores: null``) still has the sweep's value:
    it counts in that column's median and best, not in BLEU's."""
    recipe = "vaswani_bible_en_es"
    trials = [
        {"number": 0, "state": "COMPLETE", "loss": 4.0, "training.word_dropout": 0.0,
         "scores": {"loss": 4.0, "bleu": 10.0}},
        {"number": 1, "state": "COMPLETE", "loss": 3.0, "training.word_dropout": 0.0,
         "scores": None},
    ]  # fmt: skip
    run = {"space": "recipes/sweeps/v.yaml", "settings": ["training.max_minutes=12"],
           "metric": "loss", "larger_is_better": False, "trials": trials,
           "provenance": {"machine": MACHINE}}  # fmt: skip
    (tmp_path / f"sweep_{recipe}.json").write_text(json.dumps(run))
    rows = [
        line
        for line in sweep_block.option_effects_block(tmp_path, recipe).splitlines()
        if line.startswith("| `")
    ]
    assert rows == ["| `training.word_dropout` | 0.0 | 2 | 3.5, 3 | 10, 10 |"]
