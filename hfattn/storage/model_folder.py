"""The files of a model folder, named in one place.

A model folder is what ``save_pretrained`` writes (and what ``hfattn train`` leaves beside its
run files, :mod:`hfattn.storage.run_folder`): :data:`CONFIG_FILE`, the :data:`WEIGHTS_FILE` weights,
:data:`GENERATION_CONFIG_FILE` for a generating model, and the tokenizer
(:data:`TOKENIZER_FILES`). A PEFT adapter folder holds :data:`ADAPTER_CONFIG_FILE` and
:data:`ADAPTER_WEIGHTS_FILE` instead of the config and weights, and a sequence-classification
adapter its label names in :data:`LABELS_FILE`. The names are those of ``transformers``
(``CONFIG_NAME``, ``SAFE_WEIGHTS_NAME``, ``GENERATION_CONFIG_NAME``) and ``peft``
(``CONFIG_NAME``, ``SAFETENSORS_WEIGHTS_NAME``), spelt out so that reading them needs neither
package.

:func:`first_damaged_file` finds the file of a folder (a model folder, a checkpoint) that does
not read back whole. Light: no torch at import.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from .file_reads import reads_back

CONFIG_FILE = "config.json"
"""The model's config (``transformers.utils.CONFIG_NAME``)."""
WEIGHTS_FILE = "model.safetensors"
"""The model's weights (``transformers.utils.SAFE_WEIGHTS_NAME``)."""
GENERATION_CONFIG_FILE = "generation_config.json"
"""A generating model's decoding settings (``transformers.utils.GENERATION_CONFIG_NAME``)."""
TOKENIZER_FILE = "tokenizer.json"
"""A fast tokenizer, whole in one file."""
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
"""The tokenizer's settings (its class, special tokens)."""
SPECIAL_TOKENS_FILE = "special_tokens_map.json"
TOKENIZER_FILES = (TOKENIZER_FILE, TOKENIZER_CONFIG_FILE, "vocab.txt", "vocab.json", "*.model")
"""File names (glob patterns) of which a model folder needs at least one for ``AutoTokenizer``
to load."""
ADAPTER_CONFIG_FILE = "adapter_config.json"
"""A PEFT adapter's config (``peft.utils.CONFIG_NAME``)."""
ADAPTER_WEIGHTS_FILE = "adapter_model.safetensors"
"""A PEFT adapter's weights (``peft.utils.SAFETENSORS_WEIGHTS_NAME``)."""
LABELS_FILE = "labels.json"
"""The label names of a sequence-classification adapter (``{"labels": [...]}``, label-id
order), which has no ``config.json`` to hold ``id2label``."""
PICKLE_WEIGHTS = ("pytorch_model*.bin", "adapter_model.bin", "*.pt", "*.pth", "*.pkl")
"""Weight files that ``torch.load`` would unpickle (glob patterns)."""
CHECKED_FILES = (
    CONFIG_FILE,
    GENERATION_CONFIG_FILE,
    TOKENIZER_FILE,
    TOKENIZER_CONFIG_FILE,
    SPECIAL_TOKENS_FILE,
    "*.safetensors",
)
"""The files of a model folder read back one by one to name the culprit when loading fails
(:func:`first_damaged_file`)."""


def first_damaged_file(folder: Path, patterns: Iterable[str] = ("*",)) -> Path | None:
    """The first file (sorted by path) directly in ``folder`` that matches one of the glob
    ``patterns`` and does not read back whole (:func:`hfattn.storage.file_io.reads_back`: JSON that
    does
    not parse, a safetensors file with a tensor that cannot be read, a ``torch.save`` zip that
    fails its checksums), or ``None`` when every one reads back."""
    files = sorted({p for pattern in patterns for p in folder.glob(pattern) if p.is_file()})
    return next((file for file in files if not reads_back(file)), None)


__all__ = [
    "ADAPTER_CONFIG_FILE",
    "ADAPTER_WEIGHTS_FILE",
    "CHECKED_FILES",
    "CONFIG_FILE",
    "GENERATION_CONFIG_FILE",
    "LABELS_FILE",
    "PICKLE_WEIGHTS",
    "SPECIAL_TOKENS_FILE",
    "TOKENIZER_CONFIG_FILE",
    "TOKENIZER_FILE",
    "TOKENIZER_FILES",
    "WEIGHTS_FILE",
    "first_damaged_file",
]
