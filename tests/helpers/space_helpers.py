"""A Space app staged for a run folder and launched in-process on 127.0.0.1, as the Space
tests and the Space benchmarks serve it."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from hfattn.common.assets import asset_dir
from hfattn.hub import inspect_folder, load_space_app, stage_space

SPACE_FILES = {
    "README.md",
    "app.py",
    "examples.json",
    "frame.py",
    "input_text.py",
    "requirements.txt",
}
"""The files of every staged or pushed Space: its card, app, examples, the shared frame and
input checks, and its requirements."""


@dataclass
class LaunchedSpace:
    """A running Space: its staged folder, its imported ``app.py`` and its Gradio app."""

    staged: Path
    app: ModuleType
    demo: object

    @property
    def url(self) -> str:
        """The local URL to point ``gradio_client.Client`` at."""
        return self.demo.local_url

    def close(self) -> None:
        """Stop the server."""
        self.demo.close()


def launch_space(
    run: Path, out: Path, *, max_input_chars: int | None = None, env: dict[str, str] | None = None
) -> LaunchedSpace:
    """Stage the Space of the run folder ``run`` into ``out``, build it for ``run`` (inputs
    capped at ``max_input_chars`` when given, ``env`` set while it is built: the frame reads
    its limits and queue settings then) and launch it on 127.0.0.1 on a free port, without
    blocking. Call ``.close()`` on the result when done."""
    staged = stage_space(inspect_folder(run), str(run), out)
    app = load_space_app(staged)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GRADIO_ANALYTICS_ENABLED", "False")
        if max_input_chars is not None:
            patch.setenv("HFATTN_MAX_INPUT_CHARS", str(max_input_chars))
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        demo = app.build_demo(str(run))
    demo.launch(prevent_thread_lock=True, server_name="127.0.0.1", server_port=None, quiet=True)
    return LaunchedSpace(staged, app, demo)


def heatmap(plot) -> tuple[str, list[str], list[str], np.ndarray]:
    """``(title, source tokens, output tokens, weights [output, source])`` of the translation
    Space's attention heatmap: a Vega-Lite spec in the ``PlotData`` its ``translate`` returns,
    or in the dict ``gradio_client`` gives. The axis labels must name the cells' tokens."""
    kind, text = (plot.type, plot.plot) if hasattr(plot, "plot") else (plot["type"], plot["plot"])
    assert kind == "altair"
    spec = json.loads(text)
    cells = spec["data"]["values"]
    weights = np.zeros((1 + max(c["output"] for c in cells), 1 + max(c["source"] for c in cells)))
    sources, outputs = [""] * weights.shape[1], [""] * weights.shape[0]
    for cell in cells:
        weights[cell["output"], cell["source"]] = cell["weight"]
        sources[cell["source"]] = cell["source_token"]
        outputs[cell["output"]] = cell["output_token"]
    for axis, tokens in (("x", sources), ("y", outputs)):
        labels = spec["encoding"][axis]["axis"]["labelExpr"]
        assert json.loads(labels.removesuffix("[datum.value]")) == tokens
    return spec["title"], sources, outputs, weights


@contextmanager
def model_calls() -> Iterator[list[str]]:
    """While in this block, the class name of every torch module called in this process (a
    Space's handlers run in Gradio's threads of this process): a refusal that comes before the
    model, as an input check must, leaves it empty."""
    import torch

    calls: list[str] = []
    call = torch.nn.Module.__call__

    def counted(module, *args, **kwargs):
        calls.append(type(module).__name__)
        return call(module, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(torch.nn.Module, "__call__", counted)
        yield calls


def load_space_frame() -> ModuleType:
    """The Spaces' shared ``common/frame.py``, imported by path as a Space imports it."""
    spec = importlib.util.spec_from_file_location(
        "frame_under_test", asset_dir("spaces") / "common" / "frame.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module
