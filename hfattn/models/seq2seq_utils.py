"""Pieces every hfattn encoder-decoder shares: label shifting, the token loss and the
language-model output built on it, the resolution of the output flags and of ``use_cache``
(argument, else config) and the bookkeeping of embeddings shared between encoder, decoder and
output layer.

Only torch and transformers are imported: ``save_pretrained`` copies this file next to the
weights of the models that use it (``trust_remote_code``).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.modeling_outputs import Seq2SeqLMOutput, Seq2SeqModelOutput
from transformers.utils import logging

logger = logging.get_logger(__name__)


def resolve_output_flags(
    config, output_attentions: bool | None = None, output_hidden_states: bool | None = None
) -> tuple[bool, bool]:
    """``(output_attentions, output_hidden_states)``: each argument if given, else the
    config's value (``config.output_attentions`` / ``config.output_hidden_states``), as every
    ``transformers`` model resolves them. Call it once at the top of a ``forward``."""
    if output_attentions is None:
        output_attentions = config.output_attentions
    if output_hidden_states is None:
        output_hidden_states = config.output_hidden_states
    return bool(output_attentions), bool(output_hidden_states)


def resolve_use_cache(module: nn.Module, use_cache: bool | None = None) -> bool:
    """``use_cache`` if given, else ``module.config.use_cache``; ``False`` while ``module``
    trains with gradient checkpointing (the recomputation would write the cache twice), with
    a one-time warning when the cache was asked for, as Bart does."""
    if use_cache is None:
        use_cache = getattr(module.config, "use_cache", False)
    if use_cache and module.training and getattr(module, "gradient_checkpointing", False):
        logger.warning_once(
            "`use_cache=True` is incompatible with gradient checkpointing. "
            "Setting `use_cache=False`."
        )
        use_cache = False
    return bool(use_cache)


def shift_tokens_right(
    labels: torch.Tensor, pad_token_id: int | None, decoder_start_token_id: int | None
) -> torch.Tensor:
    """Teacher forcing inputs: ``y_in = [start, y_1, …, y_{T-1}]`` (``-100`` → ``pad``), as BART."""
    if decoder_start_token_id is None:
        raise ValueError("config.decoder_start_token_id must be set to shift labels")
    if pad_token_id is None:
        raise ValueError("config.pad_token_id must be set to shift labels")
    shifted = labels.new_zeros(labels.shape)
    shifted[:, 1:] = labels[:, :-1]
    shifted[:, 0] = decoder_start_token_id
    return shifted.masked_fill(shifted == -100, pad_token_id)


def token_cross_entropy(
    logits: torch.Tensor,
    labels: torch.Tensor,
    num_items_in_batch: int | torch.Tensor | None = None,
    label_smoothing: float = 0.0,
) -> torch.Tensor:
    r"""Token cross-entropy of ``logits [B, T, V]`` against ``labels [B, T]`` (``-100`` ignored).

    With label smoothing ``ε`` the target distribution is ``(1 - ε)·onehot(y) + ε/V``:

    .. math:: \ell_t = -(1-\varepsilon)\log p(y_t) - \tfrac{\varepsilon}{V}\sum_v \log p(v)

    The per-token losses are summed and divided by ``num_items_in_batch`` when the Trainer
    passes it (exact gradient accumulation), else by the number of labelled tokens.
    """
    labels = labels.to(logits.device)
    total = nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(),
        labels.reshape(-1),
        ignore_index=-100,
        reduction="sum",
        label_smoothing=label_smoothing,
    )
    if num_items_in_batch is None:
        count = (labels != -100).sum().clamp_min(1)
    else:
        count = torch.as_tensor(num_items_in_batch, device=logits.device)
    return total / count


def seq2seq_lm_output(
    logits: torch.Tensor,
    outputs: Seq2SeqModelOutput,
    labels: torch.Tensor | None,
    num_items_in_batch: int | torch.Tensor | None,
    label_smoothing: float,
) -> Seq2SeqLMOutput:
    """The ``Seq2SeqLMOutput`` of an encoder-decoder: ``logits`` with the loss
    (:func:`token_cross_entropy`, when ``labels`` are given) and every field of the base
    model's ``outputs`` (the cache, hidden states and attention maps it returned)."""
    loss = None
    if labels is not None:
        loss = token_cross_entropy(logits, labels, num_items_in_batch, label_smoothing)
    return Seq2SeqLMOutput(
        loss=loss,
        logits=logits,
        cache=outputs.cache,
        decoder_hidden_states=outputs.decoder_hidden_states,
        decoder_attentions=outputs.decoder_attentions,
        cross_attentions=outputs.cross_attentions,
        encoder_last_hidden_state=outputs.encoder_last_hidden_state,
        encoder_hidden_states=outputs.encoder_hidden_states,
        encoder_attentions=outputs.encoder_attentions,
    )


class ConfigTiedWeightsMixin:
    """``_tied_weights_keys`` computed from the config by ``_own_tied_weights`` (a model that
    shares its encoder and decoder embeddings ties them even without ``tie_word_embeddings``)."""

    def _own_tied_weights(self) -> dict[str, str]:
        """``{target: source}`` parameter names shared in this module (none by default)."""
        return {}

    @property
    def _tied_weights_keys(self) -> dict[str, str]:
        return self._own_tied_weights()

    def get_expanded_tied_weights_keys(self, all_submodels: bool = False) -> dict:
        """``{target: source}`` of the shared parameters. Unlike the base class (which ties only
        when ``tie_word_embeddings``), shared encoder/decoder embeddings are tied whenever
        ``share_encoder_decoder_embeddings`` is set."""
        if all_submodels:
            return super().get_expanded_tied_weights_keys(all_submodels=True)
        return self._own_tied_weights()


class EncoderDecoderEmbeddingsMixin:
    """Embedding bookkeeping of a base model holding ``self.encoder`` and ``self.decoder``, each
    with ``embed_tokens``: the source embedding is the input embedding, and with
    ``share_encoder_decoder_embeddings`` the decoder's is tied to it."""

    def _own_tied_weights(self) -> dict[str, str]:
        if self.config.share_encoder_decoder_embeddings:
            return {"decoder.embed_tokens.weight": "encoder.embed_tokens.weight"}
        return {}

    def get_input_embeddings(self) -> nn.Embedding:
        return self.encoder.embed_tokens

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.encoder.embed_tokens = value
        if self.config.share_encoder_decoder_embeddings:
            self.decoder.embed_tokens = value

    def get_encoder(self, modality: str | None = None):
        return self.encoder

    def get_decoder(self):
        return self.decoder


class Seq2SeqLMAccessorsMixin:
    """The accessors ``generate``, PEFT and resizing use, for a model that holds its
    encoder-decoder in ``self.model`` (with ``encoder`` / ``decoder``) and its output layer in
    ``self.lm_head`` (BART's layout), and the output layer's tie to the target embedding."""

    def _own_tied_weights(self) -> dict[str, str]:
        if not self.config.tie_word_embeddings:
            return {}
        if self.config.share_encoder_decoder_embeddings:
            return {"lm_head.weight": "model.encoder.embed_tokens.weight"}
        return {"lm_head.weight": "model.decoder.embed_tokens.weight"}

    def get_encoder(self, modality: str | None = None):
        return self.model.encoder

    def get_decoder(self):
        return self.model.decoder

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.get_input_embeddings()

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.model.set_input_embeddings(value)

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def set_output_embeddings(self, value: nn.Linear) -> None:
        self.lm_head = value

    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor) -> torch.Tensor:
        """``shift_tokens_right(labels)`` (used by data collators)."""
        return shift_tokens_right(
            labels, self.config.pad_token_id, self.config.decoder_start_token_id
        )


__all__ = [
    "ConfigTiedWeightsMixin",
    "EncoderDecoderEmbeddingsMixin",
    "Seq2SeqLMAccessorsMixin",
    "resolve_output_flags",
    "resolve_use_cache",
    "shift_tokens_right",
    "token_cross_entropy",
]
