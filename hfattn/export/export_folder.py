"""The CTranslate2 export folder: written atomically by :func:`export_ctranslate2`, recognised
by :func:`is_export` / :func:`export_of`, fetched from the Hub by :func:`download_export`::

    model.bin, config.json, shared_vocabulary.json    CTranslate2's model (ctranslate2.Translator)
    tokenizer.json, tokenizer_config.json             the model's tokenizer, unchanged
    generation_config.json                            the model's decoding defaults
    hfattn_export.json                                what the loader needs (limits, tokens)
    README.md                                         how to load it

torch, transformers, ``ctranslate2`` and ``huggingface_hub`` are imported inside the functions.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

from ..storage.file_io import atomic_dir
from ..storage.model_folder import TOKENIZER_FILE
from ..storage.run_folder import CTRANSLATE2_DIR
from .checks import check_exportable, check_output_folder, check_quantization
from .ctranslate2_runtime import require_ctranslate2
from .decoding import DecodingSettings
from .spec import build_spec, decoding_tokens, position_rows

EXPORT_INFO_FILE = "hfattn_export.json"
"""The export's own facts (limits, decoder start and end tokens, quantization)."""
EXPORT_FILES = ("model.bin", EXPORT_INFO_FILE, TOKENIZER_FILE)
"""The files every hfattn CTranslate2 export holds."""


README = """\
# {name} (CTranslate2)

A CTranslate2 export ({quantization}) of the hfattn Vaswani Transformer `{source}`, made by
`hfattn export {source_argument} --format ctranslate2 --quantization {quantization} OUT`.

With hfattn (the decoding defaults of `generation_config.json`, the model's own tokenization):

```python
from hfattn.export import CTranslate2Translation

translator = CTranslate2Translation("{name}", device="cpu")  # compute_type="int8", ...
print(translator.translate(["{example}"], num_beams=4))
```

With `ctranslate2` and `transformers` only:

```python
import ctranslate2
from transformers import PreTrainedTokenizerFast

translator = ctranslate2.Translator("{name}", device="cpu")
tokenizer = PreTrainedTokenizerFast.from_pretrained("{name}")
source = tokenizer.convert_ids_to_tokens(tokenizer("{example}")["input_ids"])  # ends with {eos}
result = translator.translate_batch(
    [source], beam_size={num_beams}, max_decoding_length={max_new_tokens}, min_decoding_length=0
)
ids = tokenizer.convert_tokens_to_ids(result[0].hypotheses[0])
print(tokenizer.decode(ids, skip_special_tokens=True).strip())
```
"""


def export_ctranslate2(
    model,
    tokenizer,
    output_dir: str | Path,
    *,
    quantization: str | None = "float32",
    overwrite: bool = False,
    source: str | None = None,
    example: str = "I love you.",
) -> Path:
    """Write the CTranslate2 folder of a Vaswani ``model`` and its ``tokenizer`` to
    ``output_dir`` (atomically: built in a temporary folder, then renamed).

    Args:
        model: a :class:`~hfattn.VaswaniForConditionalGeneration` (any dtype; its weights are
            read as float32, then stored as ``quantization``).
        tokenizer: the model's tokenizer (saved into the folder unchanged).
        output_dir: the folder to create.
        quantization: one of :data:`QUANTIZATIONS` (``None``: ``float32``).
        overwrite: replace an existing non-empty ``output_dir``.
        source: how the model was named (the README shows it).
        example: the sentence of the README's snippets.

    Returns:
        ``output_dir``.

    Raises:
        ExportError: a bad ``quantization``, a config CTranslate2 cannot express
            (:func:`check_exportable`), a tokenizer that does not fit, or ``output_dir`` taken
            (:func:`check_output_folder`); all before any weight is converted.
        ImportError: ``ctranslate2`` is not installed.
    """
    from ..evaluation.translation import source_limit  # torch on use, as above

    quantization = check_quantization(quantization)
    check_exportable(model.config)
    output_dir = check_output_folder(output_dir, overwrite)
    require_ctranslate2()
    spec = build_spec(model, tokenizer)
    spec.validate()
    spec.optimize(quantization=quantization)
    special = decoding_tokens(model)
    generation = DecodingSettings.from_generation_config(model.generation_config.to_dict())
    info = {
        "format": "ctranslate2",
        "quantization": quantization,
        "model_type": model.config.model_type,
        "source": source,
        "max_source_tokens": source_limit(model, tokenizer),
        "max_new_tokens": position_rows(model.config),
        **special,
    }

    def build(folder: Path) -> None:
        spec.save(str(folder))
        tokenizer.save_pretrained(folder)
        model.generation_config.save_pretrained(folder)
        (folder / EXPORT_INFO_FILE).write_text(json.dumps(info, indent=2) + "\n", "utf-8")
        readme = README.format(
            name=output_dir.name,
            source=source or "MODEL",
            source_argument=shlex.quote(source or "MODEL"),
            quantization=quantization,
            example=example.replace('"', '\\"'),
            eos=tokenizer.convert_ids_to_tokens(special["eos_token_ids"][0]),
            num_beams=generation.num_beams,
            max_new_tokens=generation.max_new_tokens,
        )
        (folder / "README.md").write_text(readme, "utf-8")

    with atomic_dir(output_dir) as tmp:
        build(tmp)
    return Path(output_dir)


def is_export(folder: str | Path) -> bool:
    """Whether ``folder`` is an hfattn CTranslate2 export (it holds :data:`EXPORT_FILES`)."""
    folder = Path(folder)
    return all((folder / name).is_file() for name in EXPORT_FILES)


def export_of(model: str | Path) -> Path | None:
    """The CTranslate2 export that serves ``model``: the folder itself when it is one, else its
    ``ct2/`` sub-folder (:data:`hfattn.storage.run_folder.CTRANSLATE2_DIR`) when that is one, else
    ``None``."""
    folder = Path(model).expanduser()
    for candidate in (folder, folder / CTRANSLATE2_DIR):
        if is_export(candidate):
            return candidate
    return None


def missing_export(model: str | Path) -> str:
    """Why ``--engine ctranslate2`` cannot serve ``model`` (it has no export,
    :func:`export_of`) and the command that writes one into its ``ct2/`` folder, quoted for the
    shell so that it can be pasted as printed."""
    output = Path(model) / CTRANSLATE2_DIR
    command = shlex.join(["hfattn", "export", str(model), "--format", "ctranslate2", str(output)])
    return (
        f"--engine ctranslate2: {model} has no CTranslate2 export (neither it nor its "
        f"{CTRANSLATE2_DIR}/ folder is one); write one with `{command}`"
    )


def download_export(repo_id: str, revision: str | None = None) -> Path | None:
    """The ``ct2/`` export of the Hub model repository ``repo_id``, downloaded (only that
    sub-folder) into the Hub cache; ``None`` when the repository has none.

    Raises:
        huggingface_hub errors: the repository cannot be reached or does not exist.
    """
    from huggingface_hub import HfApi, snapshot_download

    endpoint = os.environ.get("HF_ENDPOINT") or None  # read now: huggingface_hub reads it once
    files = HfApi(endpoint=endpoint).list_repo_files(repo_id, revision=revision)
    if not any(name.startswith(f"{CTRANSLATE2_DIR}/") for name in files):
        return None
    root = snapshot_download(
        repo_id,
        revision=revision,
        allow_patterns=[f"{CTRANSLATE2_DIR}/*"],
        endpoint=endpoint,
    )
    return export_of(Path(root) / CTRANSLATE2_DIR)
