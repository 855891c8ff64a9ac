"""Recurrent text classifier: the IMDb models of Géron (HOML ch. 16) and Chollet (DLwP ch. 11).

``RNNForSequenceClassification`` embeds the tokens (optionally with frozen pretrained vectors,
Chollet's GloVe model), reads the real tokens only with a (bi)GRU/LSTM (the padding that
Géron's and Chollet's Keras ``mask_zero=True`` skips is never read, so a padded text gets the
logits it gets alone), pools the outputs (final states or attention) and classifies them.

The RNN is one :class:`~.rnn_layers.RecurrentLayer` per layer (``rnn.0``, ``rnn.1``, ...):
``output_hidden_states`` returns every layer's outputs, gradient checkpointing recomputes one
layer at a time, and ``torch.export`` / ``torch.compile(fullgraph=True)`` trace the forward
(padding is then skipped step by step rather than packed). Checkpoint files keep the names of
one stacked ``nn.GRU`` / ``nn.LSTM`` (``rnn.weight_ih_l1_reverse``), mapped on load and save.

Only torch, transformers and sibling modules are imported here: ``save_pretrained`` copies
this file (and its siblings) next to the weights for ``trust_remote_code`` loading.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.modeling_outputs import SequenceClassifierOutput

from .attention import attend, build_score, get_distribution
from .configuration_rnn_classifier import RNNClassifierConfig
from .masking import padding_mask
from .rnn_layers import (
    init_recurrent_model_weights,
    is_tracing,
    recurrent_layers,
)


class FreezableEmbedding(nn.Embedding):
    """An ``nn.Embedding`` that can be frozen: while ``frozen``, its ``weight`` has
    ``requires_grad=False``, and so does any parameter later put in its place (``from_pretrained``
    loads a checkpoint by assigning new ``nn.Parameter`` objects, which require gradients)."""

    frozen: bool = False

    def __setattr__(self, name: str, value) -> None:
        if name == "weight" and isinstance(value, nn.Parameter) and self.frozen:
            value.requires_grad_(False)
        super().__setattr__(name, value)

    def freeze(self, frozen: bool = True) -> None:
        """Freeze (or unfreeze) the weight, now and for every parameter assigned later."""
        self.frozen = frozen
        self.weight.requires_grad_(not frozen)


class AttentionPooling(nn.Module):
    r"""Attention pooling with a learned query ``u`` (Raffel & Ellis 2015, Yang et al. 2016):

    .. math:: \alpha = p\big(a(u, h_1), \dots, a(u, h_T)\big),\qquad
              \mathrm{pooled} = \sum_t \alpha_t h_t

    with any score ``a`` and distribution ``p`` of :mod:`.attention` by name; masked positions
    get ``α_t = 0``.

    Args:
        size: size of the states ``h_t`` (and of ``u``).
        score: a name in ``SCORES``.
        distribution: a name in ``DISTRIBUTIONS`` (default: the score's own).
        score_params: options of the score.
    """

    def __init__(self, size: int, score: str, distribution: str | None, score_params: dict | None):
        super().__init__()
        self.query = nn.Parameter(torch.empty(size))
        # Not called `score`: PEFT's sequence-classification wrapper takes every module of that
        # name for the classification head (trained in full, never given LoRA adapters).
        self.energy = build_score(score, size, size, **(score_params or {}))
        self.distribution = distribution or self.energy.default_distribution
        get_distribution(self.distribution)  # an unknown name fails here, not at the first call

    def forward(
        self, states: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Pool ``states`` [batch, seq, size] (``mask`` [batch, seq], 0 = skip) into
        ``(pooled [batch, size], weights [batch, 1, seq])``."""
        query = self.query.to(states.dtype).expand(states.shape[0], 1, -1)
        keep = None if mask is None else padding_mask(mask, ndim=3)
        context, weights = attend(query, states, states, self.energy, self.distribution, keep)
        return context[:, 0], weights


def compaction_order(attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row, the positions of the real tokens first (in order), then those of the padding.

    Returns ``(order [batch, seq], lengths [batch])``: ``x.gather(1, order)`` moves every row's
    tokens to the front, whatever the padding side (left, right or holes), so that
    ``pack_padded_sequence`` can take the row's ``lengths``.
    """
    skip = (attention_mask == 0).to(torch.int8)
    order = torch.sort(skip, dim=1, stable=True).indices
    return order, attention_mask.shape[1] - skip.sum(1)


def _gather_positions(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``x[b, index[b, t]]`` for ``x`` [batch, seq, ...] and ``index`` [batch, seq]."""
    index = index.reshape(*index.shape, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(1, index)


class RNNClassifierPreTrainedModel(PreTrainedModel):
    """Weight initialisation and HF plumbing of the recurrent classifiers."""

    config_class = RNNClassifierConfig
    base_model_prefix = ""
    main_input_name = "input_ids"
    _no_split_modules = []
    supports_gradient_checkpointing = True
    _can_compile_fullgraph = True

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """Keras' defaults, the framework of Géron's and Chollet's models, for the RNN and the
        linears: Glorot-uniform input and orthogonal recurrent matrices, zero biases except an
        LSTM forget-gate bias of 1 (``unit_forget_bias``); Glorot-uniform linears with zero
        biases. Embeddings ``N(0, 1)`` (PyTorch's default; pretrained word vectors have entries
        of that order): the usual transformers ``N(0, 0.02)`` leaves the RNN's states and the
        features near 0, so that a model trained through a few layers only (LoRA, a frozen body)
        barely moves from the uniform prediction. The attention-pooling query is
        ``N(0, 1/size)``."""
        if init_recurrent_model_weights(module, unit_forget_bias=True):
            return
        if isinstance(module, AttentionPooling):
            init.normal_(module.query, 0.0, module.query.numel() ** -0.5)
        else:
            super()._init_weights(module)


class RNNForSequenceClassification(RNNClassifierPreTrainedModel):
    r"""Embedding → (bi)GRU/LSTM over the real tokens → pooling → dropout → linear head.

    .. math:: h→_t = \mathrm{cell}(E x_t, h→_{t-1}),\quad h←_t = \mathrm{cell}(E x_t, h←_{t+1}),
              \qquad \mathrm{logits} = W\,\mathrm{Drop}(z) + b

    with ``z = [h→_T; h←_1]`` of the top layer (``pooling="last"``, ``T`` the last real token)
    or ``z = Σ_t α_t [h→_t; h←_t]`` (``pooling="attention"``, see :class:`AttentionPooling`).
    Positions where ``attention_mask`` is 0 are never read by the RNN (each row's tokens are
    moved to the front, then the padding is skipped, packed or step by step), so padding on
    either side changes nothing. Each layer is a :class:`~.rnn_layers.RecurrentLayer` (a
    ``GradientCheckpointingLayer``), with ``rnn_dropout`` between layers. The loss follows
    ``config.problem_type`` (cross-entropy for single-label classification).
    """

    def __init__(self, config: RNNClassifierConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.embeddings = FreezableEmbedding(config.vocab_size, config.embedding_dim)
        self.input_dropout = nn.Dropout(config.input_dropout)
        self.rnn = recurrent_layers(
            config.cell,
            config.embedding_dim,
            config.hidden_size,
            config.num_layers,
            bidirectional=config.bidirectional,
        )
        self.rnn_dropout = nn.Dropout(config.rnn_dropout)
        self.pooler = (
            AttentionPooling(
                config.feature_size,
                config.attention_score,
                config.attention_distribution,
                config.attention_score_params,
            )
            if config.pooling == "attention"
            else None
        )
        self.dropout = nn.Dropout(config.dropout)
        self.classifier = nn.Linear(config.feature_size, config.num_labels)
        self.post_init()
        self._apply_freeze()

    def _apply_freeze(self) -> None:
        """``config.freeze_embeddings``: the input embeddings get no gradient, whatever loads
        into them later (see :class:`FreezableEmbedding`)."""
        frozen = self.config.freeze_embeddings
        if isinstance(self.embeddings, FreezableEmbedding):
            self.embeddings.freeze(frozen)
        else:
            self.embeddings.weight.requires_grad_(not frozen)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.embeddings

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.embeddings = value
        self._apply_freeze()

    @torch.no_grad()
    def set_embedding_matrix(self, matrix: torch.Tensor) -> None:
        """Copy pretrained word vectors ``matrix`` [vocab_size, embedding_dim] (row ``i`` = the
        vector of token id ``i``, e.g. from ``hfattn.data.word_vectors.embedding_matrix``) into
        the input embeddings; with ``config.freeze_embeddings`` they stay fixed in training."""
        weight = self.embeddings.weight
        if tuple(matrix.shape) != tuple(weight.shape):
            raise ValueError(
                f"matrix must have shape [vocab_size, embedding_dim] = {tuple(weight.shape)}; "
                f"got {tuple(matrix.shape)}"
            )
        weight.copy_(matrix.to(weight.dtype))

    def _encode(
        self, embeds: torch.Tensor, attention_mask: torch.Tensor | None
    ) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """Run the layers over the real tokens.

        Returns ``(outputs, final_h, restore, mask)``: every layer's outputs
        [batch, seq, features] with the tokens at the front of each row (zeros after them),
        the top layer's final ``h`` [directions, batch, hidden], the index that puts the
        outputs back in input order, and the mask of the front-packed rows (``None`` = no
        padding). In eager mode an all-ones mask is no padding; under ``torch.compile`` /
        ``torch.export`` every mask is honoured (no branch on its values).
        """
        restore = mask = None
        x = embeds
        if attention_mask is not None and (is_tracing() or not bool(attention_mask.all())):
            order, lengths = compaction_order(attention_mask)
            x = _gather_positions(embeds, order)
            positions = torch.arange(embeds.shape[1], device=lengths.device)
            mask = (positions[None, :] < lengths[:, None]).long()
            restore = torch.argsort(order, dim=1)
        outputs = []
        for i, layer in enumerate(self.rnn):
            if i > 0:
                x = self.rnn_dropout(x)
            x, final_h, *_ = layer(x, mask=mask)
            outputs.append(x)
        return outputs, final_h, restore, mask

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
    ) -> SequenceClassifierOutput | tuple:
        r"""Class logits of each text, and the loss when ``labels`` are given.

        Args:
            input_ids: [batch, seq] token ids (or ``inputs_embeds`` [batch, seq, embedding_dim]).
            attention_mask: [batch, seq], 1 = token, 0 = padding (skipped wherever it is).
            labels: [batch] class ids (single-label: cross-entropy), [batch, num_labels] 0/1
                floats (multi-label: BCE with logits) or [batch] floats (``num_labels=1``:
                regression, MSE), as ``config.problem_type`` says or, when it is ``None``,
                as transformers infers it (BERT's rule).
            output_attentions: with ``pooling="attention"``, return ``attentions = (α,)``,
                ``α`` [batch, 1, seq] over the input positions (0 at padding).
            output_hidden_states: return ``hidden_states``, ``num_layers + 1`` tensors: the
                embeddings [batch, seq, embedding_dim], then every layer's outputs
                [batch, seq, hidden × directions] (zeros at padding), as transformers models
                return the embeddings and one tensor per layer.
        """
        return_dict = self.config.return_dict if return_dict is None else return_dict
        if output_attentions is None:
            output_attentions = bool(getattr(self.config, "output_attentions", False))
        if output_hidden_states is None:
            output_hidden_states = bool(getattr(self.config, "output_hidden_states", False))
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("Pass exactly one of input_ids or inputs_embeds")
        embeds = self.embeddings(input_ids) if inputs_embeds is None else inputs_embeds
        outputs, final_h, restore, mask = self._encode(self.input_dropout(embeds), attention_mask)

        weights = None
        if self.pooler is None:  # final_h: [directions, batch, hidden]
            pooled = final_h.transpose(0, 1).reshape(final_h.shape[1], -1)
        else:
            pooled, weights = self.pooler(outputs[-1], mask)
        logits = self.classifier(self.dropout(pooled))

        loss = None
        if labels is not None:
            loss = self.loss_function(labels=labels, pooled_logits=logits, config=self.config)

        hidden_states = None
        if output_hidden_states:
            if restore is not None:  # back to input order
                outputs = [_gather_positions(layer_out, restore) for layer_out in outputs]
            hidden_states = (embeds, *outputs)
        if weights is not None and restore is not None:
            weights = _gather_positions(weights[:, 0], restore)[:, None]
        attentions = (weights,) if output_attentions and weights is not None else None
        if not return_dict:
            return tuple(v for v in (loss, logits, hidden_states, attentions) if v is not None)
        return SequenceClassifierOutput(
            loss=loss, logits=logits, hidden_states=hidden_states, attentions=attentions
        )


__all__ = [
    "AttentionPooling",
    "RNNClassifierPreTrainedModel",
    "RNNForSequenceClassification",
    "compaction_order",
]
