r"""Scoring a causal language model on a held-out corpus.

The corpus is read as ``batch_size`` contiguous streams with the recurrent state (or, for
models without one, nothing: each window of a Transformer such as GPT-2 is scored on its own)
carried from window to window, so every token of a recurrent model is predicted from all the
text before it in its stream, as when the model reads a play from the start.

Bits per character divide the total negative log-likelihood by the number of characters of
the scored text, not of tokens, so that a character model and a subword model (GPT-2) sit in
one table:

.. math:: \mathrm{bpc} = \frac{\sum_t -\ln p(w_t \mid w_{<t})}{N_\mathrm{chars} \, \ln 2}

For a character tokenizer :math:`N_\mathrm{chars}` is the number of scored tokens, so bpc is
the loss divided by :math:`\ln 2`.

**Zero-state loss.** A recurrent model scored with its state carried never meets the all-zero
state that every ``generate`` call, card sample and Space request starts from; an undertrained
one can score well carried (2.46 nats/char) and far worse than uniform from a zero state
(9.5-10.7 nats/char, uniform being 4.43). :func:`zero_state_loss` therefore also reads
:data:`ZERO_STATE_PASSAGES` passages of :data:`ZERO_STATE_PASSAGE_LEN` tokens (characters for the
char-RNN) spread evenly over the split, each from a zero state, and reports their mean loss per
token (``loss_zero_state``, comparable with ``loss``), the median of the passages' losses
(``loss_zero_state_median``) and how many passages score worse than guessing uniformly. The mean
is the headline because a zero-state failure is all or nothing: a 200-step Shakespeare run
scored 18 of its 20 test passages near 2.3 nats/char and 2 near 10 (its carried loss 3.56,
median 2.29, mean 3.05); the median hid the two, the mean and the count show them. A well
trained char-RNN scores about the same both ways (1.449 zero-state median vs 1.437 carried).
A stateless model (GPT-2) reads every evaluation window from its start, so its ``loss`` already
is a zero-state loss: it is reported for models with a recurrent state only.

**A bounded evaluation.** With ``max_examples`` (``evaluation.max_examples``, or
``evaluation.final_max_examples`` at the end) only the first ``max_examples`` windows of
``seq_len`` tokens are scored: the first ``max_examples × seq_len`` predicted tokens, sliced
from the memory-mapped split (:func:`scored_prefix`), read as the same contiguous streams (at
most ``max_examples`` of them), with the zero-state passages spread over that prefix. The
scores count what they read: ``num_tokens``, ``num_chars`` and ``num_examples`` (windows of
``seq_len`` tokens).

**Without the continuous cache.** A char-RNN with a continuous cache (Grave et al. 2017,
``neural_cache_size > 0``) is scored as it predicts, with the cache; the carried loss of the
network alone is reported beside it (``loss_without_cache``), so that what the cache adds is
read off the same evaluation.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch
from torch.nn import functional as F

from ..batching.lm import StreamBatches, count_characters, gather_windows, id_array
from ..common.progress import progress_bar
from ..common.stop_request import raise_if_stop_requested
from . import load_metric

ZERO_STATE_METRIC = "loss_zero_state"
"""The name of the zero-state loss (the mean over the passages' tokens) in the scores."""
ZERO_STATE_PASSAGES = 20
"""Passages scored from a zero state per split (:func:`zero_state_loss`)."""
ZERO_STATE_PASSAGE_LEN = 1000
"""Tokens predicted per passage (characters, for a character model)."""
WITHOUT_CACHE_METRIC = "loss_without_cache"
"""The carried loss of a model with a continuous cache scored by its network alone: the head's
logits of the same pass, before the mixture."""


def is_stateful(model) -> bool:
    """Whether ``model`` carries a recurrent state from one call to the next (the char-RNN)."""
    return bool(getattr(model, "_is_stateful", False))


@contextmanager
def evaluating(model) -> Iterator[torch.device]:
    """Put ``model`` in eval mode (no dropout) for the block, then back in its former mode;
    yields the device of its parameters."""
    was_training = model.training
    model.eval()
    try:
        yield next(model.parameters()).device
    finally:
        model.train(was_training)


def has_continuous_cache(model) -> bool:
    """Whether ``model`` mixes a continuous cache into its predictions (``neural_cache_size``
    of a char-RNN's config, :mod:`hfattn.models.neural_cache`)."""
    return bool(getattr(model.config, "neural_cache_size", 0))


def carried_windows(
    model, streams: StreamBatches, stateful: bool, *, output_hidden_states: bool = False
) -> Iterator[tuple]:
    """``(output, targets)`` of every window of ``streams`` in eval mode, the recurrent state
    carried from one window to the next when ``stateful``."""
    state = None
    with evaluating(model) as device:
        for window in streams.epoch(0):
            raise_if_stop_requested()
            window = window.to(device)
            out = model(
                input_ids=window[:, :-1],
                cache=state,
                use_cache=stateful,
                output_hidden_states=output_hidden_states,
            )
            state = out.cache if stateful else None
            yield out, window[:, 1:]


def passage_starts(num_ids: int, passages: int, length: int) -> tuple[list[int], int]:
    r"""``(starts, length)`` of the passages :func:`zero_state_loss` reads from ``num_ids``
    ids: ``P`` passages of ``L + 1`` ids (``L`` predicted) spread evenly from the first id to
    the last, without overlap,

    .. math:: L = \min(\mathrm{length}, n - 1),\quad P = \min(\mathrm{passages},
              \lfloor (n - 1) / L \rfloor),\quad s_p = \lfloor p\,(n - L - 1) / (P - 1)
              \rfloor,\ p = 0, \dots, P - 1

    (``s_0 = 0`` when ``P = 1``), so a split shorter than ``passages × length`` gives fewer
    passages and one shorter than ``length`` a single shorter one.

    Raises:
        ValueError: fewer than 2 ids, or ``passages`` / ``length`` below 1.
    """
    if passages < 1 or length < 1:
        raise ValueError(f"passages and length must be >= 1, got {passages} and {length}")
    if num_ids < 2:
        raise ValueError(f"a zero-state passage needs at least 2 ids, the split has {num_ids}")
    length = min(length, num_ids - 1)
    count = min(passages, (num_ids - 1) // length)
    span = num_ids - length - 1
    starts = [p * span // (count - 1) if count > 1 else 0 for p in range(count)]
    return starts, length


@torch.no_grad()
def zero_state_loss(
    model,
    ids,
    *,
    passages: int = ZERO_STATE_PASSAGES,
    length: int = ZERO_STATE_PASSAGE_LEN,
    batch_size: int = 32,
    progress: str | None = None,
) -> dict:
    r"""The mean cross-entropy of ``model`` on passages of ``ids`` each read from a zero state
    (``cache=None``: the all-zero recurrent state, as ``generate`` starts), at the
    starts :math:`s_p` of :func:`passage_starts`:

    .. math:: \ell_p = -\frac{1}{L}\sum_{t=1}^{L} \ln p\big(w_{s_p+t} \mid
              w_{s_p}, \dots, w_{s_p+t-1};\ h_0 = 0\big), \qquad
              \mathrm{loss\_zero\_state} = \frac{1}{P}\sum_{p=1}^{P} \ell_p

    (the mean per token, as ``loss`` is, since every passage has :math:`L` tokens). Returns
    ``loss_zero_state``, ``loss_zero_state_median`` (:math:`\operatorname{median}_p \ell_p`),
    ``zero_state_passages`` (:math:`P`), ``zero_state_tokens`` (:math:`L`) and
    ``zero_state_above_uniform``, the passages worse than guessing uniformly
    (:math:`\ell_p > \ln V`, :math:`V` the vocabulary size). Passages are scored
    ``batch_size`` at a time, with a bar counting them once it has taken 2 s (``progress``:
    its label; ``None``: no bar). For a model without state (each call starts afresh) this is
    its ordinary loss on those passages.

    Raises:
        ValueError: see :func:`passage_starts`.
    """
    ids = id_array(ids)
    starts, length = passage_starts(len(ids), passages, length)
    losses: list[float] = []
    bar = progress_bar(total=len(starts), desc=progress or "zero-state passages",
                       unit="passage", shown=bool(progress), leave=False)  # fmt: skip
    with bar, evaluating(model) as device:
        for first in range(0, len(starts), batch_size):
            raise_if_stop_requested()
            window = gather_windows(ids, starts[first : first + batch_size], length + 1)
            window = window.to(device)
            logits = model(input_ids=window[:, :-1], use_cache=False).logits.float()
            nll = F.cross_entropy(logits.transpose(1, 2), window[:, 1:], reduction="none")
            losses += nll.mean(dim=1).tolist()
            bar.update(len(window))
    uniform = math.log(logits.shape[-1])
    return {
        ZERO_STATE_METRIC: statistics.fmean(losses),
        f"{ZERO_STATE_METRIC}_median": statistics.median(losses),
        "zero_state_passages": len(losses),
        "zero_state_tokens": length,
        "zero_state_above_uniform": sum(loss > uniform for loss in losses),
    }


def explain_zero_state(metrics: dict[str, dict]) -> str | None:
    """One paragraph on what the zero-state loss in ``metrics`` (``{split: scores}`` of
    :func:`evaluate_causal_lm`) measures beside the carried loss, for the printed table and the
    model card; ``None`` when no split holds one."""
    splits = {name: s for name, s in metrics.items() if "zero_state_passages" in s}
    if not splits:
        return None
    length = next(iter(splits.values()))["zero_state_tokens"]
    worse = ", ".join(
        f"{name} {s['zero_state_above_uniform']} of {s['zero_state_passages']}"
        for name, s in splits.items()
    )
    return (
        f"The zero-state loss is the mean loss of passages of {length:,} tokens (characters, "
        "for a character model) spread over the split, each read from the all-zero state that "
        "generate(), the samples and "
        "the Space start from; the other loss reads the split as long streams with the "
        "recurrent state carried from window to window. Passages scored worse than guessing "
        f"uniformly over the vocabulary: {worse}. A zero-state loss far above "
        "the carried one means that the model predicts well only after a long warm-up; "
        "passages worse than uniform mean that its samples can fall into nonsense."
    )


def window_nll(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The summed next-token negative log-likelihood of one window (nats), a 0-d tensor on the
    logits' device."""
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum"
    )


def scored_prefix(ids, seq_len: int, max_examples: int | None) -> np.ndarray:
    """The ids that a scoring of at most ``max_examples`` windows of ``seq_len`` tokens reads:
    the first ``max_examples × seq_len + 1`` (every one but the first a target), a slice of
    ``ids`` (a memory-mapped split stays mapped: nothing is copied); every id for ``None``."""
    ids = id_array(ids)
    return ids if max_examples is None else ids[: max_examples * seq_len + 1]


def evaluation_streams(batch_size: int, max_examples: int | None) -> int:
    """The contiguous streams an evaluation reads (:class:`~hfattn.batching.lm.StreamBatches`):
    ``batch_size``, or ``max_examples`` when fewer, so that a cap below the batch size scores
    its windows of ``seq_len`` tokens in one batch."""
    return batch_size if max_examples is None else min(batch_size, max_examples)


@torch.no_grad()
def evaluate_causal_lm(
    model,
    ids,
    *,
    batch_size: int = 32,
    seq_len: int = 256,
    tokenizer=None,
    max_examples: int | None = None,
    progress: str | None = None,
    zero_state_passages: int = ZERO_STATE_PASSAGES,
    zero_state_len: int = ZERO_STATE_PASSAGE_LEN,
) -> dict:
    """Loss (nats/token), perplexity, bits per character and next-token accuracy of ``model``
    on ``ids``, read as ``batch_size`` streams with the state carried; for a model with a
    recurrent state also its zero-state loss right after ``loss`` (:func:`zero_state_loss` on
    ``zero_state_passages`` passages of ``zero_state_len`` tokens; 0 passages: left out).
    ``max_examples`` bounds the windows of ``seq_len`` tokens scored (:func:`scored_prefix`,
    :func:`evaluation_streams`; ``None``: every one); ``num_examples`` counts them.

    For a model with a continuous cache the carried loss of the network alone follows ``loss``
    (:data:`WITHOUT_CACHE_METRIC`).

    ``ids`` is a 1-D array (a prepared split's memory-mapped values, or a tensor): each window
    is gathered from it, never the whole split copied; the losses and the correct predictions
    are summed on the model's device and read once, so what the scoring holds does not grow
    with the split. Loss and perplexity come from the bundled ``evaluate`` module
    ``perplexity``; the accuracy is correct / tokens (what the ``accuracy`` module gives).
    With ``tokenizer`` the scored tokens are decoded to count their characters
    (:func:`~hfattn.batching.lm.count_characters`, also reported as ``num_chars``); without it
    every token counts as one character (bits per token). With ``progress`` (the split's name)
    bars count the tokens (``validation: loss``) and the zero-state passages once each phase
    has taken 2 s.
    """
    stateful = is_stateful(model)
    ids = scored_prefix(ids, seq_len, max_examples)
    streams = StreamBatches(ids, evaluation_streams(batch_size, max_examples), seq_len)
    scored = streams.target_ids()
    cached = has_continuous_cache(model)
    device = next(model.parameters()).device
    nats = torch.zeros(2, dtype=torch.float64, device=device)  # with the cache, the network's
    correct = torch.zeros((), dtype=torch.long, device=device)
    bar = progress_bar(total=len(scored), desc=f"{progress}: loss", unit="token",
                       shown=bool(progress), leave=False)  # fmt: skip
    with bar:
        for out, targets in carried_windows(model, streams, stateful, output_hidden_states=cached):
            logits = out.logits.float()
            nats[0] += window_nll(logits, targets)
            if cached:  # the same pass, before the mixture: the recurrence runs once
                nats[1] += window_nll(model.head_logits(out.hidden_states[-1]).float(), targets)
            correct += (logits.argmax(-1) == targets).sum()
            bar.update(targets.numel())
    total_nats, network_nats, num_correct = torch.cat([nats, correct[None].double()]).tolist()
    perplexity = load_metric("perplexity")
    perplexity.add(nll_sum=total_nats, num_tokens=len(scored))
    scores = perplexity.compute()
    if cached:
        alone = network_nats / len(scored)
        scores = {"loss": scores.pop("loss"), WITHOUT_CACHE_METRIC: alone, **scores}
    if stateful and zero_state_passages > 0:
        zero = zero_state_loss(model, ids, passages=zero_state_passages, length=zero_state_len,
                               batch_size=batch_size,
                               progress=progress and f"{progress}: zero-state loss")  # fmt: skip
        scores = {"loss": scores.pop("loss"), **zero, **scores}
    chars = count_characters(tokenizer, scored) if tokenizer is not None else len(scored)
    del scores["bits_per_token"]
    scores["bits_per_char"] = total_nats / chars / math.log(2)
    scores["num_chars"] = chars
    scores["accuracy"] = num_correct / len(scored)
    scores["num_examples"] = math.ceil(len(scored) / seq_len)
    return scores


__all__ = [
    "ZERO_STATE_METRIC",
    "ZERO_STATE_PASSAGES",
    "ZERO_STATE_PASSAGE_LEN",
    "WITHOUT_CACHE_METRIC",
    "carried_windows",
    "evaluate_causal_lm",
    "evaluating",
    "evaluation_streams",
    "explain_zero_state",
    "has_continuous_cache",
    "is_stateful",
    "passage_starts",
    "scored_prefix",
    "window_nll",
    "zero_state_loss",
]
