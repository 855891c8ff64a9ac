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
"""

from __future__ import annotations

import math

import torch
from torch.nn import functional as F

from ..data.lm import StreamBatches, count_characters
from . import load_metric


@torch.no_grad()
def evaluate_causal_lm(
    model, ids: torch.LongTensor, *, batch_size: int = 32, seq_len: int = 256, tokenizer=None
) -> dict:
    """Loss (nats/token), perplexity, bits per character and next-token accuracy of ``model``
    on ``ids``.

    Loss and perplexity come from the bundled ``evaluate`` module ``perplexity``, accuracy
    from ``accuracy``. With ``tokenizer`` the scored tokens are decoded to count their
    characters (:func:`~hfattn.data.lm.count_characters`, also reported as ``num_chars``);
    without it every token counts as one character (bits per token).
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    stateful = bool(getattr(model, "_is_stateful", False))
    perplexity, accuracy = load_metric("perplexity"), load_metric("accuracy")
    streams = StreamBatches(ids, batch_size, seq_len)
    state, total_nats = None, 0.0
    for window in streams.epoch(0):
        window = window.to(device)
        inputs, targets = window[:, :-1], window[:, 1:]
        out = model(input_ids=inputs, past_key_values=state, use_cache=stateful)
        state = out.past_key_values if stateful else None
        logits = out.logits.float()
        nll = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum"
        )
        total_nats += nll.item()
        perplexity.add(nll_sum=nll.item(), num_tokens=targets.numel())
        accuracy.add_batch(
            predictions=logits.argmax(-1).reshape(-1).tolist(),
            references=targets.reshape(-1).tolist(),
        )
    model.train(was_training)
    scores = perplexity.compute()
    targets = streams.target_ids()
    chars = count_characters(tokenizer, targets) if tokenizer is not None else len(targets)
    del scores["bits_per_token"]
    scores["bits_per_char"] = total_nats / chars / math.log(2)
    scores["num_chars"] = chars
    scores.update(accuracy.compute())
    return scores


__all__ = ["evaluate_causal_lm"]
