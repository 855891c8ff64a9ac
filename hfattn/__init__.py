"""hfattn: attention-era architectures as first-class Hugging Face models.

The model classes (``CharRNNConfig``, ``BahdanauForConditionalGeneration``, ...) are those of
:mod:`hfattn.models`; importing that package registers every hfattn architecture with the
``transformers`` Auto classes (:func:`hfattn.models.register_auto_classes`). So after
``import hfattn.models``, or ``from hfattn import <a model class>``,
``AutoConfig.from_pretrained(folder)`` and ``AutoModelFor....from_pretrained(folder)`` know the
hfattn model types.

``import hfattn`` itself is cheap: it imports neither torch nor ``transformers`` (seconds each),
which keeps ``hfattn --help`` and the command line's first checks fast. The model classes are
loaded on first access (module ``__getattr__``, PEP 562), so ``from hfattn import
CharRNNConfig`` works as usual.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what __getattr__ provides, for type checkers and IDEs
    from .models import *  # noqa: F403

__version__ = "0.1.0"

_MODEL_EXPORTS = frozenset(
    [
        "BahdanauConfig",
        "BahdanauForConditionalGeneration",
        "CharRNNConfig",
        "CharRNNForCausalLM",
        "RNNClassifierConfig",
        "RNNForSequenceClassification",
        "RecurrentCache",
        "VaswaniConfig",
        "VaswaniForConditionalGeneration",
    ]
)
"""The names of :mod:`hfattn.models` exported from ``hfattn``."""

__all__ = sorted(_MODEL_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    if name in _MODEL_EXPORTS:
        value = getattr(importlib.import_module(".models", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_MODEL_EXPORTS})
