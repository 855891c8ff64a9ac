"""Attention masks in the boolean *keep* convention.

Every mask built here is a ``torch.bool`` tensor in which ``True`` means "this query may
attend to this key" and ``False`` means "masked out". Masks broadcast against the energy
tensor ``[..., Tq, Tk]``; for multi-head attention that is ``[B, H, Tq, Tk]``, so a padding
mask is ``[B, 1, 1, Tk]`` and a causal mask ``[1, 1, Tq, Tk]``.

Float masks are accepted wherever a mask is taken, in the *additive* convention of
``transformers`` (``0`` = attend, a large negative number or ``-inf`` = masked, as built
by ``transformers.masking_utils``); :func:`to_keep_mask` converts them (negative = masked).

Keras-style code (Sánchez Arrabal, *Las matemáticas de la atención*; Chollet ch. 11) masks by
adding ``-1e6`` to masked scores before the softmax; here the masked energies are removed
exactly (``-inf`` for the softmax, exact zeros for the other distributions), and a query row
whose keys are all masked gets all-zero weights.

This module imports only torch: it is copied next to saved weights for remote code.
"""

from __future__ import annotations

import torch


def padding_mask(attention_mask: torch.Tensor, ndim: int = 4) -> torch.Tensor:
    """Turn a ``[B, Tk]`` padding mask (1 = real token, 0 = padding) into a keep mask.

    ``keep[b, ..., j] = attention_mask[b, j] != 0``, shaped ``[B, 1, ..., 1, Tk]`` with
    ``ndim`` dimensions in all (4 for multi-head ``[B, H, Tq, Tk]``, 3 for ``[B, Tq, Tk]``).
    """
    if attention_mask.dim() != 2:
        raise ValueError(
            f"attention_mask must have shape [batch, key_length]; got {tuple(attention_mask.shape)}"
        )
    if ndim < 3:
        raise ValueError(f"ndim must be at least 3 ([B, Tq, Tk]); got {ndim}")
    keep = attention_mask != 0
    return keep.reshape(keep.shape[0], *([1] * (ndim - 2)), keep.shape[1])


def causal_mask(
    query_length: int,
    key_length: int | None = None,
    device: torch.device | str | None = None,
    ndim: int = 4,
) -> torch.Tensor:
    """Lower-triangular keep mask, aligned to the end of the keys.

    With ``offset = key_length - query_length`` (the number of cached past keys),
    ``keep[i, j] = j <= i + offset``: query ``i`` sits at absolute position ``i + offset``
    and sees itself and everything before it. Shape ``[1, ..., 1, Tq, Tk]`` (``ndim`` dims).
    """
    key_length = query_length if key_length is None else key_length
    if key_length < query_length:
        raise ValueError(
            f"causal_mask needs key_length >= query_length; got key_length={key_length}, "
            f"query_length={query_length}"
        )
    offset = key_length - query_length
    rows = torch.arange(query_length, device=device)[:, None] + offset
    cols = torch.arange(key_length, device=device)[None, :]
    keep = cols <= rows
    return keep.reshape(*([1] * (ndim - 2)), query_length, key_length)


def combine_masks(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """Logical AND of keep masks (``None`` entries are ignored); ``None`` if all are ``None``.

    ``combine_masks(padding_mask(m), causal_mask(T))`` is the decoder self-attention mask
    ("both"): position ``j`` is visible from ``i`` iff it is a real token and ``j <= i``.
    """
    result = None
    for mask in masks:
        if mask is None:
            continue
        mask = to_keep_mask(mask)
        result = mask if result is None else result & mask
    return result


def make_attention_mask(
    query_length: int,
    key_length: int | None = None,
    attention_mask: torch.Tensor | None = None,
    causal: bool = False,
    device: torch.device | str | None = None,
    ndim: int = 4,
) -> torch.Tensor | None:
    """Build the padding, causal, or combined ("both") keep mask in one call.

    ``attention_mask`` is the ``[B, Tk]`` padding mask of the keys (or ``None``); ``causal``
    adds :func:`causal_mask`. Returns ``None`` when there is nothing to mask.
    """
    key_length = query_length if key_length is None else key_length
    pad = None
    if attention_mask is not None:
        if attention_mask.shape[-1] != key_length:
            raise ValueError(
                f"attention_mask has {attention_mask.shape[-1]} positions but key_length is "
                f"{key_length}"
            )
        pad = padding_mask(attention_mask, ndim=ndim)
        device = pad.device
    causal_keep = (
        causal_mask(query_length, key_length, device=device, ndim=ndim) if causal else None
    )
    return combine_masks(pad, causal_keep)


def to_keep_mask(mask: torch.Tensor) -> torch.Tensor:
    """Return ``mask`` as a boolean keep mask.

    Boolean masks are returned unchanged. Float masks are read in the additive convention
    of ``transformers``: ``keep = mask >= 0`` (``0`` attends; negative values such as
    ``-inf``, ``finfo.min`` or a Keras-style ``-1e6`` mask).
    """
    if mask.dtype == torch.bool:
        return mask
    if mask.is_floating_point():
        return mask >= 0
    return mask != 0


def to_additive_mask(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Return ``mask`` as an additive float mask: ``0`` where kept, ``finfo(dtype).min`` elsewhere.

    What the ``eager`` kernel adds to its energies (``sdpa`` takes the boolean keep mask
    itself). The finite minimum (rather than ``-inf``) keeps fully-masked rows NaN-free;
    such rows are then zeroed by the caller.
    """
    if mask.is_floating_point():
        return mask.to(dtype)
    keep = to_keep_mask(mask)
    return torch.zeros(keep.shape, dtype=dtype, device=keep.device).masked_fill(
        ~keep, torch.finfo(dtype).min
    )


def mask_values_are_free(mask: torch.Tensor) -> bool:
    """True when reading ``mask``'s values on the host costs nothing: a CPU tensor, outside
    ``torch.compile`` / ``torch.export`` and ``torch.jit`` tracing. On an accelerator the
    read would stall the queue; in a traced graph it would break the graph (or bake one batch's
    values into it)."""
    return (
        mask.device.type == "cpu"
        and not torch.compiler.is_compiling()
        and not torch.jit.is_tracing()
    )


def hides_nothing(mask: torch.Tensor | None) -> bool:
    """True when ``mask`` (keep or additive) shows every key to every query, read only where
    :func:`mask_values_are_free`; ``False`` when it cannot be read for free (the caller then
    keeps the mask, which is always exact). ``None`` hides nothing."""
    if mask is None:
        return True
    return mask_values_are_free(mask) and bool(to_keep_mask(mask).all())


def keep_mask(
    attention_mask: torch.Tensor | None,
    query_length: int,
    key_length: int,
    causal: bool,
    device: torch.device | str | None = None,
) -> torch.Tensor | None:
    """A given mask as a 4-D keep mask ``[B, 1|h, 1|Tq, Tk]``, ANDed with the causal one.

    ``attention_mask`` is a keep mask (bool) or an additive float mask shaped ``[B, Tk]``
    (padding), ``[B, Tq, Tk]`` or ``[B, 1|h, Tq, Tk]``; its last ``key_length`` columns are
    the keys. ``causal`` adds :func:`causal_mask` (aligned to the end of the keys, so that it
    is right with a KV cache). ``None`` when there is nothing to mask.
    """
    if attention_mask is not None:
        if attention_mask.dim() == 2:
            attention_mask = padding_mask(attention_mask, ndim=4)
        elif attention_mask.dim() == 3:
            attention_mask = attention_mask.unsqueeze(1)
        elif attention_mask.dim() != 4:
            raise ValueError(
                "attention_mask must be [B, Tk] (padding), [B, Tq, Tk] or [B, 1|h, Tq, Tk]; "
                f"got shape {tuple(attention_mask.shape)}"
            )
        attention_mask = attention_mask[..., -key_length:]
    causal_keep = causal_mask(query_length, key_length, device=device) if causal else None
    return combine_masks(attention_mask, causal_keep)


def kernel_mask(
    attention_mask: torch.Tensor | None,
    query_length: int,
    key_length: int,
    causal: bool,
    implementation: str,
    dtype: torch.dtype,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor | None, bool, torch.Tensor | None]:
    """``(mask, is_causal, row_has_key)`` for a ``transformers`` attention kernel.

    The cheapest mask that gives the outputs of ``keep`` = the given mask AND the causal one
    (True = attend):

    - a given mask that hides nothing is dropped (``eager`` and ``sdpa``; read only where
      that is free, see :func:`hides_nothing`; elsewhere the mask is kept, which is exact);
    - then, for a causal self-attention with no given mask: nothing for one query at the end
      of the keys (a cached step sees every key); ``is_causal=True`` (the kernel's fused
      causal path) and no mask when ``Tq == Tk`` (except ``eager``);
    - otherwise ``sdpa`` gets ``keep`` as a boolean mask ``[B|1, 1|h, 1|Tq, Tk]`` (as
      transformers' ``sdpa_mask`` builds), its empty rows (a query with no visible key)
      opened to every key so that no kernel or torch version meets a fully masked row;
      ``eager`` gets ``keep`` as an additive ``dtype`` mask (:func:`to_additive_mask`); any
      other kernel (flash, flex, ...) gets the given mask as is and ``is_causal``.

    ``row_has_key [B|1, 1|h, Tq, 1]`` (False = the query sees no key: the caller gives it a
    zero context) is ``None`` when no row can be empty (the causal mask always shows key 0).
    """
    own_mask = implementation in ("eager", "sdpa")  # kernels that get the mask built here
    if (
        own_mask
        and attention_mask is not None
        and attention_mask.dim() in (2, 3, 4)  # other shapes are refused by keep_mask
        and attention_mask.shape[-1] >= key_length  # shorter ones by the kernel
        and hides_nothing(attention_mask)
    ):
        attention_mask = None
    only_causal = attention_mask is None and causal
    if attention_mask is None and not causal:
        return None, False, None
    if only_causal and query_length == 1:
        return None, False, None  # one query at the end of the keys sees every key
    if only_causal and query_length == key_length and implementation != "eager":
        return None, True, None  # the kernel's fused causal path
    keep = keep_mask(attention_mask, query_length, key_length, causal, device)
    # Only a given mask can hide every key of a query (the causal one always shows key 0).
    row_has_key = keep.any(dim=-1, keepdim=True) if attention_mask is not None else None
    if implementation == "eager":
        return to_additive_mask(keep, dtype), False, row_has_key
    if implementation == "sdpa":
        return (keep if row_has_key is None else keep | ~row_has_key), False, row_has_key
    return attention_mask, causal, row_has_key
