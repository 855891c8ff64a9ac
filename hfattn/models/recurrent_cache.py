"""A recurrent state as a ``transformers`` generation cache.

An RNN decoder needs no key/value history: everything it remembers about the tokens it
has read is a handful of fixed-size tensors (``h``, ``c`` of an LSTM, the previous
attentional vector of Luong's input feeding, keys projected once per source, ...).
:class:`RecurrentCache` holds such tensors by name, each with a batch dimension, and
counts the tokens it has absorbed, so that ``generate()`` can slice its inputs
(``get_seq_length``), reorder beams (``reorder_cache``) and expand or select batch rows.

It knows nothing about any model: a model writes its named state after every forward
(:meth:`RecurrentCache.update_states`) and reads it back at the next one.

This module imports only torch and transformers (remote-code safe).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import torch
from transformers.cache_utils import Cache


class RecurrentCache(Cache):
    r"""Named recurrent-state tensors with a batch dimension, usable as ``cache``.

    After ``t`` tokens the cache holds the state ``S_t`` of the recurrence
    ``S_t = f(S_{t-1}, x_t)``; the next forward continues from it, so every generated token
    costs one step instead of a re-run over the prefix.

    Args:
        states: initial named tensors (e.g. ``{"h": h, "c": c}``).
        seen_tokens: number of tokens already absorbed into ``states``.
        batch_dims: the batch dimension of each name (default 0 for every name); e.g.
            ``{"h": 1}`` for PyTorch's ``[num_layers, batch, hidden]`` layout.

    Beam search calls :meth:`reorder_cache` (``index_select`` on each batch dimension);
    :meth:`batch_repeat_interleave` / :meth:`batch_select_indices` expand and filter rows;
    :meth:`detach` cuts the autograd graph (truncated BPTT between batches).
    """

    is_compileable = False

    def __init__(
        self,
        states: Mapping[str, torch.Tensor] | None = None,
        seen_tokens: int = 0,
        batch_dims: Mapping[str, int] | None = None,
    ):
        super().__init__(layers=[])
        self.states: dict[str, torch.Tensor] = dict(states or {})
        self.batch_dims: dict[str, int] = dict(batch_dims or {})
        self.seen_tokens = int(seen_tokens)

    # --- access ---------------------------------------------------------------------------

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}={tuple(v.shape)}" for k, v in self.states.items())
        return f"{type(self).__name__}(seen_tokens={self.seen_tokens}, {shapes})"

    def __getitem__(self, name: str) -> torch.Tensor:
        return self.states[name]

    def __contains__(self, name: object) -> bool:
        return name in self.states

    def __iter__(self) -> Iterator[str]:
        return iter(self.states)

    def get(self, name: str, default: torch.Tensor | None = None) -> torch.Tensor | None:
        """The tensor stored as ``name``, or ``default``."""
        return self.states.get(name, default)

    @property
    def is_empty(self) -> bool:
        """True before the first forward has written a state."""
        return not self.states

    def batch_dim(self, name: str) -> int:
        """The batch dimension of the tensor ``name``."""
        return self.batch_dims.get(name, 0)

    @property
    def batch_size(self) -> int:
        """Number of rows (sequences, beams) in the state, ``-1`` while empty."""
        for name, tensor in self.states.items():
            return tensor.shape[self.batch_dim(name)]
        return -1

    @property
    def is_linear(self) -> list[bool]:
        """``[False]``: ``generate`` (transformers ≥ 5.24) cuts a resumed prompt to the tokens
        the cache has not absorbed only when some cache layer is not a "linear" (SSM) one; this
        cache has no layers, but counts what it absorbed (:meth:`get_seq_length`), so a
        continued generation must be cut the same way."""
        return [False]

    def get_seq_length(self, layer_idx: int | None = 0) -> int:
        """Number of tokens absorbed into the state (what ``generate`` slices inputs by)."""
        return self.seen_tokens

    def get_max_length(self, layer_idx: int | None = None) -> int:
        """No limit: the state has a fixed size whatever the length."""
        return -1

    # --- writing ----------------------------------------------------------------------------

    def update_states(self, num_new_tokens: int = 0, **states: torch.Tensor | None) -> None:
        """Store ``states`` (a ``None`` value removes the name) after ``num_new_tokens`` tokens."""
        for name, tensor in states.items():
            if tensor is None:
                self.states.pop(name, None)
            else:
                self.states[name] = tensor
        self.seen_tokens += int(num_new_tokens)

    def reset(self) -> None:
        """Forget every state (the next forward starts from the initial state)."""
        self.states.clear()
        self.seen_tokens = 0

    def crop(self, max_length: int) -> None:
        """An RNN state cannot be rolled back to an earlier token."""
        if max_length < 0:
            max_length = self.seen_tokens + max_length
        if max_length != self.seen_tokens:
            raise NotImplementedError(
                f"{type(self).__name__} cannot be cropped: a recurrent state does not keep the "
                "states of earlier tokens"
            )

    # --- batch operations ---------------------------------------------------------------------

    def _apply_inplace(self, fn: Callable[[torch.Tensor, int], torch.Tensor]) -> None:
        for name, tensor in self.states.items():
            self.states[name] = fn(tensor, self.batch_dim(name))

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        """Beam search: row ``i`` becomes old row ``beam_idx[i]`` (in place)."""
        self._apply_inplace(lambda t, d: t.index_select(d, beam_idx.to(t.device)))

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep only the rows ``indices`` (in place)."""
        self._apply_inplace(lambda t, d: t.index_select(d, indices.to(t.device)))

    def batch_repeat_interleave(self, repeats: int) -> None:
        """Repeat every row ``repeats`` times, consecutively (in place)."""
        self._apply_inplace(lambda t, d: t.repeat_interleave(repeats, dim=d))

    def map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> RecurrentCache:
        """A new cache with ``fn`` applied to every tensor (same names, batch dims, count)."""
        return type(self)(
            {k: fn(v) for k, v in self.states.items()}, self.seen_tokens, self.batch_dims
        )

    def detach(self) -> RecurrentCache:
        """A copy whose tensors are cut from the autograd graph (truncated BPTT)."""
        return self.map(torch.Tensor.detach)

    def to(self, *args, **kwargs) -> RecurrentCache:
        """A copy with every tensor moved / cast as ``torch.Tensor.to(*args, **kwargs)``."""
        return self.map(lambda t: t.to(*args, **kwargs))


class RecurrentCacheModelMixin:
    """For a ``PreTrainedModel`` whose recurrent state is its generation cache (a
    :class:`RecurrentCache` that its ``forward`` creates and returns): ``generate()`` must not
    build a ``DynamicCache``, beam search reorders the state with
    :meth:`RecurrentCache.reorder_cache`, and assisted decoding (which rolls the cache back) is
    refused, as is any ``cache_implementation`` (``"static"`` included: ``generate`` would
    otherwise warn, keep the recurrent cache and compile nothing). Such a model does not
    claim ``_can_compile_fullgraph``, which transformers reads as "generates with a static
    cache and a compiled decoding step". List it before ``PreTrainedModel`` among the bases."""

    _is_stateful = True
    _can_compile_fullgraph = False

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        return False

    def _validate_generation_mode(self, generation_mode, generation_config, generation_mode_kwargs):
        """``generate``'s own checks, and one line refusing a ``cache_implementation``."""
        implementation = generation_config.cache_implementation
        if implementation is not None:
            raise ValueError(
                f"cache_implementation={implementation!r} is not supported by "
                f"{type(self).__name__}: its generation cache is its fixed-size recurrent state "
                "(RecurrentCache), already static in size; leave cache_implementation unset"
            )
        super()._validate_generation_mode(
            generation_mode, generation_config, generation_mode_kwargs
        )


__all__ = ["RecurrentCache", "RecurrentCacheModelMixin"]
