"""Exporting trained hfattn models to inference engines: a
:class:`~hfattn.VaswaniForConditionalGeneration` as a CTranslate2 model folder
(``hfattn export RUN --format ctranslate2 OUT``), and serving it.

One module per job:

- :mod:`~hfattn.export.checks`: what can be exported (config, quantization, output folder).
- :mod:`~hfattn.export.spec`: the model as a ``ctranslate2`` ``TransformerSpec``.
- :mod:`~hfattn.export.export_folder`: writing the export folder, finding it locally or on the Hub.
- :mod:`~hfattn.export.decoding`: ``generate``'s settings as CTranslate2's options.
- :mod:`~hfattn.export.ctranslate2_runtime`: importing ``ctranslate2`` with the CPU product it
  should use.
- :mod:`~hfattn.export.serving`: translating and scoring with an export
  (:class:`CTranslate2Translation`).

Importing this package is light: ``ctranslate2``, torch and transformers are imported by the
functions that need them, and the environment is left as it is.
"""

from .checks import (
    ACTIVATIONS,
    FORMATS,
    QUANTIZATIONS,
    ExportError,
    check_exportable,
    check_output_folder,
    check_quantization,
    unsupported_fields,
)
from .ctranslate2_runtime import require_ctranslate2
from .decoding import DecodingSettings
from .export_folder import (
    EXPORT_FILES,
    EXPORT_INFO_FILE,
    download_export,
    export_ctranslate2,
    export_of,
    is_export,
    missing_export,
)
from .serving import COMPUTE_TYPES, CTranslate2Translation, evaluate_export
from .spec import build_spec, decoding_tokens, position_rows, vocabulary

__all__ = [
    "ACTIVATIONS",
    "COMPUTE_TYPES",
    "EXPORT_FILES",
    "EXPORT_INFO_FILE",
    "FORMATS",
    "QUANTIZATIONS",
    "CTranslate2Translation",
    "DecodingSettings",
    "ExportError",
    "build_spec",
    "check_exportable",
    "check_output_folder",
    "check_quantization",
    "decoding_tokens",
    "download_export",
    "evaluate_export",
    "export_ctranslate2",
    "export_of",
    "is_export",
    "missing_export",
    "position_rows",
    "require_ctranslate2",
    "unsupported_fields",
    "vocabulary",
]
