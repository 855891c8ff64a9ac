r"""Scoring a seq2seq model on held-out pairs, and the longest source it accepts.

:func:`teacher_forced_scores` gives the teacher-forced figures of padded batches:

.. math:: L = -\frac{1}{N}\sum_{b,t:\,y_{b,t}\neq\text{pad}} \ln p(y_{b,t}\mid y_{b,<t}, x_b),
          \qquad \mathrm{acc} = \frac{1}{N}\sum_{b,t}
          1[\arg\max p(\cdot\mid y_{b,<t}, x_b) = y_{b,t}]

(masked next-token accuracy, the figure Keras reports for Chollet's ch. 11 Transformer);
:func:`text_scores` corpus BLEU, chrF and exact match of decoded translations (bundled
``evaluate`` modules). Translating is the translation task's
(:mod:`hfattn.tasks.translation.inference`), which scores a split with both
(:func:`hfattn.tasks.translation.job.score_split`).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.nn import functional as F

from ..batching.seq2seq import IGNORE_INDEX
from ..common.progress import progress_bar
from ..common.stop_request import raise_if_stop_requested
from . import load_metric


def source_limit(model, tokenizer) -> int | None:
    """The longest source (in tokens) the model accepts: ``config.max_source_positions`` or
    ``max_position_embeddings`` when set, else the tokenizer's ``model_max_length`` when it is
    a real limit, else ``None``."""
    for name in ("max_source_positions", "max_position_embeddings"):
        value = getattr(model.config, name, None)
        if value:
            return int(value)
    limit = getattr(tokenizer, "model_max_length", None)
    return int(limit) if limit and limit < 1_000_000 else None


@torch.no_grad()
def teacher_forced_scores(
    model, batches, *, total: int | None = None, progress: str | None = None
) -> dict:
    """Loss (nats/token), perplexity and masked next-token accuracy over padded ``batches``
    (any order: a split's rows sorted by length pad least); with ``progress`` (its label) a
    bar counts the pairs of the batches up to ``total`` once the pass has taken 2 s
    (:func:`~hfattn.common.progress.progress_bar`).

    The summed NLL (float64), the token count and the correct predictions are added up on the
    model's device and read once, after the last batch; loss and perplexity come from the
    bundled ``perplexity`` module, the accuracy is correct / tokens (what the ``accuracy``
    module gives for the masked predictions)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    nll_sum = torch.zeros((), dtype=torch.float64, device=device)
    counts = torch.zeros(2, dtype=torch.long, device=device)  # tokens, correct predictions
    bar = progress_bar(total=total, desc=progress or "loss", unit="pair", shown=bool(progress),
                       leave=False)  # fmt: skip
    try:
        for batch in batches:
            raise_if_stop_requested()
            batch = {k: v.to(device) for k, v in batch.items()}
            logits = model(**batch).logits.float()
            labels = batch["labels"]
            keep = labels != IGNORE_INDEX
            nll_sum += F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]),
                labels.reshape(-1),
                ignore_index=IGNORE_INDEX,
                reduction="sum",
            )
            counts += torch.stack([keep.sum(), (keep & (logits.argmax(-1) == labels)).sum()])
            bar.update(len(labels))
    finally:
        bar.close()
        model.train(was_training)
    nll, tokens, correct = torch.cat([nll_sum[None], counts.double()]).tolist()  # one read
    perplexity = load_metric("perplexity")
    perplexity.add(nll_sum=nll, num_tokens=int(tokens))
    scores = perplexity.compute()
    scores.pop("bits_per_token")
    scores["token_accuracy"] = correct / tokens
    return scores


def text_scores(predictions: Sequence[str], references: Sequence[str]) -> dict:
    """Corpus BLEU and chrF (0-100) and exact match (0-1) of ``predictions``."""
    return {
        "bleu": load_metric("sacrebleu").compute(predictions=predictions, references=references)[
            "score"
        ],
        "chrf": load_metric("chrf").compute(predictions=predictions, references=references)[
            "score"
        ],
        "exact_match": load_metric("exact_match").compute(
            predictions=predictions, references=references
        )["exact_match"],
    }


__all__ = ["source_limit", "teacher_forced_scores", "text_scores"]
