"""The recurrent layers every RNN model here is built from: one GRU / LSTM / Elman layer
(both directions when bidirectional) that skips padding, and its weight initialisation.

A model stacks :class:`RecurrentLayer` modules (one per layer, dropout between them), so
that ``output_hidden_states`` can return every layer's outputs and gradient checkpointing
can recompute one layer at a time, as transformers checkpoints Bart's layers.

Modeling code only (torch + transformers): ``save_pretrained`` copies this file next to the
modeling files that import it, for ``trust_remote_code`` loading without hfattn.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence
from transformers import initialization as init
from transformers.modeling_layers import GradientCheckpointingLayer

_MODES = {"gru": "GRU", "lstm": "LSTM", "rnn": "RNN_TANH"}
"""Cell name (a config's ``cell``) → ``nn.RNNBase`` mode."""

_FUSED = {"GRU": torch.gru, "LSTM": torch.lstm, "RNN_TANH": torch.rnn_tanh}
"""Mode → the fused sequence kernel ``nn.GRU`` / ``nn.LSTM`` / ``nn.RNN`` call."""

_CELLS = {"GRU": torch.gru_cell, "LSTM": torch.lstm_cell, "RNN_TANH": torch.rnn_tanh_cell}
"""Mode → the fused one-step kernel (``nn.GRUCell`` & co.)."""


_ALIGNMENT = 64
"""Bytes: the alignment of PyTorch's CPU allocations (and what its kernels expect)."""


def is_tracing() -> bool:
    """True under ``torch.compile`` and ``torch.export`` (where a branch on tensor values
    cannot be traced)."""
    return torch.compiler.is_compiling()


_ASSUMED_STALLS: list[bool] = []
"""Set by :func:`assume_reads_stall` (a stack, for nesting)."""


def reads_stall(device: torch.device | str) -> bool:
    """True where reading a tensor's value on the host (``.item()``, ``bool(t)``, ``.cpu()``,
    lengths for ``pack_padded_sequence``) is costly: on an accelerator the host waits for the
    device to drain its queue (a device→host synchronisation, which stops the Python of a
    training step from running ahead of its kernels), and under ``torch.compile`` /
    ``torch.export`` / ``torch.jit`` tracing the read breaks the graph (or bakes one batch's
    values into it). On the CPU a read costs nothing.

    Code on this branch computes without reading (masks and indices built on the device),
    and skips checks that would read. :func:`assume_reads_stall` selects it on the CPU. (The
    rule of ``masking.mask_values_are_free``, negated; not imported from there because this
    file ships without ``masking.py`` next to char-RNN weights.)"""
    if _ASSUMED_STALLS:
        return True
    return (
        torch.device(device).type != "cpu"
        or torch.compiler.is_compiling()
        or torch.jit.is_tracing()
    )


@contextmanager
def assume_reads_stall() -> Iterator[None]:
    """Within the block, :func:`reads_stall` is true on every device: the CPU runs the code
    path of CUDA (to test it, or to count its host reads, on a machine without a GPU)."""
    _ASSUMED_STALLS.append(True)
    try:
        yield
    finally:
        _ASSUMED_STALLS.pop()


class RecurrentLayer(GradientCheckpointingLayer, nn.RNNBase):
    r"""One batch-first GRU / LSTM / Elman (tanh) layer, both directions when
    ``bidirectional``, whose ``mask`` zeros are skipped as if they were not there:

    .. math:: s_t = m_t\,\mathrm{cell}(x_t, s_{t-1}) + (1 - m_t)\,s_{t-1},\qquad
              y_t = m_t\,h_t

    (the reverse direction runs from the last position to the first). The final state is
    the state after the last kept position of each row (the first, for the reverse
    direction); a row with nothing kept keeps its initial state. This is what packing
    (``pack_padded_sequence``) gives for right-padded rows, and it holds for any mask.

    Paths: no mask (or an all-ones mask) runs the fused kernel of ``nn.GRU`` / ``nn.LSTM``
    over the whole sequence; a right-padded mask runs it over a packed sequence; other masks
    (left padding, holes) and every mask under ``torch.compile`` / ``torch.export`` step the
    fused one-step kernel position by position (the same function, without data-dependent
    branches or shapes). An LSTM compiled with autograd on also steps (the fused LSTM kernel
    does not go through AOT autograd). Choosing among these reads the mask on the host. When
    the caller guarantees right padding (``right_padded=True``, as hfattn's encoders do) the
    fused kernel runs over the padded width with indices computed on the device instead
    (:meth:`_right_padded`): nothing is read, which spares CUDA a stall, and on the CPU it
    replaces the packed sequence, whose kernel is not oneDNN's (``benchmarks/NOTES.md``).

    The parameters are those of a one-layer ``nn.GRU`` / ``nn.LSTM`` / ``nn.RNN``
    (``weight_ih_l0``, ``weight_hh_l0_reverse``, ...; ``state_dict``-compatible with it) and
    the module is a ``GradientCheckpointingLayer``: with gradient checkpointing on, training
    keeps only its inputs and recomputes the layer in the backward pass. It is not an
    ``nn.GRU`` instance, which ``torch.compile`` would refuse to trace.

    Args:
        cell: ``"gru"``, ``"lstm"`` or ``"rnn"``.
        input_size: size of the inputs ``x_t``.
        hidden_size: size of the state of each direction.
        bidirectional: also read the sequence backwards; outputs are ``[h→_t; h←_t]``.
    """

    def __init__(self, cell: str, input_size: int, hidden_size: int, *, bidirectional=False):
        super().__init__(
            _MODES[cell],
            input_size,
            hidden_size,
            num_layers=1,
            batch_first=True,
            bidirectional=bidirectional,
        )

    def __setattr__(self, name: str, value) -> None:
        # `from_pretrained` assigns views of the memory-mapped checkpoint, whose offsets are
        # not 64-byte aligned; the CPU kernels round differently on unaligned weights, so a
        # reloaded model would differ from the saved one in the last bit. Copy those.
        if (
            isinstance(value, nn.Parameter)
            and value.device.type == "cpu"
            and value.data_ptr() % _ALIGNMENT
        ):
            value.data = value.data.clone()
        super().__setattr__(name, value)

    def extra_repr(self) -> str:
        cell = {mode: name for name, mode in _MODES.items()}[self.mode]
        bidirectional = ", bidirectional=True" if self.bidirectional else ""
        return f"{cell}, {self.input_size}, {self.hidden_size}{bidirectional}"

    @property
    def num_directions(self) -> int:
        """2 for a bidirectional layer, else 1."""
        return 2 if self.bidirectional else 1

    @property
    def num_states(self) -> int:
        """2 for an LSTM (``h``, ``c``), else 1 (``h``)."""
        return 2 if self.mode == "LSTM" else 1

    def weights(self, direction: int | None = None) -> list[torch.Tensor]:
        """The current parameters in ``nn.RNNBase``'s flat order (``weight_ih, weight_hh,
        bias_ih, bias_hh`` per direction), all or one ``direction``'s (0 forward, 1 reverse)."""
        names = self._flat_weights_names
        if direction is not None:
            names = names[4 * direction : 4 * direction + 4]
        return [getattr(self, name) for name in names]

    def zero_state(self, inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The all-zero state ``[directions, batch, hidden]`` (one tensor, two for an LSTM)."""
        shape = (self.num_directions, inputs.shape[0], self.hidden_size)
        return tuple(inputs.new_zeros(shape) for _ in range(self.num_states))

    def cell(self, x: torch.Tensor, state: tuple[torch.Tensor, ...], direction: int = 0):
        """One step of one direction: ``x [batch, input]``, ``state`` ``(h,)`` or ``(h, c)``
        each ``[batch, hidden]``; returns the new state as a tuple."""
        weights = self.weights(direction)
        if self.mode == "LSTM":
            return _CELLS[self.mode](x, state, *weights)
        return (_CELLS[self.mode](x, state[0], *weights),)

    def forward(
        self,
        inputs: torch.Tensor,
        *state: torch.Tensor,
        mask: torch.Tensor | None = None,
        right_padded: bool = False,
    ) -> tuple[torch.Tensor, ...]:
        """Run the layer over ``inputs [batch, seq, input]`` from ``state`` (``h`` or ``h, c``,
        each ``[directions, batch, hidden]``; zeros when omitted).

        ``mask [batch, seq]`` (0 = skip) is optional. Returns ``(outputs, h)`` or
        ``(outputs, h, c)``: the outputs ``[batch, seq, directions × hidden]`` (zeros at skipped
        positions) and the final state.

        ``right_padded=True`` is the caller's guarantee that every row of ``mask`` is 1s then
        0s: the layer then runs :meth:`_right_padded`, which reads nothing on the host (no
        stall on CUDA) and runs the fused kernel, faster on the CPU than a packed sequence.
        Without it the mask is read to choose the path.
        """
        if not state:
            state = self.zero_state(inputs)
        if mask is None:
            if is_tracing() and self._steps_when_compiled():
                return self._stepped(inputs, state, None)
            return self._fused(inputs, state)
        keep = mask != 0
        if is_tracing():
            return self._stepped(inputs, state, keep)
        if right_padded:
            return self._right_padded(inputs, state, keep)
        lengths = keep.sum(1)
        lengths_cpu = lengths.cpu()
        seq_len = inputs.shape[1]
        if bool((lengths_cpu == seq_len).all()):
            return self._fused(inputs, state)
        positions = torch.arange(seq_len, device=keep.device)
        if bool((keep == (positions[None] < lengths[:, None])).all()):
            return self._packed(inputs, state, lengths_cpu)
        return self._stepped(inputs, state, keep)

    def _steps_when_compiled(self) -> bool:
        return self.mode == "LSTM" and torch.is_grad_enabled() and not _is_exporting()

    def _fused(self, inputs: torch.Tensor, state: tuple) -> tuple[torch.Tensor, ...]:
        hx = state if self.mode == "LSTM" else state[0]
        return tuple(
            _FUSED[self.mode](
                inputs, hx, self.weights(), True, 1, 0.0, self.training, self.bidirectional, True
            )
        )

    def _packed(
        self, inputs: torch.Tensor, state: tuple, lengths: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        """Right-padded rows as a packed sequence (``lengths`` on the CPU); a row of length 0
        reads one position, then gets zeros and its initial state back."""
        packed = pack_padded_sequence(
            inputs, lengths.clamp_min(1), batch_first=True, enforce_sorted=False
        )
        sorted_state = tuple(s.index_select(1, packed.sorted_indices) for s in state)
        hx = sorted_state if self.mode == "LSTM" else sorted_state[0]
        data, *final = _FUSED[self.mode](
            packed.data,
            packed.batch_sizes,
            hx,
            self.weights(),
            True,
            1,
            0.0,
            self.training,
            self.bidirectional,
        )
        packed_out = PackedSequence(
            data, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices
        )
        outputs, _ = pad_packed_sequence(packed_out, batch_first=True, total_length=inputs.shape[1])
        final = [s.index_select(1, packed.unsorted_indices) for s in final]
        if bool((lengths == 0).any()):
            empty = (lengths == 0).to(inputs.device)
            outputs = outputs.masked_fill(empty[:, None, None], 0.0)
            final = [
                torch.where(empty[None, :, None], s0, s) for s, s0 in zip(final, state, strict=True)
            ]
        return (outputs, *final)

    def _right_padded(
        self, inputs: torch.Tensor, state: tuple, keep: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        r"""Right-padded rows without reading their lengths on the host: each direction runs
        the fused (cuDNN) kernel over the whole padded width, and every index is computed on
        the device from the lengths ``L_b = Σ_t keep_{b,t}``.

        - The reverse direction reads each row reversed within its length,
          ``x'_{b,t} = x_{b,r_b(t)}`` with ``r_b(t) = L_b − 1 − t`` for ``t < L_b`` and ``t``
          after; ``r_b`` is its own inverse, so the same gather puts its outputs back.
        - A direction's final ``h`` is its output at ``t = L_b − 1`` (a gather), the initial
          ``h`` for an empty row.
        - An LSTM's final ``c`` is not among the outputs: it is held through the padding by an
          extra input feature ``p_{b,t} = 1[t ≥ L_b]`` whose weights are ``−K`` on the input
          gate and ``+K`` on the forget gate (:data:`_HOLD`): ``i_t = σ(−K + …) = 0`` and
          ``f_t = σ(K + …) = 1`` exactly, so ``c_t = f_t c_{t−1} + i_t g_t = c_{t−1}`` after the
          row ends and the kernel's final ``c`` is ``c_{L_b−1}`` (the initial ``c`` of an empty
          row). The saturated gates have zero derivatives: no gradient flows from the padding.
        - Outputs at padded positions are zeros.

        The result is that of :meth:`_packed` (up to the kernels' summation order) for masks of
        1s then 0s; other masks give wrong results (callers guarantee right padding).
        """
        batch, seq_len = keep.shape
        positions = torch.arange(seq_len, device=inputs.device)
        lengths = keep.sum(1, keepdim=True)  # [batch, 1], on the device
        valid = positions < lengths  # [batch, seq]: keep itself, for right-padded rows
        last = (lengths - 1).clamp_min(0)[..., None].expand(batch, 1, self.hidden_size)
        empty = lengths == 0
        if self.mode == "LSTM":
            inputs = torch.cat([inputs, (~valid).to(inputs.dtype)[..., None]], -1)
        reverse = torch.where(valid, lengths - 1 - positions, positions)
        outputs, finals = [], []
        for direction in range(self.num_directions):
            x = inputs if direction == 0 else _gather_time(inputs, reverse)
            initial = tuple(s[direction : direction + 1] for s in state)
            weights = self.weights(direction)
            if self.mode == "LSTM":
                weights = [_holding(weights[0], self.hidden_size), *weights[1:]]
            out, *final = _FUSED[self.mode](
                x,
                initial if self.mode == "LSTM" else initial[0],
                weights,
                True,
                1,
                0.0,
                self.training,
                False,
                True,
            )
            h = torch.where(empty, initial[0][0], out.gather(1, last)[:, 0])
            finals.append((h[None], *final[1:]))
            outputs.append(out if direction == 0 else _gather_time(out, reverse))
        outputs = outputs[0] if len(outputs) == 1 else torch.cat(outputs, -1)
        outputs = outputs.masked_fill(~valid[..., None], 0.0)
        return (outputs, *(torch.cat(parts, 0) for parts in zip(*finals, strict=True)))

    def _stepped(
        self, inputs: torch.Tensor, state: tuple, keep: torch.Tensor | None
    ) -> tuple[torch.Tensor, ...]:
        """Position by position with the one-step kernel; skipped positions keep the state."""
        outputs, finals = [], []
        seq_len = inputs.shape[1]
        for direction in range(self.num_directions):
            current = tuple(s[direction] for s in state)
            steps = range(seq_len) if direction == 0 else range(seq_len - 1, -1, -1)
            out = [None] * seq_len
            for t in steps:
                new = self.cell(inputs[:, t], current, direction)
                if keep is not None:
                    kept = keep[:, t, None]
                    new = tuple(torch.where(kept, n, c) for n, c in zip(new, current, strict=True))
                    out[t] = torch.where(kept, new[0], 0.0)
                else:
                    out[t] = new[0]
                current = new
            outputs.append(torch.stack(out, 1))
            finals.append(current)
        outputs = outputs[0] if len(outputs) == 1 else torch.cat(outputs, -1)
        return (outputs, *(torch.stack(parts, 0) for parts in zip(*finals, strict=True)))


def _is_exporting() -> bool:
    return torch.compiler.is_exporting()


_HOLD = 1e4
"""``K`` of :meth:`RecurrentLayer._right_padded`: a gate pre-activation of ``±K`` plus anything
an input and a state add to it saturates the sigmoid to exactly 0 or 1 (in float32 beyond
±17, in float16 / bfloat16 sooner); ``K`` itself is exact in float16 and bfloat16."""


def _holding(weight_ih: torch.Tensor, hidden_size: int) -> torch.Tensor:
    """An LSTM's ``W_ih [4 × hidden, input]`` with one more input column: ``−K`` on the input
    gate, ``+K`` on the forget gate, 0 on the cell and output gates (PyTorch's gate order
    ``i, f, g, o``), the weights of the "past the row's end" feature that holds ``c``."""
    column = weight_ih.new_zeros(4 * hidden_size, 1)
    column[:hidden_size] = -_HOLD
    column[hidden_size : 2 * hidden_size] = _HOLD
    return torch.cat([weight_ih, column], 1)


def _gather_time(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``y[b, t] = x[b, index[b, t]]`` for ``x [batch, seq, features]``, ``index [batch, seq]``."""
    return x.gather(1, index[..., None].expand(-1, -1, x.shape[-1]))


def recurrent_layers(
    cell: str, input_size: int, hidden_size: int, num_layers: int, *, bidirectional: bool = False
) -> nn.ModuleList:
    """``num_layers`` :class:`RecurrentLayer` s, layer ``l > 0`` reading the outputs of
    layer ``l − 1`` (both directions): the layers of one stacked ``nn.GRU`` / ``nn.LSTM``."""
    directions = 2 if bidirectional else 1
    return nn.ModuleList(
        RecurrentLayer(
            cell,
            input_size if i == 0 else hidden_size * directions,
            hidden_size,
            bidirectional=bidirectional,
        )
        for i in range(num_layers)
    )


@torch.no_grad()
def init_rnn_weights(module: nn.RNNBase, *, unit_forget_bias: bool = False) -> None:
    """Xavier-uniform input matrices, orthogonal recurrent matrices and zero biases for every
    layer and direction of ``module``; with ``unit_forget_bias`` an LSTM's input-side
    forget-gate bias is 1 (Keras' ``unit_forget_bias``). Parameters already loaded from a
    checkpoint (``_is_hf_initialized``) are left as they are."""
    for name, param in module.named_parameters():
        if name.startswith("weight_ih"):
            init.xavier_uniform_(param)
        elif name.startswith("weight_hh"):
            init.orthogonal_(param)
        elif not getattr(param, "_is_hf_initialized", False):  # a slice may be set below
            init.zeros_(param)
            if unit_forget_bias and module.mode == "LSTM" and name.startswith("bias_ih"):
                size = module.hidden_size  # gates i, f, g, o: f is the second block
                init.ones_(param[size : 2 * size])


def init_rnn_embeddings(module: nn.Embedding, *, tied: bool = False) -> None:
    r"""Embeddings ``E ~ N(0, 1)`` (PyTorch's ``nn.Embedding`` default), or
    ``N(0, 1/embedding_dim)`` when ``E`` is also the output layer (``tie_word_embeddings``),
    so that the initial logits ``E h`` stay of order 1.

    The transformers default ``N(0, 0.02)`` suits models that normalise their inputs (layer
    norm); an RNN reads the embeddings through its input matrices unnormalised, so inputs
    near zero leave its states near zero and training crawls out of the unigram loss.
    """
    init.normal_(module.weight, 0.0, module.embedding_dim**-0.5 if tied else 1.0)


def init_recurrent_model_weights(
    module: nn.Module, *, tied: bool = False, unit_forget_bias: bool = False
) -> bool:
    """Keras' initialisers for the modules of an RNN model: every RNN cell as
    :func:`init_rnn_weights`, Glorot-uniform (Xavier) linears with zero biases, embeddings as
    :func:`init_rnn_embeddings` (``tied``: also the output layer). Returns whether ``module``
    was one of these; the caller's ``_init_weights`` handles the others."""
    if isinstance(module, nn.RNNBase):
        init_rnn_weights(module, unit_forget_bias=unit_forget_bias)
    elif isinstance(module, nn.Linear):
        init.xavier_uniform_(module.weight)
        if module.bias is not None:
            init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        init_rnn_embeddings(module, tied=tied)
    else:
        return False
    return True


def stack_states(finals: list[tuple[torch.Tensor, ...]]) -> tuple[torch.Tensor, ...]:
    """Per-layer final states (each ``(h,)`` or ``(h, c)``, ``[directions, batch, hidden]``)
    → the stacked ``nn.GRU`` / ``nn.LSTM`` layout ``[layers × directions, batch, hidden]``."""
    return tuple(torch.cat(parts, 0) for parts in zip(*finals, strict=True))


__all__ = [
    "RecurrentLayer",
    "assume_reads_stall",
    "init_recurrent_model_weights",
    "init_rnn_embeddings",
    "init_rnn_weights",
    "is_tracing",
    "reads_stall",
    "stack_states",
]
