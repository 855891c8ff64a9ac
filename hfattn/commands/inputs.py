"""Loading a recipe or a model folder for a command, with one clear error instead of a deep
traceback: ``error: <message>`` on stderr and exit status 2 (:func:`report_error`).

A command that runs a recipe (``train``, ``baseline``) takes it as
:func:`hfattn.commands.arguments.add_recipe_arguments` defines (the YAML path and repeatable
``--set key=value`` overrides) and reads it with :func:`load_recipe_or_report`.

A model is named by a local folder or a Hub repo id, and :func:`locate_model` tells which at
once, before torch is imported (:mod:`hfattn.storage.location`): a name that is meant as a path
(``./x``, ``/x``, ``~/x``, ``a/b/c``, or ``runs/x`` where ``runs/`` is a local folder), that is
no valid repo id, or any name while the Hub is offline (``HF_HUB_OFFLINE=1``) and not in the
Hub cache, and that does not exist is ``model folder not found: runs/x``, never a minute of
Hub retries; a command that reads a local folder only (``evaluate``, ``push``) says so of any
name that is no folder (:func:`locate_local_folder`). An existing folder that holds no model
says what it lacks (``config.json``, the weights, the tokenizer); a training run that is not
finished (no final evaluation written, whether or not its model files are) is refused by every
command the same way, with the step it reached and how to continue it
(:func:`hfattn.storage.run_status.interrupted_run_message`).
A model of another task than the command's (a translation model given to ``hfattn
generate``) is refused from its ``config.json`` before the weights are read, naming the
command that fits it (:func:`check_model_fits`).

Only safetensors weights are read: a folder (or Hub repo) whose weights are pickles
(``pytorch_model.bin``, ``*.pt``, ...) is refused, since unpickling can run arbitrary code,
unless the user opts in with ``--allow-pickle`` (:func:`allow_pickle` for library callers). A
truncated or corrupt ``config.json``, tokenizer or safetensors file is a
:class:`ModelLoadError` naming that file. hfattn's own architectures load from the installed
package (the Auto classes know them), so ``trust_remote_code`` is never needed.
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from ..common.field_checks import did_you_mean
from ..storage.file_reads import read_utf8_text
from ..storage.location import hub_offline, in_local_cache, local_model_path
from ..storage.model_folder import (
    ADAPTER_CONFIG_FILE,
    ADAPTER_WEIGHTS_FILE,
    CHECKED_FILES,
    CONFIG_FILE,
    PICKLE_WEIGHTS,
    TOKENIZER_FILES,
    WEIGHTS_FILE,
    first_damaged_file,
)
from ..tokenization.input_text import blank_text_error

logger = logging.getLogger(__name__)

TASK_COMMANDS = {
    "text-generation": ("a text-generation model", "hfattn generate {name} --prompt TEXT"),
    "translation": ("a translation model", "hfattn translate {name} TEXT..."),
    "text-classification": ("a text classifier", "hfattn classify {name} TEXT..."),
}
"""A task's ``pipeline_tag`` → (what its models are called, the command line that runs one;
``{name}`` is the model, quoted for the shell)."""

_ALLOW_PICKLE: ContextVar[bool] = ContextVar("hfattn_allow_pickle", default=False)


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


@contextmanager
def allow_pickle(enabled: bool = True) -> Iterator[None]:
    """Within the block, :func:`load_model_and_tokenizer` accepts pickle weights when
    ``enabled`` (what ``--allow-pickle`` sets for a command)."""
    token = _ALLOW_PICKLE.set(enabled)
    try:
        yield
    finally:
        _ALLOW_PICKLE.reset(token)


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


def model_task(config: dict, adapter_config: dict | None = None):
    """The task (its :class:`~hfattn.tasks.TaskInfo`) of a model, from its ``config.json``
    (``architectures``, else ``is_encoder_decoder`` for translation) or an adapter's
    ``task_type``; ``None`` when they do not tell."""
    from ..hub.tasks import task_for_architectures, task_for_peft, task_infos

    try:
        if adapter_config is not None:
            return task_for_peft(adapter_config.get("task_type"))
        return task_for_architectures(config.get("architectures"))
    except ValueError:
        pass
    return task_infos()["translation"] if config.get("is_encoder_decoder") else None


def check_model_fits(name: str, config: dict, adapter_config: dict | None, auto_class: str):
    """Refuse a model whose task is not the one ``auto_class`` loads, naming the command that
    runs it (read from ``config.json`` / ``adapter_config.json``, before any weight); also a
    model with no classification head (``DistilBertForMaskedLM``) asked for as a classifier.
    A model whose task cannot be told is left to ``transformers``.

    Raises:
        ModelLoadError: ``runs/x holds a translation model (BahdanauForConditionalGeneration),
            not a text-generation model: use `hfattn translate runs/x TEXT...```.
    """
    from ..hub.tasks import task_infos

    wanted = next((i for i in task_infos().values() if i.auto_class == auto_class), None)
    found = model_task(config, adapter_config)
    if wanted is None or found == wanted:
        return
    architectures = config.get("architectures") or []
    if adapter_config is not None:
        what = f"{adapter_config.get('task_type')} adapter"
    else:
        what = ", ".join(architectures) or config.get("model_type") or "unknown architecture"
    wanted_kind = TASK_COMMANDS.get(wanted.pipeline_tag, (wanted.task_name,))[0]
    if found is None:
        if wanted.pipeline_tag == "text-classification" and architectures:
            raise ModelLoadError(
                f"{name} holds a {what}, not {wanted_kind}: it has no trained classification "
                "head; fine-tune it with a classification recipe first"
            )
        return
    kind, command = TASK_COMMANDS[found.pipeline_tag]
    raise ModelLoadError(
        f"{name} holds {kind} ({what}), not {wanted_kind}: "
        f"use `{command.format(name=shlex.quote(name))}`"
    )


def pickle_weights(folder: Path) -> list[Path]:
    """The pickle weight files (:data:`~hfattn.storage.model_folder.PICKLE_WEIGHTS`) directly in
    ``folder``, sorted."""
    return sorted({p for pattern in PICKLE_WEIGHTS for p in folder.glob(pattern) if p.is_file()})


def check_weights_are_safe(folder: Path, allowed: bool) -> None:
    """Refuse a local ``folder`` whose weights exist only as pickles (unless ``allowed``); warn
    that pickles next to safetensors weights are ignored.

    Raises:
        ModelLoadError: naming the pickle file and the ``--allow-pickle`` opt-in.
    """
    pickles = pickle_weights(folder)
    if not pickles or allowed:
        return
    if any(folder.glob("*.safetensors")):
        logger.warning(
            "%s: ignoring %s (pickle); the safetensors weights are loaded",
            folder,
            ", ".join(p.name for p in pickles),
        )
        return
    raise ModelLoadError(
        f"{pickles[0]} is a pickle file, which can run arbitrary code when loaded; hfattn reads "
        "only safetensors weights. Convert it where you trust it (save_pretrained writes "
        "model.safetensors), or pass --allow-pickle if you trust this file"
    )


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message, or its type's name when it has none."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def damaged_file_error(folder: Path, name: str, reason: str = "") -> ModelLoadError | None:
    """The error that names the first damaged file of the model ``folder`` (shown as ``name``,
    with the loader's ``reason``): ``cannot load the model in 'runs/x': runs/x/model.safetensors
    is truncated or corrupt (...)``; ``None`` when every one of its
    :data:`~hfattn.storage.model_folder.CHECKED_FILES` reads back."""
    damaged = first_damaged_file(folder, CHECKED_FILES)
    if damaged is None:
        return None
    detail = f" ({reason})" if reason else ""
    return ModelLoadError(
        f"cannot load the model in {name!r}: {damaged} is truncated or corrupt{detail}"
    )


def read_configs(name: str, folder: Path | None) -> tuple[dict, dict | None]:
    """``(config.json, adapter_config.json or None)`` of a local folder or a Hub repo (an
    adapter has no ``config.json``: ``{}``). A local file that is not JSON reads as ``{}``:
    loading then fails on it, and the error names the damaged file (:func:`damaged_file_error`)."""
    if folder is not None:
        adapter = (folder / ADAPTER_CONFIG_FILE).is_file()
        path = folder / (ADAPTER_CONFIG_FILE if adapter else CONFIG_FILE)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return {}, None
        data = data if isinstance(data, dict) else {}
        return ({}, data) if adapter else (data, None)
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError

    from ..tasks.pretrained import fetch_hub_config

    try:  # one quick probe first: an unreachable Hub fails in seconds, not after retries
        return json.loads(Path(fetch_hub_config(name)).read_text(encoding="utf-8")), None
    except LocalEntryNotFoundError:
        raise  # offline and not cached: not a missing file
    except EntryNotFoundError:  # the repo has no config.json: an adapter
        path = Path(hf_hub_download(name, ADAPTER_CONFIG_FILE))
    return {}, json.loads(path.read_text(encoding="utf-8"))


def _adapter_labels(folder: Path | None, adapter_config: dict | None) -> dict:
    """``num_labels`` / ``id2label`` / ``label2id`` for the base model of a local
    sequence-classification adapter (its ``labels.json``, or the run's
    ``confusion_matrix.json``), so that the head the base model gets fits the adapter's; ``{}``
    for anything else.

    Raises:
        ModelLoadError: such an adapter that records no label names.
    """
    from ..hub.folder_inspection import ModelFolderError, read_labels

    if folder is None or adapter_config is None:
        return {}
    try:
        labels = read_labels(folder, {}, adapter_config)
    except ModelFolderError as err:
        raise ModelLoadError(str(err)) from None
    if not labels:
        return {}
    from ..tasks.classification.encoding import label_maps

    return label_maps(list(labels))


def load_model_and_tokenizer(name: str, auto_class: str, *, allow_pickle: bool | None = None):
    """``(model, tokenizer)`` of a folder or Hub repo id through ``transformers.<auto_class>``,
    in eval mode, from safetensors weights only.

    Args:
        name: a local folder or a Hub repo id (told apart by :func:`locate_model`).
        auto_class: e.g. ``"AutoModelForCausalLM"``.
        allow_pickle: also accept pickle weights (``pytorch_model.bin``); default: the
            :func:`allow_pickle` setting (off).

    Raises:
        ModelLoadError: a folder that does not exist or holds no model (:func:`locate_model`),
            a model of another task (:func:`check_model_fits`), pickle weights without the
            opt-in, or files that cannot be read (truncated weights, a garbage config or
            tokenizer); the message names the file when one of them is damaged, else the
            folder.
    """
    folder = locate_model(name)

    import transformers

    import hfattn  # noqa: F401  (registers the model types: no trust_remote_code needed)

    allowed = _ALLOW_PICKLE.get() if allow_pickle is None else allow_pickle
    if folder is not None:
        check_weights_are_safe(folder, allowed)
    try:
        config, adapter_config = read_configs(name, folder)
        check_model_fits(name, config, adapter_config, auto_class)
        # trust_remote_code=False: hfattn's model types run from the installed package, not
        # from the modeling files of a repo (without it transformers asks on stdin)
        tokenizer = transformers.AutoTokenizer.from_pretrained(name, trust_remote_code=False)
        model = getattr(transformers, auto_class).from_pretrained(
            name,
            use_safetensors=None if allowed else True,
            trust_remote_code=False,
            **_adapter_labels(folder, adapter_config),
        )
    except ModelLoadError:
        raise
    except Exception as exc:  # noqa: BLE001 (safetensors, json, tokenizers each raise their own)
        reason = first_line(exc)
        if folder is None:
            raise ModelLoadError(
                f"model folder not found: {name}, and it cannot be loaded as a Hub model id "
                f"({type(exc).__name__}: {reason})"
            ) from None
        damaged = damaged_file_error(folder, name, reason)
        if damaged is not None:
            raise damaged from None
        if not allowed and "safetensors" in reason:
            reason += " (hfattn reads only safetensors weights; --allow-pickle accepts pickles)"
        raise ModelLoadError(f"cannot load the model in {name!r}: {reason}") from None
    return model.eval(), tokenizer


__all__ = [
    "TASK_COMMANDS",
    "ModelLoadError",
    "allow_pickle",
    "check_model_config",
    "check_model_fits",
    "check_model_folder",
    "check_weights_are_safe",
    "damaged_file_error",
    "first_line",
    "load_model_and_tokenizer",
    "load_recipe_or_report",
    "locate_local_folder",
    "locate_model",
    "model_task",
    "pickle_weights",
    "read_configs",
    "report_error",
    "require_counts",
    "text_command_inputs",
]
