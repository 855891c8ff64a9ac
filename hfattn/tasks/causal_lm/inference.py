"""Text generation with a causal LM: :func:`generate_text` continues a prompt (``hfattn
generate``, the sample after training), :func:`check_generation_settings` checks its settings
before any model loads, and :func:`write_sample` writes the sample after training to
:data:`hfattn.storage.run_folder.SAMPLES_FILE`, which the model card shows.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import torch

from ...recipes.schema import GenerationSection
from ...storage.file_io import atomic_write_text
from ...tokenization.characters import encode_prompt, require_text

logger = logging.getLogger(__name__)


GREEDY_BELOW_TEMPERATURE = 1e-4
"""Sampling at a temperature below this (0 included) decodes greedily: it is greedy decoding to
float precision anyway (a token whose logit is 0.01 below the best has odds e^-100), and
dividing float32 logits by a far smaller temperature overflows into NaN probabilities."""

SEED_RANGE = (-(2**63), 2**64 - 1)
"""The seeds ``torch.manual_seed`` takes."""


def is_char_vocabulary(tokenizer) -> bool:
    """Whether every non-special token of ``tokenizer`` is a single character (the char-RNN's
    tokenizer), as opposed to a subword vocabulary (GPT-2's byte-level BPE)."""
    special = set(tokenizer.all_special_tokens)
    return all(len(token) == 1 for token in tokenizer.get_vocab() if token not in special)


def context_length(config) -> int | None:
    """The longest input a model takes (``max_position_embeddings``, GPT-2's ``n_positions``),
    or ``None`` for a recurrent model."""
    return getattr(config, "max_position_embeddings", None)


def check_generation_settings(settings: dict, prefix: str = "") -> None:
    """Raise ``ValueError`` naming the first ``generate`` setting out of its range:
    ``max_new_tokens`` and ``num_beams`` >= 1, ``temperature`` finite and >= 0 (0 = greedy),
    ``top_k`` >= 0 (0 = off), ``top_p`` in (0, 1], ``seed`` in :data:`SEED_RANGE`; ``None``
    (or a missing key) is the default. ``prefix`` goes before each name, with ``_`` written
    ``-`` (``"--"`` names the command-line options)."""
    ranges = {
        "max_new_tokens": (lambda v: v >= 1, "must be >= 1"),
        "num_beams": (lambda v: v >= 1, "must be >= 1"),
        "temperature": (
            lambda v: math.isfinite(v) and v >= 0,
            "must be a finite number >= 0 (0 = greedy)",
        ),
        "top_k": (lambda v: v >= 0, "must be >= 0 (0 = off)"),
        "top_p": (lambda v: 0 < v <= 1, "must be in (0, 1]"),
        "seed": (lambda v: SEED_RANGE[0] <= v <= SEED_RANGE[1], "must be a 64-bit integer"),
    }
    for name, (ok, allowed) in ranges.items():
        value = settings.get(name)
        if value is not None and not ok(value):
            shown = prefix + name.replace("_", "-") if prefix else name
            raise ValueError(f"{shown} {allowed}, got {value}")


@torch.no_grad()
def generate_text(model, tokenizer, prompt: str, *, seed: int | None = 0, **kwargs) -> str:
    """Continue ``prompt`` with ``model.generate`` and return prompt + continuation as text.

    With a character vocabulary, characters outside it become ``<unk>`` (with a warning); a
    subword tokenizer (GPT-2) encodes any prompt. An empty prompt starts from ``<bos>``.
    ``kwargs`` go to ``generate`` (``top_k=None`` or ``0`` disables top-k; a ``temperature``
    below :data:`GREEDY_BELOW_TEMPERATURE`, 0 included, decodes greedily). A model with a
    fixed context (GPT-2's positions) reads the last tokens of a longer prompt, with a warning.
    The model generates in eval mode (its mode is restored afterwards).

    Raises:
        ValueError: a setting out of range (:func:`check_generation_settings`), a prompt that
            is not valid text, or ``max_new_tokens`` that leave no room for the prompt.
    """
    require_text(prompt, "prompt")
    check_generation_settings({**kwargs, "seed": seed})
    if seed is not None:
        torch.manual_seed(seed)
    if not prompt or is_char_vocabulary(tokenizer):
        prompt_ids = encode_prompt(tokenizer, prompt)
    else:
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    prompt_ids = _fit_context(prompt_ids, model.config, kwargs.get("max_new_tokens"))
    ids = torch.tensor([prompt_ids], device=model.device)
    temperature = kwargs.get("temperature")
    if temperature is not None and temperature < GREEDY_BELOW_TEMPERATURE:
        kwargs["do_sample"] = False
    if not kwargs.get("do_sample", True):
        kwargs = {k: v for k, v in kwargs.items() if k not in ("temperature", "top_k", "top_p")}
    kwargs["top_k"] = kwargs.get("top_k") or None
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    was_training = model.training
    model.eval()  # no dropout (GPT-2 has 0.1) in the sample, whatever the caller's mode
    try:
        out = model.generate(
            input_ids=ids, attention_mask=torch.ones_like(ids), pad_token_id=pad, **kwargs
        )
    finally:
        model.train(was_training)
    # the prompt is returned as typed (characters mapped to <unk> are not lost)
    return prompt + tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)


def _fit_context(prompt_ids: list[int], config, max_new_tokens: int | None) -> list[int]:
    """The last tokens of the prompt that leave room for ``max_new_tokens`` in a model with a
    fixed context (:func:`context_length`); all of them for a recurrent model."""
    limit = context_length(config)
    if limit is None:
        return prompt_ids
    new = max_new_tokens or 0
    if new >= limit:
        raise ValueError(
            f"max_new_tokens must be < {limit} (the model reads at most {limit} positions), "
            f"got {new}"
        )
    if len(prompt_ids) + new > limit:
        logger.warning(
            "the prompt has %d tokens; with %d new tokens the model reads only its last %d",
            len(prompt_ids),
            new,
            limit - new,
        )
        prompt_ids = prompt_ids[len(prompt_ids) + new - limit :]
    return prompt_ids


def write_sample(path: Path, text: str, generation: GenerationSection) -> None:
    """Write ``text`` (a generated sample) and the settings that made it to ``path`` as Markdown,
    atomically."""
    settings = ", ".join(
        f"{key} {value}"
        for key, value in generation.generate_kwargs().items()
        if value is not None and key != "max_new_tokens"
    )
    prompt = json.dumps(getattr(generation, "prompt", ""))
    fence = "````" if "```" in text else "```"
    atomic_write_text(
        path,
        f"Prompt {prompt}, {generation.max_new_tokens} new tokens ({settings}):\n\n"
        f"{fence}text\n{text}\n{fence}\n",
    )


__all__ = [
    "GREEDY_BELOW_TEMPERATURE",
    "SEED_RANGE",
    "check_generation_settings",
    "context_length",
    "generate_text",
    "is_char_vocabulary",
    "write_sample",
]
