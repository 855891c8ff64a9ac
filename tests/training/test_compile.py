"""``training.compile: true`` / ``regional``: the loss step through ``torch.compile`` trains the
same model.

Tolerance: TorchInductor fuses the ops of the forward and backward into its own C++ kernels
(vectorised ``exp`` / ``tanh``, reductions summed in another order), so a compiled step
differs from the eager one by float32 rounding, about 1e-7 of the value per op; over the few
optimizer steps here the train losses have stayed within 3e-7 (relative) of the eager run's.
``rtol=1e-4`` leaves a margin of over 300 times that and is still 25 times smaller than the
relative change of the loss from one step to the next (above 2.5e-3). The tiny models have no
dropout: compiled dropout draws its masks from Inductor's own generator, not eager's.

The runs of ``make test`` compile with ``aot_eager``: the same TorchDynamo graphs and guards
and the same AOTAutograd forward and backward as Inductor, run by eager kernels, so graphs,
regions, checkpoint and resume are checked without a C++ compiler run per generated kernel.
Inductor's own kernels (the Transformer's ``compile: true`` run on length buckets) are the
``inductor`` mark's test: half a minute of cold compile on 2 cores, so ``make test`` leaves it
out; ``pytest -m inductor`` runs it.
"""

import functools
import json

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

from hfattn.orchestration.run import run_recipe
from hfattn.recipes import load_recipe
from hfattn.recipes.schema import RecipeError
from tests.helpers.recipe_helpers import write_recipe
from tests.helpers.tiny_runs import RECIPES, TINY_TRANSLATION_MODELS

RTOL = 1e-4


def train_losses(run_dir) -> list[float]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r["loss"] for r in map(json.loads, lines) if r["split"] == "train"]


def weights(path):
    return load_file(str(path))


def assert_same_model(compiled_dir, eager_dir, auto_class, skip: str | None = None):
    """The same state-dict keys (no ``_orig_mod.``), close weights (but those whose names end
    with ``skip``) and a folder that loads. ``atol=1e-5``: Adam divides a near-zero gradient
    by its own running size, so a weight whose gradient is all rounding noise moves by up to
    ~1e-5 differently in the two runs after these few steps (2e-6 seen)."""
    compiled = weights(compiled_dir / "model.safetensors")
    eager = weights(eager_dir / "model.safetensors")
    assert compiled.keys() == eager.keys()
    for key in (k for k in eager if skip is None or not k.endswith(skip)):
        torch.testing.assert_close(compiled[key], eager[key], rtol=RTOL, atol=1e-5, msg=key)
    loaded = auto_class.from_pretrained(compiled_dir)
    assert set(loaded.state_dict()) >= set(compiled)


def compile_with(monkeypatch, backend: str) -> None:
    """Have ``torch.compile`` use ``backend`` (Inductor's is the default) from a fresh
    TorchDynamo cache."""
    if backend != "inductor":
        monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend=backend))
    torch._dynamo.reset()


@pytest.mark.slow
def test_stateful_char_rnn_compiles_checkpoints_and_resumes(tmp_path, monkeypatch):
    """Stateful char-RNN: a carried state (two graphs: the first batch of an epoch has none);
    a compiled run stopped at step 3 and resumed ends where the eager run does."""
    compile_with(monkeypatch, "aot_eager")
    common = {
        "model": {"embedding_dim": 8, "hidden_size": 16},
        "training": {"seq_len": 8, "max_steps": 6, "log_every": 1, "eval_every": 3,
                     "save_every": 3},
        "evaluation": {"splits": ["test"], "seq_len": 32},
        "generation": {"max_new_tokens": 10},
    }  # fmt: skip
    eager = run_recipe(load_recipe(write_recipe(tmp_path / "eager", **common)))
    recipe = load_recipe(write_recipe(tmp_path / "compiled", **common), ["training.compile=true"])

    def stop_at_3(progress):
        if progress.step == 3:
            progress.stop.request("interrupted")

    assert run_recipe(recipe, callbacks=[stop_at_3]).interrupted
    run = tmp_path / "compiled" / "run"
    checkpoint = weights(run / "checkpoints" / "step-3" / "model.safetensors")
    assert checkpoint.keys() == weights(eager.output_dir / "model.safetensors").keys()
    resumed = run_recipe(recipe, resume=True)

    assert resumed.progress.step == 6
    assert train_losses(run) == pytest.approx(train_losses(eager.output_dir), rel=RTOL)
    assert resumed.metrics["test"]["loss"] == pytest.approx(eager.metrics["test"]["loss"], rel=RTOL)
    assert_same_model(run, eager.output_dir, AutoModelForCausalLM)
    assert resumed.sample  # generation after training runs on the model itself


def translation_run(folder, model=None, **training):
    """A 1+1-layer Vaswani Transformer (d 32, 4 heads, no dropout unless ``model`` sets it)
    trained 6 steps on dates."""
    recipe = write_recipe(
        folder,
        base={},
        name="vaswani_compile_test",
        task="translation",
        model={**TINY_TRANSLATION_MODELS["vaswani"], "encoder_layers": 1, "decoder_layers": 1,
               **(model or {})},
        tokenizer={"type": "char"},
        data={"source": "date-normalization", "size": 600},
        training={"batch_size": 32, "max_steps": 6, "learning_rate": 0.005, "log_every": 1,
                  "eval_every": None, "save_every": 6, **training},
        evaluation={"splits": ["test"], "batch_size": 64, "max_new_tokens": 12},
        generation={"max_new_tokens": 12, "num_beams": 2, "examples": ["April 22, 2019"]},
    )  # fmt: skip
    return run_recipe(load_recipe(recipe))


BUCKETS = {"token_budget": 400, "length_buckets": 2}
"""Batches in two length buckets, their dimensions marked dynamic: one graph for both."""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("setting", "backend", "batching"),
    [
        pytest.param(True, "inductor", BUCKETS, marks=pytest.mark.inductor),
        ("regional", "aot_eager", {}),
    ],
    ids=["inductor-buckets", "regional-padded"],
)
def test_vaswani_translation_compiles(setting, backend, batching, tmp_path, monkeypatch):
    """Inductor's kernels for length buckets (one graph with dynamic sizes, which Inductor
    compiles once for the run), padded batches of several lengths under ``regional`` (each
    layer and the modules around them compiled on their own): the eager run's losses and
    weights; the evaluation after training (greedy decoding, BLEU) runs on the model itself."""
    eager = translation_run(tmp_path / "eager", **batching)
    compile_with(monkeypatch, backend)
    compiled = translation_run(tmp_path / "compiled", compile=setting, **batching)
    if batching:
        records = [json.loads(line) for line in (compiled.output_dir / "metrics.jsonl").open()]
        assert {r["compiles"] for r in records if r["split"] == "train"} == {1}
    assert train_losses(compiled.output_dir) == pytest.approx(
        train_losses(eager.output_dir), rel=RTOL
    )
    test, reference = compiled.metrics["test"], eager.metrics["test"]
    assert test["loss"] == pytest.approx(reference["loss"], rel=RTOL)
    assert "bleu" in test
    # the key biases get no gradient (softmax ignores a shift shared by every key): Adam turns
    # their rounding noise into full steps, so only the other weights are compared
    assert_same_model(
        compiled.output_dir, eager.output_dir, AutoModelForSeq2SeqLM, skip=".k_proj.bias"
    )


@pytest.mark.slow
def test_r_drop_and_word_dropout_compile_to_the_eager_losses(tmp_path, monkeypatch):
    """R-Drop's two passes run through the compiled model, and the decoder inputs that word
    dropout adds to a batch are in it when the batch's dimensions are marked dynamic: batches
    in two length buckets share the one graph, with the eager run's losses."""
    regularized = {"r_drop_alpha": 1.0, "word_dropout": 0.2, **BUCKETS}
    dropout = {"dropout": 0.1}  # R-Drop compares two dropout masks
    eager = translation_run(tmp_path / "eager", dropout, **regularized)
    compile_with(monkeypatch, "aot_eager")
    compiled = translation_run(tmp_path / "compiled", dropout, compile=True, **regularized)
    assert train_losses(compiled.output_dir) == pytest.approx(
        train_losses(eager.output_dir), rel=RTOL
    )
    records = [json.loads(line) for line in (compiled.output_dir / "metrics.jsonl").open()]
    assert [r["compiles"] for r in records if r["split"] == "train"] == [1] * 6


@pytest.mark.parametrize(
    "recipe", ["bahdanau_dates_en_es.yaml", "rnn_classifier_genre.yaml", "seq2seq_spa_eng.yaml"]
)
def test_recurrence_over_padded_batches_is_refused(recipe):
    """Bahdanau / Luong encoder-decoders and the RNN classifier: one line, at recipe check."""
    with pytest.raises(RecipeError, match=r"^training\.compile: model\.type .* compiled anew"):
        load_recipe(RECIPES / recipe, ["training.compile=true"])
    assert load_recipe(RECIPES / recipe).training.compile == "auto"  # off for these models
