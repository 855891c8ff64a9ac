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

import time
from contextlib import contextmanager

import torch

from ..common.families import COMPILED_BY_AUTO, COMPILED_BY_AUTO_IN_BUCKETS

COMPILE_PAD_MULTIPLE = 8
"""Batches of a compiled run are padded to a multiple of this length (the padded positions
are masked: the loss is the same), so that a run compiles a few shapes, not one per length."""


def resolve_compile(
    setting: bool | str, model_type: str | None, device, fixed_shapes: bool = False
) -> bool:
    """Whether the loss step is compiled: ``setting`` itself when ``True`` / ``False``;
    ``auto``: on CUDA for :data:`~hfattn.common.families.COMPILED_BY_AUTO`, and for
    :data:`~hfattn.common.families.COMPILED_BY_AUTO_IN_BUCKETS` when the batches come in a few
    ``fixed_shapes`` (``training.token_budget``), else off (on a CPU the first steps' compile
    time is rarely won back within a run)."""
    if setting == "auto":
        chosen = COMPILED_BY_AUTO_IN_BUCKETS if fixed_shapes else COMPILED_BY_AUTO
        return torch.device(device).type == "cuda" and model_type in chosen
    return bool(setting)


def compile_for_training(model: torch.nn.Module, shapes: int | None = None) -> torch.nn.Module:
    """``torch.compile(model)`` with the default mode and backend (``inductor``).

    With ``shapes`` (the batches come in that many fixed shapes: length buckets) every shape
    is one static graph (``dynamic=False``), compiled at its first batch and never again: the
    recompile limit of TorchDynamo is raised to ``shapes`` (plus one for the train/eval
    switch) so that no bucket falls back to eager.

    Without it shapes start static; a batch of a new shape (translation and classification
    batches are padded to their longest example, rounded up to :data:`COMPILE_PAD_MULTIPLE`)
    recompiles with the sizes that changed marked dynamic, and a later batch whose shape breaks
    another of the graph's guards compiles again: a run of varying lengths compiles several
    times. The char-RNN's first batch of every epoch (no carried state) and the others (a
    carried state) are two graphs, each compiled once. The first steps are slower while this
    happens.
    """
    if shapes is None:
        return torch.compile(model)
    import torch._dynamo.config as dynamo_config

    dynamo_config.recompile_limit = max(dynamo_config.recompile_limit, shapes + 1)
    return torch.compile(model, dynamic=False)


class CompileClock:
    """The seconds a compiled run spends in the first step of each batch shape, compile
    included (``compile_s`` of ``metrics.jsonl``): the one step a shape that waits for the
    device (on CUDA), so that the compile's cost is on the record; the training clock counts
    these seconds like any other step's."""

    def __init__(self, device, enabled: bool = True):
        self.device, self.enabled = torch.device(device), enabled
        self.seconds = 0.0
        self.shapes: set[tuple] = set()

    def _wait(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    @contextmanager
    def timing(self, batch):
        """Time the step on ``batch`` (a dict of tensors, or a tensor) if its shapes are new
        (and the clock is ``enabled``: the step is compiled)."""
        values = batch.values() if isinstance(batch, dict) else (batch,)
        shape = tuple(tuple(value.shape) for value in values)
        if not self.enabled or shape in self.shapes:
            yield
            return
        self._wait()
        began = time.monotonic()
        yield
        self._wait()
        self.seconds += time.monotonic() - began
        self.shapes.add(shape)


__all__ = [
    "COMPILE_PAD_MULTIPLE",
    "CompileClock",
    "compile_for_training",
    "resolve_compile",
]
