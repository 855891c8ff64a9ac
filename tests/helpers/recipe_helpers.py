"""Tiny recipes on a small text file, for the training and CLI tests."""

from __future__ import annotations

from pathlib import Path

import yaml

from hfattn.data.shakespeare import play_text

TINY_RECIPE = {
    "name": "tiny",
    "model": {"type": "char-rnn", "cell": "gru", "embedding_dim": 8, "hidden_size": 32},
    "training": {
        "mode": "stateful",
        "seq_len": 32,
        "batch_size": 8,
        "epochs": 1,
        "max_steps": 40,
        "optimizer": "adamw",
        "learning_rate": 0.01,
        "log_every": 5,
        "eval_every": 20,
        "save_every": 20,
    },
    "evaluation": {"splits": ["validation", "test"], "batch_size": 4, "seq_len": 64},
    "generation": {"prompt": "MACBETH:\n", "max_new_tokens": 40, "temperature": 0.8},
}


def corpus_file(folder: Path, chars: int = 60_000) -> Path:
    """A slice of Macbeth as a local text file (the same code path as tiny-shakespeare)."""
    path = Path(folder) / "input.txt"
    if not path.exists():
        path.write_text(play_text("macbeth")[:chars], encoding="utf-8")
    return path


def write_recipe(
    folder: Path, filename: str = "recipe.yaml", base: dict | None = None, **sections
) -> Path:
    """Write ``base`` (default :data:`TINY_RECIPE` on a slice of Macbeth) with ``sections``
    merged in (one level deep)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if base is None:
        recipe = {k: (dict(v) if isinstance(v, dict) else v) for k, v in TINY_RECIPE.items()}
        recipe["data"] = {
            "source": str(corpus_file(folder)),
            "validation_fraction": 0.1,
            "test_fraction": 0.1,
        }
    else:
        recipe = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
    recipe["output_dir"] = str(folder / "run")
    for key, value in sections.items():
        if isinstance(value, dict):
            recipe.setdefault(key, {}).update(value)
        else:
            recipe[key] = value
    path = folder / filename
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    return path


def small_recipe(folder: Path, **sections) -> Path:
    """:func:`write_recipe` on 6000 characters of Macbeth (quick validations)."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    corpus_file(folder, chars=6000)  # write_recipe then reads this file
    return write_recipe(folder, **sections)
