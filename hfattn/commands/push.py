"""``hfattn push DIR --repo-id OWNER/NAME``: publish a model folder (and its Space) to the Hub."""

from __future__ import annotations

import argparse


def register(subparsers) -> None:
    """Add the ``push`` sub-command."""
    parser = subparsers.add_parser(
        "push",
        help="publish a model folder to the Hugging Face Hub (model card, optional Space)",
        description=(
            "Upload a saved model or training run (weights, config, tokenizer, modeling code, a "
            "rendered model card) to the Hub as one commit. Uses HF_TOKEN and HF_ENDPOINT."
        ),
    )
    parser.add_argument(
        "dir", metavar="DIR", help="model folder (save_pretrained output or training run)"
    )
    parser.add_argument("--repo-id", required=True, metavar="OWNER/NAME", help="Hub repository id")
    parser.add_argument("--private", action="store_true", help="create the repository private")
    parser.add_argument("--revision", metavar="REV", help="branch to commit to (default: main)")
    parser.add_argument("--space", action="store_true", help="also publish a Gradio Space demo")
    parser.add_argument(
        "--merge",
        action="store_true",
        help="LoRA folders: publish the merged model, not the adapter",
    )
    parser.add_argument(
        "--dry-run",
        metavar="OUT_DIR",
        help="write the folders that would be uploaded to OUT_DIR, print their tree, "
        "upload nothing",
    )
    parser.add_argument(
        "--license",
        metavar="ID",
        help=(
            "the card's Hub license id (apache-2.0, mit, cc-by-4.0, ...), in place of the "
            "recipe's hub.license or its data's; needed when the data's license is unknown"
        ),
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="publish a run that stopped far short of its recipe's schedule (refused otherwise)",
    )
    parser.set_defaults(func=handler)


def handler(args: argparse.Namespace) -> int:
    """Run ``hfattn push``; errors are printed as one ``error: ...`` line and give exit
    status 2, as for the other commands."""
    from hfattn.hub import HubPushError, push_model_folder

    from .inputs import ModelLoadError, locate_local_folder, report_error
    from .logging_setup import configure_logging

    configure_logging()

    try:  # the folder first: its contents are checked before the token (push_model_folder)
        locate_local_folder(args.dir, check=False)
        url = push_model_folder(
            args.dir,
            args.repo_id,
            private=args.private,
            revision=args.revision,
            space=args.space,
            merge=args.merge,
            dry_run_dir=args.dry_run,
            force=args.force,
            license=args.license,
        )
    except (ModelLoadError, HubPushError, FileExistsError) as exc:
        return report_error(exc)
    if args.dry_run is None:
        print(url)
        if args.space:
            print(url.replace(args.repo_id, f"spaces/{args.repo_id}"))
    return 0
