"""Loading the model of a command (``generate``, ``translate``, ``classify``, ``evaluate``,
``plot``, ``export``) through ``transformers``, once :mod:`hfattn.commands.inputs` has found its
folder or Hub repo id, with one clear error (:class:`~hfattn.commands.inputs.ModelLoadError`)
instead of a deep traceback.

A model of another task than the command's (a translation model given to ``hfattn
generate``) is refused from its ``config.json`` before the weights are read, naming the
command that fits it (:func:`check_model_fits`).

Only safetensors weights are read: a folder (or Hub repo) whose weights are pickles
(``pytorch_model.bin``, ``*.pt``, ...) is refused, since unpickling can run arbitrary code,
unless the user opts in with ``--allow-pickle`` (:func:`allow_pickle` for library callers). A
truncated or corrupt ``config.json``, tokenizer or safetensors file is a
:class:`~hfattn.commands.inputs.ModelLoadError` naming that file. hfattn's own architectures
load from the installed package (the Auto classes know them), so ``trust_remote_code`` is never
needed.
"""

from __future__ import annotations

import json
import logging
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from ..storage.model_folder import (
    ADAPTER_CONFIG_FILE,
    CHECKED_FILES,
    CONFIG_FILE,
    first_damaged_file,
)
from .inputs import ModelLoadError, locate_model, pickle_weights

logger = logging.getLogger(__name__)

TASK_COMMANDS = {
    "text-generation": ("a text-generation model", "hfattn generate {name} --prompt TEXT"),
    "translation": ("a translation model", "hfattn translate {name} TEXT..."),
    "text-classification": ("a text classifier", "hfattn classify {name} TEXT..."),
}
"""A task's ``pipeline_tag`` → (what its models are called, the command line that runs one;
``{name}`` is the model, quoted for the shell)."""

_ALLOW_PICKLE: ContextVar[bool] = ContextVar("hfattn_allow_pickle", default=False)


@contextmanager
def allow_pickle(enabled: bool = True) -> Iterator[None]:
    """Within the block, :func:`load_model_and_tokenizer` accepts pickle weights when
    ``enabled`` (what ``--allow-pickle`` sets for a command)."""
    token = _ALLOW_PICKLE.set(enabled)
    try:
        yield
    finally:
        _ALLOW_PICKLE.reset(token)


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
        name: a local folder or a Hub repo id (told apart by
            :func:`~hfattn.commands.inputs.locate_model`).
        auto_class: e.g. ``"AutoModelForCausalLM"``.
        allow_pickle: also accept pickle weights (``pytorch_model.bin``); default: the
            :func:`allow_pickle` setting (off).

    Raises:
        ModelLoadError: a folder that does not exist or holds no model
            (:func:`~hfattn.commands.inputs.locate_model`),
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
    "allow_pickle",
    "check_model_fits",
    "check_weights_are_safe",
    "damaged_file_error",
    "first_line",
    "load_model_and_tokenizer",
    "model_task",
    "read_configs",
]
