"""Serving a CTranslate2 export: :class:`CTranslate2Translation` loads the folder and
translates as :func:`hfattn.tasks.translation.inference.translate_texts` does: the same
tokenizer (sources end with ``<eos>``, no prefix), the same truncation of long sources, the
decoder started from ``decoder_start_token_id``, stopped at ``eos_token_id``, decoded with
``skip_special_tokens=True`` and stripped; its defaults (beam width, length, length penalty,
n-gram blocking) come from ``generation_config.json``. :func:`evaluate_export` scores an export
on a recipe's data.

``ctranslate2`` is loaded by :func:`~hfattn.export.ctranslate2_runtime.require_ctranslate2`
(which chooses its int8 matrix product); it, torch and transformers are imported inside the
functions.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path

from ..storage.model_folder import GENERATION_CONFIG_FILE
from ..tasks.translation.encoding import encode_sources, load_pairs
from .checks import QUANTIZATIONS
from .ctranslate2_runtime import require_ctranslate2
from .decoding import DecodingSettings
from .export_folder import EXPORT_FILES, EXPORT_INFO_FILE

logger = logging.getLogger(__name__)

COMPUTE_TYPES = ("default", "auto", *QUANTIZATIONS, "int16", "bfloat16", "int8_bfloat16")
"""What :class:`CTranslate2Translation` may compute in (``default``: the export's own type, or
the nearest one the device supports)."""
DEVICES = ("cpu", "cuda", "auto")


class CTranslate2Translation:
    """Translate with a folder written by
    :func:`~hfattn.export.export_folder.export_ctranslate2`, as hfattn's PyTorch path
    (:func:`~hfattn.tasks.translation.inference.translate_texts`) does with the model.

    Args:
        folder: the export.
        device: ``cpu``, ``cuda`` or ``auto``.
        compute_type: one of :data:`COMPUTE_TYPES` (``default``: the export's quantization,
            or the nearest type the device runs).
        intra_threads: threads per translation (0: CTranslate2's default).
        inter_threads: translations run in parallel.

    Attributes:
        defaults: the :class:`DecodingSettings` of the folder's ``generation_config.json``.
        translator / tokenizer: the ``ctranslate2.Translator`` and the model's tokenizer.

    Raises:
        ValueError: a folder that is no export (naming the missing file), a bad ``device`` or
            ``compute_type`` (naming the allowed values), before the model is loaded.
        ImportError: ``ctranslate2`` is not installed.
    """

    def __init__(
        self,
        folder: str | Path,
        device: str = "cpu",
        compute_type: str = "default",
        *,
        intra_threads: int = 0,
        inter_threads: int = 1,
    ):
        folder = Path(folder).expanduser()
        if not folder.is_dir():
            raise ValueError(f"CTranslate2 export not found: {folder} is not a folder")
        for name in EXPORT_FILES:
            if not (folder / name).is_file():
                raise ValueError(
                    f"{folder} is not an hfattn CTranslate2 export: {name} is missing "
                    "(write one with `hfattn export MODEL --format ctranslate2 OUT`)"
                )
        if device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}; got {device!r}")
        if compute_type not in COMPUTE_TYPES:
            raise ValueError(
                f"compute_type must be one of {', '.join(COMPUTE_TYPES)}; got {compute_type!r}"
            )
        ctranslate2 = require_ctranslate2()
        if device != "auto" and compute_type not in ("default", "auto"):
            supported = sorted(ctranslate2.get_supported_compute_types(device))
            if compute_type not in supported:
                raise ValueError(
                    f"compute_type={compute_type!r} is not supported on {device} here (supported: "
                    f"{', '.join(supported)}; or 'default')"
                )
        from transformers import PreTrainedTokenizerFast

        self.folder = folder
        self.info = json.loads((folder / EXPORT_INFO_FILE).read_text("utf-8"))
        generation = folder / GENERATION_CONFIG_FILE
        saved = json.loads(generation.read_text("utf-8")) if generation.is_file() else {}
        self.defaults = DecodingSettings.from_generation_config(saved)
        self.tokenizer = PreTrainedTokenizerFast.from_pretrained(folder)
        self.translator = ctranslate2.Translator(
            str(folder),
            device=device,
            compute_type=compute_type,
            intra_threads=intra_threads,
            inter_threads=inter_threads,
        )
        self._end_tokens = self.tokenizer.convert_ids_to_tokens(self.info["eos_token_ids"])

    def settings(self, **overrides) -> DecodingSettings:
        """:attr:`defaults` with the given ``overrides`` (``None`` keeps the default), and
        ``max_new_tokens`` cut (with a warning) to the positions the export holds."""
        settings = self.defaults.updated(**overrides)
        limit = self.info.get("max_new_tokens")
        if limit and settings.max_new_tokens > limit:
            logger.warning(
                "max_new_tokens %d is more than the decoder's %d positions: cut to %d",
                settings.max_new_tokens,
                limit,
                limit,
            )
            settings = replace(
                settings, max_new_tokens=limit, min_new_tokens=min(settings.min_new_tokens, limit)
            )
        return settings

    def generate_ids(
        self,
        input_ids: Sequence[Sequence[int]],
        *,
        batch_size: int = 32,
        **decoding,
    ) -> list[list[int]]:
        """The token ids each source (ids as the tokenizer gives them, ``<eos>`` included)
        translates to, without the decoder start token and the end token: ``generate``'s
        output rows less their first token, the end token and the padding.

        ``decoding``: fields of :class:`DecodingSettings` (``None``: the default).

        Raises:
            ValueError: ``batch_size`` < 1, or a decoding setting out of range.
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1; got {batch_size!r}")
        settings = self.settings(**decoding)
        if not input_ids:
            return []
        convert = self.tokenizer.convert_ids_to_tokens
        results = self.translator.translate_batch(
            [convert(list(ids)) for ids in input_ids],
            max_batch_size=batch_size,
            end_token=self._end_tokens,
            max_input_length=0,  # sources are cut to the model's limit by the caller
            **settings.ctranslate2_options(),
        )
        to_ids = self.tokenizer.convert_tokens_to_ids
        return [to_ids(result.hypotheses[0]) for result in results]

    def translate(
        self,
        texts: Sequence[str],
        *,
        num_beams: int | None = None,
        max_new_tokens: int | None = None,
        length_penalty: float | None = None,
        no_repeat_ngram_size: int | None = None,
        batch_size: int = 32,
        on_too_long: str = "warn",
        **decoding,
    ) -> list[str]:
        """Translate ``texts`` (any order and lengths); an empty or blank source gives ``""``.
        Sources longer than the model accepts are cut with a warning (``on_too_long="warn"``)
        or refused (``"error"``); ``None`` settings take the :attr:`defaults`.

        Raises:
            ValueError: a source that is not valid text, ``batch_size`` < 1, a decoding
                setting out of range, or (``on_too_long="error"``)
                :class:`~hfattn.tasks.translation.encoding.SourceTooLongError`.
        """
        # transformers (seconds): `hfattn --help` imports this module
        from ..tokenization.characters import require_text

        for i, text in enumerate(texts):
            require_text(text, f"source {i}")
        decoding.update(
            num_beams=num_beams,
            max_new_tokens=max_new_tokens,
            length_penalty=length_penalty,
            no_repeat_ngram_size=no_repeat_ngram_size,
        )
        self.defaults.updated(**decoding)  # bad settings fail before any work
        outputs = [""] * len(texts)
        todo = [i for i, text in enumerate(texts) if text.strip()]
        if not todo:
            return outputs
        encoded = encode_sources(
            self.tokenizer,
            [texts[i] for i in todo],
            self.info.get("max_source_tokens"),
            on_too_long=on_too_long,
        )
        generated = self.generate_ids(encoded, batch_size=batch_size, **decoding)
        decoded = self.tokenizer.batch_decode(generated, skip_special_tokens=True)
        for i, text in zip(todo, decoded, strict=True):
            outputs[i] = text.strip()
        return outputs

    def __repr__(self) -> str:
        return (
            f"CTranslate2Translation({str(self.folder)!r}, device={self.translator.device!r}, "
            f"compute_type={self.translator.compute_type!r}, defaults={asdict(self.defaults)})"
        )


def evaluate_export(
    folder: str | Path,
    recipe,
    splits: Sequence[str],
    *,
    data: str | None = None,
    num_beams: int | None = None,
    max_new_tokens: int | None = None,
    compute_type: str = "default",
) -> dict[str, dict]:
    """BLEU, chrF and exact match of the export in ``folder`` on ``splits`` of a translation
    ``recipe``'s data (or of ``data``), as the model's own scoring
    (:func:`~hfattn.tasks.translation.job.decoded_scores`) but translated by CTranslate2 with
    the export's saved generation settings (or the ``num_beams`` / ``max_new_tokens`` given).
    No teacher-forced loss: the export translates, it is not trained.

    Raises:
        ValueError: ``folder`` is no export, or a decoding setting out of range.
        ImportError: ``ctranslate2`` is not installed.
    """
    from ..tasks.translation.job import decoded_rows, decoded_scores  # torch on use, as above

    translator = CTranslate2Translation(folder, compute_type=compute_type)
    settings = {"num_beams": num_beams, "max_new_tokens": max_new_tokens}
    beams = translator.settings(**settings).num_beams  # bad settings fail before the data loads
    pairs = load_pairs(recipe.data, data, splits)
    e, seed = recipe.evaluation, recipe.data.seed

    def translate(texts: list[str], rows) -> list[str]:
        return translator.translate(texts, batch_size=e.batch_size, **settings)

    scores = {}
    for split in splits:
        sources, targets = pairs[split]
        rows = decoded_rows(split, len(sources), e, beams, True, seed)
        scores[split] = decoded_scores(translate, translator.tokenizer, sources, targets, rows)
    return scores
