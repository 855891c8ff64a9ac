"""``hfattn evaluate DIR``: re-score a saved model with its task's metrics (causal LM: loss,
perplexity, bits per char, next-char accuracy; translation: BLEU, chrF, exact match, ...)."""

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
    parser.add_argument(
        "--batch-size", type=int, help="default: the recipe's evaluation.batch_size"
    )
    parser.add_argument(
        "--seq-len", type=int, help="causal LM window (default: the recipe's evaluation.seq_len)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load the folder and its recipe's data, score with the recipe's task, print a table."""
    import math
    import sys
    from pathlib import Path

    from ..orchestration import check_data_source
    from ..recipes import RecipeError, default_recipe, load_recipe
    from ..run_folder import recipe_path

    model_dir = Path(args.model_dir)
    if not any((model_dir / name).is_file() for name in ("config.json", "adapter_config.json")):
        print(
            f"error: model_dir: {model_dir} has neither config.json nor adapter_config.json",
            file=sys.stderr,
        )
        return 2
    recipe_file = recipe_path(model_dir)
    if args.batch_size is not None and args.batch_size < 1:
        print(f"error: --batch-size must be >= 1, got {args.batch_size}", file=sys.stderr)
        return 2
    for split in args.split or []:
        if split not in ("train", "validation", "test"):
            print(
                f"error: --split {split!r} is not one of train, validation, test", file=sys.stderr
            )
            return 2
    try:
        recipe = load_recipe(recipe_file) if recipe_file.is_file() else default_recipe()
        if args.batch_size is not None:
            recipe.evaluation.batch_size = args.batch_size
        if args.seq_len is not None:
            if not hasattr(recipe.evaluation, "seq_len"):
                raise RecipeError(f"--seq-len: task {recipe.task!r} has no evaluation.seq_len")
            recipe.evaluation.seq_len = args.seq_len
    except RecipeError as err:
        print(f"error: {recipe_file}: {err}", file=sys.stderr)
        return 2
    try:  # a --data typo fails before the model loads
        check_data_source(recipe.task, args.data)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: --data: {str(err).removeprefix('data.source: ')}", file=sys.stderr)
        return 2

    from ..logging_setup import configure_logging
    from ..tasks import get_task
    from .loading import ModelLoadError, load_model_and_tokenizer
    from .report import print_metrics

    configure_logging()
    task = get_task(recipe.task)
    try:  # one clear message for unreadable weights, config or tokenizer files
        load_model_and_tokenizer(str(model_dir), task.card.auto_class)
    except ModelLoadError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        metrics = task.evaluate_folder(model_dir, recipe, args.split or ["test"], data=args.data)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    from ..evaluation.language_modeling import explain_zero_state
    from ..run_folder import training_shortfall

    title = f"{model_dir} on {args.data or recipe.data.source}"
    print_metrics(metrics, title=title, note=explain_zero_state(metrics))
    shortfall = training_shortfall(model_dir)
    if shortfall is not None:
        print(f"warning: {model_dir}: {shortfall}", file=sys.stderr)
    broken = [
        f"{split}.{name}={value}"
        for split, scores in metrics.items()
        for name, value in scores.items()
        if isinstance(value, float) and not math.isfinite(value)
    ]
    if broken:
        print(
            f"error: non-finite metrics ({', '.join(broken)}): the weights are broken",
            file=sys.stderr,
        )
        return 1
    return 0
