"""Modeling code only (torch + transformers). Files here import siblings, never the rest of
hfattn, because ``save_pretrained`` copies them flat next to the weights."""

from .configuration_bahdanau import BahdanauConfig
from .configuration_char_rnn import CharRNNConfig
from .configuration_rnn_classifier import RNNClassifierConfig
from .configuration_vaswani import VaswaniConfig
from .modeling_bahdanau import BahdanauForConditionalGeneration, BahdanauModel
from .modeling_char_rnn import CharRNNForCausalLM
from .modeling_rnn_classifier import RNNForSequenceClassification
from .modeling_vaswani import VaswaniForConditionalGeneration, VaswaniModel
from .recurrent_cache import RecurrentCache

__all__ = [
    "BahdanauConfig",
    "BahdanauForConditionalGeneration",
    "BahdanauModel",
    "CharRNNConfig",
    "CharRNNForCausalLM",
    "RNNClassifierConfig",
    "RNNForSequenceClassification",
    "RecurrentCache",
    "VaswaniConfig",
    "VaswaniForConditionalGeneration",
    "VaswaniModel",
]
