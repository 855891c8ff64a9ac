"""``hfattn baseline RECIPE.yaml [--vectorizer ...] [--classifier ...]``: the classic
bag-of-words / TF-IDF + Naive Bayes / linear SVM baselines
(:mod:`hfattn.tasks.classification.baselines`) on a classification recipe's data, splits and
metric files."""

from __future__ import annotations

import argparse

from .arguments import add_recipe_arguments
from .inputs import load_recipe_or_report, report_error

# Literal copies of hfattn.tasks.classification.baselines' choices: importing it here would
# load scikit-learn for `hfattn --help` (tests/tasks/test_baselines.py checks that both stay equal).
VECTORIZER_CHOICES = ("count", "tfidf", "tfidf-thesis")
CLASSIFIER_CHOICES = ("nb", "svm", "linear-svc")
STOP_WORD_CHOICES = ("none", "spanish", "english")
TOKEN_CHOICES = ("words", "symbols")


def register(subparsers) -> None:
    """Add the ``baseline`` sub-command."""
    parser = subparsers.add_parser(
        "baseline",
        help="bag-of-words / TF-IDF + Naive Bayes / linear SVM on a classification recipe",
        description=(
            "Fit scikit-learn baselines on the train split of a classification recipe's data "
            "and score its evaluation splits; each vectorizer × classifier pair writes "
            "eval_results.json and confusion_matrix.json to "
            "<runs>/<name>-baseline-<vectorizer>-<classifier>."
        ),
    )
    add_recipe_arguments(
        parser,
        recipe_help="a recipe YAML with task: classification, or a shipped one's name",
        set_example="data.source=reber",
    )
    parser.add_argument(
        "--vectorizer",
        nargs="+",
        choices=VECTORIZER_CHOICES,
        default=["tfidf"],
        help="count: bag of words; tfidf: scikit-learn's default (smooth idf, L2 rows); "
        "tfidf-thesis: tf = f/|d|, idf = ln(|C|/df) (default: tfidf)",
    )
    parser.add_argument(
        "--classifier",
        nargs="+",
        choices=CLASSIFIER_CHOICES,
        default=["nb"],
        help="nb: MultinomialNB; svm: SVC(kernel='linear'), Navarro Castillo's; "
        "linear-svc: LinearSVC (default: nb)",
    )
    parser.add_argument(
        "--stop-words",
        choices=STOP_WORD_CHOICES,
        help="stop words removed before counting (default: spanish for reviews-es, else none)",
    )
    parser.add_argument(
        "--tokens",
        choices=TOKEN_CHOICES,
        help="words: scikit-learn's default, 2+ characters (Navarro Castillo's); symbols: every "
        "non-space run (default: symbols for reber, else words)",
    )
    parser.add_argument(
        "--ngram-max",
        type=int,
        default=1,
        help="count n-grams of 1..N tokens (default: 1)",
    )
    parser.add_argument(
        "--output-root",
        help="folder of the result folders (default: the parent of the recipe's output_dir)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load the recipe and its data, fit and score every requested pair, write and print."""
    from ..recipes import RecipeError
    from ..recipes.schema import require

    recipe = load_recipe_or_report(args)
    if recipe is None:
        return 2
    try:
        require(
            recipe.task == "classification",
            "task",
            f"the baseline command needs a classification recipe, got {recipe.task!r}",
        )
        results = run_pairs(recipe, args)
    except (RecipeError, FileNotFoundError, ValueError) as err:
        return report_error(err)
    for folder, result in results:
        print_result(result, title=f"{recipe.name}: {result.vectorizer} + {result.classifier}")
        print(f"results saved to {folder}")
    if len(results) > 1:
        print_summary([r for _, r in results], title=f"{recipe.name}: baselines")
    return 0


def run_pairs(recipe, args: argparse.Namespace) -> list:
    """``[(folder, BaselineResult)]`` of every ``--vectorizer`` × ``--classifier`` pair, each
    written to its folder with the recipe
    (:func:`hfattn.tasks.classification.baselines.write_baseline`)."""
    from ..storage.run_folder import write_recipe
    from ..tasks import get_task
    from ..tasks.base import dataset_card_names
    from ..tasks.classification.baselines import (
        DEFAULT_STOP_WORDS,
        DEFAULT_TOKENS,
        default_output_dir,
        run_baseline,
        write_baseline,
    )
    from ..tasks.classification.encoding import DATASET_NAMES, load_data
    from ..tasks.classification.recipe import METRIC_NAMES

    source = recipe.data.source
    data = load_data(recipe.data)
    stop_words = args.stop_words or DEFAULT_STOP_WORDS.get(source, "none")
    tokens = args.tokens or DEFAULT_TOKENS.get(source, "words")
    metadata = get_task("classification").card_metadata(
        dataset_card_names(source, DATASET_NAMES), METRIC_NAMES
    )
    results = []
    for vectorizer in dict.fromkeys(args.vectorizer):
        for classifier in dict.fromkeys(args.classifier):
            result = run_baseline(
                data,
                vectorizer=vectorizer,
                classifier=classifier,
                stop_words=stop_words,
                tokens=tokens,
                ngram_max=args.ngram_max,
                splits=recipe.evaluation.splits,
                seed=recipe.training.seed,
            )
            folder = default_output_dir(recipe, vectorizer, classifier, args.output_root)
            write_baseline(
                folder, result, recipe_name=recipe.name, card_metadata=metadata, data_name=source
            )
            write_recipe(folder, recipe.to_yaml())
            results.append((folder, result))
    return results


def print_result(result, title: str) -> None:
    """The metrics table (a column per split) and each split's confusion matrix."""
    from rich.console import Console

    from .report import print_metrics, titled_table

    print_metrics(result.metrics, title=title)
    console = Console()
    for split, matrix in result.confusion.items():
        table = titled_table(f"{split} confusion matrix (rows: true, columns: predicted)")
        table.add_column("")
        for name in result.label_names:
            table.add_column(name, justify="right")
        for name, row in zip(result.label_names, matrix, strict=True):
            table.add_row(name, *map(str, row))
        console.print(table)


def print_summary(results, title: str) -> None:
    """One row per vectorizer × classifier: accuracy and macro-F1 of the last split."""
    from rich.console import Console

    from .report import titled_table

    split = list(results[0].metrics)[-1]
    r = results[0]
    table = titled_table(
        f"{title} ({r.stop_words} stop words, {r.tokens} 1..{r.ngram_max}-grams), {split} split"
    )
    for column in ("vectorizer", "classifier", "accuracy", "macro_f1", "confusion matrix"):
        table.add_column(column, justify="left" if column != "accuracy" else "right")
    for r in results:
        scores = r.metrics[split]
        table.add_row(
            r.vectorizer,
            r.classifier,
            f"{scores['accuracy']:.4f}",
            f"{scores['macro_f1']:.4f}",
            str(r.confusion[split]),
        )
    Console().print(table)
