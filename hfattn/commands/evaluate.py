"""``hfattn evaluate DIR``: loss, perplexity, bits per char and next-char accuracy."""

from __future__ import annotations

import argparse


def register(subparsers) -> None:
    """Add the ``evaluate`` sub-command."""
    parser = subparsers.add_parser(
        "evaluate",
        help="score a trained model folder on its recipe's held-out data",
        description="Score a saved model on the data named by its recipe.yaml (or --data).",
    )
    parser.add_argument("model_dir", help="a folder written by `hfattn train`")
    parser.add_argument("--split", action="append", help="split(s) to score (default: test)")
    parser.add_argument("--data", help="override the data source (name, text file or Hub id)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load the folder and its recipe's data, score, print a table, return 0."""
    import sys
    from pathlib import Path

    from ..recipes import Recipe, RecipeError, load_recipe

    model_dir = Path(args.model_dir)
    if not (model_dir / "config.json").is_file():
        print(f"error: model_dir: {model_dir} has no config.json", file=sys.stderr)
        return 2
    recipe_file = model_dir / "recipe.yaml"
    try:
        recipe = load_recipe(recipe_file) if recipe_file.is_file() else Recipe()
    except RecipeError as err:
        print(f"error: {recipe_file}: {err}", file=sys.stderr)
        return 2

    from transformers import AutoModelForCausalLM, AutoTokenizer

    import hfattn  # noqa: F401

    from ..data.lm import encode_corpus
    from ..data.text import load_text_splits
    from ..evaluation.language_modeling import evaluate_causal_lm
    from .report import print_metrics

    source = args.data or recipe.data.source
    try:
        splits = load_text_splits(
            source,
            text_column=recipe.data.text_column,
            validation_fraction=recipe.data.validation_fraction,
            test_fraction=recipe.data.test_fraction,
        )
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    metrics = {
        split: evaluate_causal_lm(
            model,
            encode_corpus(tokenizer, splits[split]),
            batch_size=args.batch_size,
            seq_len=args.seq_len,
        )
        for split in (args.split or ["test"])
    }
    print_metrics(metrics, title=f"{model_dir} on {source}")
    return 0
