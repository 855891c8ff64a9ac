"""Positional encodings: fixed sinusoidal (Vaswani et al.) and learned.

Sinusoidal, with 0-based positions ``t``, even size ``d`` and ``omega_i = base^(-2i/d)``:

    PE[t, 2i] = sin(omega_i t),    PE[t, 2i + 1] = cos(omega_i t),    i = 0 .. d/2 - 1.

Relative-position property (Vaswani et al. 2017, §3.5: ``T^delta f(t) = f(t + delta)``): each pair
``(sin, cos)`` rotates by the angle ``omega_i delta``, so ``PE(t + delta) = R(delta) PE(t)``
with the block-diagonal rotation returned by :func:`relative_position_rotation`.

This module imports only torch (remote-code safe). Sinusoidal tables are non-persistent
buffers: a model recomputes them in ``_init_weights`` with
``transformers.initialization.copy_(module.weight, module.compute_table(dtype))`` since buffers
are garbage after ``from_pretrained`` builds the model on the meta device. The buffer is
created in the default dtype (``from_pretrained(dtype=...)`` sets it while building the
model), so a model loaded in half precision gets a half-precision table, as Marian's
frozen-parameter table is cast with the other weights.

Both modules look positions up in two ways: by a tensor of ``position_ids`` (any
positions; the bound is checked on the data), or by the contiguous range
``forward(past_length=p, length=T)`` = positions ``p .. p + T - 1``, whose bound is known
from Python integers: a slice of the table, with no data-dependent branch, so that
``torch.export`` and ``torch.compile(fullgraph=True)`` trace it.
"""

from __future__ import annotations

import torch
from torch import nn


def _check_even(dim: int) -> None:
    if dim <= 0 or dim % 2:
        raise ValueError(f"sinusoidal encodings need a positive even dim; got dim={dim}")


def sinusoid_frequencies(dim: int, base: float = 10000.0, dtype=torch.float64) -> torch.Tensor:
    """Angular frequencies ``omega_i = base^(-2i / d)`` for ``i = 0 .. d/2 - 1``."""
    _check_even(dim)
    return base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim).to(dtype)


def sinusoidal_position_encoding(
    num_positions: int,
    dim: int,
    base: float = 10000.0,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """The ``[num_positions, dim]`` table ``PE[t, 2i] = sin(omega_i t)``,
    ``PE[t, 2i+1] = cos(omega_i t)``.

    Computed in float64 then cast to ``dtype``; positions are ``t = 0 .. num_positions - 1``.
    """
    angles = torch.arange(num_positions, dtype=torch.float64)[:, None] * sinusoid_frequencies(
        dim, base
    )
    table = torch.stack((angles.sin(), angles.cos()), dim=-1).reshape(num_positions, dim)
    return table.to(dtype=dtype, device=device)


def relative_position_rotation(
    delta: float, dim: int, base: float = 10000.0, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """Block-diagonal ``R(delta)`` with ``PE(t + delta) = R(delta) PE(t)`` for every ``t``.

    Block ``i`` acts on ``(PE[2i], PE[2i+1]) = (sin(omega_i t), cos(omega_i t))``:

        [[ cos(omega_i delta), sin(omega_i delta)],
         [-sin(omega_i delta), cos(omega_i delta)]]

    (the angle-addition formulas), independent of ``t``.
    """
    phase = sinusoid_frequencies(dim, base) * delta
    cos, sin = phase.cos(), phase.sin()
    rotation = torch.zeros(dim, dim, dtype=torch.float64)
    even = torch.arange(0, dim, 2)
    rotation[even, even] = cos
    rotation[even, even + 1] = sin
    rotation[even + 1, even] = -sin
    rotation[even + 1, even + 1] = cos
    return rotation.to(dtype)


def _check_positions(position_ids: torch.Tensor, num_positions: int, kind: str) -> None:
    """Raise ``ValueError`` if a position of ``position_ids`` is beyond ``num_positions``
    (reads the data: use :func:`_check_range` where the bound is known from shapes)."""
    if position_ids.numel() and int(position_ids.max()) >= num_positions:
        raise ValueError(
            f"{kind} positional encoding has num_positions={num_positions}; got position "
            f"{int(position_ids.max())} (positions are 0-based)"
        )


def _check_range(past_length: int, length: int, num_positions: int, kind: str) -> None:
    """Raise ``ValueError`` if positions ``past_length .. past_length + length - 1`` do not
    fit in ``num_positions`` (integers only: no data-dependent branch)."""
    if past_length + length > num_positions:
        raise ValueError(
            f"{kind} positional encoding has num_positions={num_positions}; got position "
            f"{past_length + length - 1} (positions are 0-based)"
        )


class _PositionLookup:
    """The two ways a positional module is read: ``forward(position_ids)`` (any positions;
    the bound is checked on the data) or ``forward(past_length=p, length=T)``, the
    ``[T, dim]`` encodings of positions ``p .. p + T - 1`` (a slice whose bound is known from
    Python integers, so ``torch.export`` traces it). Subclasses give ``_range`` and
    ``_lookup``."""

    def forward(
        self,
        position_ids: torch.Tensor | None = None,
        *,
        past_length: int = 0,
        length: int | None = None,
        bound: int | None = None,
    ) -> torch.Tensor:
        """``[..., T]`` integer positions -> ``[..., T, dim]`` encodings; or, without
        ``position_ids``, the ``[length, dim]`` encodings of ``past_length ..
        past_length + length - 1``.

        ``bound``: the caller knows every position is below it (a static cache's capacity),
        so the data are not read to check or size the table: a compiled step whose positions
        are a tensor (a static cache counts its tokens on the device) has no graph break."""
        if position_ids is None:
            if length is None:
                raise ValueError("pass position_ids, or the range's length (and past_length)")
            return self._range(past_length, length)
        if bound is not None:
            return self._bounded(position_ids, bound)
        return self._lookup(position_ids)


class SinusoidalPositionalEmbedding(_PositionLookup, nn.Module):
    """Fixed sinusoidal encodings of Vaswani et al. (2017), "Attention is all you need",
    looked up by position: ``forward(position_ids) = PE[position_ids]``, or
    ``forward(past_length=p, length=T) = PE[p : p + T]``.

    The table is a non-persistent buffer (never saved) created in ``dtype`` (default: the
    default dtype, which ``from_pretrained(dtype=...)`` sets while building the model); it
    follows ``module.to(dtype)`` like any buffer.
    """

    def __init__(
        self, num_positions: int, dim: int, base: float = 10000.0, dtype: torch.dtype | None = None
    ):
        super().__init__()
        _check_even(dim)
        self.num_positions = num_positions
        self.dim = dim
        self.base = base
        table = self.compute_table(dtype or torch.get_default_dtype())
        self.register_buffer("weight", table, persistent=False)

    def compute_table(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The ``[num_positions, dim]`` table in ``dtype`` (computed in float64, rounded once).
        Call from ``_init_weights`` to restore the buffer:
        ``init.copy_(module.weight, module.compute_table(module.weight.dtype))``."""
        return sinusoidal_position_encoding(self.num_positions, self.dim, self.base, dtype)

    def _table(self, rows: int) -> torch.Tensor:
        """The table, recomputed in its dtype with ``rows`` rows when it holds fewer."""
        table = self.weight
        if rows > self.num_positions:
            table = sinusoidal_position_encoding(
                rows, self.dim, self.base, table.dtype, table.device
            )
        return table

    def _range(self, past_length: int, length: int) -> torch.Tensor:
        return self._table(past_length + length)[past_length : past_length + length]

    def _lookup(self, position_ids: torch.Tensor) -> torch.Tensor:
        rows = int(position_ids.max()) + 1 if position_ids.numel() else 0
        return self._bounded(position_ids, rows)

    def _bounded(self, position_ids: torch.Tensor, bound: int) -> torch.Tensor:
        return nn.functional.embedding(position_ids, self._table(bound))

    def extra_repr(self) -> str:
        return f"num_positions={self.num_positions}, dim={self.dim}, base={self.base}"


class LearnedPositionalEmbedding(_PositionLookup, nn.Embedding):
    """Learned absolute positions (Gehring et al. 2017, "Convolutional sequence to sequence
    learning"; Chollet's ``PositionalEmbedding``): ``forward(t) = P[t]``, ``P`` trained, or
    ``forward(past_length=p, length=T) = P[p : p + T]``. Positions beyond the table raise."""

    def __init__(self, num_positions: int, dim: int):
        super().__init__(num_positions, dim)
        self.num_positions = num_positions

    def _range(self, past_length: int, length: int) -> torch.Tensor:
        _check_range(past_length, length, self.num_positions, "learned")
        return self.weight[past_length : past_length + length]

    def _lookup(self, position_ids: torch.Tensor) -> torch.Tensor:
        _check_positions(position_ids, self.num_positions, "learned")
        return nn.Embedding.forward(self, position_ids)

    def _bounded(self, position_ids: torch.Tensor, bound: int) -> torch.Tensor:
        _check_range(0, bound, self.num_positions, "learned")
        return nn.Embedding.forward(self, position_ids)


POSITIONAL_ENCODINGS: dict[str, type[nn.Module]] = {
    "sinusoidal": SinusoidalPositionalEmbedding,
    "learned": LearnedPositionalEmbedding,
}


def build_positional_encoding(kind: str, num_positions: int, dim: int, **params) -> nn.Module:
    """Build the positional encoding ``kind`` (``"sinusoidal"`` or ``"learned"``)."""
    try:
        cls = POSITIONAL_ENCODINGS[kind]
    except KeyError:
        raise ValueError(
            f"unknown positional encoding {kind!r}; valid names: {', '.join(POSITIONAL_ENCODINGS)}"
        ) from None
    return cls(num_positions, dim, **params)


def position_ids_for(
    batch_size: int, length: int, past_length: int = 0, device: torch.device | str | None = None
) -> torch.Tensor:
    """Positions ``past_length .. past_length + length - 1`` as a ``[batch_size, length]``
    tensor."""
    ids = torch.arange(past_length, past_length + length, device=device)
    return ids.unsqueeze(0).expand(batch_size, length)
