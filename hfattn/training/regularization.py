"""Regularizers of the training step for small corpora: R-Drop (``training.r_drop_alpha``) and
word dropout (``training.word_dropout``).

R-Drop (Liang et al. 2021, "R-Drop: Regularized Dropout for Neural Networks") runs each
micro-batch through the model twice, so that the two passes draw different dropout masks, and
adds to the mean of their cross-entropies the symmetric KL divergence of their predictions
(:func:`r_drop_loss`): one function for every task, since every job's ``compute_loss``
returns its logits and labels (:class:`~hfattn.training.training_job.StepLoss`).

Word dropout (Sennrich & Zhang 2019, "Revisiting Low-Resource Neural Machine Translation";
Nguyen & Salazar 2019, "Transformers without Tears") replaces input tokens by the unknown token
(:class:`WordDropout`); each task applies it to its own inputs (the translation job to the
source and the decoder's inputs, the causal-LM job to the window's inputs), never to the
labels, through the job's ``noise`` that the engine calls on a training batch before its
forward. Both draw from torch's global random generator during the step, whose state each
checkpoint saves: a resumed run draws what the uninterrupted run drew.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..common.field_checks import require
from .training_job import StepLoss


def symmetric_kl(first: torch.Tensor, second: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    r"""The symmetric KL divergence of the predictions ``P_1 = softmax(first)`` and
    ``P_2 = softmax(second)`` (logits ``[..., V]``), averaged over the positions whose label is
    not ``-100`` (``labels`` has the logits' shape without ``V``: a classifier's ``[B]``, a
    sequence model's ``[B, T]``), computed in float32:

    .. math:: \mathrm{KL}_{sym} = \frac{1}{|M|} \sum_{t \in M} \tfrac12 \big(
        \mathrm{KL}(P_{1,t} \| P_{2,t}) + \mathrm{KL}(P_{2,t} \| P_{1,t}) \big)
        = \frac{1}{2|M|} \sum_{t \in M} \sum_v (p_{1,t,v} - p_{2,t,v})
        (\log p_{1,t,v} - \log p_{2,t,v})

    (Liang et al. 2021, "R-Drop", Eq. 2). Zero when no position is labelled."""
    log_p = first.float().log_softmax(-1)
    log_q = second.float().log_softmax(-1)
    per_position = ((log_p.exp() - log_q.exp()) * (log_p - log_q)).sum(-1)
    labelled = (labels != -100).to(per_position.device)
    return (per_position * labelled).sum() / (2 * labelled.sum().clamp_min(1))


def r_drop_loss(
    compute_loss: Callable[..., StepLoss], model, batch, state, stateful: bool, alpha: float
) -> StepLoss:
    r"""R-Drop (Liang et al. 2021, "R-Drop: Regularized Dropout for Neural Networks", Eq. 3):
    ``compute_loss`` (a job's, :class:`~hfattn.training.training_job.TrainingJob`) runs twice on
    ``batch`` from the same incoming ``state``, each pass with its own dropout masks, and

    .. math:: \mathcal{L} = \tfrac12 (\mathcal{L}_{CE}^{(1)} + \mathcal{L}_{CE}^{(2)})
        + \alpha \cdot \tfrac12 \big(\mathrm{KL}(P_1 \| P_2) + \mathrm{KL}(P_2 \| P_1)\big)

    the KL term averaged over the labelled positions (:func:`symmetric_kl`); each
    :math:`\mathcal{L}_{CE}` is the job's own loss (label smoothing included). The state carried
    on (a stateful char-RNN's) is the first pass's."""
    first = compute_loss(model, batch, state, stateful)
    second = compute_loss(model, batch, state, stateful)
    kl = symmetric_kl(first.logits, second.logits, first.labels)
    return first._replace(loss=(first.loss + second.loss) / 2 + alpha * kl)


def training_loss(
    compute_loss: Callable[..., StepLoss], model, batch, state, stateful: bool, r_drop_alpha: float
) -> StepLoss:
    """The loss of a training micro-batch: the job's ``compute_loss``, or with ``r_drop_alpha``
    above 0 its R-Drop loss (:func:`r_drop_loss`)."""
    if r_drop_alpha:
        return r_drop_loss(compute_loss, model, batch, state, stateful, r_drop_alpha)
    return compute_loss(model, batch, state, stateful)


@dataclass(frozen=True)
class WordDropout:
    r"""Word dropout at ``rate`` (Sennrich & Zhang 2019, "Revisiting Low-Resource Neural Machine
    Translation"; Nguyen & Salazar 2019, "Transformers without Tears", 0.1): each token of a
    tensor of ids that is not one of ``special_ids`` (padding, ``<bos>``, ``<eos>``, ``<unk>``
    and the tokenizer's other special tokens) is replaced by ``replacement_id`` (the tokenizer's
    ``<unk>``) with probability ``rate``, independently:

    .. math:: \tilde x_t = \begin{cases} \texttt{<unk>} & u_t < p \text{ and }
        x_t \notin S \\ x_t & \text{otherwise} \end{cases}, \qquad u_t \sim U(0, 1)

    One uniform number is drawn for every position from torch's global generator (on the ids'
    device), so the draws depend on the ids' shape only."""

    rate: float
    replacement_id: int
    special_ids: tuple[int, ...]

    @classmethod
    def of_tokenizer(cls, rate: float, tokenizer) -> WordDropout:
        """Word dropout at ``rate`` with ``tokenizer``'s ``<unk>`` and special tokens.

        Raises:
            RecipeError: the tokenizer has no unknown token to replace words with.
        """
        require(
            tokenizer.unk_token_id is not None,
            "training.word_dropout",
            f"needs a tokenizer with an unknown token to replace words with; "
            f"{type(tokenizer).__name__} has none",
        )
        return cls(rate, tokenizer.unk_token_id, tuple(sorted(set(tokenizer.all_special_ids))))

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        """``ids`` with tokens replaced (a new tensor; ``ids`` is left as it is)."""
        drawn = torch.rand(ids.shape, device=ids.device) < self.rate
        kept = torch.zeros_like(ids, dtype=torch.bool)
        for token in self.special_ids:  # no tensor of ids copied to the device at each step
            kept |= ids == token
        return ids.masked_fill(drawn & ~kept, self.replacement_id)


__all__ = ["WordDropout", "r_drop_loss", "symmetric_kl", "training_loss"]
