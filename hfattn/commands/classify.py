"""``hfattn classify DIR "text" [...] [--file F] [--top-k N]``: label texts with a saved sequence
classifier (an ``rnn-classifier`` run, a fine-tuned DistilBERT / MiniLM, or a Hub repo id).

Prints one line per text, in input order: the ``--top-k`` most probable labels, each as
``label<TAB>probability`` (six decimals), most probable first, separated by tabs.
"""

from __future__ import annotations

import argparse

from .arguments import add_text_arguments


def register(subparsers) -> None:
    """Add the ``classify`` sub-command."""
    parser = subparsers.add_parser(
        "classify",
        help="label texts with a trained classifier folder",
        description=(
            "Classify the given texts (and/or the lines of --file) with a saved sequence "
            "classifier; prints one line per text, in input order: label and probability, "
            "tab-separated, the --top-k most probable labels first."
        ),
    )
    add_text_arguments(parser, what="texts to classify", item="text")
    parser.add_argument(
        "--top-k", type=int, default=1, help="labels shown per text, most probable first "
        "(default: 1; more than the model has shows them all)",
    )  # fmt: skip
    parser.add_argument(
        "--batch-size", type=int, default=32, help="texts classified at once (default: 32)"
    )
    parser.set_defaults(func=run)


def format_labels(scores: list[tuple[str, float]]) -> str:
    """One output line: ``label<TAB>probability`` pairs joined by tabs."""
    return "\t".join(f"{label}\t{probability:.6f}" for label, probability in scores)


def run(args: argparse.Namespace) -> int:
    """Print the labels of every input, one line per text."""
    from .inputs import report_error, text_command_inputs

    try:  # bad options, a missing model folder and unreadable inputs fail before torch loads
        texts = text_command_inputs(args, "texts to classify", ("top_k", "batch_size"))
    except ValueError as err:
        return report_error(err)

    from ..tasks.classification.inference import classify_texts
    from .inputs import answer_lines
    from .logging_setup import configure_logging
    from .model_loading import load_model_and_tokenizer

    configure_logging()
    try:
        model, tokenizer = load_model_and_tokenizer(
            args.model_dir, "AutoModelForSequenceClassification"
        )
        lines = answer_lines(texts, lambda kept: [format_labels(row) for row in classify_texts(
            model, tokenizer, kept, top_k=args.top_k, batch_size=args.batch_size
        )])  # fmt: skip
    except ValueError as err:  # ModelLoadError, or a text that is not valid text
        return report_error(err)
    print("\n".join(lines))
    return 0
