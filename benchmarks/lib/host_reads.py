"""Device→host reads of a training step, counted on the CPU.

    .venv/bin/python -m benchmarks.host_reads          # prints the reads per Bahdanau/Luong step

A value read on the host (``.item()``, ``bool(t)``, ``.cpu()``, ``.tolist()``, a boolean index,
``torch.nonzero``, a packed sequence's lengths …) makes the host wait for the device to drain
its queue: on CUDA the step stops overlapping its Python with the kernels it launched.

:func:`count_host_reads` runs a function under a ``TorchDispatchMode`` and a
``TorchFunctionMode`` and counts the calls that read tensor data on the host (see
:data:`READ_OPS`). Run on the CPU, ``.cpu()`` / ``.tolist()`` of a CPU tensor dispatch nothing,
so the function mode counts those calls themselves: every tensor of the step stands for a
device tensor. The model's branch for devices where reads stall is selected with
:func:`hfattn.models.rnn_layers.assume_reads_stall`; the count is then what the CUDA code path
would read. Syncs inside a kernel (a CUDA kernel that reads a size on the host by itself) are
not visible to either mode.

:func:`bahdanau_host_reads_per_step` builds a tiny RNNsearch (Bahdanau et al. 2015, preset
``bahdanau``) and a tiny Luong model (Luong et al. 2015, preset ``luong-general``), feeds them
a right-padded batch with rows of different lengths and counts the reads of one training step
(forward, loss, backward, gradient clipping, fused AdamW step).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

_aten = torch.ops.aten

READ_OPS = frozenset(
    {
        _aten._local_scalar_dense.default,  # .item(), bool(t), int(t), float(t)
        _aten.item.default,
        _aten.is_nonzero.default,
        _aten.equal.default,  # torch.equal: one bool on the host
        _aten.nonzero.default,  # output size depends on the data
        _aten.masked_select.default,
        _aten.unique_consecutive.default,
        _aten._unique2.default,
        _aten.unique_dim.default,
        _aten.bincount.default,
        # Its lengths must be a host tensor: read from the device unless the batch brought
        # them from the host (a CPU run cannot tell; counted as a read).
        _aten._pack_padded_sequence.default,
    }
)
"""Aten ops that read device data on the host every time they run."""

_HOST_METHODS = frozenset({"cpu", "tolist", "numpy"})
"""Tensor methods that copy a tensor's data to the host (counted by the function mode on CPU
tensors, where they dispatch nothing)."""

_BOOL_DTYPES = (torch.bool, torch.uint8)


def _is_cpu(device) -> bool:
    return device is not None and torch.device(device).type == "cpu"


def _reads(func, args, kwargs) -> bool:
    """Whether the aten call ``func(*args, **kwargs)`` reads device data on the host."""
    if func in READ_OPS:
        return True
    packet = func.overloadpacket
    if packet in (_aten.index, _aten.index_put, _aten.index_put_, _aten._index_put_impl_):
        # A boolean (mask) index becomes nonzero(mask): its size is read on the host.
        indices = args[1] if len(args) > 1 else kwargs.get("indices", ())
        return any(i is not None and i.dtype in _BOOL_DTYPES for i in indices)
    if func is _aten.repeat_interleave.Tensor:  # repeats as a tensor: the size is read
        return kwargs.get("output_size") is None
    if packet is _aten._to_copy:
        return _is_cpu(kwargs.get("device")) and not _is_cpu(args[0].device)
    if packet is _aten.copy_:
        return args[0].device.type == "cpu" and args[1].device.type != "cpu"
    return False


class HostReadCounter(TorchDispatchMode):
    """Counts the aten calls that read device data on the host (:data:`READ_OPS`, a boolean
    index, a copy to the CPU from another device); ``counts`` maps op names to calls."""

    def __init__(self):
        super().__init__()
        self.counts: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if _reads(func, args, kwargs):
            self.counts[str(func)] += 1
        return func(*args, **kwargs)


class HostCopyCounter(TorchFunctionMode):
    """Counts ``Tensor.cpu()`` / ``.tolist()`` / ``.numpy()`` on CPU tensors (which stand for
    device tensors in a CPU run, and dispatch nothing that :class:`HostReadCounter` sees)."""

    def __init__(self, counts: Counter):
        super().__init__()
        self.counts = counts

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if (
            name in _HOST_METHODS
            and args
            and isinstance(args[0], torch.Tensor)
            and args[0].device.type == "cpu"
        ):
            self.counts[f"Tensor.{name}"] += 1
        return func(*args, **kwargs)


def count_host_reads(fn: Callable[[], object], details: Counter | None = None) -> int:
    """Run ``fn()`` and return how many times it read tensor data on the host: the aten calls
    of :class:`HostReadCounter` plus the host copies of :class:`HostCopyCounter`. ``details``
    (a ``Counter``), when given, receives the count per op."""
    dispatch = HostReadCounter()
    with HostCopyCounter(dispatch.counts), dispatch:
        fn()
    if details is not None:
        details.update(dispatch.counts)
    return sum(dispatch.counts.values())


TINY = {
    "embedding_dim": 12,
    "encoder_hidden_size": 10,
    "decoder_hidden_size": 14,
    "attention_size": 9,
    "vocab_size": 40,
    "dropout": 0.1,
    "label_smoothing": 0.1,
    "tie_word_embeddings": True,
}
"""Widths that shrink a preset to a model that trains a step in milliseconds."""

PRESETS = {
    "bahdanau": {},
    "luong-general": {"encoder_layers": 2, "decoder_layers": 2, "decoder_hidden_size": 10},
}
"""The presets counted: RNNsearch (BiGRU, additive attention, projection bridge) and Luong's
LSTM with the general score, input feeding and the concat bridge (2 layers instead of 4)."""


def tiny_model(preset: str, seed: int = 0, **overrides):
    """``BahdanauForConditionalGeneration`` of ``preset`` at the :data:`TINY` widths."""
    from hfattn.models import BahdanauConfig, BahdanauForConditionalGeneration

    torch.manual_seed(seed)
    kwargs = {**TINY, **PRESETS.get(preset, {}), **overrides}
    if preset == "luong-general":
        kwargs.pop("attention_size", None)
    return BahdanauForConditionalGeneration(BahdanauConfig.from_preset(preset, **kwargs))


def right_padded_batch(
    vocab_size: int = 40, lengths=(7, 3, 5, 1), target_lengths=(4, 6, 2, 5), seed: int = 0
) -> dict[str, torch.Tensor]:
    """A right-padded batch (hfattn's batchers right-pad): ``input_ids`` / ``attention_mask``
    with rows of ``lengths`` tokens, ``labels`` with rows of ``target_lengths`` (``-100``
    after)."""
    g = torch.Generator().manual_seed(seed)
    lengths, target_lengths = torch.tensor(lengths), torch.tensor(target_lengths)
    mask = (torch.arange(int(lengths.max()))[None] < lengths[:, None]).long()
    ids = torch.randint(4, vocab_size, mask.shape, generator=g) * mask
    width = int(target_lengths.max())
    labels = torch.randint(4, vocab_size, (len(target_lengths), width), generator=g)
    labels = labels.masked_fill(torch.arange(width)[None] >= target_lengths[:, None], -100)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def training_step(model, batch: dict, optimizer: torch.optim.Optimizer) -> torch.Tensor:
    """One training step as the engine runs it: forward with the loss, backward, gradient
    clipping at norm 1, optimizer step, gradients zeroed. Returns the loss (not read)."""
    model.train()
    loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def _stall_branch():
    from hfattn.models.rnn_layers import assume_reads_stall

    return assume_reads_stall()


def bahdanau_host_reads_per_step(
    stall: bool = True, presets=tuple(PRESETS), details: dict | None = None, **overrides
) -> dict[str, int]:
    """Host reads of one training step of each of ``presets`` (tiny widths, :data:`TINY` and
    ``overrides``) on a right-padded batch with rows of different lengths.

    ``stall=True`` selects the models' branch for devices where a read stalls the queue (the
    CUDA code path; :func:`~hfattn.models.rnn_layers.assume_reads_stall`), ``False`` the CPU
    branch. The step is :func:`training_step` with AdamW in its fused form (as the engine runs
    it on CUDA: its step counts stay on the device). The first step (optimizer state
    creation) is run before counting. Returns ``{preset: reads}``; ``details``, when given,
    receives ``{preset: Counter(op → calls)}``.
    """
    results = {}
    for preset in presets:
        model = tiny_model(preset, **overrides)
        batch = right_padded_batch(model.config.vocab_size)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
        per_op: Counter = Counter()
        with _stall_branch() if stall else contextlib.nullcontext():
            training_step(model, batch, optimizer)  # creates the optimizer state
            results[preset] = count_host_reads(
                lambda m=model, b=batch, o=optimizer: training_step(m, b, o), per_op
            )
        if details is not None:
            details[preset] = per_op
    return results


def main() -> None:
    """Print the reads per step of both presets on both branches."""
    for stall in (False, True):
        details: dict = {}
        counts = bahdanau_host_reads_per_step(stall=stall, details=details)
        branch = "stall (CUDA) branch" if stall else "CPU branch"
        for preset, count in counts.items():
            ops = ", ".join(f"{op}×{n}" for op, n in sorted(details[preset].items()))
            print(f"{branch:20} {preset:14} {count:3d} host reads/step  {ops}")


if __name__ == "__main__":
    main()
