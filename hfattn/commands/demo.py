"""``hfattn demo DIR``: run a model's Gradio Space app locally, on the model folder."""

from __future__ import annotations

import argparse
import signal
import threading
import time
from contextlib import contextmanager


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


@contextmanager
def _stop_on_signals():
    """Within the block, Ctrl-C and SIGTERM (:data:`~hfattn.training.stop_signals.SIGNALS`,
    as for ``hfattn train``) raise ``KeyboardInterrupt``, even where the shell started the
    command with SIGINT ignored, so that the server stops, the staged Space's temporary folder
    is removed and the command exits with status 130. Outside the main thread (where signals
    cannot be caught) it does nothing."""
    from ..training.stop_signals import SIGNALS

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, interrupt) for s in SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def serve(demo, args: argparse.Namespace, name: str) -> None:
    """Serve ``demo`` until Ctrl-C or SIGTERM (the ``KeyboardInterrupt`` goes on to the command
    line: exit status 130), with one line of ours in place of Gradio's banner, ``share=True``
    hint and "Keyboard interruption" message."""
    demo.launch(server_name=args.host, server_port=args.port, share=args.share, quiet=True,
                prevent_thread_lock=True)  # fmt: skip
    url = getattr(demo, "share_url", None) or getattr(demo, "local_url", None)
    print(f"serving {name} on {url} (Ctrl-C to stop)", flush=True)
    try:
        wait_for_interrupt()
    finally:
        demo.close(verbose=False)


def wait_for_interrupt() -> None:
    """Block the main thread until Ctrl-C or SIGTERM (a ``KeyboardInterrupt``)."""
    while True:
        time.sleep(0.2)


def handler(args: argparse.Namespace) -> int:
    """Stage the Space for DIR in a temporary folder, load its app and serve it until Ctrl-C or
    SIGTERM (the folder is removed either way; the interrupt exits with status 130, as for
    every command). A bad folder, a training run not finished yet
    (:func:`~hfattn.storage.run_status.interrupted_run_message`), or a damaged file in it, is
    one ``error: ...`` line and exit status 2, as for the other commands."""
    import tempfile
    from pathlib import Path

    from hfattn.hub import ModelFolderError, SpaceError, inspect_folder, load_space_app, stage_space
    from hfattn.storage.run_status import interrupted_run_message

    from .inputs import ModelLoadError, report_error
    from .logging_setup import configure_logging
    from .model_loading import damaged_file_error, first_line

    configure_logging()
    folder = Path(args.dir).resolve()
    try:
        unfinished = interrupted_run_message(args.dir)
        if unfinished is not None:
            raise ModelLoadError(unfinished)
        model_folder = inspect_folder(folder)
        with _stop_on_signals(), tempfile.TemporaryDirectory(prefix="hfattn-demo-") as tmp:
            app = load_space_app(stage_space(model_folder, str(folder), tmp))
            try:
                demo = app.build_demo(str(folder))
            except Exception as exc:  # noqa: BLE001 (safetensors, json, tokenizers each raise their own)
                damaged = damaged_file_error(folder, args.dir, first_line(exc))
                if damaged is None:
                    raise
                raise damaged from None
            serve(demo, args, str(folder))
    except (ModelFolderError, SpaceError, FileNotFoundError, ModelLoadError) as exc:
        return report_error(exc)
    return 0
