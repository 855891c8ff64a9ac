r"""Muon for the hidden weight matrices, AdamW for every other parameter (``optimizer: muon``).

Muon, "MomentUm Orthogonalized by Newton-Schulz" (Jordan et al. 2024), replaces the update of a
weight matrix :math:`W \in \mathbb{R}^{m \times n}` by the semi-orthogonal matrix nearest to its
Nesterov momentum, so that every direction of the update moves by about the same amount:

.. math::
    B_t = \mu B_{t-1} + G_t,\qquad U_t = G_t + \mu B_t,\qquad
    W_t = (1 - \eta_t \lambda)\, W_{t-1} - \eta_t \cdot 0.2\sqrt{\max(m, n)}\;
    \mathrm{NS}_k(U_t)

:math:`\mathrm{NS}_k` is :func:`orthogonalize`, ``k`` steps of a quintic Newton-Schulz iteration
that pushes every singular value of :math:`U_t` into about [0.7, 1.2] while keeping its singular
vectors. The factor :math:`0.2\sqrt{\max(m, n)}` gives the update the root-mean-square size of a
typical AdamW update (Liu et al. 2025, "Muon is Scalable for LLM Training"), so that one learning
rate and one schedule serve the Muon and the AdamW parameters alike.

Which parameters take Muon (:func:`muon_param_groups`): the 2-D weights of the hidden layers:
recurrent and input matrices of an RNN, attention and feed-forward projections. Embeddings, the
output layer (``get_output_embeddings()``), biases, norms and tensors of other ranks take AdamW,
as in Jordan et al. A classification head is a hidden-layer ``Linear`` to this rule and takes Muon.

``torch.optim.Muon`` runs the iteration in bfloat16, which a CPU without bfloat16 instructions
(AVX2, or AVX-512 without BF16) emulates slowly; :class:`MuonAdamW` runs it in ``ns_dtype``:
the engine passes bfloat16 when the run trains in bf16 (``training.mixed_precision`` resolved
to ``bf16``, so the device has bf16 kernels), else the parameter's own dtype (float32 for a
float32 model). On an AVX-512 BF16 CPU the iteration of a 1536 × 512 GRU matrix takes 0.4× its
float32 time.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.optim.adamw import adamw

NEWTON_SCHULZ_COEFFICIENTS = (3.4445, -4.7750, 2.0315)
"""``(a, b, c)`` of the quintic iteration ``X <- a X + (b A + c A^2) X`` (Jordan et al. 2024)."""
MUON_MOMENTUM = 0.95
"""The Nesterov momentum ``mu`` of Jordan et al."""
MUON_RMS_MATCH = 0.2
"""The AdamW update size the Muon update is scaled to (Liu et al. 2025)."""


def orthogonalize(
    update: torch.Tensor, steps: int = 5, eps: float = 1e-7, dtype: torch.dtype | None = None
) -> torch.Tensor:
    r"""An approximately semi-orthogonal matrix with the singular vectors of the 2-D ``update``.

    .. math:: X_0 = U / (\lVert U \rVert_F + \epsilon),\quad A_j = X_j X_j^\top,\quad
              X_{j+1} = a X_j + (b A_j + c A_j^2) X_j

    with :data:`NEWTON_SCHULZ_COEFFICIENTS` and ``X`` held with no more rows than columns (a tall
    ``update`` is transposed and back), ``steps`` times. Each step maps a singular value
    ``s`` to ``a s + b s^3 + c s^5``; the coefficients make small values grow fast, so five steps
    leave every value of a normalised matrix in about [0.7, 1.2] rather than exactly at 1.
    The iteration runs in ``dtype`` (default: ``update``'s own), and so does the result.
    """
    a, b, c = NEWTON_SCHULZ_COEFFICIENTS
    x = update.to(dtype or update.dtype)
    x = x / (x.norm() + eps)
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    for _ in range(steps):
        gram = x @ x.T
        x = a * x + (b * gram + c * (gram @ gram)) @ x
    return x.T if tall else x


def muon_param_groups(model: nn.Module) -> list[dict]:
    """``model``'s trainable parameters in two groups: ``{"params": hidden, "use_muon": True}``,
    the 2-D weights of its hidden layers, and ``{"params": rest, "use_muon": False}``: embeddings
    (every ``nn.Embedding``), the output layer of ``get_output_embeddings()``, biases, norms and
    tensors of other ranks. Empty groups are left out."""
    to_adamw = {
        id(p) for m in model.modules() if isinstance(m, nn.Embedding) for p in m.parameters()
    }
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if isinstance(head, nn.Module):
        to_adamw |= {id(p) for p in head.parameters()}
    hidden, rest = [], []
    for param in model.parameters():
        if param.requires_grad:
            (hidden if param.ndim == 2 and id(param) not in to_adamw else rest).append(param)
    groups = [{"params": hidden, "use_muon": True}, {"params": rest, "use_muon": False}]
    return [group for group in groups if group["params"]]


class MuonAdamW(torch.optim.Optimizer):
    r"""Muon on the parameter groups with ``use_muon=True`` (2-D tensors only), AdamW on the others
    (``torch.optim.AdamW``'s own update, through its functional form); see the module docstring for
    the Muon
    update. One ``lr`` per group, so any ``LambdaLR`` schedule drives both.

    Args:
        params: parameters or groups; build the groups of a model with :func:`muon_param_groups`
            (a plain parameter list is all AdamW).
        lr: the learning rate :math:`\eta` of both rules.
        betas, eps: AdamW's moment decays and denominator term.
        weight_decay: decoupled decay :math:`\lambda`, both rules.
        momentum: Muon's Nesterov momentum :math:`\mu`.
        ns_steps: Newton-Schulz steps ``k`` of :func:`orthogonalize`.
        ns_dtype: the dtype the Newton-Schulz iteration runs in (``None``: the parameter's).
        fused: run the AdamW groups' update as torch's fused kernel (``torch.optim.AdamW``'s
            ``fused``; its step counts live on the parameters' device); ``None``: torch's
            default (``foreach``).
    """

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        *,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = MUON_MOMENTUM,
        ns_steps: int = 5,
        ns_dtype: torch.dtype | None = None,
        fused: bool | None = None,
    ):
        if lr < 0 or eps < 0 or weight_decay < 0:
            raise ValueError(
                f"MuonAdamW: lr, eps, weight_decay must be >= 0; got {lr}, {eps}, {weight_decay}"
            )
        if not all(0.0 <= beta < 1.0 for beta in (*betas, momentum)):
            raise ValueError(
                f"MuonAdamW: betas and momentum must be in [0, 1); got {betas}, {momentum}"
            )
        if ns_steps < 1:
            raise ValueError(f"MuonAdamW: ns_steps must be >= 1; got {ns_steps}")
        defaults = dict(
            lr=lr,
            betas=tuple(betas),
            eps=eps,
            weight_decay=weight_decay,
            momentum=momentum,
            ns_steps=ns_steps,
            ns_dtype=ns_dtype,
            use_muon=False,
            fused=fused,
        )
        super().__init__(params, defaults)
        for group in self.param_groups:
            if group["use_muon"] and any(p.ndim != 2 for p in group["params"]):
                shapes = [tuple(p.shape) for p in group["params"] if p.ndim != 2]
                raise ValueError(
                    f"MuonAdamW: a use_muon group holds tensors that are not 2-D: {shapes}"
                )

    @torch.no_grad()
    def step(self, closure=None):
        """One update of every parameter that has a gradient; returns ``closure()``'s loss."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            (self._muon_step if group["use_muon"] else self._adamw_step)(group)
        return loss

    def _muon_step(self, group: dict) -> None:
        lr, momentum = group["lr"], group["momentum"]
        for param in group["params"]:
            if param.grad is None:
                continue
            state = self.state[param]
            if "momentum_buffer" not in state:
                state["momentum_buffer"] = torch.zeros_like(param)
            buffer = state["momentum_buffer"].mul_(momentum).add_(param.grad)
            nesterov = param.grad.add(buffer, alpha=momentum)
            scale = MUON_RMS_MATCH * math.sqrt(max(param.shape))
            param.mul_(1.0 - lr * group["weight_decay"])
            direction = orthogonalize(nesterov, group["ns_steps"], dtype=group.get("ns_dtype"))
            param.add_(direction, alpha=-lr * scale)

    def _adamw_step(self, group: dict) -> None:
        """``torch.optim.AdamW``'s own update (its functional form) on the group's parameters."""
        params = [param for param in group["params"] if param.grad is not None]
        fused = group.get("fused")
        for param in params:
            state = self.state[param]
            if "step" not in state:
                # as torch.optim.AdamW: a fused update keeps its float32 count on the device
                where = param.device if fused else None
                state["step"] = torch.tensor(0.0, dtype=torch.float32, device=where)
                state["exp_avg"] = torch.zeros_like(param)
                state["exp_avg_sq"] = torch.zeros_like(param)
        states = [self.state[param] for param in params]
        beta1, beta2 = group["betas"]
        adamw(
            params,
            [param.grad for param in params],
            [state["exp_avg"] for state in states],
            [state["exp_avg_sq"] for state in states],
            [],
            [state["step"] for state in states],
            fused=fused,
            amsgrad=False,
            beta1=beta1,
            beta2=beta2,
            lr=group["lr"],
            weight_decay=group["weight_decay"],
            eps=group["eps"],
            maximize=False,
        )


__all__ = [
    "MUON_MOMENTUM",
    "MUON_RMS_MATCH",
    "NEWTON_SCHULZ_COEFFICIENTS",
    "MuonAdamW",
    "muon_param_groups",
    "orthogonalize",
]
