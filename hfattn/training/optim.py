"""Optimizers selectable by name from a recipe (``training.optimizer``)."""

from __future__ import annotations

import torch
from torch import nn

from .muon import MuonAdamW, muon_param_groups
from .optimizer_names import OPTIMIZER_NAMES, WITHOUT_BETAS

OPTIMIZERS = dict(
    zip(
        OPTIMIZER_NAMES,
        (
            torch.optim.AdamW,
            torch.optim.NAdam,
            torch.optim.RMSprop,
            torch.optim.RAdam,
            torch.optim.SGD,
            MuonAdamW,
        ),
        strict=True,
    )
)
"""Each of :data:`~.optimizer_names.OPTIMIZER_NAMES` → its optimizer class."""


FUSED_ADAMW = ("adamw", "muon")
"""The optimizers whose AdamW update runs fused on CUDA (``muon``: its AdamW groups)."""


def adamw_kernel(device: torch.device | str) -> dict:
    """The keyword arguments that pick the AdamW implementation for parameters on ``device``:
    ``{"fused": True}`` on CUDA (one kernel for every parameter's update, with its step count
    on the device: no host round trip), ``{}`` elsewhere (torch's default, ``foreach`` over the
    parameters, on a CPU the same numbers as ever)."""
    return {"fused": True} if torch.device(device).type == "cuda" else {}


def build_optimizer(
    name: str,
    model: nn.Module,
    *,
    lr: float,
    weight_decay: float = 0.0,
    betas: tuple[float, float] = (0.9, 0.999),
    device: torch.device | str | None = None,
    mixed_precision: str = "no",
) -> torch.optim.Optimizer:
    """Instantiate the optimizer ``name`` (one of :data:`OPTIMIZERS`) over ``model``'s parameters
    (``muon``: in the two groups of :func:`~.muon.muon_param_groups`). ``device`` is where the
    parameters will train (default: where they are now); on CUDA the AdamW updates run fused
    (:func:`adamw_kernel`). ``mixed_precision`` is the run's resolved Accelerate setting: in
    ``bf16`` Muon's Newton-Schulz iteration runs in bfloat16 too."""
    if name not in OPTIMIZERS:
        raise ValueError(f"training.optimizer: {name!r} is not one of {', '.join(OPTIMIZERS)}")
    if device is None:
        device = next(model.parameters()).device
    kernel = adamw_kernel(device) if name in FUSED_ADAMW else {}
    if name == "muon":
        groups = muon_param_groups(model)
        ns_dtype = torch.bfloat16 if mixed_precision == "bf16" else None
        return MuonAdamW(groups, lr=lr, weight_decay=weight_decay, betas=tuple(betas),
                         ns_dtype=ns_dtype, **kernel)  # fmt: skip
    params = model.parameters()
    if name in WITHOUT_BETAS:
        return OPTIMIZERS[name](params, lr=lr, weight_decay=weight_decay)
    return OPTIMIZERS[name](params, lr=lr, weight_decay=weight_decay, betas=tuple(betas), **kernel)


def training_optimizer(
    cfg, model: nn.Module, *, device=None, mixed_precision: str = "no"
) -> torch.optim.Optimizer:
    """The optimizer the ``training:`` section ``cfg`` names (``optimizer``, ``learning_rate``,
    ``weight_decay``, ``betas``) over ``model``, as :func:`build_optimizer` builds it for
    ``device`` and the run's resolved ``mixed_precision``."""
    return build_optimizer(
        cfg.optimizer,
        model,
        lr=cfg.learning_rate,
        weight_decay=cfg.weight_decay,
        betas=tuple(cfg.betas),
        device=device,
        mixed_precision=mixed_precision,
    )


__all__ = ["FUSED_ADAMW", "OPTIMIZERS", "adamw_kernel", "build_optimizer", "training_optimizer"]
