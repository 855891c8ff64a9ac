"""The Accelerate training engine on tiny recipes: outputs, resume, budgets, accumulation, and
what it refuses before or while it trains (a non-finite loss, a folder that holds a run, bad
data sources and push settings). Mixed precision is in ``test_mixed_precision.py``, the kept
and averaged checkpoints in ``test_best_and_averaged_checkpoints.py``.

Runs that assert no score train on 6000 characters (``small_recipe``): quick validations."""

import json

import pytest
import torch

from hfattn.cli import main
from hfattn.orchestration.run import run_recipe
from hfattn.recipes import load_recipe
from tests.helpers.crash_runs import assert_same_weights, weights
from tests.helpers.fault_injection import nan_loss_at
from tests.helpers.network import connections
from tests.helpers.recipe_helpers import small_recipe, write_recipe


def test_train_writes_a_complete_model_folder(tmp_path, capsys):
    recipe = write_recipe(tmp_path)
    assert main(["train", str(recipe)]) == 0
    out = capsys.readouterr().out
    assert "perplexity" in out and "--- sample" in out and "MACBETH:" in out
    run = tmp_path / "run"
    for name in ("config.json", "model.safetensors", "generation_config.json", "tokenizer.json",
                 "modeling_char_rnn.py", "configuration_char_rnn.py", "recipe.yaml",
                 "metrics.jsonl", "loss_curve.png", "eval_results.json"):  # fmt: skip
        assert (run / name).is_file(), name
    assert (run / "loss_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    config = json.loads((run / "config.json").read_text())
    assert config["auto_map"]["AutoModelForCausalLM"] == "modeling_char_rnn.CharRNNForCausalLM"

    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train_losses = [r["loss"] for r in records if r["split"] == "train"]
    assert len(train_losses) == 8 and train_losses[-1] < train_losses[0] - 0.5
    assert [r["step"] for r in records if r["split"] == "validation"] == [20, 40]

    results = json.loads((run / "eval_results.json").read_text())
    assert results["training"]["global_step"] == 40
    assert results["training"]["stop_reason"] == "completed"
    # every label of the 40 batches of 8 × 32 characters is a token trained on
    tokens = [r["tokens"] for r in records if r["split"] == "train"]
    assert tokens == [5 * 8 * 32 * k for k in range(1, 9)]
    training = results["training"]
    assert training["train_tokens"] == 40 * 8 * 32
    runtime = training["train_runtime_s"]  # rounded to 0.1 s
    low, high = (training["train_tokens"] / (runtime + d) for d in (0.05, -0.05))
    assert low <= training["train_tokens_per_s"] <= high
    test = {r["metric_type"]: r["value"] for r in results["results"] if r["split"] == "test"}
    assert test["perplexity"] == pytest.approx(torch.tensor(test["loss"]).exp().item(), rel=1e-6)
    assert test["bits_per_char"] == pytest.approx(
        test["loss"] / torch.log(torch.tensor(2.0)).item(), rel=1e-6
    )
    assert 0 < test["accuracy"] < 1 and test["loss"] < 3.5
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["best", "step-20", "step-40"]

    # the folder evaluates and generates through the CLI
    assert (
        main(["evaluate", str(run), "--split", "test", "--batch-size", "4", "--seq-len", "64"]) == 0
    )
    assert f"{test['loss']:.4f}" in capsys.readouterr().out
    assert (
        main(
            [
                "generate",
                str(run),
                "--prompt",
                "MACBETH:\n",
                "--max-new-tokens",
                "30",
                "--top-k",
                "5",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.startswith("MACBETH:\n")
    # a character outside the vocabulary: warned about, kept in the printed prompt
    assert main(["generate", str(run), "--prompt", "Zoë:\n", "--max-new-tokens", "5"]) == 0
    assert capsys.readouterr().out.startswith("Zoë:\n")


@pytest.mark.parametrize(
    ("mode", "optimizer"), [("stateful", "adamw"), ("stateless", "adamw"), ("stateful", "muon")]
)
def test_resume_continues_exactly(tmp_path, mode, optimizer):
    """Stop at step 7 (as a signal would), resume, and end with bit-identical weights (Muon's
    momentum buffers and AdamW's moments both come back from the checkpoint)."""
    common = {"training": {"mode": mode, "max_steps": 14, "save_every": 100, "eval_every": 5,
                           "optimizer": optimizer},
              "model": {"dropout": 0.2, "num_layers": 2}}  # fmt: skip
    straight = load_recipe(small_recipe(tmp_path / "a", **common))
    reference = run_recipe(straight)

    resumed = load_recipe(small_recipe(tmp_path / "b", **common))

    def stop_at_7(progress):
        if progress.step == 7:
            progress.stop.request("interrupted")

    first = run_recipe(resumed, callbacks=[stop_at_7])
    assert first.interrupted and first.progress.step == 7
    assert (tmp_path / "b" / "run" / "checkpoints" / "step-7" / "progress.json").is_file()
    assert not (tmp_path / "b" / "run" / "model.safetensors").exists()
    second = run_recipe(resumed, resume=True)
    assert second.progress.step == 14 and not second.interrupted
    assert_same_weights(tmp_path / "a" / "run", tmp_path / "b" / "run")
    assert second.progress.best_step == reference.progress.best_step
    assert second.progress.best_score == reference.progress.best_score
    assert second.progress.train_tokens == reference.progress.train_tokens == 14 * 8 * 32


def test_gradient_accumulation_matches_a_larger_batch(tmp_path):
    # Both runs eager (with `compile: auto` one run may be compiled and the other not: the
    # worker's TorchDynamo caches differ from test to test) and on SGD: Adam's first steps are
    # ±lr·sign(g), which turns the rounding differences of near-zero gradients (rare
    # characters' embeddings, summed in another order) into lr-sized ones.
    common = {"training": {"mode": "stateless", "max_steps": 6, "eval_every": 100, "save_every": 100,
                           "compile": False, "optimizer": "sgd", "learning_rate": 0.5},
              "evaluation": {"splits": ["test"]}}  # fmt: skip
    big = load_recipe(small_recipe(tmp_path / "big", **common), ["training.batch_size=8"])
    small = load_recipe(
        small_recipe(tmp_path / "small", **common),
        [
            "training.batch_size=4",
            "training.gradient_accumulation_steps=2",
            "training.window_shift=32",
        ],
    )
    big.training.window_shift = 32
    # windows of the same permutation: 2 micro-batches of 4 == 1 batch of 8
    small.training.seed = big.training.seed
    run_recipe(big)
    run_recipe(small)
    assert_same_weights(tmp_path / "big" / "run", tmp_path / "small" / "run", exact=False)


def test_time_budget_stops_training_anneals_the_schedule_and_still_exports(tmp_path):
    training = {"max_steps": 100000, "epochs": 1000, "max_minutes": 0.02, "log_every": 1,
                "schedule": "linear", "learning_rate": 0.01, "warmup_steps": 4}  # fmt: skip
    result = run_recipe(load_recipe(write_recipe(tmp_path, training=training)))
    assert 0 < result.progress.step < 100000
    assert result.progress.stop.reason == "time budget"
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    train = [r for r in records if r["split"] == "train"]
    # by steps the run got nowhere (< 1 % of 100000), by time it used the whole budget:
    # the schedule followed the clock down to its last value. Each logged rate is the linear
    # schedule at the share of the 1.2 s budget elapsed (elapsed_s is rounded to 0.01 s),
    # whatever the machine's speed.
    # The warmup counts steps, whatever the clock: after step s the rate is 0.01 (s + 1) / 4.
    warmup, rest = train[:3], train[3:]
    assert [r["step"] for r in warmup] == [1, 2, 3]
    for r in warmup:
        assert r["learning_rate"] == pytest.approx(0.01 * (r["step"] + 1) / 4, rel=1e-3), r
    for r in rest:
        expected = 0.01 * max(0.0, 1 - r["elapsed_s"] / 1.2)
        assert r["learning_rate"] == pytest.approx(expected, abs=1e-4), r
    assert train[-1]["learning_rate"] == 0.0
    saved = json.loads((tmp_path / "run" / "eval_results.json").read_text())
    assert saved["training"]["stop_reason"] == "time budget"


def test_resume_without_checkpoint_is_a_clear_error(tmp_path, capsys):
    assert main(["train", str(write_recipe(tmp_path)), "--resume"]) == 2
    assert "--resume: no checkpoint under" in capsys.readouterr().err


def test_non_finite_loss_stops_training_with_the_step(tmp_path, monkeypatch, capsys):
    nan_loss_at(monkeypatch, {25})
    recipe = write_recipe(tmp_path)
    assert main(["train", str(recipe)]) == 2
    err = capsys.readouterr().err
    assert "training loss is nan at step 25" in err
    assert "the last good checkpoint is" in err and "step-20" in err
    run = tmp_path / "run"
    assert not (run / "model.safetensors").exists()  # no NaN model is exported
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["best", "step-20"]


def test_evaluate_refuses_nan_weights_and_bad_options(tmp_path, capsys):
    import shutil

    from safetensors.torch import save_file

    recipe = small_recipe(tmp_path, training={"max_steps": 10, "eval_every": 10, "save_every": 10})
    assert main(["train", str(recipe)]) == 0
    run = tmp_path / "run"
    broken = tmp_path / "broken"
    shutil.copytree(run, broken)
    tensors = weights(run)
    tensors["lm_head.bias"] = torch.full_like(tensors["lm_head.bias"], float("nan"))
    save_file(tensors, str(broken / "model.safetensors"))
    capsys.readouterr()
    assert main(["evaluate", str(broken), "--split", "test", "--seq-len", "64"]) == 1
    assert "non-finite metrics (test.loss=nan" in capsys.readouterr().err
    assert main(["evaluate", str(run), "--batch-size", "0"]) == 2
    assert "--batch-size must be >= 1, got 0" in capsys.readouterr().err
    assert main(["evaluate", str(run), "--split", "bogus"]) == 2
    assert "--split 'bogus' is not one of train, validation, test" in capsys.readouterr().err


def test_a_fresh_run_owns_its_output_dir(tmp_path, capsys):
    recipe = small_recipe(tmp_path, training={"max_steps": 10, "eval_every": 10, "save_every": 5})
    assert main(["train", str(recipe)]) == 0
    first = weights(tmp_path / "run")
    capsys.readouterr()
    # a second run into the same folder is refused: nothing of the first run is touched
    assert main(["train", str(recipe), "--set", "training.seed=7"]) == 2
    assert "already holds a run (checkpoints, model.safetensors)" in capsys.readouterr().err
    assert all(torch.equal(first[k], v) for k, v in weights(tmp_path / "run").items())
    # --overwrite replaces it: only the new run's checkpoints remain
    assert main(["train", str(recipe), "--set", "training.seed=7", "--overwrite"]) == 0
    run = tmp_path / "run"
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["best", "step-10", "step-5"]
    assert any(not torch.equal(first[k], v) for k, v in weights(run).items())
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(steps)  # one run's log, not two


def test_unknown_bare_data_source_fails_at_once(tmp_path, capsys):
    recipe = write_recipe(tmp_path, data={"source": "shakespear"})
    with connections() as attempts:
        assert main(["train", str(recipe)]) == 2
    assert attempts == []  # no trip to the Hub
    assert "data.source: 'shakespear' is not an embedded dataset (shakespeare)" in (
        capsys.readouterr().err
    )


def test_push_settings_are_checked_before_training(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))  # no stored token either
    recipe = write_recipe(tmp_path, hub={"push_to_hub": True, "repo_id": "me/tiny"})
    assert main(["train", str(recipe)]) == 2
    assert "hub: " in capsys.readouterr().err
    assert not (tmp_path / "run").exists()  # nothing was trained
    monkeypatch.setenv("HF_TOKEN", "hf_x")
    assert main(["train", str(recipe), "--set", "hub.repo_id=not a repo id"]) == 2
    assert "hub: " in capsys.readouterr().err and not (tmp_path / "run").exists()


def test_preset_overrides_are_reported(caplog):
    import logging

    from hfattn.recipes.model_section import validate_model_section

    with caplog.at_level(logging.WARNING):
        config = validate_model_section(
            {"type": "char-rnn", "preset": "karpathy", "hidden_size": 64, "dropout": 0.1}
        )
    assert config.hidden_size == 64 and config.cell == "lstm"
    assert "model.preset 'karpathy': the recipe overrides its hidden_size" in caplog.text


def test_held_out_text_too_short_for_evaluation_fails_before_training(tmp_path, capsys):
    recipe = write_recipe(
        tmp_path,
        data={"validation_fraction": 0.001},
        evaluation={"batch_size": 100},
    )
    assert main(["train", str(recipe)]) == 2
    assert "evaluation.batch_size: the validation split has" in capsys.readouterr().err
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_checkpoint_write_cut_short_leaves_no_temp_folder(tmp_path, monkeypatch):
    from accelerate import Accelerator

    real_save = Accelerator.save_state

    def save_then_interrupt(self, output_dir=None, **kwargs):
        real_save(self, output_dir, **kwargs)
        if output_dir.endswith("step-10"):
            raise KeyboardInterrupt  # a second SIGTERM arriving mid-write

    monkeypatch.setattr(Accelerator, "save_state", save_then_interrupt)
    recipe = write_recipe(tmp_path, training={"save_every": 5, "eval_every": None})
    with pytest.raises(KeyboardInterrupt):
        run_recipe(load_recipe(recipe))
    names = sorted(p.name for p in (tmp_path / "run" / "checkpoints").iterdir())
    assert names == ["step-5"]  # the complete checkpoint stays; no .tmp-step-10


def test_trained_tokens_count_the_labels_that_count_or_the_real_inputs():
    from hfattn.batching.seq2seq import pad_pairs, pad_sources
    from hfattn.training.engine import trained_tokens

    pairs = pad_pairs([[5, 6, 7], [5]], [[8, 9], [8, 9, 9, 9]], pad_token_id=0)
    assert trained_tokens(pairs) == 2 + 4  # the targets, not the padding or the sources
    labelled = {**pad_sources([[5, 6, 7], [5]], 0), "labels": torch.tensor([1, 0])}
    assert trained_tokens(labelled) == 3 + 1  # a classifier: its real input tokens
    assert trained_tokens(torch.zeros(4, 17, dtype=torch.long)) == 4 * 16  # a window of T + 1
