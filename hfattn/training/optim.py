"""Optimizers selectable by name from a recipe (``training.optimizer``)."""

from __future__ import annotations

import torch
from torch import nn

from .muon import MuonAdamW, muon_param_groups

OPTIMIZERS = {
    "adamw": torch.optim.AdamW,
    "nadam": torch.optim.NAdam,  # Géron's char-RNN
    "rmsprop": torch.optim.RMSprop,  # Chollet's Transformer
    "radam": torch.optim.RAdam,  # Liu et al., rectified Adam
    "sgd": torch.optim.SGD,
    "muon": MuonAdamW,  # Jordan et al. 2024: Muon on the hidden matrices, AdamW on the rest
}


def build_optimizer(
    name: str,
    model: nn.Module,
    *,
    lr: float,
    weight_decay: float = 0.0,
    betas: tuple[float, float] = (0.9, 0.999),
) -> torch.optim.Optimizer:
    """Instantiate the optimizer ``name`` (one of :data:`OPTIMIZERS`) over ``model``'s parameters
    (``muon``: in the two groups of :func:`~.muon.muon_param_groups`)."""
    if name not in OPTIMIZERS:
        raise ValueError(f"training.optimizer: {name!r} is not one of {', '.join(OPTIMIZERS)}")
    if name == "muon":
        groups = muon_param_groups(model)
        return MuonAdamW(groups, lr=lr, weight_decay=weight_decay, betas=tuple(betas))
    params = model.parameters()
    if name in ("rmsprop", "sgd"):
        return OPTIMIZERS[name](params, lr=lr, weight_decay=weight_decay)
    return OPTIMIZERS[name](params, lr=lr, weight_decay=weight_decay, betas=tuple(betas))


__all__ = ["OPTIMIZERS", "build_optimizer"]
