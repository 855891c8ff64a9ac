"""hfattn: attention-era architectures as first-class Hugging Face models.

Importing the package registers every config, model and tokenizer with the ``Auto`` classes
and marks them for ``trust_remote_code`` export (``save_pretrained`` then copies the modeling
source and writes ``auto_map``).
"""

from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM

from .models import (
    BahdanauConfig,
    BahdanauForConditionalGeneration,
    CharRNNConfig,
    CharRNNForCausalLM,
    RecurrentCache,
)

__version__ = "0.1.0"

_AUTO_MODELS = (
    (CharRNNConfig, CharRNNForCausalLM, AutoModelForCausalLM),
    (BahdanauConfig, BahdanauForConditionalGeneration, AutoModelForSeq2SeqLM),
)


def _register() -> None:
    for config_cls, model_cls, auto_cls in _AUTO_MODELS:
        AutoConfig.register(config_cls.model_type, config_cls, exist_ok=True)
        auto_cls.register(config_cls, model_cls, exist_ok=True)
        config_cls.register_for_auto_class()
        model_cls.register_for_auto_class(auto_cls.__name__)


_register()

__all__ = [
    "BahdanauConfig",
    "BahdanauForConditionalGeneration",
    "CharRNNConfig",
    "CharRNNForCausalLM",
    "RecurrentCache",
    "__version__",
]
