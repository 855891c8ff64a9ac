"""Build the folder of a Gradio Space that demos a published model, and load its app locally.

A staged Space is self-contained: the task's ``app.py`` (from ``spaces/<task>/``), the shared
``frame.py`` (from ``spaces/common/``), ``input_text.py`` (hfattn's
:mod:`~hfattn.tokenization.input_text`: the Space refuses and warns about an input in the
commands' words), ``requirements.txt`` and a README whose
:class:`huggingface_hub.SpaceCardData` front matter names the model. Every app ships an
``examples.json``, replaced by the model's own examples, those of its card: the recipe's
``generation.examples`` or prompt (:func:`example_inputs`); the app decodes them with the
model's saved generation settings (``generation_config.json``). A classification adapter's
Space gets the adapter's ``labels.json`` (the app reads the model's own first). A translation
model published with its CTranslate2 export (``ct2/``) gets ``ctranslate2`` in the Space's
requirements, and the app decodes with it (the README says which engine runs). ``hfattn demo``
runs the very same files on a local model folder.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import shutil
import sys
import textwrap
from pathlib import Path
from types import ModuleType

from huggingface_hub import SpaceCard, SpaceCardData

from ..common.assets import asset_dir
from ..common.extras import Extra
from ..export.export_folder import EXPORT_INFO_FILE, is_export
from ..storage.file_io import atomic_write_text
from ..storage.location import looks_like_hub_id
from ..storage.model_folder import LABELS_FILE
from ..storage.run_folder import CTRANSLATE2_DIR
from ..tokenization import input_text
from .card import example_inputs
from .folder_inspection import ModelFolder
from .tasks import TaskInfo, task_infos

APP_FILE = "app.py"
FRAME_FILE = "frame.py"
INPUT_TEXT_FILE = "input_text.py"
"""The copy of :mod:`hfattn.tokenization.input_text` next to a staged Space's ``frame.py``."""
EXAMPLES_FILE = "examples.json"
CARD_TEMPLATE = "space_card_template.md"
FALLBACK_GRADIO_VERSION = "5.0.0"
GRADIO = Extra("spaces", "gradio")
"""The extra that runs a Space app here (``hfattn demo``); staging one needs no gradio."""
CTRANSLATE2_REQUIREMENT = "ctranslate2>=4.5,<5"
"""What a translation Space whose model has a CTranslate2 export installs to decode with it."""
_EMOJI = {"text-generation": "✍️", "translation": "🌐", "text-classification": "🏷️"}


class SpaceError(ValueError):
    """No Space app exists for the task, or the staged app cannot be loaded."""


def app_dir_for(task: TaskInfo) -> Path:
    """The ``spaces/<task>/`` folder of ``task``'s app.

    Raises:
        SpaceError: naming the task and the tasks that have an app.
    """
    available = [tag for tag, info in task_infos().items() if info.space_app]
    if task.space_app is None:
        raise SpaceError(
            f"no Space app for task {task.pipeline_tag!r} yet; apps exist for: "
            f"{', '.join(available)}"
        )
    path = asset_dir("spaces") / task.space_app
    if not (path / APP_FILE).is_file():
        raise SpaceError(f"{path / APP_FILE} is missing (task {task.pipeline_tag!r})")
    return path


def gradio_sdk_version() -> str:
    """The installed gradio version (what the app was tested with), for the Space's
    ``sdk_version``."""
    try:
        return importlib.metadata.version("gradio")
    except importlib.metadata.PackageNotFoundError:
        return FALLBACK_GRADIO_VERSION


def ctranslate2_export(folder: ModelFolder) -> Path | None:
    """The CTranslate2 export (``ct2/``) the translation Space of ``folder`` decodes with, or
    ``None`` (another task, or no export: the Space decodes with ``generate``)."""
    export = folder.path / CTRANSLATE2_DIR
    if folder.task.space_app == "translation" and is_export(export):
        return export
    return None


def _engine_note(folder: ModelFolder) -> str:
    """The README's paragraph on the translation Space's decoder (``""`` for other tasks)."""
    if folder.task.space_app != "translation":
        return ""
    export = ctranslate2_export(folder)
    if export is None:
        return (
            "Translations are decoded by transformers' `generate` (the model repo has no "
            f"CTranslate2 export in `{CTRANSLATE2_DIR}/`)."
        )
    try:
        info = json.loads((export / EXPORT_INFO_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        info = {}
    quantization = info.get("quantization") or "float32"
    return (
        f"Translations are decoded by **CTranslate2** from the model repo's CTranslate2 export "
        f"(`{CTRANSLATE2_DIR}/`, {quantization}; `{CTRANSLATE2_REQUIREMENT}` is in "
        "`requirements.txt`), and the attention heatmap comes from one teacher-forced pass of "
        "the PyTorch model over that output. The page shows the engine; set "
        "`HFATTN_ENGINE=generate` to decode with transformers' `generate` instead (`auto`, "
        "the default, falls back to it when `ctranslate2` is not installed)."
    )


def space_card(folder: ModelFolder, model_id: str, title: str | None = None) -> SpaceCard:
    """The Space README: front matter (sdk gradio, ``app_file``, ``models: [model_id]``) + body."""
    task = folder.task
    title = title or model_id.split("/")[-1]
    data = SpaceCardData(
        title=title,
        emoji=_EMOJI.get(task.pipeline_tag, "🤗"),
        colorFrom="indigo",
        colorTo="blue",
        sdk="gradio",
        sdk_version=gradio_sdk_version(),
        app_file=APP_FILE,
        models=[model_id] if looks_like_hub_id(model_id) else None,
        license=folder.hub.license,
        license_name=folder.hub.license_name,
        license_link=folder.hub.license_link,
        pinned=False,
        short_description=f"{task.task_name} with {title}"[:60],
        tags=["hfattn", task.pipeline_tag],
    )
    template = asset_dir("spaces") / "common" / CARD_TEMPLATE
    return SpaceCard.from_template(
        data,
        template_path=str(template),
        title=title,
        model_id=model_id,
        task_name=task.task_name,
        description=f"Built with hfattn from the `spaces/{task.space_app}` app.",
        engine=textwrap.fill(
            _engine_note(folder), 92, break_long_words=False, break_on_hyphens=False
        ),
    )


def stage_space(
    folder: ModelFolder, model_id: str, out: str | Path, *, title: str | None = None
) -> Path:
    """Write the Space that demos ``model_id`` (a Hub repo id, or a local folder for demos)
    into the empty or new directory ``out``; return ``out``.

    Raises:
        SpaceError: no app exists for the folder's task.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    app_dir = app_dir_for(folder.task)
    for src in sorted(app_dir.iterdir()):
        if src.is_file() and not src.name.startswith(".") and src.suffix != ".pyc":
            shutil.copy2(src, out / src.name)
    shutil.copy2(asset_dir("spaces") / "common" / FRAME_FILE, out / FRAME_FILE)
    shutil.copy2(input_text.__file__, out / INPUT_TEXT_FILE)
    requirements = (app_dir / "requirements.txt").read_text(encoding="utf-8").splitlines()
    if folder.is_adapter and not any(r.startswith("peft") for r in requirements):
        requirements.append("peft")
    if ctranslate2_export(folder) and not any(r.startswith("ctranslate2") for r in requirements):
        requirements.append(CTRANSLATE2_REQUIREMENT)
    atomic_write_text(out / "requirements.txt", "\n".join(r for r in requirements if r) + "\n")
    if (app_dir / EXAMPLES_FILE).is_file():
        examples = json.dumps(example_inputs(folder), indent=2, ensure_ascii=False)
        atomic_write_text(out / EXAMPLES_FILE, examples + "\n")
    if folder.is_adapter and folder.labels:
        labels = json.dumps({"labels": list(folder.labels)}, indent=2, ensure_ascii=False)
        atomic_write_text(out / LABELS_FILE, labels + "\n")
    atomic_write_text(out / "README.md", str(space_card(folder, model_id, title)))
    return out


def load_space_app(space_dir: str | Path) -> ModuleType:
    """Import a staged Space's ``app.py`` as a fresh module, with the modules beside it
    (``frame.py``, ``input_text.py``, an app's own) imported from this Space's folder.

    The module exposes ``build_demo(model_id=None) -> gradio.Blocks``.

    Raises:
        SpaceError: when gradio is not installed or ``app.py`` is missing.
    """
    space_dir = Path(space_dir).resolve()
    if not GRADIO.installed():
        raise SpaceError(str(GRADIO.error("the Space apps")))
    if not (space_dir / APP_FILE).is_file():
        raise SpaceError(f"{space_dir} has no {APP_FILE}")
    for module_file in space_dir.glob("*.py"):  # each staged Space brings its own copies
        sys.modules.pop(module_file.stem, None)
    sys.path.insert(0, str(space_dir))
    try:
        name = f"hfattn_space_app_{abs(hash(space_dir))}"
        spec = importlib.util.spec_from_file_location(name, space_dir / APP_FILE)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(space_dir))
    return module
