"""``training.compile``: the training loss step through ``torch.compile``.

:func:`compile_for_training` wraps the module that the engine's loss step calls (the one
Accelerate prepared, so DDP's gradient hooks and mixed precision's autocast are inside what is
compiled) in ``torch.compile`` (TorchDynamo captures the forward as FX graphs, TorchInductor
generates fused C++ / Triton kernels for it and for its backward; Ansel et al. 2024, "PyTorch
2"). Only the wrapper is compiled: the engine keeps the prepared module itself for everything
else (checkpoints, evaluation, generation, the saved folder), so state-dict keys carry no
``_orig_mod.`` prefix and a checkpoint written with ``compile: true`` resumes with ``false``
and the other way round.

Accelerate's own ``Accelerator(dynamo_backend=...)`` is not used: it compiles inside
``prepare``, so ``save_state`` writes the compiled wrapper's keys (``_orig_mod.*``) into the
checkpoints and ``unwrap_model`` returns the compiled model unless told otherwise.
"""

from __future__ import annotations

import torch

from ..models.families import COMPILED_BY_AUTO

COMPILE_PAD_MULTIPLE = 8
"""Batches of a compiled run are padded to a multiple of this length (the padded positions
are masked: the loss is the same), so that a run compiles a few shapes, not one per length."""


def resolve_compile(setting: bool | str, model_type: str | None, device) -> bool:
    """Whether the loss step is compiled: ``setting`` itself when ``True`` / ``False``;
    ``auto``: on CUDA for :data:`~hfattn.models.families.COMPILED_BY_AUTO`, else off (on a
    CPU the first steps' compile time is rarely won back within a run)."""
    if setting == "auto":
        return torch.device(device).type == "cuda" and model_type in COMPILED_BY_AUTO
    return bool(setting)


def compile_for_training(model: torch.nn.Module) -> torch.nn.Module:
    """``torch.compile(model)`` with the default mode and backend (``inductor``).

    Shapes start static; a batch of a new shape (translation and classification batches are
    padded to their longest example, rounded up to :data:`COMPILE_PAD_MULTIPLE`) recompiles
    with the sizes that changed marked dynamic, and a later batch whose shape breaks another of
    the graph's guards compiles again: a run of varying lengths compiles several times. The
    char-RNN's first batch of every epoch (no carried state) and the others (a carried state)
    are two graphs, each compiled once. The first steps are slower while this happens.
    """
    return torch.compile(model)


__all__ = [
    "COMPILE_PAD_MULTIPLE",
    "compile_for_training",
    "resolve_compile",
]
