"""Modeling code only (torch + transformers). Files here import siblings, never the rest of
hfattn, because ``save_pretrained`` copies them flat next to the weights.

Importing this package registers every hfattn architecture with the ``transformers`` Auto
classes (:func:`register_auto_classes`, the one place that does it): afterwards
``AutoConfig.from_pretrained(folder)``, ``AutoModelForSeq2SeqLM.from_pretrained(folder)`` and
the other Auto classes of :data:`AUTO_CLASSES` load hfattn folders, and ``save_pretrained``
copies the modeling code and writes ``auto_map`` (for ``trust_remote_code`` loading where
hfattn is not installed). It also registers ``pipeline("hfattn-translation")`` for the
sequence-to-sequence models (:mod:`.translation_pipeline`: transformers 5 refuses the
``translation`` task).
"""

import transformers

from ..common.families import FAMILIES
from .configuration_bahdanau import BahdanauConfig
from .configuration_char_rnn import CharRNNConfig
from .configuration_rnn_classifier import RNNClassifierConfig
from .configuration_vaswani import VaswaniConfig
from .modeling_bahdanau import BahdanauForConditionalGeneration, BahdanauModel
from .modeling_char_rnn import CharRNNForCausalLM
from .modeling_rnn_classifier import RNNForSequenceClassification
from .modeling_vaswani import VaswaniForConditionalGeneration, VaswaniModel
from .recurrent_cache import RecurrentCache
from .translation_pipeline import TranslationPipeline, register_translation_pipeline

AUTO_CLASSES = tuple(
    (config_cls, model_cls, FAMILIES[config_cls.model_type].auto_class)
    for config_cls, model_cls in (
        (CharRNNConfig, CharRNNForCausalLM),
        (BahdanauConfig, BahdanauForConditionalGeneration),
        (VaswaniConfig, VaswaniForConditionalGeneration),
        (RNNClassifierConfig, RNNForSequenceClassification),
    )
)
"""One row per architecture: its config class, its model class and the name of its Auto class
in ``transformers`` (:attr:`hfattn.common.families.Family.auto_class`)."""


def register_auto_classes() -> None:
    """Register each row of :data:`AUTO_CLASSES` with ``AutoConfig`` (by ``model_type``) and
    its Auto model class, and mark both for ``trust_remote_code`` export
    (``register_for_auto_class``). Idempotent; run when this package is imported."""
    for config_cls, model_cls, auto_name in AUTO_CLASSES:
        transformers.AutoConfig.register(config_cls.model_type, config_cls, exist_ok=True)
        getattr(transformers, auto_name).register(config_cls, model_cls, exist_ok=True)
        config_cls.register_for_auto_class()
        model_cls.register_for_auto_class(auto_name)


register_auto_classes()
register_translation_pipeline()

__all__ = [
    "AUTO_CLASSES",
    "BahdanauConfig",
    "BahdanauForConditionalGeneration",
    "BahdanauModel",
    "CharRNNConfig",
    "CharRNNForCausalLM",
    "RNNClassifierConfig",
    "RNNForSequenceClassification",
    "RecurrentCache",
    "TranslationPipeline",
    "VaswaniConfig",
    "VaswaniForConditionalGeneration",
    "VaswaniModel",
    "register_auto_classes",
    "register_translation_pipeline",
]
