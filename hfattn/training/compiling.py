"""``training.compile``: the training loss step through ``torch.compile``.

:func:`compile_for_training` wraps the module that the engine's loss step calls (the one
Accelerate prepared, so DDP's gradient hooks and mixed precision's autocast are inside what is
compiled) in ``torch.compile`` (TorchDynamo captures the forward as FX graphs, TorchInductor
generates fused C++ / Triton kernels for it and for its backward; Ansel et al. 2024, "PyTorch
2"). Only the wrapper is compiled: the engine keeps the prepared module itself for everything
else (checkpoints, evaluation, generation, the saved folder), so state-dict keys carry no
``_orig_mod.`` prefix and a checkpoint written with ``compile: true`` resumes with ``false``
and the other way round.

Batches in a few fixed shapes (length buckets, ``training.token_budget``) are compiled as one
graph: the row and length dimensions of every batch tensor are marked dynamic
(:func:`mark_dynamic_dims`), so the first batch compiles a graph whose sizes are symbols and the
other buckets reuse it. One static graph a bucket (``dynamic=False``) would cost a compile per
bucket before the run's steps pay anything back (``benchmarks/NOTES.md`` says what this choice
rests on).

:class:`CompileWatch` counts the graphs that TorchDynamo compiles during the run's steps and
the seconds those steps take (``compiles`` and ``compile_s`` of ``metrics.jsonl``), and tells
the progress bar which steps compile.

``training.compile: regional`` compiles each stack of repeated layers as one function instead
(Accelerate's ``compile_regions``, the recipe of PyTorch's "regional compilation" tutorial):
TorchDynamo caches a layer's graph on its code, so the six decoder layers of a Transformer
compile once, not six times, and the graphs to compile do not multiply with the depth; the
code between the layers (the stack's loop, the loss) runs eagerly, and no fusion crosses a
layer's edge.

Accelerate's own ``Accelerator(dynamo_backend=...)`` is not used: it compiles inside
``prepare``, so ``save_state`` writes the compiled wrapper's keys (``_orig_mod.*``) into the
checkpoints and ``unwrap_model`` returns the compiled model unless told otherwise.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import torch
from torch._dynamo.utils import counters

from ..common.families import COMPILED_BY_AUTO

COMPILE_PAD_MULTIPLE = 8
"""Batches of a compiled run without length buckets are padded to a multiple of this length
(the padded positions are masked: the loss is the same), so that a run compiles a few shapes,
not one per length."""


def resolve_compile(setting: bool | str, model_type: str | None, device) -> bool:
    """Whether the loss step is compiled: ``setting`` itself when ``True`` / ``False``;
    ``auto``: on CUDA for :data:`~hfattn.common.families.COMPILED_BY_AUTO` (families whose
    measured compile pays for itself within a recipe's run), else off."""
    if setting == "auto":
        return torch.device(device).type == "cuda" and model_type in COMPILED_BY_AUTO
    return bool(setting)


def compile_for_training(
    model: torch.nn.Module, *, regional: bool = False, dynamic_shapes: bool = False
) -> torch.nn.Module:
    """``torch.compile(model)`` with the default mode and backend (``inductor``); with
    ``regional``, each ``ModuleList`` of layers of one class compiled once for all of them and
    every other module on its own (``accelerate.utils.compile_regions``).

    Batches whose dimensions :func:`mark_dynamic_dims` marked compile once into a graph with
    symbolic sizes. Other batches start static: a batch of a new shape (translation and
    classification batches are padded to their longest example, rounded up to
    :data:`COMPILE_PAD_MULTIPLE`) recompiles with the sizes that changed marked dynamic, and a
    later batch whose shape breaks another of the graph's guards compiles again. The
    char-RNN's first batch of every epoch (no carried state) and the others (a carried state)
    are two graphs, each compiled once.

    A regional compile sees the activations between layers, which :func:`mark_dynamic_dims`
    does not reach: with ``dynamic_shapes`` (the batches come in length buckets) its regions
    are compiled with symbolic sizes from the first batch (``dynamic=True``), so the other
    buckets compile nothing. ``compile_regions`` copies the modules above the layers, their
    ``training`` flag with them: the copy serves the training step only, so ``model`` must be
    in training mode.

    Raises:
        ValueError: ``regional`` and ``model`` in eval mode.
    """
    if not regional:
        return torch.compile(model)
    if not model.training:
        raise ValueError("a regional compile copies the training flag: put the model in train()")
    from accelerate.utils import compile_regions

    return compile_regions(model, dynamic=True if dynamic_shapes else None)


def mark_dynamic_dims(batch) -> None:
    """Mark the rows (dim 0) and, for 2-D tensors, the positions (dim 1) of every tensor of
    ``batch`` (a dict of tensors, or a tensor) dynamic for TorchDynamo
    (``torch._dynamo.mark_dynamic``): batches of different bucket shapes then share one
    compiled graph."""
    for tensor in _tensors(batch):
        for dim in range(min(tensor.dim(), 2)):
            torch._dynamo.mark_dynamic(tensor, dim)


def compiled_graphs() -> int:
    """The graphs TorchDynamo has compiled in this process so far."""
    return counters["stats"]["unique_graphs"]


class CompileWatch:
    """The compiles of a run's steps on ``device``: ``compiles`` counts the graphs compiled
    during them, ``seconds`` the time of the steps that compiled one (``compile_s``: each such
    step waits for the device on CUDA, so the compile's cost is on the record; the training
    clock counts it like any other step's; a resumed run starts both from its checkpoint's).
    ``enabled``: the step is compiled; ``num_shapes``:
    the batches come in that many fixed shapes (length buckets), whose dimensions are then
    marked dynamic (:func:`mark_dynamic_dims`): one graph for all of them (with ``regional``,
    one graph a region: :func:`compile_for_training`)."""

    def __init__(
        self,
        device,
        enabled: bool = True,
        num_shapes: int | None = None,
        regional: bool = False,
    ):
        self.device, self.enabled, self.num_shapes = torch.device(device), enabled, num_shapes
        self.dynamic, self.regional = num_shapes is not None, regional
        self.seconds, self.compiles, self.compiled_last = 0.0, 0, False
        self.shapes: set[tuple] = set()

    def _wait(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def compiling_label(self, batch) -> str | None:
        """What the progress bar says during the step on ``batch`` when it is expected to
        compile (the run's first step; with static shapes, a batch of a shape not seen yet):
        "compiling shape 3 of 8" (``num_shapes``: the batches' fixed shapes, when known; a
        regional compile says "compiling each layer stack once for 8 shapes");
        ``None`` when no compile is expected."""
        if not self.enabled or (self.dynamic and self.shapes):
            return None
        graph = "each layer stack once" if self.regional else "one graph"
        if self.dynamic:
            return f"compiling {graph} for {self.num_shapes} shapes"
        if _shape(batch) in self.shapes:
            return None
        count = f" of {self.num_shapes}" if self.num_shapes else ""
        return f"compiling shape {len(self.shapes) + 1}{count}"

    @contextmanager
    def step(self, batch):
        """Run the step on ``batch`` (a dict of tensors, or a tensor), its dimensions marked
        when ``dynamic``. A step in which TorchDynamo compiled a graph counts as a compile
        (``compiled_last``), its seconds in ``seconds``; a step of a shape not seen yet waits
        for the device before and after (on CUDA), so that its seconds hold the compile's
        kernels."""
        self.compiled_last = False
        if not self.enabled:
            yield
            return
        if self.dynamic:
            mark_dynamic_dims(batch)
        shape = _shape(batch)
        new_shape = shape not in self.shapes
        if new_shape:
            self._wait()
        began, graphs = time.monotonic(), compiled_graphs()
        yield
        if new_shape:
            self._wait()
            self.shapes.add(shape)
        new = compiled_graphs() - graphs
        if new:
            self.compiles += new
            self.seconds += time.monotonic() - began
            self.compiled_last = True


def _tensors(batch) -> tuple:
    return tuple(batch.values()) if isinstance(batch, dict) else (batch,)


def _shape(batch) -> tuple:
    return tuple(tuple(tensor.shape) for tensor in _tensors(batch))


__all__ = [
    "COMPILE_PAD_MULTIPLE",
    "CompileWatch",
    "compile_for_training",
    "compiled_graphs",
    "mark_dynamic_dims",
    "resolve_compile",
]
