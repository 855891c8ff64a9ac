"""``hfattn demo DIR``: run a model's Gradio Space app locally, on the model folder."""

from __future__ import annotations

import argparse
import sys


def _bool(value: str) -> bool:
    lowered = value.lower()
    if lowered not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")
    return lowered == "true"


def register(subparsers) -> None:
    """Add the ``demo`` sub-command."""
    parser = subparsers.add_parser(
        "demo",
        help="run the model's Gradio Space app locally",
        description="Stage the same Space that `hfattn push --space` uploads and run it on DIR.",
    )
    parser.add_argument("dir", metavar="DIR", help="model folder")
    parser.add_argument(
        "--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)"
    )
    parser.add_argument("--port", type=int, default=7860, help="port (default 7860)")
    parser.add_argument(
        "--share",
        type=_bool,
        default=False,
        metavar="{true,false}",
        help="create a gradio.live link",
    )
    parser.set_defaults(func=handler)


def handler(args: argparse.Namespace) -> int:
    """Stage the Space for DIR in a temporary folder, load its app and serve it until Ctrl-C."""
    import tempfile
    from pathlib import Path

    from hfattn.hub import ModelFolderError, SpaceError, inspect_folder, load_space_app, stage_space

    folder = Path(args.dir).resolve()
    try:
        model_folder = inspect_folder(folder)
        with tempfile.TemporaryDirectory(prefix="hfattn-demo-") as tmp:
            app = load_space_app(stage_space(model_folder, str(folder), tmp))
            demo = app.build_demo(str(folder))
            demo.launch(server_name=args.host, server_port=args.port, share=args.share)
    except (ModelFolderError, SpaceError, FileNotFoundError) as exc:
        print(f"hfattn demo: error: {exc}", file=sys.stderr)
        return 1
    return 0
