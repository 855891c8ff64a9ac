"""What a command is given (a recipe, texts, a model folder or a Hub repo id), read and checked
before torch is imported, with one clear error instead of a deep traceback: ``error: <message>``
on stderr and exit status 2 (:func:`report_error`).

A command that runs a recipe (``train``, ``baseline``) takes it as
:func:`hfattn.commands.arguments.add_recipe_arguments` defines (the YAML path and repeatable
``--set key=value`` overrides) and reads it with :func:`load_recipe_or_report`; a command that
reads texts (``translate``, ``classify``) reads them with :func:`text_command_inputs`.

A model is named by a local folder or a Hub repo id, and :func:`locate_model` tells which at
once (:mod:`hfattn.storage.location`): a name that is meant as a path
(``./x``, ``/x``, ``~/x``, ``a/b/c``, or ``runs/x`` where ``runs/`` is a local folder), that is
no valid repo id, or any name while the Hub is offline (``HF_HUB_OFFLINE=1``) and not in the
Hub cache, and that does not exist is ``model folder not found: runs/x``, never a minute of
Hub retries; a command that reads a local folder only (``evaluate``, ``push``) says so of any
name that is no folder (:func:`locate_local_folder`). An existing folder that holds no model
says what it lacks (``config.json``, the weights, the tokenizer); a training run that is not
finished (no final evaluation written, whether or not its model files are) is refused by every
command the same way, with the step it reached and how to continue it
(:func:`hfattn.storage.run_status.interrupted_run_message`). The model is then loaded by
:func:`hfattn.commands.model_loading.load_model_and_tokenizer`.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from ..common.field_checks import did_you_mean
from ..storage.file_reads import read_utf8_text
from ..storage.location import hub_offline, in_local_cache, local_model_path
from ..storage.model_folder import (
    ADAPTER_CONFIG_FILE,
    ADAPTER_WEIGHTS_FILE,
    CONFIG_FILE,
    PICKLE_WEIGHTS,
    TOKENIZER_FILES,
    WEIGHTS_FILE,
)
from ..tokenization.input_text import blank_text_error


class ModelLoadError(ValueError):
    """The model folder (or repo id) cannot be loaded; the message names it and why."""


def report_error(err: BaseException | str, status: int = 2) -> int:
    """Print ``error: <err>`` to stderr and return ``status``, the command's exit status."""
    print(f"error: {err}", file=sys.stderr)
    return status


def load_recipe_or_report(args: argparse.Namespace):
    """The validated recipe of ``args.recipe`` with the ``args.overrides`` applied, or ``None``
    after printing the error (a bad field, a missing file) as :func:`report_error` does."""
    from .. import tasks  # noqa: F401  (registers every task's recipe)
    from ..recipes import RecipeError, load_recipe

    try:
        return load_recipe(args.recipe, args.overrides)
    except (RecipeError, FileNotFoundError) as err:
        report_error(err)
        return None


def require_counts(args: argparse.Namespace, *names: str) -> None:
    """Each named option of ``args`` (``"batch_size"`` is ``--batch-size``) must be unset or
    >= 1.

    Raises:
        ValueError: ``--batch-size must be >= 1, got 0``.
    """
    for name in names:
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {value}")


def text_command_inputs(
    args: argparse.Namespace,
    what: str,
    counts: tuple[str, ...],
    *,
    item: str = "text",
    verb: str = "classify",
    locate: bool = True,
) -> list[str]:
    """The texts of a ``MODEL TEXT... [--file FILE]`` command (``translate``, ``classify``):
    ``args.texts`` then the lines of ``args.file`` (UTF-8, ``-`` for stdin), after the checks
    that need no torch: the ``counts`` options are unset or >= 1 (:func:`require_counts`) and,
    with ``locate``, ``args.model_dir`` is found (:func:`locate_model`); each text given as an
    argument is then checked to hold more than whitespace. A blank line of the file is kept
    (as ``""``): its output is a blank line (:func:`answer_lines`), so the output has a line
    for every line of the file.

    Raises:
        ValueError: a count below 1, a missing model folder (:class:`ModelLoadError`), a file
            that cannot be read (``--file: ...``), no text at all (``give <what> or --file``), or
            a blank argument (``<item> 1 is blank: there is nothing to <verb>``, counted from 0).
    """
    require_counts(args, *counts)
    if locate:
        locate_model(args.model_dir)
    texts = list(args.texts)
    blank = blank_text_error(texts, item, verb)  # the Spaces' words too
    if blank is not None:
        raise ValueError(blank)
    try:
        if args.file == "-":
            texts += [line if line.strip() else "" for line in sys.stdin.read().splitlines()]
        elif args.file:  # not UTF-8: the file, line and column (read_utf8_text)
            lines = read_utf8_text(args.file).splitlines()
            texts += [line if line.strip() else "" for line in lines]
    except (OSError, ValueError) as err:  # (UnicodeDecodeError is a ValueError)
        raise ValueError(f"--file: {err}") from None
    if not any(texts):
        raise ValueError(f"give {what} or --file")
    return texts


def answer_lines(texts: list[str], answer) -> list[str]:
    """``answer(non_blank_texts)`` (one output line each) spread back over ``texts``, a blank
    line (``""``, a blank line of ``--file``) for each blank text."""
    kept = [i for i, text in enumerate(texts) if text]
    lines = [""] * len(texts)
    for i, line in zip(kept, answer([texts[i] for i in kept]), strict=True):
        lines[i] = line
    return lines


def _did_you_mean(folder: Path) -> str:
    """``"; did you mean runs/x2?"`` when a sibling folder has a close name
    (:func:`~hfattn.common.field_checks.did_you_mean`), else ``""``."""
    parent = folder.parent
    if not parent.is_dir():
        return ""
    names = [p.name for p in parent.iterdir() if p.is_dir()]
    return did_you_mean(folder.name, names, show=lambda close: str(parent / close))


def locate_model(name: str) -> Path | None:
    """The local folder that ``name`` names, checked to hold a model (:func:`check_model_folder`),
    or ``None`` when ``name`` is a Hub repo id to download. Light and quick: no torch, no
    transformers, no network.

    Raises:
        ModelLoadError: ``model folder not found: NAME`` for a missing folder that is meant as
            a path or is no valid repo id (:func:`~hfattn.storage.location.local_model_path`), or
            is not in the Hub cache while the Hub is offline; or what an existing folder lacks
            (:func:`check_model_folder`).
    """
    if not name.strip():
        raise ModelLoadError("model folder not found: the name is empty")
    try:
        folder = local_model_path(name)
    except FileNotFoundError:
        raise _folder_not_found(name, Path(name).expanduser()) from None
    if folder is not None:
        check_model_folder(folder, name)
        return folder
    if hub_offline() and not in_local_cache(name):
        raise ModelLoadError(
            f"model folder not found: {name} (and the Hub is offline, HF_HUB_OFFLINE=1, with no "
            f"copy of a Hub model {name} in the cache)"
        )
    return None


def locate_local_folder(name: str, *, check: bool = True) -> Path:
    """The existing local folder that ``name`` names, for a command that reads a local folder
    only (``hfattn evaluate``, ``hfattn push``): unlike :func:`locate_model`, a name that could
    be a Hub repo id is no exception. With ``check``, the folder must have a config
    (:func:`check_model_config`; its weights and tokenizer are checked when it is loaded).
    Light and quick: no torch, no transformers, no network.

    Raises:
        ModelLoadError: ``model folder not found: NAME`` (with a close sibling's name when there
            is one) when nothing exists there; with ``check``, a file or a folder without a
            config.
    """
    if not name.strip():
        raise ModelLoadError("model folder not found: the name is empty")
    folder = Path(name).expanduser()
    if not folder.exists():
        raise _folder_not_found(name, folder)
    if check:
        check_model_config(folder, name)
    return folder


def _folder_not_found(name: str, folder: Path) -> ModelLoadError:
    """``model folder not found: runs/x; did you mean runs/x2?`` (:func:`_did_you_mean`)."""
    return ModelLoadError(f"model folder not found: {name}{_did_you_mean(folder)}")


def check_model_config(folder: Path, name: str | None = None) -> None:
    """Refuse a ``folder`` (shown as ``name``) that is a file, that is a training run not
    finished yet (:func:`~hfattn.storage.run_status.interrupted_run_message`: its step and how to
    continue it, whether or not its model files are written yet: a run interrupted while it
    saved them has weights but no final evaluation), or that has neither ``config.json`` nor
    ``adapter_config.json``. A model folder that holds no run loads as it is.

    Raises:
        ModelLoadError: ``runs/x holds no model: config.json is missing``.
    """
    from ..storage.run_status import interrupted_run_message

    name = name or str(folder)
    if not folder.is_dir():
        raise ModelLoadError(f"{name} is a file, not a model folder")
    unfinished = interrupted_run_message(folder)
    if unfinished is not None:
        raise ModelLoadError(unfinished)
    if not (folder / ADAPTER_CONFIG_FILE).is_file() and not (folder / CONFIG_FILE).is_file():
        raise ModelLoadError(f"{name} holds no model: {CONFIG_FILE} is missing")


def check_model_folder(folder: Path, name: str | None = None) -> None:
    """Refuse a ``folder`` (shown as ``name``) that holds no loadable model, naming what it
    lacks, before anything is loaded.

    Raises:
        ModelLoadError: the path is a file; a training run not finished yet (its step and
            how to continue it); no ``config.json`` (nor
            ``adapter_config.json``); no weights (a CTranslate2 export: which engine reads it);
            no tokenizer files.
    """
    name = name or str(folder)
    check_model_config(folder, name)
    adapter = (folder / ADAPTER_CONFIG_FILE).is_file()
    weights = ADAPTER_WEIGHTS_FILE if adapter else WEIGHTS_FILE
    if not any(folder.glob("*.safetensors")) and not pickle_weights(folder):
        from ..export.export_folder import is_export

        if is_export(folder):
            raise ModelLoadError(
                f"{name} is a CTranslate2 export, not a PyTorch model folder: translate with it "
                f"by `hfattn translate {shlex.quote(name)} TEXT... --engine ctranslate2`; the "
                "other commands (and --engine torch) read the model folder it was exported from"
            )
        raise ModelLoadError(f"{name} holds no model weights: {weights} is missing")
    if not any(any(folder.glob(pattern)) for pattern in TOKENIZER_FILES):
        raise ModelLoadError(
            f"{name} holds no tokenizer: tokenizer.json is missing (save the tokenizer next to "
            "the model with tokenizer.save_pretrained)"
        )


def pickle_weights(folder: Path) -> list[Path]:
    """The pickle weight files (:data:`~hfattn.storage.model_folder.PICKLE_WEIGHTS`) directly in
    ``folder``, sorted."""
    return sorted({p for pattern in PICKLE_WEIGHTS for p in folder.glob(pattern) if p.is_file()})


__all__ = [
    "ModelLoadError",
    "answer_lines",
    "check_model_config",
    "check_model_folder",
    "load_recipe_or_report",
    "locate_local_folder",
    "locate_model",
    "pickle_weights",
    "report_error",
    "require_counts",
    "text_command_inputs",
]
