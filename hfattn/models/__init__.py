"""Modeling code only (torch + transformers). Files here import siblings, never the rest of
hfattn, because ``save_pretrained`` copies them flat next to the weights."""

from .configuration_char_rnn import CharRNNConfig
from .modeling_char_rnn import CharRNNForCausalLM

__all__ = ["CharRNNConfig", "CharRNNForCausalLM"]
