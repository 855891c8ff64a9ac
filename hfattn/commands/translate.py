"""``hfattn translate DIR "text" [...] [--file F] [--num-beams N]``: translate with a saved
seq2seq model folder (or Hub repo id), in batches, one translation per line."""

from __future__ import annotations

import argparse


def register(subparsers) -> None:
    """Add the ``translate`` sub-command."""
    parser = subparsers.add_parser(
        "translate",
        help="translate sentences with a trained seq2seq model folder",
        description=(
            "Translate the given sentences (and/or the lines of --file) with a saved "
            "encoder-decoder; prints one translation per line, in input order."
        ),
    )
    parser.add_argument("model_dir", help="a model folder (or a Hub repo id)")
    parser.add_argument("texts", nargs="*", metavar="TEXT", help="sentences to translate")
    parser.add_argument("--file", help="a UTF-8 file with one sentence per line ('-': stdin)")
    parser.add_argument("--num-beams", type=int, help="beam width (default: generation_config)")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--refuse-long",
        action="store_true",
        help="refuse sources longer than the model accepts (default: truncate with a warning)",
    )
    parser.set_defaults(func=run)


def _read_inputs(args) -> list[str]:
    import sys
    from pathlib import Path

    texts = list(args.texts)
    if args.file == "-":
        texts += sys.stdin.read().splitlines()
    elif args.file:
        texts += Path(args.file).read_text(encoding="utf-8").splitlines()
    return texts


def run(args: argparse.Namespace) -> int:
    """Print the translation of every input, one per line."""
    import sys

    for name in ("num_beams", "max_new_tokens", "batch_size"):
        value = getattr(args, name)
        if value is not None and value < 1:
            print(f"error: --{name.replace('_', '-')} must be >= 1, got {value}", file=sys.stderr)
            return 2
    try:
        texts = _read_inputs(args)
    except (OSError, UnicodeDecodeError) as err:
        print(f"error: --file: {err}", file=sys.stderr)
        return 2
    if not texts:
        print("error: give sentences to translate or --file", file=sys.stderr)
        return 2

    from ..evaluation.translation import translate_texts
    from ..logging_setup import configure_logging
    from .loading import ModelLoadError, load_model_and_tokenizer

    configure_logging()
    try:
        model, tokenizer = load_model_and_tokenizer(args.model_dir, "AutoModelForSeq2SeqLM")
    except ModelLoadError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    num_beams = args.num_beams or model.generation_config.num_beams or 1
    try:
        translations = translate_texts(
            model,
            tokenizer,
            texts,
            batch_size=args.batch_size,
            num_beams=num_beams,
            max_new_tokens=args.max_new_tokens,
            on_too_long="error" if args.refuse_long else "warn",
        )
    except ValueError as err:  # SourceTooLongError, or a source that is not valid text
        print(f"error: {err}", file=sys.stderr)
        return 2
    print("\n".join(translations))
    return 0
