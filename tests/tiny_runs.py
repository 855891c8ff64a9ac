"""Small but real training runs of the char-RNN for the publishing tests.

A run folder is what ``hfattn train`` leaves behind: the saved model + tokenizer (with the
modeling source and ``auto_map``), ``recipe.yaml``, ``eval_results.json`` (measured on the
held-out split), ``metrics.jsonl``, ``loss_curve.png`` and a ``checkpoints/`` folder that must
never be published. It is produced here by the training engine itself, on a tiny recipe.
"""

from __future__ import annotations

from pathlib import Path

from recipe_helpers import write_recipe


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
    from hfattn.recipes import load_recipe, run_recipe

    out = Path(out)
    recipe = write_recipe(
        out.parent / f"{out.name}_recipe",
        name="char_rnn_tiny_test",
        output_dir=str(out),
        model={"embedding_dim": embedding_dim, "hidden_size": hidden_size},
        training={"max_steps": steps, "seed": seed, "eval_every": steps, "save_every": steps // 2},
        evaluation={"splits": ["test"]},
        generation={"prompt": "ROMEO:"},
        hub={"tags": ["shakespeare", "tiny"]},
    )
    run_recipe(load_recipe(recipe))
    if not with_results:
        (out / "eval_results.json").unlink()
    return out
