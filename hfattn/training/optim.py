"""Optimizers selectable by name from a recipe (``training.optimizer``)."""

from __future__ import annotations

import torch

OPTIMIZERS = {
    "adamw": torch.optim.AdamW,
    "nadam": torch.optim.NAdam,  # Géron's char-RNN
    "rmsprop": torch.optim.RMSprop,  # Chollet's Transformer
    "radam": torch.optim.RAdam,  # Liu et al., rectified Adam
    "sgd": torch.optim.SGD,
}


def build_optimizer(
    name: str,
    params,
    *,
    lr: float,
    weight_decay: float = 0.0,
    betas: tuple[float, float] = (0.9, 0.999),
) -> torch.optim.Optimizer:
    """Instantiate the optimizer ``name`` (one of :data:`OPTIMIZERS`) over ``params``."""
    if name not in OPTIMIZERS:
        raise ValueError(f"training.optimizer: {name!r} is not one of {', '.join(OPTIMIZERS)}")
    if name in ("rmsprop", "sgd"):
        return OPTIMIZERS[name](params, lr=lr, weight_decay=weight_decay)
    return OPTIMIZERS[name](params, lr=lr, weight_decay=weight_decay, betas=tuple(betas))


__all__ = ["OPTIMIZERS", "build_optimizer"]
