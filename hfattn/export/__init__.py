"""Exporting trained hfattn models to inference engines.

:mod:`hfattn.export.ctranslate2` converts a :class:`~hfattn.VaswaniForConditionalGeneration`
to a CTranslate2 model folder (``hfattn export RUN --format ctranslate2 OUT``) and serves it
(:class:`CTranslate2Translation`). Importing this package is light: ``ctranslate2``, torch and
transformers are imported by the functions that need them.
"""

from .ctranslate2 import *  # noqa: F403
from .ctranslate2 import __all__  # noqa: F401
