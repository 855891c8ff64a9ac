"""RNN encoder-decoders with and without attention (Sutskever / Cho, Bahdanau et al. 2015,
Luong et al. 2015).

``BahdanauForConditionalGeneration`` is a ``PreTrainedModel`` + ``GenerationMixin`` laid out
as BART: ``model.encoder`` (embeddings → (bi)GRU/LSTM layers over the real tokens → bridge),
``model.decoder`` (GRU/LSTM layers with Bahdanau, Luong or no attention over the encoder
outputs) and ``lm_head``.

- Encoder: padded positions never change a real token's annotation or the final state (the
  fused kernel over the padded width, each row reversed within its length and its final state
  taken at its last token; skipped step by step under ``torch.compile`` / ``torch.export``),
  so a sentence's annotations are the same padded in a batch or alone. Sources must be
  right-padded (checked where reading the mask on the host costs nothing, i.e. on the CPU; on
  CUDA the encoder reads nothing on the host, see :func:`~.rnn_layers.reads_stall`).
- Bahdanau: ``c_t = Σ_j α_tj h_j``, ``α_t = p(a(s_{t-1}, h_j))``, ``s_t = cell([E y_{t-1};
  c_t], s_{t-1})``, readout ``[s_t; c_t]``. The keys' share of the score (``W_k h_j``) is
  computed once per source, not once per step.
- Luong: ``h_t = cell(E y_{t-1} [; h̃_{t-1}], h_{t-1})``, ``c_t = Σ_j α_tj h̄_j`` with
  ``α_t = p(a(h_t, h̄_j))``, ``h̃_t = tanh(W_c [c_t; h_t])``, readout ``h̃_t``.
- Without attention and for Luong without input feeding, teacher forcing runs each decoder
  layer once over the whole target and the attention as one batched score over all steps;
  a step loop is used only where the recurrence needs the context.
- The decoder state (``h``, ``c``, ``h̃``, precomputed keys) is the generation cache, a
  :class:`~.recurrent_cache.RecurrentCache`: each generated token costs one decoder step.
- The transformers contracts: ``output_attentions`` / ``output_hidden_states`` from the
  argument, else the config; ``return_dict=False`` (argument or config) gives tuples at every
  level; ``output_hidden_states`` gives the embeddings and every layer's outputs (as Bart);
  ``inputs_embeds`` / ``decoder_inputs_embeds``; gradient checkpointing per layer
  (:class:`~.rnn_layers.RecurrentLayer` is a ``GradientCheckpointingLayer``);
  ``torch.export`` and ``torch.compile(fullgraph=True)`` trace the forward.

Only torch, transformers and sibling modules are imported here: ``save_pretrained`` copies
this file (and its siblings) next to the weights for ``trust_remote_code`` loading.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput, Seq2SeqModelOutput
from transformers.utils import can_return_tuple
from transformers.utils.deprecation import deprecate_kwarg

from .attention import Attention
from .configuration_bahdanau import BahdanauConfig
from .masking import padding_mask
from .recurrent_cache import RecurrentCache, RecurrentCacheModelMixin
from .rnn_layers import (
    init_recurrent_model_weights,
    reads_stall,
    recurrent_layers,
    stack_states,
)
from .seq2seq_utils import (
    ConfigTiedWeightsMixin,
    EncoderDecoderEmbeddingsMixin,
    Seq2SeqLMAccessorsMixin,
    resolve_output_flags,
    seq2seq_lm_output,
    shift_tokens_right,
)


def residual(
    config: BahdanauConfig, index: int, output: torch.Tensor, below: torch.Tensor
) -> torch.Tensor:
    """The output of stacked layer ``index``: ``RNN_l(x_{l-1}) + x_{l-1}`` above the first
    layer when ``config.residual_connections`` (Wu et al. 2016), else ``RNN_l(x_{l-1})``."""
    return output + below if index > 0 and config.residual_connections else output


@dataclass
class BahdanauEncoderOutput(BaseModelOutput):
    """Encoder outputs plus the decoder's initial state, all batch-first (so that
    ``generate`` can expand them with ``repeat_interleave`` on dim 0).

    Args:
        last_hidden_state: annotations ``h_j = [h→_j; h←_j]`` ``[batch, src_len, annotation]``
            (zeros at padded positions).
        hidden_states: with ``output_hidden_states``, ``encoder_layers + 1`` tensors: the
            embeddings ``[batch, src_len, embedding_dim]``, then every layer's outputs
            ``[batch, src_len, annotation]`` (before dropout; the last one is the annotations).
        decoder_initial_hidden: ``s_0`` ``[batch, decoder_layers, decoder_hidden]``.
        decoder_initial_cell: the LSTM's ``c_0``, same shape (``None`` for a GRU).
    """

    decoder_initial_hidden: torch.Tensor | None = None
    decoder_initial_cell: torch.Tensor | None = None


@dataclass
class BahdanauDecoderOutput(BaseModelOutput):
    """Decoder readout ``o_t`` ``[batch, tgt_len, readout]`` (``last_hidden_state``), the state
    after the last step (``state``: names → batch-first tensors) and, when asked, the
    alignment ``α`` ``[batch, 1, tgt_len, src_len]`` (``attentions``, one head) and
    ``decoder_layers + 1`` ``hidden_states``: the target embeddings
    ``[batch, tgt_len, embedding_dim]``, then every layer's outputs
    ``[batch, tgt_len, decoder_hidden]`` (``s_t`` of that layer at each step)."""

    state: dict | None = None


class BahdanauPreTrainedModel(ConfigTiedWeightsMixin, RecurrentCacheModelMixin, PreTrainedModel):
    """Weight initialisation, tied-weight bookkeeping and HF plumbing of the family (the
    decoder state is the generation cache: :class:`~.recurrent_cache.RecurrentCacheModelMixin`).

    Gradient checkpointing recomputes one :class:`~.rnn_layers.RecurrentLayer` at a time: every
    encoder layer, and the decoder layers where teacher forcing runs them in one pass (see
    :class:`BahdanauDecoder` for the step loop)."""

    config_class = BahdanauConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    _no_split_modules = []
    supports_gradient_checkpointing = True

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """Glorot-uniform linears (Keras' ``Dense`` default) with zero biases; Xavier input and
        orthogonal recurrent matrices with zero biases for every RNN cell; embeddings
        ``N(0, 1)`` (``N(0, 1/embedding_dim)`` when tied to the output layer).

        The usual transformers ``N(0, 0.02)`` leaves an RNN encoder-decoder with annotations,
        keys and attention energies near zero: the score's gradients fall below Adam's epsilon
        and a Luong model stays at the unigram loss (measured on the date-normalisation task).
        """
        tied = getattr(self.config, "tie_word_embeddings", False)
        if not init_recurrent_model_weights(module, tied=tied):
            super()._init_weights(module)


class BahdanauEncoder(BahdanauPreTrainedModel):
    r"""Embeddings → (bi)GRU/LSTM layers over the real tokens only → bridge to the decoder state.

    .. math:: h→_j = \mathrm{cell}(E x_j, h→_{j-1}),\quad h←_j = \mathrm{cell}(E x_j, h←_{j+1}),
              \quad h_j = [h→_j; h←_j]

    Each layer is a :class:`~.rnn_layers.RecurrentLayer` (both directions), with dropout on
    the embeddings, between layers and on the annotations. Bridge: ``concat`` gives decoder
    layer ``l`` the state ``[h→_T; h←_1]`` of encoder layer ``l`` (and the same for ``c``);
    ``projection`` gives ``s_0 = tanh(W [h→_T; h←_1])`` of the top layer reshaped to
    ``[decoder_layers, decoder_hidden]``; ``zeros`` gives zeros.
    """

    def __init__(self, config: BahdanauConfig, embed_tokens: nn.Embedding | None = None):
        super().__init__(config)
        self.embed_tokens = embed_tokens or nn.Embedding(config.vocab_size, config.embedding_dim)
        self.dropout = nn.Dropout(config.dropout)
        self.layers = recurrent_layers(
            config.cell,
            config.embedding_dim,
            config.encoder_hidden_size,
            config.encoder_layers,
            bidirectional=config.bidirectional,
        )
        if config.bridge == "projection":
            out = config.decoder_layers * config.decoder_hidden_size
            self.bridge_hidden = nn.Linear(config.annotation_size, out)
            self.bridge_cell = (
                nn.Linear(config.annotation_size, out) if config.cell == "lstm" else None
            )
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embed_tokens

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embed_tokens = value

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> BahdanauEncoderOutput:
        """Encode ``input_ids`` ``[batch, src_len]`` (or ``inputs_embeds`` ``[batch, src_len,
        embedding_dim]``; right-padded, ``attention_mask`` 1 = token).

        Returns annotations ``[batch, src_len, hidden × directions]`` (zeros at padding), the
        decoder's initial state and, with ``output_hidden_states`` (default
        ``config.output_hidden_states``), the embeddings and every layer's outputs (see
        :class:`BahdanauEncoderOutput`). ``return_dict=False`` returns the tuple of its
        non-``None`` fields.
        """
        _, output_hidden_states = resolve_output_flags(self.config, None, output_hidden_states)
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("Pass exactly one of input_ids or inputs_embeds")
        embeds = self.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds
        batch, src_len = embeds.shape[:2]
        if src_len > self.config.max_source_positions:
            raise ValueError(
                f"input_ids has {src_len} positions but max_source_positions is "
                f"{self.config.max_source_positions}"
            )
        if attention_mask is not None and not reads_stall(attention_mask.device):
            # The check reads the mask on the host: done only where that costs nothing (CPU,
            # eager). On CUDA (and when compiled) the sources are taken to be right-padded, as
            # hfattn's batchers and translation inference pad them (`pad_pairs` /
            # `pad_sources` of hfattn.batching.seq2seq), and no read stalls the step.
            keep = attention_mask != 0
            if bool((keep[:, 1:] & ~keep[:, :-1]).any()):
                raise ValueError(
                    "attention_mask: the encoder needs right-padded sources (1s then 0s per row)"
                )
        hidden_states = [embeds] if output_hidden_states else None
        finals = []
        x = self.dropout(embeds)
        for i, layer in enumerate(self.layers):
            below = x
            if i > 0:
                x = self.dropout(x)
            x, *final = layer(x, mask=attention_mask, right_padded=True)
            x = residual(self.config, i, x, below)
            finals.append(final)
            if output_hidden_states:
                hidden_states.append(x)
        hidden, *cell = stack_states(finals)  # [layers × directions, batch, hidden]
        init_h, init_c = self._bridge(hidden, cell[0] if cell else None, batch)
        return BahdanauEncoderOutput(
            last_hidden_state=self.dropout(x),
            hidden_states=tuple(hidden_states) if output_hidden_states else None,
            decoder_initial_hidden=init_h,
            decoder_initial_cell=init_c,
        )

    def _by_layer(self, state: torch.Tensor) -> torch.Tensor:
        """``[layers × directions, batch, hidden]`` → ``[batch, layers, directions × hidden]``."""
        c = self.config
        state = state.view(
            c.encoder_layers, c.num_directions, state.shape[1], c.encoder_hidden_size
        )
        return state.permute(2, 0, 1, 3).reshape(state.shape[2], c.encoder_layers, -1)

    def _bridge(
        self, hidden: torch.Tensor, cell: torch.Tensor | None, batch: int
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        c = self.config
        if c.bridge == "zeros":
            zeros = hidden.new_zeros(batch, c.decoder_layers, c.decoder_hidden_size)
            return zeros, (zeros.clone() if cell is not None else None)
        hidden = self._by_layer(hidden)
        cell = None if cell is None else self._by_layer(cell)
        if c.bridge == "concat":
            return hidden, cell
        shape = (batch, c.decoder_layers, c.decoder_hidden_size)
        init_h = torch.tanh(self.bridge_hidden(hidden[:, -1])).view(shape)
        init_c = None if cell is None else torch.tanh(self.bridge_cell(cell[:, -1])).view(shape)
        return init_h, init_c


class BahdanauDecoder(BahdanauPreTrainedModel):
    r"""GRU/LSTM decoder with Bahdanau, Luong or no attention; produces the readout ``o_t``.

    - none: ``s_t = cell(E y_{t-1}, s_{t-1})``, ``o_t = s_t``.
    - bahdanau (Bahdanau et al. 2015): ``c_t = Σ_j α_tj h_j``, ``α_t = p(a(s_{t-1}, h_·))``,
      ``s_t = cell([E y_{t-1}; c_t], s_{t-1})``, ``o_t = [s_t; c_t]``.
    - luong (Luong et al. 2015): ``h_t = cell(E y_{t-1} [; h̃_{t-1}], h_{t-1})``,
      ``α_t = p(a(h_t, h̄_·))``, ``c_t = Σ_j α_tj h̄_j``, ``o_t = h̃_t = tanh(W_c [c_t; h_t])``.

    Queries are the top layer's hidden state; ``p`` and ``a`` are any distribution / score.
    Each layer is a :class:`~.rnn_layers.RecurrentLayer` with dropout between layers. Gradient
    checkpointing recomputes the layers where teacher forcing runs them in one pass (no
    attention, Luong without input feeding); the step loop (Bahdanau attention, input
    feeding) is not checkpointed, since its layers run one token at a time and a checkpoint
    per token would keep about as much (the step's input and state) as it frees.
    """

    def __init__(self, config: BahdanauConfig, embed_tokens: nn.Embedding | None = None):
        super().__init__(config)
        self.embed_tokens = embed_tokens or nn.Embedding(config.vocab_size, config.embedding_dim)
        self.dropout = nn.Dropout(config.dropout)
        hidden, annotation = config.decoder_hidden_size, config.annotation_size
        self.attention = None
        self.combine = None
        input_size = config.embedding_dim
        if config.attention is not None:
            self.attention = Attention(
                hidden,
                annotation,
                score=config.attention_score,
                distribution=config.distribution,
                **config.attention_score_kwargs(),
            )
        if config.attention == "bahdanau":
            input_size += annotation
            self.readout_size = hidden + annotation
        elif config.attention == "luong":
            self.combine = nn.Linear(annotation + hidden, hidden, bias=False)
            if config.input_feeding:
                input_size += hidden
            self.readout_size = hidden
        else:
            self.readout_size = hidden
        self.layers = recurrent_layers(config.cell, input_size, hidden, config.decoder_layers)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embed_tokens

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embed_tokens = value

    @property
    def one_pass(self) -> bool:
        """True when teacher forcing needs no step loop (no attention, or Luong without
        input feeding: the recurrence does not depend on the context)."""
        return self.config.attention is None or (
            self.config.attention == "luong" and not self.config.input_feeding
        )

    def initial_state(self, encoder_outputs: BahdanauEncoderOutput) -> dict[str, torch.Tensor]:
        """The state before the first target token: bridge output, ``h̃_0 = 0`` (input feeding)
        and the precomputed keys ``precompute_keys(h_·)``."""
        state = {"h": encoder_outputs.decoder_initial_hidden}
        if encoder_outputs.decoder_initial_cell is not None:
            state["c"] = encoder_outputs.decoder_initial_cell
        if self.config.input_feeding:
            h = state["h"]
            state["feed"] = h.new_zeros(h.shape[0], self.config.decoder_hidden_size)
        if self.attention is not None:
            state["keys"] = self.attention.precompute_keys(encoder_outputs.last_hidden_state)
        return state

    def _rnn_state(self, state: dict):
        """Batch-first ``h`` (``c``) → the stacked layout ``[layers, batch, hidden]``."""
        h = state["h"].transpose(0, 1).contiguous()
        if "c" in state:
            return h, state["c"].transpose(0, 1).contiguous()
        return h

    @staticmethod
    def _batch_first(rnn_state) -> dict[str, torch.Tensor]:
        if isinstance(rnn_state, tuple):
            return {"h": rnn_state[0].transpose(0, 1), "c": rnn_state[1].transpose(0, 1)}
        return {"h": rnn_state.transpose(0, 1)}

    def _unstack(self, rnn_state) -> list:
        """``[layers, batch, hidden]`` state(s) → one ``h`` or ``(h, c)`` per layer."""
        if isinstance(rnn_state, tuple):
            return list(zip(rnn_state[0].unbind(0), rnn_state[1].unbind(0), strict=True))
        return list(rnn_state.unbind(0))

    @staticmethod
    def _restack(layers: list):
        if isinstance(layers[0], tuple):
            return torch.stack([h for h, _ in layers]), torch.stack([c for _, c in layers])
        return torch.stack(layers)

    def _step(self, x: torch.Tensor, layers: list) -> tuple[torch.Tensor, list]:
        """One time step of every layer with its fused one-step kernel (``torch.lstm_cell`` /
        ``torch.gru_cell``, several times faster than a sequence kernel on a length-1 input);
        ``layers`` holds one ``h`` or ``(h, c)`` ``[batch, hidden]`` per layer. Dropout between
        layers."""
        new_layers = []
        for index, (layer, state) in enumerate(zip(self.layers, layers, strict=True)):
            below = x
            if index > 0:
                x = self.dropout(x)
            new = layer.cell(x, state if isinstance(state, tuple) else (state,))
            new_layers.append(new if len(new) == 2 else new[0])
            x = residual(self.config, index, new[0], below)
        return x, new_layers

    def _one_pass(self, x: torch.Tensor, rnn_state) -> tuple[list[torch.Tensor], object]:
        """Every layer over the whole target (fused kernel); returns each layer's outputs and
        the final stacked state."""
        states = rnn_state if isinstance(rnn_state, tuple) else (rnn_state,)
        outputs, finals = [], []
        for i, layer in enumerate(self.layers):
            below = x
            if i > 0:
                x = self.dropout(x)
            x, *final = layer(x, *(s[i : i + 1] for s in states))
            x = residual(self.config, i, x, below)
            outputs.append(x)
            finals.append(final)
        final = stack_states(finals)
        return outputs, final if len(final) == 2 else final[0]

    def _attend(self, query, annotations, keys, keep):
        """Attend from ``query [batch, T, q]`` to the annotations ``[batch, src_len, a]``;
        returns ``(context [batch, T, a], α [batch, 1, T, src_len])``.

        The attention runs with a head axis of one, so that ``α`` is returned as the tensor
        that multiplied the annotations (it carries gradients, as transformers' attention
        maps do) rather than as a reshaped copy."""
        context, weights = self.attention(
            query[:, None],
            annotations[:, None],
            annotations[:, None],
            None if keep is None else keep[:, None],
            precomputed_keys=None if keys is None else keys[:, None],
        )
        return context[:, 0], weights

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        state: dict[str, torch.Tensor] | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        step_by_step: bool = False,
        **kwargs,
    ) -> BahdanauDecoderOutput:
        """Run the decoder over ``input_ids`` ``[batch, tgt_len]`` (or ``inputs_embeds``
        ``[batch, tgt_len, embedding_dim]``) from ``state``.

        Args:
            encoder_hidden_states: annotations ``[batch, src_len, annotation]``.
            state: batch-first ``h`` (``c``, ``feed``, ``keys``) from :meth:`initial_state` or
                from the previous call.
            encoder_attention_mask: ``[batch, src_len]``, 0 = padding (masked out of the
                attention).
            output_attentions / output_hidden_states: default to the config's (see
                :class:`BahdanauDecoderOutput`).
            return_dict: ``False`` (default ``config.return_dict``) returns a tuple.
            step_by_step: force the step loop even where one pass suffices (for checks).
        """
        output_attentions, output_hidden_states = resolve_output_flags(
            self.config, output_attentions, output_hidden_states
        )
        if encoder_hidden_states is None or state is None:
            raise ValueError(
                "the decoder needs encoder_hidden_states and its state (initial_state(...))"
            )
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("Pass exactly one of input_ids or inputs_embeds")
        embeds = self.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds
        x = self.dropout(embeds)
        keep = None
        if encoder_attention_mask is not None and self.attention is not None:
            keep = padding_mask(encoder_attention_mask, ndim=3)  # [batch, 1, src_len]
        keys = state.get("keys")
        rnn_state = self._rnn_state(state)
        weights = None
        new_state = {}
        if self.one_pass and not step_by_step:
            layer_outputs, rnn_state = self._one_pass(x, rnn_state)
            outputs = readout = layer_outputs[-1]
            if self.attention is not None:  # Luong without input feeding
                context, weights = self._attend(outputs, encoder_hidden_states, keys, keep)
                readout = torch.tanh(self.combine(torch.cat([context, outputs], -1)))
        else:
            readouts, all_weights = [], []
            steps = [] if output_hidden_states else None
            feed = state.get("feed")
            layers = self._unstack(rnn_state)
            for t in range(x.shape[1]):
                x_t = x[:, t]
                if self.config.attention == "bahdanau":
                    top = layers[-1][0] if isinstance(layers[-1], tuple) else layers[-1]
                    context, w = self._attend(top[:, None], encoder_hidden_states, keys, keep)
                    context = context[:, 0]
                    out_t, layers = self._step(torch.cat([x_t, context], -1), layers)
                    o_t = torch.cat([out_t, context], -1)
                else:
                    if feed is not None:
                        x_t = torch.cat([x_t, feed], -1)
                    out_t, layers = self._step(x_t, layers)
                    o_t, w = out_t, None
                    if self.attention is not None:
                        context, w = self._attend(out_t[:, None], encoder_hidden_states, keys, keep)
                        o_t = torch.tanh(self.combine(torch.cat([context[:, 0], out_t], -1)))
                        if feed is not None:
                            feed = o_t
                readouts.append(o_t)
                if w is not None:
                    all_weights.append(w)
                if steps is not None:
                    steps.append([s[0] if isinstance(s, tuple) else s for s in layers])
            readout = torch.stack(readouts, 1)
            # One step (a decoding step of generate) returns its own map; several steps are
            # assembled here, after the loop: a copy, since each step's weights fed the next
            # step's recurrence before the later steps existed.
            weights = (
                torch.cat(all_weights, 2) if len(all_weights) > 1 else next(iter(all_weights), None)
            )
            rnn_state = self._restack(layers)
            layer_outputs = None
            if steps is not None:
                layer_outputs = [
                    torch.stack(per_layer, 1) for per_layer in zip(*steps, strict=True)
                ]
            if feed is not None:
                new_state["feed"] = feed
        if self.config.input_feeding and "feed" not in new_state:
            new_state["feed"] = state.get("feed")
        new_state.update(self._batch_first(rnn_state))
        if keys is not None:
            new_state["keys"] = keys
        return BahdanauDecoderOutput(
            last_hidden_state=self.dropout(readout),
            hidden_states=(embeds, *layer_outputs) if output_hidden_states else None,
            attentions=weights if output_attentions else None,
            state=new_state,
        )


class BahdanauModel(EncoderDecoderEmbeddingsMixin, BahdanauPreTrainedModel):
    """Encoder + decoder without the output layer (BART's ``BartModel``); returns the
    decoder readout as ``last_hidden_state``."""

    def __init__(self, config: BahdanauConfig):
        super().__init__(config)
        if config.share_encoder_decoder_embeddings:
            shared = nn.Embedding(config.vocab_size, config.embedding_dim)
            self.encoder = BahdanauEncoder(config, shared)
            self.decoder = BahdanauDecoder(
                config, nn.Embedding(config.vocab_size, config.embedding_dim)
            )
        else:
            self.encoder = BahdanauEncoder(config)
            self.decoder = BahdanauDecoder(config)
        self.post_init()

    @can_return_tuple
    @deprecate_kwarg("past_key_values", version="6.0.0", new_name="cache")
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        encoder_outputs: BahdanauEncoderOutput | tuple | None = None,
        cache: RecurrentCache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        step_by_step: bool = False,
        **kwargs,
    ) -> Seq2SeqModelOutput | tuple:
        """Encode (unless ``encoder_outputs`` are given), then decode ``decoder_input_ids`` (or
        ``decoder_inputs_embeds``) from the cached state or from the bridge. See
        :meth:`BahdanauForConditionalGeneration.forward`; ``return_dict=False`` (default
        ``config.return_dict``) returns ``Seq2SeqModelOutput.to_tuple()``."""
        output_attentions, output_hidden_states = resolve_output_flags(
            self.config, output_attentions, output_hidden_states
        )
        use_cache = self.config.use_cache if use_cache is None else use_cache
        if decoder_input_ids is None and decoder_inputs_embeds is None:
            raise ValueError("decoder_input_ids, decoder_inputs_embeds or labels are required")
        if encoder_outputs is None:
            encoder_outputs = self.encoder(
                input_ids=input_ids,
                attention_mask=attention_mask,
                inputs_embeds=inputs_embeds,
                output_hidden_states=output_hidden_states,
                return_dict=True,
            )
        elif not isinstance(encoder_outputs, BahdanauEncoderOutput):
            encoder_outputs = _encoder_output_from(encoder_outputs)
        if cache is not None and not isinstance(cache, RecurrentCache):
            raise TypeError(
                "cache must be the RecurrentCache returned by this model; got "
                f"{type(cache).__name__}"
            )
        if cache is None or cache.is_empty:
            state = self.decoder.initial_state(encoder_outputs)
        else:
            state = dict(cache.states)
        decoded = self.decoder(
            decoder_input_ids,
            encoder_outputs.last_hidden_state,
            state,
            encoder_attention_mask=attention_mask,
            inputs_embeds=decoder_inputs_embeds,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            return_dict=True,
            step_by_step=step_by_step,
        )
        if use_cache:
            cache = cache if cache is not None else RecurrentCache()
            cache.update_states(decoded.last_hidden_state.shape[1], **decoded.state)
        weights = decoded.attentions
        return Seq2SeqModelOutput(
            last_hidden_state=decoded.last_hidden_state,
            cache=cache if use_cache else None,
            decoder_hidden_states=decoded.hidden_states,
            cross_attentions=(weights,) if weights is not None else None,
            encoder_last_hidden_state=encoder_outputs.last_hidden_state,
            encoder_hidden_states=encoder_outputs.hidden_states,
        )


def _encoder_output_from(outputs) -> BahdanauEncoderOutput:
    """Accept the encoder's output as a tuple (``BahdanauEncoderOutput.to_tuple()``: the
    annotations, the hidden states when returned, then the decoder's initial state) or as a
    plain ``BaseModelOutput`` / dict too."""
    if isinstance(outputs, (tuple, list)):
        fields: dict = {"last_hidden_state": outputs[0]}
        rest = list(outputs[1:])
        if rest and isinstance(rest[0], (tuple, list)):
            fields["hidden_states"] = tuple(rest.pop(0))
        fields.update(zip(["decoder_initial_hidden", "decoder_initial_cell"], rest, strict=False))
        return BahdanauEncoderOutput(**fields)
    return BahdanauEncoderOutput(**{k: v for k, v in outputs.items()})


class BahdanauForConditionalGeneration(
    Seq2SeqLMAccessorsMixin, BahdanauPreTrainedModel, GenerationMixin
):
    r"""RNN encoder-decoder with an output layer over the readout ``o_t``:

    .. math:: p(y_t \mid y_{<t}, x) = \mathrm{softmax}(W_o\, o_t + b_o)

    With ``tie_word_embeddings`` ``W_o`` is the decoder embedding matrix, applied after a
    bias-free projection ``o_t → embedding_dim`` when the sizes differ. Training loss:
    token cross-entropy with ``-100`` ignored (label-smoothed by ``config.label_smoothing``,
    see :func:`~.seq2seq_utils.token_cross_entropy`), summed and divided by ``num_items_in_batch``
    when the Trainer passes it (exact gradient accumulation), else averaged.
    """

    def __init__(self, config: BahdanauConfig):
        super().__init__(config)
        self.model = BahdanauModel(config)
        readout = self.model.decoder.readout_size
        tied = config.tie_word_embeddings
        self.output_projection = (
            nn.Linear(readout, config.embedding_dim, bias=False)
            if tied and readout != config.embedding_dim
            else None
        )
        self.lm_head = nn.Linear(config.embedding_dim if tied else readout, config.vocab_size)
        self.post_init()

    @can_return_tuple
    @deprecate_kwarg("past_key_values", version="6.0.0", new_name="cache")
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.LongTensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: BahdanauEncoderOutput | tuple | None = None,
        cache: RecurrentCache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        num_items_in_batch: int | torch.Tensor | None = None,
        step_by_step: bool = False,
        **kwargs,
    ) -> Seq2SeqLMOutput | tuple:
        r"""Next-token logits for every target position, and the loss when ``labels`` are given.

        Args:
            input_ids: source ids ``[batch, src_len]``, right-padded.
            attention_mask: ``[batch, src_len]``, 1 = token, 0 = padding.
            decoder_input_ids: ``[batch, tgt_len]``; default ``shift_tokens_right(labels)``.
            decoder_attention_mask: ignored (the decoder is causal; padding comes last).
            encoder_outputs: reuse an encoder pass (``generate`` does).
            cache: the :class:`RecurrentCache` returned by the previous call.
            inputs_embeds / decoder_inputs_embeds: instead of the ids, their embeddings
                ``embed_tokens(ids)`` ``[batch, len, embedding_dim]`` (the same outputs).
            labels: ``[batch, tgt_len]`` targets, ``-100`` ignored.
            use_cache: return the decoder state as ``cache`` (default
                ``config.use_cache``).
            num_items_in_batch: number of target tokens in the whole (accumulated) batch; the
                loss is then ``Σ CE / num_items_in_batch``.
            output_attentions: return ``cross_attentions = (α,)`` with ``α`` ``[batch, 1,
                tgt_len, src_len]`` (one head); default ``config.output_attentions``.
            output_hidden_states: return ``encoder_hidden_states`` (``encoder_layers + 1``
                tensors: the source embeddings, then every encoder layer's outputs
                ``[batch, src_len, annotation]``) and ``decoder_hidden_states``
                (``decoder_layers + 1``: the target embeddings, then every decoder layer's
                per-step outputs ``[batch, tgt_len, decoder_hidden]``), as Bart's; default
                ``config.output_hidden_states``.
            return_dict: ``False`` (default ``config.return_dict``) returns
                ``Seq2SeqLMOutput.to_tuple()`` (the non-``None`` fields, loss first).
            step_by_step: force the decoder's step loop (one pass is used where possible).
        """
        if labels is not None and decoder_input_ids is None and decoder_inputs_embeds is None:
            decoder_input_ids = self.prepare_decoder_input_ids_from_labels(labels)
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            encoder_outputs=encoder_outputs,
            cache=cache,
            inputs_embeds=inputs_embeds,
            decoder_inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            return_dict=True,
            step_by_step=step_by_step,
        )
        readout = outputs.last_hidden_state
        if self.output_projection is not None:
            readout = self.output_projection(readout)
        logits = self.lm_head(readout)
        return seq2seq_lm_output(
            logits, outputs, labels, num_items_in_batch, self.config.label_smoothing
        )


__all__ = [
    "BahdanauDecoder",
    "BahdanauEncoder",
    "BahdanauEncoderOutput",
    "BahdanauForConditionalGeneration",
    "BahdanauModel",
    "BahdanauPreTrainedModel",
    "shift_tokens_right",
]
