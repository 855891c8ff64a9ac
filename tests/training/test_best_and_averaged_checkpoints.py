"""The Accelerate training engine's kept model on tiny recipes: the best checkpoint follows
``training.metric_for_best_model``; ``training.average_checkpoints`` averages the newest
checkpoints, which compete with the best single one; the final evaluations say what they
score before they run.

Runs that assert no score train on 6000 characters (``small_recipe``): quick validations."""

import json
import logging
import re
from unittest import mock

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

from hfattn.cli import main
from hfattn.orchestration.run import run_recipe
from hfattn.recipes import load_recipe
from tests.helpers.recipe_helpers import small_recipe, write_recipe


@pytest.mark.parametrize("metric", ["accuracy", "loss"])
def test_best_checkpoint_follows_metric_for_best_model(tmp_path, metric):
    """``training.metric_for_best_model`` picks the kept model: the largest accuracy (larger is
    better by default for names not ending in ``loss``) or the smallest loss."""
    training = {"max_steps": 30, "epochs": 2, "eval_every": 5, "save_every": 100,
                "metric_for_best_model": metric}  # fmt: skip
    result = run_recipe(load_recipe(small_recipe(tmp_path, training=training)))
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    validation = [r for r in records if r["split"] == "validation"]
    assert len(validation) == 6
    pick = max if metric == "accuracy" else min
    best = pick(validation, key=lambda r: (r[metric], -r["step"]) if pick is max else r[metric])
    assert result.progress.best_step == best["step"]
    assert result.progress.best_score == best[metric]
    kept = AutoModelForCausalLM.from_pretrained(tmp_path / "run").state_dict()
    saved = load_file(str(tmp_path / "run" / "checkpoints" / "best" / "model.safetensors"))
    assert saved.keys() == kept.keys() and all(torch.equal(kept[k], saved[k]) for k in saved)


def test_unknown_metric_for_best_model_is_refused_before_training(tmp_path, capsys):
    recipe = write_recipe(tmp_path, training={"metric_for_best_model": "bleu"})
    assert main(["train", str(recipe)]) == 2
    err = capsys.readouterr().err
    assert "training.metric_for_best_model: 'bleu' is not one of loss, perplexity" in err
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_checkpoint_average_is_the_mean_of_the_saved_weights(tmp_path):
    """``average_checkpoint_weights``: floating tensors averaged (dtype kept), other tensors
    from the newest folder; checkpoints of another model are refused naming the folder."""
    from safetensors.torch import save_file

    from hfattn.training.checkpoints import average_checkpoint_weights

    folders = []
    for step, value in ((10, 1.0), (20, 2.0), (30, 6.0)):
        folder = tmp_path / f"step-{step}"
        folder.mkdir()
        save_file(
            {
                "w": torch.full((2, 3), value),
                "half": torch.full((4,), value, dtype=torch.bfloat16),
                "count": torch.tensor([step]),
            },
            str(folder / "model.safetensors"),
        )
        folders.append(folder)
    mean = average_checkpoint_weights(folders)
    assert torch.equal(mean["w"], torch.full((2, 3), 3.0))
    assert mean["half"].dtype == torch.bfloat16 and torch.equal(
        mean["half"], torch.full((4,), 3.0, dtype=torch.bfloat16)
    )
    assert torch.equal(mean["count"], torch.tensor([30]))
    other = tmp_path / "other"
    other.mkdir()
    save_file({"w": torch.zeros(3, 2), "half": torch.zeros(4), "count": torch.tensor([1])},
              str(other / "model.safetensors"))  # fmt: skip
    with pytest.raises(ValueError, match="other holds other tensors"):
        average_checkpoint_weights([other, *folders])


def test_averaged_checkpoints_compete_with_the_best_checkpoint(tmp_path):
    """``training.average_checkpoints: 3``: the mean of the newest three checkpoints is scored
    on validation (a ``validation-averaged`` record naming their steps) and is the saved
    model exactly when its loss beats every single validation."""
    from hfattn.storage.run_folder import complete_checkpoints
    from hfattn.training.checkpoints import average_checkpoint_weights

    training = {"max_steps": 30, "epochs": 2, "eval_every": 10, "save_every": 5,
                "keep_checkpoints": 3, "average_checkpoints": 3, "learning_rate": 0.03}  # fmt: skip
    result = run_recipe(load_recipe(small_recipe(tmp_path, training=training)))
    run = tmp_path / "run"
    records = [json.loads(line) for line in (run / "metrics.jsonl").open()]
    averaged = [r for r in records if r["split"] == "validation-averaged"]
    assert [r["averaged_steps"] for r in averaged] == [[20, 25, 30]]
    best_single = min(r["loss"] for r in records if r["split"] == "validation")
    folders = complete_checkpoints(run)
    assert [f.name for f in folders] == ["step-20", "step-25", "step-30"]
    kept = AutoModelForCausalLM.from_pretrained(run).state_dict()
    mean = average_checkpoint_weights(folders)
    summary = json.loads((run / "eval_results.json").read_text())["training"]
    if averaged[0]["loss"] < best_single:
        assert result.progress.best_averaged_steps == [20, 25, 30]
        assert summary["best_averaged_steps"] == [20, 25, 30]
        assert all(torch.equal(kept[k], mean[k]) for k in mean)
        assert result.metrics["validation"]["loss"] == pytest.approx(averaged[0]["loss"])
    else:
        assert result.progress.best_averaged_steps is None
        assert summary["best_averaged_steps"] is None
        assert not all(torch.equal(kept[k], mean[k]) for k in mean)


def test_averaged_checkpoints_compete_with_the_last_step_without_periodic_validation(tmp_path):
    """``eval_every: null``: no validation while training; at the end the last step and the
    mean of the newest two checkpoints are validated, and the better one is the model."""
    training = {"max_steps": 20, "epochs": 2, "eval_every": None, "save_every": 10,
                "keep_checkpoints": 2, "average_checkpoints": 2, "learning_rate": 0.03}  # fmt: skip
    result = run_recipe(load_recipe(small_recipe(tmp_path, training=training)))
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    validations = [(r["split"], r["step"]) for r in records if r["split"].startswith("valid")]
    assert validations == [("validation", 20), ("validation-averaged", 20)]
    averaged = next(r for r in records if r["split"] == "validation-averaged")
    last = next(r for r in records if r["split"] == "validation")
    assert averaged["averaged_steps"] == [10, 20]
    won = averaged["loss"] < last["loss"]
    assert (result.progress.best_averaged_steps == [10, 20]) == won


@pytest.mark.parametrize(
    ("training", "message"),
    [
        ({"average_checkpoints": 3, "keep_checkpoints": 2},
         "training.average_checkpoints: must be from 2 to training.keep_checkpoints=2"),
        ({"average_checkpoints": 1},
         "training.average_checkpoints: must be from 2 to training.keep_checkpoints=2"),
    ],
)  # fmt: skip
def test_average_checkpoints_is_checked_before_training(tmp_path, capsys, training, message):
    assert main(["train", str(write_recipe(tmp_path, training=training))]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_averaged_weights_load_into_a_model_with_tied_embeddings(tmp_path):
    """Accelerate saves one name for tied tensors (``safetensors.torch.save_model``): the
    average still loads, the tie kept; a tensor that is really missing is refused."""
    from safetensors.torch import save_file, save_model

    from hfattn.training.checkpoints import average_checkpoint_weights, load_saved_weights

    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(5, 3)
            self.head = torch.nn.Linear(3, 5)
            self.head.weight = self.embed.weight

    folders = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        folder = tmp_path / f"step-{seed}"
        folder.mkdir()
        save_model(Tied(), str(folder / "model.safetensors"))
        folders.append(folder)
    saved = [load_file(str(f / "model.safetensors")) for f in folders]
    assert len(saved[0]) == 2  # the tied weight under one name, and the head's bias
    model = Tied()
    load_saved_weights(model, average_checkpoint_weights(folders))
    name = next(k for k in saved[0] if k.endswith("weight"))
    torch.testing.assert_close(model.embed.weight, (saved[0][name] + saved[1][name]) / 2)
    assert model.head.weight is model.embed.weight
    save_file({"head.bias": torch.zeros(5)}, str(tmp_path / "partial.safetensors"))
    with pytest.raises(ValueError, match="missing"):
        load_saved_weights(model, load_file(str(tmp_path / "partial.safetensors")))


def test_the_final_evaluations_are_announced_before_they_run(tmp_path, caplog):
    """Once the progress bar is closed, each evaluation says what it scores before it starts
    (a final evaluation takes seconds to minutes and printed nothing)."""
    from hfattn.training import finishing

    def said() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == finishing.logger.name]

    scored = []
    evaluate = finishing.TrainingSession.evaluate

    def spy(run, split, final=False):
        scored.append((split, final, len(said())))
        return evaluate(run, split, final)

    training = {"max_steps": 30, "epochs": 2, "eval_every": 20, "save_every": 20,
                "average_checkpoints": 2}  # fmt: skip
    with (
        mock.patch.object(finishing.TrainingSession, "evaluate", spy),
        caplog.at_level(logging.INFO, logger=finishing.logger.name),
    ):
        run_recipe(load_recipe(small_recipe(tmp_path, training=training)))
    final = said()[2]
    assert said() == [
        "evaluating the validation split with the weights of step 30...",
        "evaluating the validation split with the mean weights of 2 checkpoints...",
        final,
        "evaluating the test split with the final weights...",
    ]
    # the kept weights were validated already, the same way: their scores, not a new decoding
    assert re.fullmatch(
        r"the validation split with the final weights: the scores of (step \d+|the mean of "
        r"steps \[20, 30\]), already computed the same way",
        final,
    )
    # step 20's periodic validation unannounced (the bar shows it), then each after its line
    assert scored == [
        ("validation", False, 0),
        ("validation", False, 1),
        ("validation", False, 2),
        ("test", True, 4),
    ]
