"""Character-level recurrent language model (Géron HOML ch. 16, Karpathy's char-rnn).

``CharRNNForCausalLM`` is a ``PreTrainedModel`` + ``GenerationMixin``: the recurrent state is
the generation cache (``past_key_values``), so every new character costs one RNN step instead
of a re-run over the whole text. The same state, carried between batches and detached, gives
stateful (truncated-BPTT) training.

Only torch, transformers and sibling modules are imported here: ``save_pretrained`` copies
this file next to the weights for ``trust_remote_code`` loading.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers import initialization as init
from transformers.modeling_outputs import CausalLMOutputWithPast

from .configuration_char_rnn import CharRNNConfig

RecurrentState = torch.Tensor | tuple[torch.Tensor, torch.Tensor]
"""``h`` of shape [num_layers, batch, hidden] (GRU / RNN) or the pair ``(h, c)`` (LSTM)."""

_CELLS = {"gru": nn.GRU, "lstm": nn.LSTM, "rnn": nn.RNN}


def map_state(state: RecurrentState, fn) -> RecurrentState:
    """Apply ``fn`` to every tensor of a recurrent state (a tensor or an LSTM ``(h, c)`` pair)."""
    if isinstance(state, tuple):
        return tuple(fn(t) for t in state)
    return fn(state)


def detach_state(state: RecurrentState | None) -> RecurrentState | None:
    """Cut the autograd graph at a batch boundary (truncated BPTT for stateful training)."""
    return None if state is None else map_state(state, torch.Tensor.detach)


@dataclass
class CharRNNOutput(CausalLMOutputWithPast):
    """:class:`~transformers.modeling_outputs.CausalLMOutputWithPast` whose ``past_key_values``
    is the recurrent state after the last input character (see :data:`RecurrentState`)."""


class CharRNNPreTrainedModel(PreTrainedModel):
    """Weight initialisation and HF plumbing shared by char-RNN models."""

    config_class = CharRNNConfig
    base_model_prefix = "char_rnn"
    main_input_name = "input_ids"
    # The recurrent state is the cache: generate() must not build a DynamicCache, and beam
    # search reorders it through `_reorder_cache`.
    _is_stateful = True
    _no_split_modules = []

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        return False

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """Normal(0, initializer_range) embeddings/linears; Xavier input and orthogonal recurrent
        matrices with zero biases for every RNN cell (the base class only knows ``nn.LSTM``)."""
        if isinstance(module, nn.RNNBase):
            for name, param in module.named_parameters():
                if name.startswith("weight_ih"):
                    init.xavier_uniform_(param)
                elif name.startswith("weight_hh"):
                    init.orthogonal_(param)
                else:
                    init.zeros_(param)
        else:
            super()._init_weights(module)


class CharRNNForCausalLM(CharRNNPreTrainedModel, GenerationMixin):
    r"""Embedding → stacked GRU/LSTM/RNN → linear head, trained to predict the next character.

    .. math:: h_t = \mathrm{cell}(E[x_t], h_{t-1}),\qquad p(x_{t+1}\mid x_{\le t}) =
              \mathrm{softmax}(W h_t + b)

    With ``tie_word_embeddings`` the output matrix is ``E`` itself and ``h_t`` is first projected
    to ``embedding_dim`` when the sizes differ.
    """

    def __init__(self, config: CharRNNConfig):
        super().__init__(config)
        self.embeddings = nn.Embedding(config.vocab_size, config.embedding_dim)
        self.dropout = nn.Dropout(config.dropout)
        self.rnn = _CELLS[config.cell](
            input_size=config.embedding_dim,
            hidden_size=config.hidden_size,
            num_layers=config.num_layers,
            dropout=config.dropout if config.num_layers > 1 else 0.0,
            batch_first=True,
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

    def _run_rnn(
        self, embeds: torch.Tensor, state: RecurrentState | None, mask: torch.Tensor | None
    ) -> tuple[torch.Tensor, RecurrentState]:
        """Run the stacked cell. Where ``mask`` has zeros (padding, e.g. left-padded prompts),
        step one position at a time and keep the previous state at masked positions, so pad
        tokens never change the state: ``h_t = m_t·cell(x_t, h_{t-1}) + (1−m_t)·h_{t-1}``."""
        if mask is None or bool(mask.all()):
            return self.rnn(embeds, state)
        if state is None:
            state = self.initial_state(embeds.shape[0])
        outputs = []
        for t in range(embeds.shape[1]):
            out_t, new_state = self.rnn(embeds[:, t : t + 1], state)
            keep = mask[:, t].to(embeds.dtype)
            state = _blend_state(new_state, state, keep)
            outputs.append(out_t * keep[:, None, None])
        return torch.cat(outputs, dim=1), state

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        past_key_values: RecurrentState | None = None,
        labels: torch.LongTensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> CharRNNOutput | tuple:
        r"""Next-character logits for every position, the loss when ``labels`` are given, and the
        final recurrent state when ``use_cache``.

        Args:
            input_ids: [batch, seq] character ids (or ``inputs_embeds`` [batch, seq, embedding_dim]).
            attention_mask: [batch, seq] or [batch, past+seq] (1 = real token). Only the last
                ``seq`` columns are used; zeros make the state skip those positions.
            past_key_values: the state returned by the previous call (``None`` = zeros).
            labels: [batch, seq] targets, ``-100`` ignored. As in every HF causal LM they are the
                inputs themselves; the shift happens here: loss = CE(logits[:, :-1], labels[:, 1:]).
        """
        use_cache = self.config.use_cache if use_cache is None else use_cache
        return_dict = self.config.return_dict if return_dict is None else return_dict
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("Pass exactly one of input_ids or inputs_embeds")
        embeds = self.embeddings(input_ids) if inputs_embeds is None else inputs_embeds
        seq_len = embeds.shape[1]
        mask = None if attention_mask is None else attention_mask[:, -seq_len:]
        hidden, state = self._run_rnn(self.dropout(embeds), past_key_values, mask)
        hidden = self.dropout(hidden)
        if self.output_projection is not None:
            hidden = self.output_projection(hidden)
        logits = self.lm_head(hidden)

        loss = None
        if labels is not None:
            loss = nn.functional.cross_entropy(
                logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
                labels[:, 1:].reshape(-1).to(logits.device),
                ignore_index=-100,
            )
        state = state if use_cache else None
        if not return_dict:
            return tuple(v for v in (loss, logits, state) if v is not None)
        return CharRNNOutput(loss=loss, logits=logits, past_key_values=state)

    def _reorder_cache(self, past_key_values: RecurrentState, beam_idx: torch.LongTensor):
        """Beam search: pick the state of each surviving beam (batch dim is 1)."""
        return map_state(past_key_values, lambda t: t.index_select(1, beam_idx.to(t.device)))


def _blend_state(new: RecurrentState, old: RecurrentState, keep: torch.Tensor) -> RecurrentState:
    """``keep·new + (1−keep)·old`` per tensor of the state, ``keep`` [batch] broadcast over
    [layers, batch, hidden]."""
    k = keep[None, :, None]
    if isinstance(new, tuple):
        return tuple(k * n + (1 - k) * o for n, o in zip(new, old, strict=True))
    return k * new + (1 - k) * old


__all__ = ["CharRNNForCausalLM", "CharRNNOutput", "CharRNNPreTrainedModel", "detach_state"]
