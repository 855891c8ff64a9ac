"""``hfattn export RUN_OR_MODEL OUT [--format ctranslate2] [--quantization int8] [--overwrite]``:
write a trained Vaswani Transformer as a CTranslate2 model folder (:mod:`hfattn.export`)."""

from __future__ import annotations

import argparse

from ..export.checks import FORMATS, QUANTIZATIONS


def register(subparsers) -> None:
    """Add the ``export`` sub-command."""
    parser = subparsers.add_parser(
        "export",
        help="export a trained Vaswani Transformer to CTranslate2 (fast CPU/GPU inference)",
        description=(
            "Convert a trained Vaswani Transformer (a run folder, model folder or Hub repo id) "
            "into a CTranslate2 model folder that ctranslate2.Translator loads, with its "
            "tokenizer, generation_config.json and a README showing how to load it. The folder "
            "is written to a temporary name, then renamed."
        ),
    )
    parser.add_argument(
        "model_dir", metavar="RUN_OR_MODEL", help="a run or model folder (or a Hub repo id)"
    )
    parser.add_argument("output_dir", metavar="OUT", help="the folder to write")
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="ctranslate2",
        help="export format (default: ctranslate2)",
    )
    parser.add_argument(
        "--quantization",
        choices=QUANTIZATIONS,
        default="float32",
        help="weight type: int8* quantize the linear layers per row, the second part is the "
        "type of the other weights (default: float32)",
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace OUT when it exists and is not empty"
    )
    parser.set_defaults(func=run)


def _example(folder) -> str:
    """The first ``generation.examples`` sentence of a run folder's recipe, for the README."""
    import yaml

    from ..storage.run_folder import read_recipe

    try:
        examples = ((read_recipe(folder) or {}).get("generation") or {}).get("examples") or []
    except (OSError, ValueError, yaml.YAMLError, AttributeError):
        examples = []
    return examples[0] if examples and isinstance(examples[0], str) else "I love you."


def run(args: argparse.Namespace) -> int:
    """Export the model; one ``error: ...`` line (exit status 2) for a missing or unsupported
    model, a taken OUT or a missing ``ctranslate2``, all found before the weights are read."""
    from ..export.checks import check_exportable, check_output_folder
    from ..export.ctranslate2_runtime import require_ctranslate2
    from .inputs import locate_model, report_error
    from .model_loading import read_configs

    try:  # cheap checks first: folders, the package, the config.json alone
        check_output_folder(args.output_dir, args.overwrite, args.model_dir)
        folder = locate_model(args.model_dir)
        require_ctranslate2()
        config = read_configs(args.model_dir, folder)[0] if folder is not None else None
        if config:  # a local config.json (an unreadable one: loading names the damaged file)
            check_exportable(config)
    except (ValueError, ImportError) as err:
        return report_error(err)

    from transformers import AutoConfig

    import hfattn.models  # noqa: F401  (registers the model types)

    from ..export.export_folder import export_ctranslate2
    from .logging_setup import configure_logging
    from .model_loading import load_model_and_tokenizer

    configure_logging()
    try:
        check_exportable(AutoConfig.from_pretrained(args.model_dir))
        model, tokenizer = load_model_and_tokenizer(args.model_dir, "AutoModelForSeq2SeqLM")
        out = export_ctranslate2(
            model,
            tokenizer,
            args.output_dir,
            quantization=args.quantization,
            overwrite=args.overwrite,
            source=args.model_dir,
            example=_example(folder) if folder is not None else "I love you.",
        )
    except (ValueError, OSError) as err:  # ExportError, ModelLoadError, a full disk
        return report_error(err)
    print(f"wrote {out} (CTranslate2, {args.quantization})")
    return 0
