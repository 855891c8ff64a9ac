"""``hfattn translate DIR "text" [...] [--file F] [--num-beams N]``: translate with a saved
seq2seq model folder (or Hub repo id), in batches, one translation per line.

It decodes with the model's saved generation config (``generation_config.json``: the recipe's
``generation:`` section, what the end of training and ``hfattn evaluate`` use); ``--num-beams``
and ``--max-new-tokens`` override it (:mod:`hfattn.tasks.decoding`). Options and texts come in
any order (``hfattn translate DIR --num-beams 4 "7/4/76"``).
"""

from __future__ import annotations

import argparse

from ..tasks.decoding import TRANSLATION_FALLBACK
from .arguments import ENGINES, add_text_arguments, saved_setting_help


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
    add_text_arguments(parser, what="sentences to translate", item="sentence")
    parser.add_argument(
        "--num-beams",
        type=int,
        help="beam width" + saved_setting_help(f"{TRANSLATION_FALLBACK['num_beams']}, greedy,"),
    )
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        help="most tokens per translation"
        + saved_setting_help(TRANSLATION_FALLBACK["max_new_tokens"]),
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument(
        "--refuse-long",
        action="store_true",
        help="refuse sources longer than the model accepts (default: truncate with a warning)",
    )
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="torch",
        help=(
            "torch: the model's generate(); ctranslate2: its CTranslate2 export (MODEL itself, "
            "MODEL/ct2/, or the ct2/ folder of a Hub repo; hfattn export writes one), several "
            "times faster on a CPU"
        ),
    )
    parser.add_argument(
        "--compute-type",
        default="default",
        help="with --engine ctranslate2: int8, float32, ... (default: the export's quantization)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the translation of every input, one per line; parts of a source that the
    tokenizer cannot represent (``<unk>``) are named in a warning first."""
    from .inputs import report_error, text_command_inputs

    try:  # bad options, a missing model folder and unreadable inputs fail before torch loads
        texts = text_command_inputs(
            args,
            "sentences to translate",
            ("num_beams", "max_new_tokens", "batch_size"),
            item="source",
            verb="translate",
            locate=args.engine == "torch",  # an export holds no PyTorch model
        )
    except ValueError as err:
        return report_error(err)

    if args.engine == "ctranslate2":
        return _run_ctranslate2(args, texts)

    from ..tasks.translation.inference import translate_texts
    from ..tokenization.characters import require_text, warn_unknown
    from .inputs import answer_lines
    from .logging_setup import configure_logging
    from .model_loading import load_model_and_tokenizer

    configure_logging()
    try:
        model, tokenizer = load_model_and_tokenizer(args.model_dir, "AutoModelForSeq2SeqLM")
        for i, text in enumerate(texts):
            warn_unknown(tokenizer, require_text(text, f"source {i}"), f"source {i}")
        translations = answer_lines(texts, lambda kept: translate_texts(
            model,
            tokenizer,
            kept,
            batch_size=args.batch_size,
            num_beams=args.num_beams,  # None: the model's saved setting
            max_new_tokens=args.max_new_tokens,
            on_too_long="error" if args.refuse_long else "warn",
            progress=True,
        ))  # fmt: skip
    except ValueError as err:  # ModelLoadError, SourceTooLongError, a source that is not text
        return report_error(err)
    print("\n".join(translations))
    return 0


def _ctranslate2_export(model: str):
    """The CTranslate2 export that serves ``model`` (a folder, its ``ct2/``, or a Hub repo's).

    Raises:
        ValueError: there is none, saying how to write one.
    """
    from pathlib import Path

    from ..export.export_folder import download_export, export_of, missing_export
    from ..storage.location import looks_like_hub_id

    local = Path(model).expanduser().exists()
    if not local and not looks_like_hub_id(model):
        raise ValueError(f"model folder not found: {model}")
    export = export_of(model) if local else download_export(model)
    if export is None:
        raise ValueError(missing_export(model))
    return export


def _run_ctranslate2(args: argparse.Namespace, texts: list[str]) -> int:
    """``--engine ctranslate2``: translate with the model's CTranslate2 export."""
    from ..export.serving import CTranslate2Translation
    from ..tokenization.characters import require_text, warn_unknown
    from .inputs import answer_lines, report_error
    from .logging_setup import configure_logging

    configure_logging()
    try:
        translator = CTranslate2Translation(
            _ctranslate2_export(args.model_dir), compute_type=args.compute_type
        )
        for i, text in enumerate(texts):
            warn_unknown(translator.tokenizer, require_text(text, f"source {i}"), f"source {i}")
        translations = answer_lines(texts, lambda kept: translator.translate(
            kept,
            num_beams=args.num_beams,
            max_new_tokens=args.max_new_tokens,
            batch_size=args.batch_size,
            on_too_long="error" if args.refuse_long else "warn",
        ))  # fmt: skip
    except (ValueError, ImportError) as err:
        return report_error(err)
    print("\n".join(translations))
    return 0
