"""hfattn: attention-era architectures as first-class Hugging Face models.

``import hfattn`` registers every config and model with the ``transformers`` Auto classes
(``AutoConfig`` by ``model_type``, each model under its Auto class, see :data:`_AUTO_MODELS`)
and marks both for ``trust_remote_code`` export (``save_pretrained`` then copies the modeling
source and writes ``auto_map``). So after ``import hfattn``,
``AutoConfig.from_pretrained(folder)``, ``AutoModelForCausalLM.from_pretrained(folder)`` and
``AutoModelFor....from_config(config)`` know the hfattn model types.

Importing this package itself is cheap, though: neither torch nor ``transformers`` (seconds
each) is imported by it. The CLI needs that: ``hfattn --help`` and ``python -m hfattn --help``
import this package before any CLI code runs. What makes it possible:

- The public classes (``CharRNNConfig``, ``BahdanauForConditionalGeneration``, ...) are
  loaded from :mod:`hfattn.models` on first access (module ``__getattr__``, PEP 562);
  ``from hfattn import CharRNNConfig`` works as usual.
- The registration (:func:`register`) runs when it can have an effect: at once if
  ``transformers`` is already imported, otherwise right after ``transformers`` or
  :mod:`hfattn.models` gets imported, whoever imports it, through a post-import hook on
  :data:`sys.meta_path` (:mod:`hfattn._post_import`; ``transformers`` puts a finder of its
  own there too). The Auto classes cannot be reached before ``transformers`` is imported,
  so they never run unregistered. The hook removes itself once registration is done.

:func:`register` can also be called directly; it is idempotent.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING

from ._post_import import PostImportHook

if TYPE_CHECKING:  # what __getattr__ provides, for type checkers and IDEs
    from .models import *  # noqa: F403

__version__ = "0.1.0"

_AUTO_MODELS = (
    ("CharRNNConfig", "CharRNNForCausalLM", "AutoModelForCausalLM"),
    ("BahdanauConfig", "BahdanauForConditionalGeneration", "AutoModelForSeq2SeqLM"),
    ("VaswaniConfig", "VaswaniForConditionalGeneration", "AutoModelForSeq2SeqLM"),
    ("RNNClassifierConfig", "RNNForSequenceClassification", "AutoModelForSequenceClassification"),
)
"""One line per architecture: (config class, model class, Auto class). The first two are names
in :mod:`hfattn.models` and are exported from ``hfattn``; the third is a name in
``transformers``."""

_OTHER_EXPORTS = ("RecurrentCache",)
"""Further names of :mod:`hfattn.models` exported from ``hfattn``."""

_LAZY_EXPORTS = frozenset(
    [name for config, model, _ in _AUTO_MODELS for name in (config, model)] + [*_OTHER_EXPORTS]
)

__all__ = sorted(_LAZY_EXPORTS) + ["__version__", "register"]

_registered = False


def register() -> None:
    """Register every hfattn config/model with the ``transformers`` Auto classes and mark them
    for ``trust_remote_code`` export (imports torch and ``transformers``). Idempotent;
    ``import hfattn`` arranges for it to run (see the module docstring)."""
    global _registered
    if _registered:
        return
    models = importlib.import_module(".models", __name__)
    if _registered:  # importing hfattn.models just now ran the hook, which registered
        return
    import transformers

    for config_name, model_name, auto_name in _AUTO_MODELS:
        config_cls = getattr(models, config_name)
        model_cls = getattr(models, model_name)
        transformers.AutoConfig.register(config_cls.model_type, config_cls, exist_ok=True)
        getattr(transformers, auto_name).register(config_cls, model_cls, exist_ok=True)
        config_cls.register_for_auto_class()
        model_cls.register_for_auto_class(auto_name)
        _store_forward_signature(model_cls)
    _registered = True
    _HOOK.uninstall()


def _store_forward_signature(model_cls) -> None:
    """Keep ``model_cls.forward``'s signature on the function (``__signature__``).

    A class registered for remote code counts as remote code to ``generate()``, which then
    reads ``inspect.signature(self.forward)`` at every decoding step (its ``cache_position``
    check); computing it costs about 0.15 ms, 1 % of a small model's cached greedy step."""
    import inspect

    forward = model_cls.forward
    if "__signature__" not in vars(forward):
        forward.__signature__ = inspect.signature(forward)


def _on_import(name: str) -> None:
    if name == "transformers" and "hfattn.models" in _HOOK.executing:
        return  # hfattn.models is importing transformers: register once hfattn.models is done
    register()


_HOOK = PostImportHook(("transformers", "hfattn.models"), _on_import)


def __getattr__(name: str):
    if name in _LAZY_EXPORTS:
        register()
        value = getattr(importlib.import_module(".models", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY_EXPORTS})


if "transformers" in sys.modules:
    register()
else:
    _HOOK.install()
