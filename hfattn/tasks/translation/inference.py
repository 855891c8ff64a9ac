"""Translating with a seq2seq model, and the attention it paid to the source.

:func:`translate_texts` batches sources (sorted by length, order restored), truncates sources
longer than the model allows (warning, or
:class:`~hfattn.tasks.translation.encoding.SourceTooLongError` when asked to refuse), returns
``""`` for an empty source, and decodes with ``generate`` (greedy, sampling or beam search)
with the model's saved generation settings, the ``num_beams`` / ``max_new_tokens`` given
overriding them (:func:`decoding_settings`); sources already encoded (``source_ids``: a split
scored at every validation) are not tokenized again. It is what ``hfattn translate``, the
scoring of a split and the sample after training use;
:func:`translate_n_best` returns the ``n`` best of each.
:func:`cross_attention_maps` (and :func:`alignment`, one layer and head of it) gives the
cross-attention of a translation, what ``hfattn plot attention`` draws.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch

from ...batching.seq2seq import pad_sources
from ...common.progress import progress_bar
from ...common.stop_request import raise_if_stop_requested
from ...evaluation.translation import source_limit
from ...tokenization.characters import require_text
from ..decoding import TRANSLATION_FALLBACK, saved_decoding
from .encoding import encode_sources

logger = logging.getLogger(__name__)


def target_limit(model) -> int | None:
    """The most tokens the decoder can read: ``config.max_target_positions``, or
    ``max_position_embeddings`` when the positions are a table (learned, or Marian's fixed
    sinusoids); ``None`` when they extend on the fly (Vaswani's sinusoids) or there are none
    (a recurrent decoder)."""
    config = model.config
    if getattr(config, "max_target_positions", None):
        return int(config.max_target_positions)
    if getattr(config, "position_embedding", None) == "sinusoidal":
        return None
    value = getattr(config, "max_position_embeddings", None)
    return int(value) if value else None


def decoding_settings(
    model, num_beams: int | None = None, max_new_tokens: int | None = None
) -> tuple[int, int]:
    """``(num_beams, max_new_tokens)`` a translation decodes with: each one given (not
    ``None``), else the model's saved ``generation_config``, else
    :data:`~hfattn.tasks.decoding.TRANSLATION_FALLBACK` (greedy, 128): the saved-settings rule
    (:func:`~hfattn.tasks.decoding.saved_decoding`)."""
    chosen = saved_decoding(
        getattr(model, "generation_config", None),
        TRANSLATION_FALLBACK,
        num_beams=num_beams,
        max_new_tokens=max_new_tokens,
    )
    return int(chosen["num_beams"]), int(chosen["max_new_tokens"])


def translate_texts(model, tokenizer, texts: Sequence[str], **options) -> list[str]:
    """Translate ``texts`` (any order and lengths): the best translation of each, as
    :func:`translate_n_best` decodes them with the same keyword ``options`` (``batch_size``,
    ``num_beams``, ``max_new_tokens``, ``on_too_long``, ``source_ids`` and ``generate()``
    keywords); an empty or blank source gives ``""``. ``num_beams`` and ``max_new_tokens`` left
    ``None`` are the model's saved ones (``model.generation_config``), else greedy and 128
    (:func:`decoding_settings`); ``max_new_tokens`` beyond the decoder's positions
    (:func:`target_limit`) are cut to them, with a warning. ``source_ids``: the token ids of
    ``texts`` already encoded, one list per text, as
    :func:`~hfattn.tasks.translation.encoding.encode_sources` gives them for the model's
    :func:`~hfattn.evaluation.translation.source_limit` (a split scored again and again): used
    as they are, not tokenized again.

    Raises:
        ValueError: ``batch_size`` < 1, a source that is not valid text
            (:func:`~hfattn.tokenization.characters.require_text`), or ``source_ids`` of
            another length than ``texts``.
    """
    return [best[0] for best in translate_n_best(model, tokenizer, texts, **options)]


@torch.no_grad()
def translate_n_best(
    model,
    tokenizer,
    texts: Sequence[str],
    *,
    batch_size: int = 32,
    num_beams: int | None = None,
    num_return_sequences: int = 1,
    max_new_tokens: int | None = None,
    on_too_long: str = "warn",
    source_ids: Sequence[Sequence[int]] | None = None,
    progress: bool | str = False,
    **generate_kwargs,
) -> list[list[str]]:
    """The ``num_return_sequences`` best translations of each of ``texts``, best first (beam
    search keeps at most ``num_beams``), as :func:`translate_texts` translates (``source_ids``
    too, the saved ``num_beams`` / ``max_new_tokens`` included); an empty or blank source gives
    ``[""]``. With ``progress`` a bar counts the sources translated once it has taken 2 s
    (:func:`~hfattn.common.progress.progress_bar`; a string ``progress`` is its label). Between
    batches it stops when the run is asked to
    (:func:`~hfattn.common.stop_request.raise_if_stop_requested`).

    Raises:
        ValueError: ``batch_size`` < 1, a source that is not valid text
            (:func:`~hfattn.tokenization.characters.require_text`), or ``source_ids`` of
            another length than ``texts``.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if source_ids is not None and len(source_ids) != len(texts):
        raise ValueError(
            f"source_ids: {len(source_ids)} id lists for {len(texts)} texts (one per text)"
        )
    for i, text in enumerate(texts):
        require_text(text, f"source {i}")
    num_beams, max_new_tokens = decoding_settings(model, num_beams, max_new_tokens)
    outputs: list[list[str]] = [[""] for _ in texts]
    todo = [i for i, text in enumerate(texts) if text.strip()]
    if not todo:  # the tokenizer refuses an empty batch
        return outputs
    limit = target_limit(model)
    if limit is not None and max_new_tokens > limit:
        logger.warning(
            "max_new_tokens %d is more than the decoder's %d positions: cut to %d",
            max_new_tokens,
            limit,
            limit,
        )
        max_new_tokens = limit
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    if source_ids is None:
        sources, source_max = [texts[i] for i in todo], source_limit(model, tokenizer)
        encoded = encode_sources(tokenizer, sources, source_max, on_too_long=on_too_long)
    else:
        encoded = [source_ids[i] for i in todo]
    order = sorted(range(len(todo)), key=lambda k: len(encoded[k]))
    label = progress if isinstance(progress, str) else "translating"
    bar = progress_bar(total=len(todo), desc=label, unit="source", shown=bool(progress),
                       leave=False)  # fmt: skip
    try:
        for begin in range(0, len(order), batch_size):
            raise_if_stop_requested()
            chunk = order[begin : begin + batch_size]
            batch = pad_sources([encoded[k] for k in chunk], tokenizer.pad_token_id)
            generated = model.generate(
                input_ids=batch["input_ids"].to(device),
                attention_mask=batch["attention_mask"].to(device),
                num_beams=num_beams,
                max_new_tokens=max_new_tokens,
                **({"num_return_sequences": num_return_sequences}
                   if num_return_sequences > 1 else {}),
                **generate_kwargs,
            )  # fmt: skip
            decoded = [
                text.strip() for text in tokenizer.batch_decode(generated, skip_special_tokens=True)
            ]
            for position, k in enumerate(chunk):
                start = position * num_return_sequences
                outputs[todo[k]] = decoded[start : start + num_return_sequences]
            bar.update(len(chunk))
    finally:  # a stop between batches too
        bar.close()
        model.train(was_training)
    return outputs


@torch.no_grad()
def cross_attention_maps(
    model,
    tokenizer,
    text: str,
    *,
    num_beams: int | None = None,
    max_new_tokens: int | None = None,
):
    """Translate ``text`` (``num_beams`` and ``max_new_tokens`` left ``None``: the model's
    saved ones, :func:`decoding_settings`) and return ``(source_tokens, output_tokens, maps)``:
    ``maps`` [layers, heads, output, source] holds every decoder layer's cross-attention, read
    from one teacher-forced pass over the decoded output, so it is the alignment of the
    translation whatever the decoding (beam search included). A model with one attention over
    the source (Bahdanau, Luong) gives ``[1, 1, output, source]``; a Transformer one map per
    layer and head.

    Raises:
        ValueError: for an empty source, or a model that returns no cross-attention.
    """
    if not text.strip():
        raise ValueError("text: the source sentence is empty")
    num_beams, max_new_tokens = decoding_settings(model, num_beams, max_new_tokens)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    ids = encode_sources(tokenizer, [text], source_limit(model, tokenizer))[0]
    input_ids = torch.tensor([ids], device=device)
    try:
        generated = model.generate(
            input_ids=input_ids,
            attention_mask=torch.ones_like(input_ids),
            num_beams=num_beams,
            max_new_tokens=max_new_tokens,
            do_sample=False,
        )
        out = model(
            input_ids=input_ids,
            attention_mask=torch.ones_like(input_ids),
            decoder_input_ids=generated[:, :-1],
            output_attentions=True,
            return_dict=True,
        )
    finally:
        model.train(was_training)
    cross = out.cross_attentions
    if cross is None or (isinstance(cross, (tuple, list)) and not cross):
        raise ValueError(f"{type(model).__name__} returned no cross-attention (attention: null?)")
    layers = cross if isinstance(cross, (tuple, list)) else (cross,)
    # [batch, heads, tgt, src] per layer; a bare [batch, tgt, src] is one head
    maps = torch.stack([w if w.dim() == 4 else w[:, None] for w in layers], dim=1)
    return (
        tokenizer.convert_ids_to_tokens(ids),
        tokenizer.convert_ids_to_tokens(generated[0, 1:].tolist()),
        maps[0].float().cpu().numpy(),
    )


def select_attention(maps, layer: int | None = None, head: int | None = None):
    """The [output, source] map of ``maps`` [layers, heads, output, source] for ``layer``
    (1-based; default the last) and ``head`` (1-based; default ``None``: the mean over heads).

    Raises:
        ValueError: naming the field and the valid range when ``layer`` or ``head`` is out of it.
    """
    num_layers, num_heads = maps.shape[:2]
    for name, value, count, what in (
        ("layer", layer, num_layers, "cross-attention layer"),
        ("head", head, num_heads, "attention head"),
    ):
        if value is not None and (isinstance(value, bool) or not 1 <= value <= count):
            plural = "s" if count != 1 else ""
            raise ValueError(
                f"{name} must be between 1 and {count} (the model has {count} {what}{plural}); "
                f"got {value!r}"
            )
    weights = maps[(layer or num_layers) - 1]
    return weights.mean(0) if head is None else weights[head - 1]


def alignment(
    model, tokenizer, text: str, *, layer: int | None = None, head: int | None = None, **decoding
):
    """Translate ``text`` and return ``(source_tokens, output_tokens, weights)``: ``weights``
    [output, source] is the cross-attention each output token paid to each source token in
    decoder ``layer`` (1-based, default the last) and ``head`` (1-based, default the mean over
    heads); the translation decodes as :func:`cross_attention_maps` does with the
    ``decoding`` keywords (``num_beams``, ``max_new_tokens``).

    Raises:
        ValueError: for an empty source, a model that returns no cross-attention, or a
            ``layer`` / ``head`` the model does not have.
    """
    source, output, maps = cross_attention_maps(model, tokenizer, text, **decoding)
    return source, output, select_attention(maps, layer, head)


__all__ = [
    "alignment",
    "cross_attention_maps",
    "decoding_settings",
    "select_attention",
    "target_limit",
    "translate_n_best",
    "translate_texts",
]
