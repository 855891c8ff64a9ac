"""Small but real training runs (char-RNN, translation encoder-decoders, classifiers) for the
publishing tests and the Space benchmarks.

A run folder is what ``hfattn train`` leaves behind: the saved model + tokenizer (with the
modeling source and ``auto_map``), ``recipe.yaml``, ``eval_results.json`` (measured on the
held-out split), ``metrics.jsonl``, ``loss_curve.png`` and a ``checkpoints/`` folder that must
never be published. It is produced here by the training engine itself, on a tiny recipe.
"""

from __future__ import annotations

from pathlib import Path

from tests.helpers.recipe_helpers import write_recipe

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
TINY_CLASSIFICATION_TRAINING = [
    "data.train_size=300",
    "training.max_steps=20",
    "training.epochs=1",
    "training.eval_every=null",
    "training.save_every=null",
    "evaluation.splits=[test]",
]
"""Overrides that turn a classification recipe into a few-second run (scored on test)."""


PUBLISHED = {
    "README.md",
    "config.json",
    "config_checks.py",
    "configuration_char_rnn.py",
    "eval_results.json",
    "generation_config.json",
    "loss_curve.png",
    "model.safetensors",
    "modeling_char_rnn.py",
    "neural_cache.py",
    "recurrent_cache.py",
    "recipe.yaml",
    "rnn_layers.py",
    "tokenizer.json",
    "tokenizer_config.json",
}
"""The files that ``hfattn push`` uploads of a :func:`build_char_rnn_run` folder."""


def build_char_rnn_run(
    out: Path,
    *,
    embedding_dim: int = 16,
    hidden_size: int = 32,
    steps: int = 40,
    seed: int = 0,
    with_results: bool = True,
) -> Path:
    """Train a tiny GRU char-RNN with ``run_recipe`` for ``steps`` steps into ``out``."""
    from hfattn.orchestration.run import run_recipe
    from hfattn.recipes import load_recipe

    out = Path(out)
    recipe = write_recipe(
        out.parent / f"{out.name}_recipe",
        name="char_rnn_tiny_test",
        output_dir=str(out),
        model={"embedding_dim": embedding_dim, "hidden_size": hidden_size},
        training={"max_steps": steps, "seed": seed, "eval_every": steps, "save_every": steps // 2},
        evaluation={"splits": ["test"]},
        generation={"prompt": "ROMEO:"},
        hub={"tags": ["shakespeare", "tiny"], "license": "mit"},
    )
    run_recipe(load_recipe(recipe))
    if not with_results:
        (out / "eval_results.json").unlink()
    return out


TINY_TRANSLATION_MODELS = {
    "bahdanau": {
        "type": "bahdanau",
        "attention": "bahdanau",
        "embedding_dim": 16,
        "encoder_hidden_size": 32,
        "bidirectional": True,
        "decoder_hidden_size": 64,
    },
    "marian": {
        "type": "marian",
        "d_model": 32,
        "encoder_layers": 1,
        "decoder_layers": 1,
        "encoder_attention_heads": 2,
        "decoder_attention_heads": 2,
        "encoder_ffn_dim": 64,
        "decoder_ffn_dim": 64,
        "max_position_embeddings": 64,
    },
    "vaswani": {
        "type": "vaswani",
        "encoder_layers": 2,
        "decoder_layers": 2,
        "d_model": 32,
        "num_heads": 4,
        "ffn_dim": 64,
        "dropout": 0.0,
        "max_position_embeddings": 64,
    },
}
"""Tiny encoder-decoders for the translation-task tests (Marian shows the task is model-agnostic;
the Vaswani Transformer has 2+2 layers of 4 heads, so layer and head choices are real)."""


def build_translation_run(
    out: Path,
    *,
    model: str = "bahdanau",
    steps: int = 60,
    source: str = "date-normalization",
    training: dict | None = None,
    tokenizer: dict | None = None,
) -> Path:
    """Train a tiny translation model on a small generated task with ``run_recipe``
    (``training`` overrides fields of the recipe's ``training:`` section; ``tokenizer`` is the
    ``tokenizer:`` section, characters by default)."""
    from hfattn.orchestration.run import run_recipe
    from hfattn.recipes import load_recipe

    out = Path(out)
    recipe = write_recipe(
        out.parent / f"{out.name}_recipe",
        base={},
        name=f"{model}_tiny_test",
        task="translation",
        output_dir=str(out),
        model=TINY_TRANSLATION_MODELS[model],
        tokenizer=tokenizer or {"type": "char"},
        data={"source": source, "size": 1500, "validation_fraction": 0.1, "test_fraction": 0.1},
        training={
            "batch_size": 32,
            "max_steps": steps,
            "learning_rate": 0.005,
            "log_every": 10,
            "eval_every": steps,
            "save_every": steps,
            **(training or {}),
        },
        evaluation={"splits": ["test"], "batch_size": 64, "max_new_tokens": 16},
        generation={"max_new_tokens": 16, "num_beams": 2, "examples": ["April 22, 2019"]},
        hub={"language": ["en"], "tags": ["tiny"]},
    )
    run_recipe(load_recipe(recipe))
    return out


def build_vaswani_translation_run(out: Path, *, steps: int = 200, seed: int = 0) -> Path:
    """A tiny Vaswani Transformer (2+2 layers, 4 heads, d 32) trained for ``steps`` steps on
    date normalisation: long enough that different dates translate differently (no
    mid-training validation, to keep it quick; the test split is still evaluated)."""
    return build_translation_run(
        out,
        model="vaswani",
        steps=steps,
        training={"epochs": 100, "seed": seed, "log_every": 50, "eval_every": None},
    )


def build_classification_run(
    tmp: Path, recipe: str, *overrides: str, out: Path | None = None
) -> Path:
    """Run ``hfattn train recipes/<recipe> --set ...`` (:data:`TINY_CLASSIFICATION_TRAINING`,
    then ``overrides``) into ``out`` (by default ``tmp/run``); returns the run."""
    from hfattn.cli import main as cli_main

    out = Path(out) if out is not None else Path(tmp) / "run"
    args = [*TINY_CLASSIFICATION_TRAINING, *overrides, f"output_dir={out}"]
    command = ["train", str(RECIPES / recipe), *(x for a in args for x in ("--set", a))]
    if cli_main(command) != 0:
        raise RuntimeError(f"hfattn {' '.join(command)} failed")
    return out


def build_reber_attention_run(out: Path) -> Path:
    """The Reber grammar classifier with attention pooling (remote code on the Hub), trained
    by :func:`build_classification_run` into ``out``."""
    return build_classification_run(
        Path(out).parent, "rnn_classifier_reber.yaml", "model.pooling=attention", out=out
    )
