"""``hfattn evaluate DIR``: re-score a saved model with its task's metrics (causal LM: loss,
perplexity, bits per char, next-char accuracy; translation: BLEU, chrF, exact match, ...).
Each split is scored on at most ``evaluation.final_max_examples`` examples, as at the end of
``hfattn train`` (``--max-examples N`` overrides it). ``--data FILE`` scores a single file in
full, every pair, row or character of it, in a column named after the file
(:func:`hfattn.tasks.base.scoring_data`); a dataset folder or Hub id keeps its named splits
(``--split``). The table counts what was scored (``num_examples``, ``num_chars``).
A translation decodes with the model's saved generation settings, the ones the end of
``hfattn train`` scores with (``--num-beams`` / ``--max-new-tokens`` change them), with
``generate()`` or (``--engine ctranslate2``) the run's CTranslate2 export."""

from __future__ import annotations

import argparse

from .arguments import ENGINES

DECODING_OPTIONS = ("num_beams", "max_new_tokens")
"""The options that change how a translation run decodes (translation runs only)."""


def register(subparsers) -> None:
    """Add the ``evaluate`` sub-command."""
    parser = subparsers.add_parser(
        "evaluate",
        help="score a trained model folder on its recipe's held-out data",
        description="Score a saved model on the data named by its recipe.yaml (or --data).",
    )
    parser.add_argument("model_dir", help="a folder written by `hfattn train`")
    parser.add_argument(
        "--split",
        action="append",
        help="split(s) to score (default: test); not with a single --data FILE, scored whole",
    )
    parser.add_argument(
        "--data",
        help="another data source: a single file (spa.txt / .tsv pairs, text, .csv / .jsonl "
        "labelled texts) is scored in full, every pair, row or character; a dataset folder or "
        "Hub id by its named --split",
    )
    parser.add_argument(
        "--batch-size", type=int, help="default: the recipe's evaluation.batch_size"
    )
    parser.add_argument(
        "--seq-len", type=int, help="causal LM window (default: the recipe's evaluation.seq_len)"
    )
    parser.add_argument(
        "--max-examples",
        type=int,
        help="score at most N examples of each split: pairs or texts (a random sample drawn "
        "with the recipe's data.seed), or a causal LM's first N windows of --seq-len tokens "
        "(default: the recipe's evaluation.final_max_examples, else evaluation.max_examples; "
        "a single --data FILE: all)",
        metavar="N",
    )
    parser.add_argument(
        "--num-beams",
        type=int,
        help="translation: beam width (default: the model's generation_config.json, the "
        "recipe's generation.num_beams)",
    )
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        help="translation: most tokens per translation (default: generation_config.json)",
    )
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="torch",
        help="translation: torch (the model's generate(), with loss and token accuracy) or "
        "ctranslate2 (the run's CTranslate2 export, MODEL_DIR/ct2 or MODEL_DIR itself: BLEU, "
        "chrF and exact match)",
    )
    parser.set_defaults(func=run)


def decoding_error(args: argparse.Namespace, task: str) -> str | None:
    """The one-line error for a bad decoding option (``--num-beams``, ``--max-new-tokens``,
    ``--engine``), or ``None``: each must be >= 1, and only a translation run decodes."""
    given = [name for name in DECODING_OPTIONS if getattr(args, name) is not None]
    if args.engine != "torch":
        given.append("engine")
    for name in given:
        flag = "--" + name.replace("_", "-")
        if task != "translation":
            return f"{flag}: only a translation run decodes; {args.model_dir} is a {task} run"
        value = getattr(args, name)
        if name in DECODING_OPTIONS and (isinstance(value, bool) or value < 1):
            return f"{flag} must be >= 1, got {value}"
    return None


def run(args: argparse.Namespace) -> int:
    """Load the folder and its recipe's data, score with the recipe's task, print a table."""
    import sys

    from ..recipes import RecipeError, default_recipe, load_recipe
    from ..recipes.run_checks import check_data_source
    from ..storage.run_folder import recipe_path
    from .inputs import ModelLoadError, locate_local_folder, report_error

    try:  # a missing folder, or one without a config, fails at once
        model_dir = locate_local_folder(args.model_dir)
    except ModelLoadError as err:
        return report_error(err)
    recipe_file = recipe_path(model_dir)
    for flag, value in (("--batch-size", args.batch_size), ("--max-examples", args.max_examples)):
        if value is not None and value < 1:
            print(f"error: {flag} must be >= 1, got {value}", file=sys.stderr)
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
    problem = decoding_error(args, recipe.task)
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:  # a --data typo fails before the model loads
        check_data_source(recipe.task, args.data)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: --data: {str(err).removeprefix('data.source: ')}", file=sys.stderr)
        return 2

    from ..tasks import get_task
    from ..tasks.base import WHOLE_FILE_SPLIT, scores_whole_file
    from .logging_setup import configure_logging
    from .model_loading import load_model_and_tokenizer

    configure_logging()
    task = get_task(recipe.task)
    whole = scores_whole_file(args.data)
    if whole:
        if args.split:
            print(f"note: --split is ignored: {args.data} is scored whole", file=sys.stderr)
        recipe.evaluation.max_examples = recipe.evaluation.final_max_examples = None  # all
    if args.max_examples is not None:
        recipe.evaluation.final_max_examples = args.max_examples
    splits = [WHOLE_FILE_SPLIT] if whole else args.split or ["test"]
    decoding = {name: getattr(args, name) for name in DECODING_OPTIONS}
    if args.engine == "ctranslate2":
        from ..export.export_folder import export_of, missing_export
        from ..export.serving import evaluate_export

        export = export_of(model_dir)
        if export is None:
            return report_error(missing_export(model_dir))
        try:
            metrics = evaluate_export(export, recipe, splits, data=args.data, **decoding)
        except (FileNotFoundError, ValueError, ImportError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        return _report(args, model_dir, recipe, _named(metrics, args.data, whole))
    try:  # one clear message for unreadable weights, config or tokenizer files
        load_model_and_tokenizer(str(model_dir), task.card.auto_class)
    except ModelLoadError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    options = decoding if recipe.task == "translation" else {}
    try:
        metrics = task.evaluate_folder(model_dir, recipe, splits, data=args.data, **options)
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return _report(args, model_dir, recipe, _named(metrics, args.data, whole))


def _named(metrics: dict[str, dict], data: str | None, whole: bool) -> dict[str, dict]:
    """``metrics`` with the column of a file scored whole named after the file."""
    from pathlib import Path

    from ..tasks.base import WHOLE_FILE_SPLIT

    return {Path(data).name: metrics[WHOLE_FILE_SPLIT]} if whole else metrics


def _report(args: argparse.Namespace, model_dir, recipe, metrics: dict) -> int:
    """Print the table and the warnings; 1 when a metric is not finite."""
    import math
    import sys

    from ..evaluation.language_modeling import explain_zero_state
    from ..storage.run_status import training_shortfall
    from .report import print_metrics

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
