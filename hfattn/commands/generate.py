"""``hfattn generate DIR --prompt ... [--temperature] [--top-k] [--top-p] [--num-beams]``."""

from __future__ import annotations

import argparse


def register(subparsers) -> None:
    """Add the ``generate`` sub-command."""
    parser = subparsers.add_parser(
        "generate",
        help="sample text from a trained model folder",
        description="Continue a prompt with a saved causal LM (greedy, sampling or beam search).",
    )
    parser.add_argument("model_dir", help="a model folder (or a Hub repo id)")
    parser.add_argument("--prompt", default="", help="text to continue (empty: start from <bos>)")
    parser.add_argument("--max-new-tokens", type=int, default=300)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-k", type=int, default=None)
    parser.add_argument("--top-p", type=float, default=None)
    parser.add_argument("--num-beams", type=int, default=1)
    parser.add_argument("--greedy", action="store_true", help="argmax decoding (no sampling)")
    parser.add_argument("--seed", type=int, default=0)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the prompt and its continuation."""
    import sys

    if args.max_new_tokens < 1 or args.temperature <= 0 or args.num_beams < 1:
        print("error: --max-new-tokens, --temperature and --num-beams must be > 0", file=sys.stderr)
        return 2
    if args.top_p is not None and not 0 < args.top_p <= 1:
        print("error: --top-p must be in (0, 1]", file=sys.stderr)
        return 2

    from transformers import AutoModelForCausalLM, AutoTokenizer

    import hfattn  # noqa: F401

    from ..logging_setup import configure_logging
    from ..tasks.causal_lm import generate_text

    configure_logging()
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    model = AutoModelForCausalLM.from_pretrained(args.model_dir).eval()
    text = generate_text(
        model,
        tokenizer,
        args.prompt,
        seed=args.seed,
        max_new_tokens=args.max_new_tokens,
        do_sample=not args.greedy and args.num_beams == 1,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        num_beams=args.num_beams,
    )
    print(text)
    return 0
