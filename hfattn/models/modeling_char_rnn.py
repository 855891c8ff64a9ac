"""Character-level recurrent language model (Géron HOML ch. 16, Karpathy's char-rnn).

``CharRNNForCausalLM`` is a ``PreTrainedModel`` + ``GenerationMixin``: the recurrent state is
the generation cache (``cache``, a :class:`~.recurrent_cache.RecurrentCache`), so
every new character costs one RNN step instead of a re-run over the whole text, and a cache
returned by ``generate`` continues the text where it stopped. The same state, carried between
batches and detached, gives stateful (truncated-BPTT) training.

Only torch, transformers and sibling modules are imported here: ``save_pretrained`` copies
this file (and ``recurrent_cache.py``, ``rnn_layers.py``, ``neural_cache.py``) next to the
weights for ``trust_remote_code`` loading.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers.cache_utils import Cache
from transformers.modeling_outputs import CausalLMOutputWithPast
from transformers.utils.deprecation import deprecate_kwarg

from .configuration_char_rnn import CharRNNConfig
from .neural_cache import CacheMemory, cache_log_probs
from .recurrent_cache import RecurrentCache, RecurrentCacheModelMixin
from .rnn_layers import (
    init_rnn_embeddings,
    init_rnn_weights,
    recurrent_layers,
    stack_states,
)

RecurrentState = torch.Tensor | tuple[torch.Tensor, torch.Tensor]
"""``h`` of shape [num_layers, batch, hidden] (GRU / RNN) or the pair ``(h, c)`` (LSTM)."""

_STATE_NAMES = ("h", "c")
"""Names of the state tensors in the cache: ``h`` (every cell) and ``c`` (LSTM)."""


def map_state(state: RecurrentState, fn) -> RecurrentState:
    """Apply ``fn`` to every tensor of a recurrent state (a tensor or an LSTM ``(h, c)`` pair)."""
    if isinstance(state, tuple):
        return tuple(fn(t) for t in state)
    return fn(state)


def to_cache(state: RecurrentState | RecurrentCache | None, seen_tokens: int = 0) -> RecurrentCache:
    """The state as a :class:`RecurrentCache` (``None`` gives an empty cache = zero state).

    A cache is returned as is; a plain ``h`` / ``(h, c)`` (``[num_layers, batch, hidden]``
    each) is wrapped, with ``seen_tokens`` as its length (unknown for a bare tensor: 0).
    """
    if isinstance(state, RecurrentCache):
        return state
    if isinstance(state, Cache):
        raise TypeError(
            f"cache must be a RecurrentCache, a tensor h or a tuple (h, c); "
            f"got {type(state).__name__}"
        )
    tensors = () if state is None else state if isinstance(state, tuple) else (state,)
    if len(tensors) > len(_STATE_NAMES):
        raise ValueError(f"a recurrent state has 1 (h) or 2 (h, c) tensors; got {len(tensors)}")
    states = dict(zip(_STATE_NAMES, tensors, strict=False))
    return RecurrentCache(states, seen_tokens, batch_dims=dict.fromkeys(states, 1))


def state_tensors(state: RecurrentState | RecurrentCache | None) -> RecurrentState | None:
    """The plain state: ``h`` (GRU / RNN) or ``(h, c)`` (LSTM), from a cache or as given.

    This is what training checkpoints store and what ``forward(cache=...)`` also
    accepts; ``None`` for ``None`` or an empty cache.
    """
    if not isinstance(state, RecurrentCache):
        return state
    if state.is_empty:
        return None
    if "c" in state:
        return (state["h"], state["c"])
    return state["h"]


def detach_state(
    state: RecurrentState | RecurrentCache | None,
) -> RecurrentState | RecurrentCache | None:
    """Cut the autograd graph at a batch boundary (truncated BPTT for stateful training).

    Works on a plain state (returns tensors) and on a :class:`RecurrentCache` (returns a
    detached copy with the same length).
    """
    if state is None:
        return None
    if isinstance(state, RecurrentCache):
        return state.detach()
    return map_state(state, torch.Tensor.detach)


@dataclass
class CharRNNOutput(CausalLMOutputWithPast):
    """:class:`~transformers.modeling_outputs.CausalLMOutputWithPast` whose ``cache``
    is the recurrent state after the last input character (a :class:`RecurrentCache` holding
    ``h`` and, for an LSTM, ``c``, each [num_layers, batch, hidden]) and whose
    ``hidden_states`` are the embeddings followed by the output of every layer."""


class CharRNNPreTrainedModel(RecurrentCacheModelMixin, PreTrainedModel):
    """Weight initialisation and HF plumbing shared by char-RNN models (the recurrent state is
    the generation cache: :class:`~.recurrent_cache.RecurrentCacheModelMixin`)."""

    config_class = CharRNNConfig
    # The model has no separate base model: its body is itself.
    base_model_prefix = ""
    main_input_name = "input_ids"
    _no_split_modules = []
    supports_gradient_checkpointing = True

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """Embeddings ``N(0, 1)`` (``N(0, 1/embedding_dim)`` when tied to the output layer,
        :func:`~.rnn_layers.init_rnn_embeddings`); Xavier input and orthogonal recurrent
        matrices with zero biases for every RNN cell (the base class only knows ``nn.LSTM``);
        linears ``N(0, initializer_range)``, so the first predictions are near uniform.

        The transformers ``N(0, 0.02)`` embeddings keep the GRU's inputs near zero and
        training crawls out of the unigram loss: on the Shakespeare plays (GRU 512, batch
        128 × 64 characters, AdamW 4e-3) the training loss of steps 126-150 was 2.09 with them
        and 1.74 with ``N(0, 1)``, and a two-layer GRU 320 stayed near the unigram loss (3.3)
        for its first 150 steps."""
        if isinstance(module, nn.RNNBase):
            init_rnn_weights(module)
        elif isinstance(module, nn.Embedding):
            init_rnn_embeddings(module, tied=getattr(self.config, "tie_word_embeddings", False))
        else:
            super()._init_weights(module)


class CharRNNForCausalLM(CharRNNPreTrainedModel, GenerationMixin):
    r"""Embedding → ``num_layers`` GRU/LSTM/RNN layers → linear head, predicting the next character.

    .. math:: h^{(l)}_t = \mathrm{cell}_l(h^{(l-1)}_t, h^{(l)}_{t-1}),\quad h^{(0)}_t = E[x_t],
              \qquad p(x_{t+1}\mid x_{\le t}) = \mathrm{softmax}(W h^{(L)}_t + b)

    Every layer is its own single-layer :class:`~.rnn_layers.RecurrentLayer` (``layers[l]``),
    so that ``output_hidden_states`` can return each layer's outputs and gradient
    checkpointing (``activation_checkpointing_enable()``) recomputes one layer at a time; each
    runs the whole sequence in one fused call (packed when right-padded). Dropout is applied to
    the embeddings, between layers and before the head. With ``tie_word_embeddings`` the output
    matrix is ``E`` itself and ``h_t`` is first projected to ``embedding_dim`` when the sizes
    differ.
    With ``neural_cache_size > 0``, outside training the returned logits are the log of the
    continuous-cache mixture of Grave et al. (2017) (:func:`~.neural_cache.cache_log_probs`),
    whose memory of recent hidden states travels in ``cache`` beside the recurrent state.
    ``torch.export`` and ``torch.compile(fullgraph=True)`` trace the forward (a padded
    ``attention_mask`` is then stepped position by position, never branched on).
    """

    def __init__(self, config: CharRNNConfig):
        super().__init__(config)
        self.embeddings = nn.Embedding(config.vocab_size, config.embedding_dim)
        self.dropout = nn.Dropout(config.dropout)
        self.layers = recurrent_layers(
            config.cell, config.embedding_dim, config.hidden_size, config.num_layers
        )
        tied = getattr(config, "tie_word_embeddings", False)
        head_in = config.embedding_dim if tied else config.hidden_size
        self.output_projection = (
            nn.Linear(config.hidden_size, config.embedding_dim, bias=False)
            if tied and config.hidden_size != config.embedding_dim
            else None
        )
        self.lm_head = nn.Linear(head_in, config.vocab_size)
        self.post_init()

    @property
    def _tied_weights_keys(self) -> dict[str, str]:
        if getattr(self.config, "tie_word_embeddings", False):
            return {"lm_head.weight": "embeddings.weight"}
        return {}

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embeddings = value

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def set_output_embeddings(self, value: nn.Linear) -> None:
        self.lm_head = value

    def initial_state(self, batch_size: int) -> RecurrentState:
        """The all-zero state for ``batch_size`` sequences."""
        shape = (self.config.num_layers, batch_size, self.config.hidden_size)
        weight = self.embeddings.weight
        h = torch.zeros(shape, dtype=weight.dtype, device=weight.device)
        return (h, h.clone()) if self.config.cell == "lstm" else h

    def head_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        r"""The network's own next-character logits ``W h_t + b`` for the last layer's outputs
        ``hidden`` [batch, seq, hidden_size] (projected to ``embedding_dim`` first when the
        head is tied to the embeddings and the sizes differ); no continuous cache, no dropout.
        In eval mode, ``head_logits(out.hidden_states[-1])`` are the logits that the forward
        mixes with the cache."""
        if self.output_projection is not None:
            hidden = self.output_projection(hidden)
        return self.lm_head(hidden)

    def _run_layers(
        self, embeds: torch.Tensor, state: RecurrentState | None, mask: torch.Tensor | None
    ) -> tuple[list[torch.Tensor], RecurrentState]:
        """Run the layers over the sequence; return each layer's outputs and the final state.

        Pad tokens never change the state: ``h_t = m_t·cell(x_t, h_{t-1}) + (1−m_t)·h_{t-1}``
        (outputs are 0 there); see :class:`~.rnn_layers.RecurrentLayer`, which runs a layer
        fused (no padding), packed (right padding) or step by step (left padding, and any
        padding under ``torch.compile`` / ``torch.export``).
        """
        states = () if state is None else state if isinstance(state, tuple) else (state,)
        outputs, finals = [], []
        x = self.dropout(embeds)
        for i, layer in enumerate(self.layers):
            if i > 0:
                x = self.dropout(x)
            x, *final = layer(x, *(s[i : i + 1] for s in states), mask=mask)
            outputs.append(x)
            finals.append(final)
        final = stack_states(finals)
        return outputs, final if len(final) == 2 else final[0]

    @deprecate_kwarg("past_key_values", version="6.0.0", new_name="cache")
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        cache: RecurrentCache | RecurrentState | None = None,
        labels: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> CharRNNOutput | tuple:
        r"""Next-character logits for every position (outside training with a continuous cache,
        ``neural_cache_size > 0``: the log-probabilities of its mixture), the loss when
        ``labels`` are given, the final recurrent state when ``use_cache`` and every layer's
        outputs when ``output_hidden_states``.

        Args:
            input_ids: [batch, seq] character ids (or ``inputs_embeds``
                [batch, seq, embedding_dim]).
            attention_mask: [batch, seq] or [batch, past+seq] (1 = real token). Only the last
                ``seq`` columns are used; zeros make the state skip those positions.
            cache: the state to start from: a :class:`RecurrentCache` (returned by a
                previous call or by ``generate``; it is updated in place and returned, as
                ``DynamicCache`` is), or a plain ``h`` / ``(h, c)`` [num_layers, batch, hidden]
                (wrapped in a new cache). ``None`` = zeros.
            labels: [batch, seq] targets, ``-100`` ignored. As in every HF causal LM they are the
                inputs themselves; the shift happens here: loss = CE(logits[:, :-1], labels[:, 1:]).
            output_hidden_states: also return ``hidden_states``, a tuple of ``num_layers + 1``
                tensors: the embeddings [batch, seq, embedding_dim], then the output of each
                layer [batch, seq, hidden_size] (before dropout; the last one feeds the head).
            kwargs: ``num_items_in_batch`` (passed by ``Trainer``): the loss is then the sum of
                the token losses divided by it, so that gradient accumulation over micro-batches
                gives the gradient of the whole batch's mean.
        """
        use_cache = self.config.use_cache if use_cache is None else use_cache
        return_dict = self.config.return_dict if return_dict is None else return_dict
        if output_hidden_states is None:
            output_hidden_states = bool(getattr(self.config, "output_hidden_states", False))
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("Pass exactly one of input_ids or inputs_embeds")
        embeds = self.embeddings(input_ids) if inputs_embeds is None else inputs_embeds
        seq_len = embeds.shape[1]
        mask = None if attention_mask is None else attention_mask[:, -seq_len:]
        cache = to_cache(cache) if use_cache or cache is not None else None
        outputs, state = self._run_layers(embeds, state_tensors(cache), mask)
        logits = self.head_logits(self.dropout(outputs[-1]))
        memory = None
        if self.config.neural_cache_size and not self.training:
            logits, memory = cache_log_probs(
                logits,
                outputs[-1],
                input_ids,
                mask,
                CacheMemory.from_states(cache),
                size=self.config.neural_cache_size,
                theta=self.config.neural_cache_theta,
                lam=self.config.neural_cache_lambda,
            )

        loss = None
        if labels is not None:
            loss = self.loss_function(
                logits=logits,
                labels=labels,
                vocab_size=self.config.vocab_size,
                num_items_in_batch=kwargs.get("num_items_in_batch"),
            )
        if use_cache:
            states = {"h": state[0], "c": state[1]} if isinstance(state, tuple) else {"h": state}
            cache.batch_dims.update(dict.fromkeys(states, 1))
            if memory is not None:
                states.update(memory.as_states())
            cache.update_states(seq_len, **states)
        else:
            cache = None
        hidden_states = (embeds, *outputs) if output_hidden_states else None
        if not return_dict:
            return tuple(v for v in (loss, logits, cache, hidden_states) if v is not None)
        return CharRNNOutput(loss=loss, logits=logits, cache=cache, hidden_states=hidden_states)


__all__ = [
    "CharRNNForCausalLM",
    "CharRNNOutput",
    "CharRNNPreTrainedModel",
    "detach_state",
    "state_tensors",
    "to_cache",
]
