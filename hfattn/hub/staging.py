"""Build the exact folder that is uploaded to a model repository.

Only top-level files a model repository needs are copied (weights, configs, tokenizer,
modeling source, the recipe, the recorded results and the loss curve), and the model's
CTranslate2 export in ``ct2/`` when it has one; checkpoints, training logs, pickles and anything
else are left out, and ``README.md`` is rendered afresh. LoRA
adapters are staged as adapters (a classification adapter with its ``labels.json``) or, with
``merge=True``, as the merged full model.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import os
import shutil
from pathlib import Path

from ..export.export_folder import is_export
from ..storage.file_io import atomic_files, atomic_write_text
from ..storage.model_folder import ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE, LABELS_FILE
from ..storage.run_folder import CHECKPOINTS_DIR, CTRANSLATE2_DIR, LOSS_CURVE_FILE, RECIPE_FILE
from .card import render_model_card
from .folder_inspection import ModelFolder, ModelFolderError, inspect_folder

INCLUDE_PATTERNS = (
    "*.safetensors",
    "*.json",
    "*.py",
    "*.txt",
    "*.model",
    "*.jinja",
    RECIPE_FILE,
    LOSS_CURVE_FILE,
)
"""Top-level files published with a model (matched case-sensitively, after the exclusions)."""

EXCLUDE_REASONS = (
    ("README.md", "re-rendered from model_cards/"),
    ("trainer_state.json", "training log"),
    ("training_args.json", "training log"),
    ("*.jsonl", "training log"),
    ("*.log", "training log"),
    ("*.bin", "pickle (only safetensors are published)"),
    ("*.pt", "pickle (only safetensors are published)"),
    ("*.pth", "pickle (only safetensors are published)"),
    ("*.pkl", "pickle (only safetensors are published)"),
    ("*.ckpt", "checkpoint"),
    (".*", "hidden file"),
)
"""``(pattern, reason)`` of top-level files never published, checked before the inclusions."""

ADAPTER_ONLY_FILES = (ADAPTER_CONFIG_FILE, ADAPTER_WEIGHTS_FILE)


def select_files(folder: Path) -> tuple[list[Path], list[tuple[str, str]]]:
    """Split the entries of ``folder`` into files (and the ``ct2/`` export folder) to publish
    and ``(name, reason)`` left out."""
    included, excluded = [], []
    for entry in sorted(Path(folder).iterdir()):
        if entry.is_dir() and entry.name == CTRANSLATE2_DIR and is_export(entry):
            included.append(entry)
            continue
        if entry.is_dir():
            reason = "training checkpoints" if entry.name == CHECKPOINTS_DIR else "sub-folder"
            excluded.append((entry.name + "/", reason))
            continue
        reason = next((r for p, r in EXCLUDE_REASONS if fnmatch.fnmatchcase(entry.name, p)), None)
        if reason is None and not any(fnmatch.fnmatchcase(entry.name, p) for p in INCLUDE_PATTERNS):
            reason = "not a model repository file"
        if reason is None:
            included.append(entry)
        else:
            excluded.append((entry.name, reason))
    return included, excluded


def _copy(src: Path, dst: Path, *, link: bool) -> None:
    """Hard-link ``src`` to ``dst`` when ``link`` and possible (weights can be large), else
    copy it (a folder: each of its files). Only a staging folder that is deleted after the
    upload may link: a preview the user can edit must not share its files with the model."""
    if src.is_dir():
        dst.mkdir()
        for child in sorted(src.iterdir()):
            _copy(child, dst / child.name, link=link)
        return
    if link:
        try:
            os.link(src, dst)
            return
        except OSError:
            pass
    shutil.copy2(src, dst)


def _stage_adapter_config(folder: ModelFolder, out: Path) -> None:
    """Copy ``adapter_config.json``, pointing ``base_model_name_or_path`` at the Hub base model."""
    config = dict(folder.adapter_config)
    if folder.base_model:
        config["base_model_name_or_path"] = folder.base_model
    atomic_write_text(
        out / ADAPTER_CONFIG_FILE, json.dumps(config, indent=2, sort_keys=True) + "\n"
    )


def merge_adapter(folder: ModelFolder, out: Path) -> None:
    """Load the adapter's base model, apply the adapter, ``merge_and_unload`` and save to ``out``.

    Raises:
        ModelFolderError: when ``peft`` is not installed.
    """
    try:
        import peft
    except ImportError:
        raise ModelFolderError(
            "merging a LoRA adapter (--merge) needs peft: pip install peft"
        ) from None
    import transformers

    import hfattn.models  # noqa: F401  (registers hfattn architectures for the base model)

    base_id = folder.adapter_config.get("base_model_name_or_path")
    if not base_id:
        raise ModelFolderError(
            f"{folder.path / ADAPTER_CONFIG_FILE}: base_model_name_or_path is empty"
        )
    auto_class = getattr(transformers, folder.task.auto_class)
    # A classification head must be built for the adapter's labels before its weights load.
    base = auto_class.from_pretrained(base_id, **folder.label_kwargs())
    merged = peft.PeftModel.from_pretrained(base, str(folder.path)).merge_and_unload()
    with atomic_files(out) as staged:
        merged.save_pretrained(staged)


def stage_model(
    folder: ModelFolder, out: str | Path, repo_id: str, *, merge: bool = False, link: bool = False
) -> tuple[ModelFolder, list[tuple[str, str]]]:
    """Write the folder to upload as ``repo_id`` into the empty or new directory ``out``
    (``link``: hard-link the files instead of copying them, for a temporary staging folder).

    Returns the folder as published (the merged model when ``merge``) and the
    ``(name, reason)`` of every entry left out.

    Raises:
        ModelFolderError: ``merge`` on a folder that is not a LoRA adapter, or the folder is
            invalid.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if merge and not folder.is_adapter:
        raise ModelFolderError(
            "--merge applies to LoRA adapter folders (with adapter_config.json); "
            f"{folder.path} is a full model"
        )
    included, excluded = select_files(folder.path)
    for src in included:
        if folder.is_adapter and src.name in ADAPTER_ONLY_FILES:
            if merge:
                excluded.append((src.name, "merged into the base model"))
                continue
            if src.name == ADAPTER_CONFIG_FILE:
                _stage_adapter_config(folder, out)
                continue
        if folder.is_adapter and merge and src.name == LABELS_FILE:
            excluded.append((src.name, "the merged config.json holds the labels"))
            continue
        _copy(src, out / src.name, link=link)
    if folder.is_adapter and not merge and folder.labels:
        labels = {"labels": list(folder.labels)}
        atomic_write_text(out / LABELS_FILE, json.dumps(labels, indent=2) + "\n")
    published = folder
    if merge:
        merge_adapter(folder, out)
        # the adapter's card settings (a --license given to push included) carry over
        published = dataclasses.replace(
            inspect_folder(out), hub=dataclasses.replace(folder.hub, base_model=folder.base_model)
        )
    card = render_model_card(published, repo_id, merged=merge)
    atomic_write_text(out / "README.md", str(card))
    return published, excluded


def publish_dir(staged: Path, dest: str | Path) -> Path:
    """Move the finished ``staged`` folder to ``dest`` (which must not exist or be empty).

    Raises:
        FileExistsError: ``dest`` exists and is not an empty directory.
    """
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise FileExistsError(f"dry-run output {dest} exists and is not empty; pass a new folder")
    if dest.exists():
        dest.rmdir()
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.replace(staged, dest)
    return dest


def render_tree(root: Path, label: str | None = None):
    """A ``rich.tree.Tree`` of ``root`` with file sizes (print it with a rich ``Console``)."""
    from rich.filesize import decimal
    from rich.tree import Tree

    def add(node: Tree, directory: Path) -> None:
        for entry in sorted(directory.iterdir(), key=lambda p: (p.is_file(), p.name)):
            if entry.is_dir():
                add(node.add(f"[bold]{entry.name}/"), entry)
            else:
                node.add(f"{entry.name} [dim]({decimal(entry.stat().st_size)})")

    tree = Tree(f"[bold]{label or root}")
    add(tree, root)
    return tree
