"""``hfattn generate DIR --prompt ... [--temperature] [--top-k] [--top-p] [--num-beams]``.

It decodes with the model's saved generation config (``generation_config.json``: the recipe's
``generation:`` section); each option given overrides one setting (:mod:`hfattn.tasks.decoding`).
"""

from __future__ import annotations

import argparse
import sys

from ..tasks.decoding import TEXT_GENERATION_FALLBACK, saved_decoding
from .arguments import MODEL_HELP, saved_setting_help


def register(subparsers) -> None:
    """Add the ``generate`` sub-command."""
    parser = subparsers.add_parser(
        "generate",
        help="sample text from a trained model folder",
        description="Continue a prompt with a saved causal LM (greedy, sampling or beam search).",
    )
    parser.add_argument("model_dir", help=MODEL_HELP)
    parser.add_argument("--prompt", default="", help="text to continue (empty: start from <bos>)")

    def saved(name: str, unset: str = "") -> str:
        return saved_setting_help(unset or TEXT_GENERATION_FALLBACK[name])

    parser.add_argument("--max-new-tokens", type=int, help="new tokens" + saved("max_new_tokens"))
    parser.add_argument(
        "--temperature", type=float, help="sampling temperature, 0 = greedy" + saved("temperature")
    )
    parser.add_argument("--top-k", type=int, help="top-k sampling, 0 = off" + saved("top_k", "off"))
    parser.add_argument("--top-p", type=float, help="nucleus sampling" + saved("top_p", "off"))
    parser.add_argument("--num-beams", type=int, help="beam width" + saved("num_beams"))
    parser.add_argument("--greedy", action="store_true", help="argmax decoding (no sampling)")
    parser.add_argument(
        "--seed",
        type=int,
        help="random seed of the sampling (default: a fresh one, printed to stderr so that a "
        "sample can be repeated with --seed N)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the prompt and its continuation; prompt characters that the tokenizer cannot
    represent (``<unk>``) are named in a warning first."""
    from .inputs import locate_model, report_error

    try:  # a missing model folder fails at once, before torch loads
        locate_model(args.model_dir)
    except ValueError as err:
        return report_error(err)

    from ..tasks.causal_lm.inference import check_generation_settings, generate_text
    from ..tokenization.characters import require_text
    from .logging_setup import configure_logging
    from .model_loading import load_model_and_tokenizer

    try:  # bad options fail before the model is loaded
        check_generation_settings(vars(args), prefix="--")
        require_text(args.prompt, "--prompt")
    except ValueError as err:
        return report_error(err)
    configure_logging()
    try:
        model, tokenizer = load_model_and_tokenizer(args.model_dir, "AutoModelForCausalLM")
        settings = _settings(args, model)
        seed = args.seed if args.seed is not None else fresh_seed()
        if settings["do_sample"] and args.seed is None:
            print(f"seed {seed} (repeat this sample with --seed {seed})", file=sys.stderr)
        text = generate_text(model, tokenizer, args.prompt, seed=seed, **settings)
    except ValueError as err:  # ModelLoadError, or saved settings / a prompt out of range
        return report_error(err)
    print(text)
    return 0


def fresh_seed() -> int:
    """A seed drawn from the operating system's randomness (``[0, 2**32)``)."""
    import secrets

    return secrets.randbelow(2**32)


def _settings(args: argparse.Namespace, model) -> dict:
    """``generate`` settings: each option given on the command line, else the value saved in
    the model's ``generation_config.json`` (the recipe's ``generation:`` section), else
    :data:`~hfattn.tasks.decoding.TEXT_GENERATION_FALLBACK`
    (:func:`~hfattn.tasks.decoding.saved_decoding`); sampling unless the saved config or
    ``--greedy`` says otherwise, or beam search is asked for."""
    saved = model.generation_config
    given = {name: getattr(args, name) for name in TEXT_GENERATION_FALLBACK}
    chosen = saved_decoding(saved, TEXT_GENERATION_FALLBACK, **given)
    if chosen["top_k"] == 0:
        chosen["top_k"] = None
    sample = saved.do_sample if saved.do_sample is not None else True
    chosen["do_sample"] = bool(sample) and not args.greedy and chosen["num_beams"] == 1
    return chosen
