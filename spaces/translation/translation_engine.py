"""How the translation Space decodes a sentence: its token ids cut to the longest source the
model accepts, then decoded by the engine ``$HFATTN_ENGINE`` picks (``auto``, the default,
``generate`` or ``ctranslate2``): transformers' ``generate``, or :class:`CTranslate2Engine` on
the model's CTranslate2 export (a local folder's ``ct2/``, or the Hub repo's, only that
sub-folder downloaded), which decodes as ``generate`` decodes with the model.

The Space's ``app.py`` imports it from its own folder (staged and uploaded beside it, as in
hfattn's ``spaces/translation/``); it needs torch (and ``ctranslate2`` to decode with an
export), not gradio.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    import frame

ENGINE_ENV = "HFATTN_ENGINE"
"""Environment variable choosing the decoder: one of :data:`ENGINES`."""
ENGINES = ("auto", "generate", "ctranslate2")
"""``auto`` (the default): CTranslate2 when the model has an export and ``ctranslate2`` is
installed, else ``generate``; the other two force one (``ctranslate2`` fails at start when it
cannot run)."""
EXPORT_DIR = "ct2"
"""The CTranslate2 export's sub-folder of the model folder / repo (hfattn's
``run_folder.CTRANSLATE2_DIR``)."""
EXPORT_FILES = ("model.bin", "hfattn_export.json", "tokenizer.json")
"""The files of an hfattn CTranslate2 export (hfattn's ``export.export_folder.EXPORT_FILES``)."""

logger = logging.getLogger(__name__)


def beam_patience(early_stopping) -> float:
    """CTranslate2's beam patience for ``generate``'s ``early_stopping`` (hfattn's
    ``export.decoding.DecodingSettings.beam_patience``): ``True`` stops once ``beams``
    hypotheses have ended, CTranslate2's rule at patience 1 (the same output as ``generate``);
    otherwise ``generate`` searches on while a running beam could still win, which patience 2
    comes nearest to."""
    return 1.0 if early_stopping is True else 2.0


def source_ids(context: frame.Context, sentence: str) -> list[int]:
    """Token ids of ``sentence`` (with the tokenizer's special tokens), cut to the longest
    source the model accepts (keeping the final ``<eos>``)."""
    tokenizer, config = context.tokenizer, context.model.config
    ids = tokenizer(sentence)["input_ids"]
    limit = getattr(config, "max_source_positions", None) or getattr(
        config, "max_position_embeddings", None
    )
    if not limit and getattr(tokenizer, "model_max_length", None):
        limit = tokenizer.model_max_length if tokenizer.model_max_length < 1_000_000 else None
    if limit and len(ids) > limit:
        ids = ids[: limit - 1] + [tokenizer.eos_token_id]
    return ids


def target_limit(config) -> int | None:
    """The most tokens the decoder can read: ``max_target_positions``, or
    ``max_position_embeddings`` when the positions are a table (learned, or Marian's fixed
    sinusoids); ``None`` when they extend (sinusoidal) or there are none (a recurrent decoder).
    The same rule as hfattn's ``target_limit``."""
    if getattr(config, "max_target_positions", None):
        return config.max_target_positions
    if getattr(config, "position_embedding", None) == "sinusoidal":
        return None
    return getattr(config, "max_position_embeddings", None)


def decoder_start(model) -> int:
    """The token the decoder starts from, as ``generate`` picks it."""
    start = getattr(model.generation_config, "decoder_start_token_id", None)
    if start is None:
        start = getattr(model.config, "decoder_start_token_id", None) or 0
    return int(start)


class CTranslate2Engine:
    """Decodes with the model's CTranslate2 export (a folder of :data:`EXPORT_FILES`) as
    ``generate`` decodes with the model: the same source ids, the decoder started from the
    export's ``decoder_start_token_id`` and stopped at the model's ``eos_token_id``, the
    length penalty, n-gram blocking and repetition penalty of the model's generation config.

    Greedy search gives ``generate``'s tokens; beam search ranks finished hypotheses alike and
    stops as :func:`beam_patience` says: as ``generate`` does when the model's
    ``early_stopping`` is ``True``, else possibly before a longer hypothesis ``generate`` would
    find (with a length penalty).

    Args:
        folder: the export.
        threads: CTranslate2's threads per translation (the app passes torch's).
    """

    def __init__(self, folder: str | Path, threads: int = 1):
        import ctranslate2

        self.folder = Path(folder)
        self.info = json.loads((self.folder / "hfattn_export.json").read_text("utf-8"))
        self.translator = ctranslate2.Translator(
            str(self.folder), device="cpu", intra_threads=max(1, threads)
        )
        quantization = self.info.get("quantization") or self.translator.compute_type
        self.label = f"CTranslate2 ({quantization})"

    def generate(
        self, model, tokenizer, source_ids: list[int], num_beams: int, max_new_tokens: int
    ):
        """``generate``'s output row for one source, as a ``[1, length]`` tensor: the decoder
        start token, the new tokens and the end token when the decoding reached it."""
        config = model.generation_config
        limit = self.info.get("max_new_tokens") or max_new_tokens  # positions the export holds
        eos = config.eos_token_id if config.eos_token_id is not None else model.config.eos_token_id
        eos = [eos] if isinstance(eos, int) else list(eos or [])
        result = self.translator.translate_batch(
            [tokenizer.convert_ids_to_tokens(source_ids)],
            beam_size=num_beams,
            max_decoding_length=min(max_new_tokens, limit),
            min_decoding_length=min(config.min_new_tokens or 0, max_new_tokens, limit),
            length_penalty=float(
                config.length_penalty if config.length_penalty is not None else 1.0
            ),
            no_repeat_ngram_size=config.no_repeat_ngram_size or 0,
            repetition_penalty=float(config.repetition_penalty or 1.0),
            patience=beam_patience(config.early_stopping),
            end_token=tokenizer.convert_ids_to_tokens(eos) if eos else None,
            return_end_token=True,
            max_input_length=0,  # the source is already cut to the model's limit
        )
        new_ids = tokenizer.convert_tokens_to_ids(result[0].hypotheses[0])
        start = self.info.get("decoder_start_token_id", decoder_start(model))
        return torch.tensor([[start, *new_ids]])


def engine_choice() -> str:
    """``$HFATTN_ENGINE`` (``auto`` when unset or empty).

    Raises:
        ValueError: naming the variable and the allowed values.
    """
    choice = (os.environ.get(ENGINE_ENV) or "auto").strip().lower()
    if choice not in ENGINES:
        raise ValueError(
            f"{ENGINE_ENV} must be one of {', '.join(ENGINES)}; got {os.environ[ENGINE_ENV]!r}"
        )
    return choice


def _is_export(folder: Path) -> bool:
    return all((folder / name).is_file() for name in EXPORT_FILES)


def export_folder(model_id: str) -> Path | None:
    """The CTranslate2 export in ``ct2/`` of the model folder ``model_id``, or of the Hub
    repo ``model_id`` (only that sub-folder downloaded, into the Hub cache; offline, what the
    cache holds); ``None`` when it has none.

    Raises:
        huggingface_hub errors: the repo cannot be reached.
    """
    local = Path(model_id).expanduser()
    if local.is_dir():
        return local / EXPORT_DIR if _is_export(local / EXPORT_DIR) else None
    from huggingface_hub import HfApi, snapshot_download
    from huggingface_hub.errors import OfflineModeIsEnabled

    endpoint = os.environ.get("HF_ENDPOINT") or None  # huggingface_hub reads it once, at import
    try:
        files = HfApi(endpoint=endpoint).list_repo_files(model_id)
    except OfflineModeIsEnabled:
        files = None  # whatever the cache holds
    if files is not None and not any(name.startswith(f"{EXPORT_DIR}/") for name in files):
        return None
    root = snapshot_download(
        model_id,
        allow_patterns=[f"{EXPORT_DIR}/*"],
        endpoint=endpoint,
        local_files_only=files is None,
    )
    folder = Path(root) / EXPORT_DIR
    return folder if _is_export(folder) else None


def load_engine(model_id: str, choice: str | None = None) -> CTranslate2Engine | None:
    """The engine ``choice`` (default :func:`engine_choice`) asks for ``model_id``: a
    :class:`CTranslate2Engine` on the model's export, or ``None`` for ``generate``. ``auto``
    falls back to ``generate`` (logging why) when ``ctranslate2`` is missing, the model has
    no export or it cannot be loaded.

    Raises:
        RuntimeError: ``ctranslate2`` was asked for and cannot run (the message says why).
    """
    choice = choice or engine_choice()
    if choice == "generate":
        return None
    forced = choice == "ctranslate2"
    why = None
    if importlib.util.find_spec("ctranslate2") is None:
        why = "ctranslate2 is not installed (pip install 'ctranslate2>=4.5,<5')"
    else:
        try:
            folder = export_folder(model_id)
            if folder is None:
                why = (
                    f"{model_id} has no CTranslate2 export in {EXPORT_DIR}/ (write one with "
                    f"`hfattn export MODEL --format ctranslate2 MODEL/{EXPORT_DIR}`)"
                )
            else:
                return CTranslate2Engine(folder, threads=torch.get_num_threads())
        except Exception as exc:  # auto: a missing fast path must not stop the Space
            if forced:
                raise RuntimeError(
                    f"{ENGINE_ENV}=ctranslate2: cannot load the CTranslate2 export of "
                    f"{model_id}: {exc}"
                ) from exc
            why = f"its CTranslate2 export cannot be loaded ({type(exc).__name__}: {exc})"
    if forced:
        raise RuntimeError(f"{ENGINE_ENV}=ctranslate2 but {why}")
    logger.info("translating with transformers' generate: %s", why)
    return None


@torch.no_grad()
def translate_one(context: frame.Context, sentence: str, num_beams: int, max_new_tokens: int):
    """``(input_ids, generated_ids)`` of one sentence, decoded with beam search (at most as
    many new tokens as the decoder has positions) by the context's engine (CTranslate2) or
    ``generate``."""
    input_ids = torch.tensor([source_ids(context, sentence)])
    limit = target_limit(context.model.config)
    max_new_tokens = min(max_new_tokens, limit or max_new_tokens)
    if context.engine is not None:
        generated = context.engine.generate(
            context.model, context.tokenizer, input_ids[0].tolist(), num_beams, max_new_tokens
        )
        return input_ids, generated
    generated = context.model.generate(
        input_ids=input_ids,
        attention_mask=torch.ones_like(input_ids),
        num_beams=num_beams,
        max_new_tokens=max_new_tokens,
        do_sample=False,
    )
    return input_ids, generated
