"""Scoring a causal language model on a held-out corpus.

The corpus is read as ``batch_size`` contiguous streams with the recurrent state (or, for
models without one, nothing) carried from window to window, so every token is predicted from
all the text before it in its stream, as when the model reads a play from the start.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from ..data.lm import StreamBatches
from . import load_metric


@torch.no_grad()
def evaluate_causal_lm(
    model, ids: torch.LongTensor, *, batch_size: int = 32, seq_len: int = 256
) -> dict:
    """Loss (nats/token), perplexity, bits per token and next-token accuracy of ``model`` on ``ids``.

    Metrics are computed by the bundled ``evaluate`` modules ``perplexity`` and ``accuracy``.
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    stateful = bool(getattr(model, "_is_stateful", False))
    perplexity, accuracy = load_metric("perplexity"), load_metric("accuracy")
    state = None
    for window in StreamBatches(ids, batch_size, seq_len).epoch(0):
        window = window.to(device)
        inputs, targets = window[:, :-1], window[:, 1:]
        out = model(input_ids=inputs, past_key_values=state, use_cache=stateful)
        state = out.past_key_values if stateful else None
        logits = out.logits.float()
        nll = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum"
        )
        perplexity.add(nll_sum=nll.item(), num_tokens=targets.numel())
        accuracy.add_batch(
            predictions=logits.argmax(-1).reshape(-1).tolist(),
            references=targets.reshape(-1).tolist(),
        )
    model.train(was_training)
    scores = perplexity.compute()
    scores["bits_per_char"] = scores.pop("bits_per_token")
    scores.update(accuracy.compute())
    return scores


__all__ = ["evaluate_causal_lm"]
