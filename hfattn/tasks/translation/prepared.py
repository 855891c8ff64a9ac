"""The translation data prepared once on disk (:func:`hfattn.data.prepared.prepare`): the
tokenizer, trained on a bounded sample of the training pairs, and every split's token ids
and texts as memory-mapped ragged arrays (:mod:`hfattn.storage.ragged`), which the training
batches, the periodic validations and the sample read instead of the corpus.

A prepared folder (:func:`prepare_pairs`) holds:

- ``tokenizer/``: the tokenizer of the ``tokenizer:`` section (``save_pretrained``), trained on
  at most ``tokenizer.sample_pairs`` training pairs (:func:`tokenizer_sample`);
- for each split, ``{split}.source_ids`` / ``{split}.target_ids`` (:class:`RaggedIds`, ids
  with ``<eos>``) and ``{split}.source_texts`` / ``{split}.target_texts``
  (:class:`RaggedTexts`);
- ``pairs.json``: the rows of each split and what cutting them did
  (:meth:`~hfattn.tasks.translation.encoding.RowCutter.facts`), warned about again by every
  run that maps the folder.

The training sources are cut to ``data.max_source_length`` with ``data.on_too_long``; the
held-out sources are kept whole (the scoring cuts them to the model's limit,
:class:`~hfattn.tasks.translation.job.EncodedSplit`); the targets of every split are cut to
``data.max_target_length`` (training: ``data.on_too_long``; held out: a warning). The key of
the folder is the source's identity, every field of the ``data:`` section, the
``tokenizer:`` section and the loader's version (:func:`data_settings`); once the folder is
ready, prepared or found, one line states the pairs of every split (:func:`prepare_pairs`).

The pairs stay in their Arrow tables (memory-mapped for a dataset folder or a Hub dataset)
until encoded, :data:`ENCODE_BATCH` pairs at a time by the Rust tokenizer, so memory holds the
tokenizer's sample and one batch, whatever the corpus.
"""

from __future__ import annotations

import json
import logging
from contextlib import ExitStack
from dataclasses import asdict
from functools import partial
from pathlib import Path

import numpy as np
from transformers import PreTrainedTokenizerFast

from ...common.launch import process_rank
from ...common.progress import progress_bar
from ...data.held_out import log_split_sizes
from ...data.prepared import Prepared, prepare, source_identity
from ...data.translation import LOADER_VERSION
from ...storage.file_io import atomic_write_json
from ...storage.ragged import RaggedIds, RaggedTexts, RaggedWriter, ids_dtype
from ...tokenization.translation import BatchEncoder, build_translation_tokenizer
from .encoding import RowCutter, encode_flat, load_pair_splits, pair_batches, warn_cut
from .recipe import PairDataSection, TranslationRecipe

logger = logging.getLogger(__name__)

TASK_NAME = "translation"
"""The task part of a prepared folder's name."""
ENCODE_BATCH = 10_000
"""Pairs read, encoded and written at a time."""
TRAINER_PROGRESS_PAIRS = 100_000
"""The ``tokenizers`` trainer shows its own bar (at once, no delay) from this many sampled
pairs: below, training takes about a second."""
TOKENIZER_FOLDER = "tokenizer"
FACTS_FILE = "pairs.json"
SIDES = ("source", "target")


def data_settings(recipe: TranslationRecipe) -> dict:
    """The key of the recipe's prepared pairs: the identity of ``data.source``
    (:func:`~hfattn.data.prepared.source_identity`), every other field of the ``data:``
    section (``translation_column`` included), the ``tokenizer:`` section and the version of
    what the loader makes of a source (:data:`~hfattn.data.translation.LOADER_VERSION`);
    ``tokenizer.bpe_dropout`` is left out: it samples while training, from the same prepared
    texts and tokenizer (:mod:`~hfattn.tasks.translation.sampling`)."""
    data, tokenizer = asdict(recipe.data), asdict(recipe.tokenizer)
    tokenizer.pop("bpe_dropout")
    return {"source": source_identity(data.pop("source")), "data": data,
            "tokenizer": tokenizer, "loader": LOADER_VERSION}  # fmt: skip


def prepare_pairs(recipe: TranslationRecipe) -> Prepared:
    """The recipe's pairs prepared (see the module docstring), or found prepared; either way
    one line states the pairs of every split (read from ``pairs.json``)."""
    prepared = prepare(TASK_NAME, data_settings(recipe), partial(build_prepared, recipe),
                       what=f"the translation pairs of {recipe.data.source}")  # fmt: skip
    rows = {split: facts["rows"] for split, facts in PreparedPairs(prepared.folder).facts.items()}
    log_split_sizes(rows, "pairs", cap=recipe.data.max_held_out_pairs,
                    cap_field="data.max_held_out_pairs")  # fmt: skip
    return prepared


def build_prepared(recipe: TranslationRecipe, folder: Path) -> dict:
    """Fill ``folder``: the tokenizer trained on the sample, then every split encoded
    (:func:`encode_splits`); the manifest's facts."""
    d = recipe.data
    splits, target_lang = load_pair_splits(d)
    sources, targets = tokenizer_sample(splits["train"], recipe.tokenizer.sample_pairs, d.seed,
                                        d.source_lang, target_lang)  # fmt: skip
    shown = process_rank() == 0 and len(sources) >= TRAINER_PROGRESS_PAIRS
    if shown:  # the trainer's own bar is drawn on a terminal only: say what the wait is
        logger.info("training the %s tokenizer on %s pairs...", recipe.tokenizer.type,
                    f"{len(sources):,}")  # fmt: skip
    tokenizer = build_tokenizer(recipe, sources, targets, target_lang, show_progress=shown)
    del sources, targets
    tokenizer.save_pretrained(folder / TOKENIZER_FOLDER)
    tokenizer = load_tokenizer(folder)  # encode with what every later run loads
    facts = encode_splits(tokenizer, dict(splits), folder, d, target_lang, cut_train=True)
    return {"rows": {split: f["rows"] for split, f in facts.items()},
            "vocab_size": len(tokenizer), "target_lang": target_lang}  # fmt: skip


def tokenizer_sample(
    train, limit: int | None, seed: int, source_lang: str, target_lang: str
) -> tuple[list[str], list[str]]:
    """``(sources, targets)`` the tokenizer trains on: every pair of ``train`` (in order) when
    it has at most ``limit``, else ``limit`` pairs drawn at random with ``seed``, kept in
    corpus order."""
    if limit is not None and len(train) > limit:
        rows = np.random.default_rng(seed).choice(len(train), size=limit, replace=False)
        train = train.select(np.sort(rows))
    sources, targets = [], []
    with progress_bar(total=len(train), desc="tokenizer sample", unit="pair") as bar:
        for batch_sources, batch_targets in pair_batches(train, source_lang, target_lang,
                                                         ENCODE_BATCH):  # fmt: skip
            sources += batch_sources
            targets += batch_targets
            bar.update(len(batch_sources))
    return sources, targets


def build_tokenizer(
    recipe: TranslationRecipe,
    sources: list[str],
    targets: list[str],
    target_lang: str,
    show_progress: bool = False,
):
    """The seq2seq tokenizer of the ``tokenizer:`` section, built on the pairs ``sources`` /
    ``targets`` (:func:`tokenizer_sample`)."""
    t, d = recipe.tokenizer, recipe.data
    tokenizer = build_translation_tokenizer(
        list(zip(sources, targets, strict=True)),
        kind=t.type,
        vocab_size=t.vocab_size,
        joint=t.joint,
        source_lang=d.source_lang,
        target_lang=target_lang,
        min_frequency=t.min_frequency,
        model_max_length=d.max_source_length,
        show_progress=show_progress,
        **t.normalization_options(),
    )
    sharing = "joint" if t.joint else "per-language"
    logger.info("%s %s tokenizer (%s→%s): %d tokens", sharing, t.type, d.source_lang,
                target_lang, len(tokenizer))  # fmt: skip
    return tokenizer


def load_tokenizer(folder: Path):
    """The tokenizer saved in a prepared ``folder``."""
    return PreTrainedTokenizerFast.from_pretrained(Path(folder) / TOKENIZER_FOLDER)


def encode_splits(
    tokenizer, splits: dict, folder: Path, data: PairDataSection, target_lang: str, *,
    cut_train: bool,
) -> dict:  # fmt: skip
    """Encode every split of ``splits`` (name → ``Dataset``) into ``folder``
    (:func:`encode_split`), the training sources cut to ``data.max_source_length`` with
    ``data.on_too_long`` when ``cut_train`` (held-out sources: kept whole), every target to
    ``data.max_target_length``; the facts of each split, also written to ``pairs.json``."""
    facts = {}
    for name, dataset in splits.items():
        train = cut_train and name == "train"
        facts[name] = encode_split(
            tokenizer, dataset, folder, name, (data.source_lang, target_lang),
            source_limit=data.max_source_length if train else None,
            target_limit=data.max_target_length,
            on_too_long=data.on_too_long if train else "warn",
        )  # fmt: skip
    atomic_write_json(Path(folder) / FACTS_FILE, {"splits": facts})
    return facts


def encode_split(
    tokenizer,
    dataset,
    folder: Path,
    name: str,
    languages: tuple[str, str],
    *,
    source_limit: int | None,
    target_limit: int | None,
    on_too_long: str = "warn",
) -> dict:
    """Write split ``name`` of ``dataset`` (a ``translation`` column with the ``languages``
    ``(source, target)``) into ``folder``, :data:`ENCODE_BATCH` pairs at a time: the ids of
    both sides cut to their limits (:class:`~hfattn.tasks.translation.encoding.RowCutter`;
    ``None``: kept whole) and the texts. Returns ``{"rows", "cuts"}``."""
    backend = tokenizer.backend_tokenizer
    backend.no_truncation()  # what ``tokenizer(texts)`` does: every token kept, no padding
    backend.no_padding()
    encoder = BatchEncoder(backend)
    dtype = ids_dtype(len(tokenizer))
    eos = tokenizer.eos_token_id
    cutters = [RowCutter("source", source_limit, eos, on_too_long),
               RowCutter("target", target_limit, eos, on_too_long)]  # fmt: skip
    with ExitStack() as stack:
        ids = [stack.enter_context(RaggedWriter(folder, f"{name}.{side}_ids", dtype))
               for side in SIDES]  # fmt: skip
        texts = [stack.enter_context(RaggedWriter(folder, f"{name}.{side}_texts", np.uint8))
                 for side in SIDES]  # fmt: skip
        bar = stack.enter_context(progress_bar(total=len(dataset), desc=f"encoding {name}",
                                           unit="pair"))  # fmt: skip
        for batch in pair_batches(dataset, *languages, ENCODE_BATCH):
            for side_texts, cutter, id_writer, text_writer in zip(batch, cutters, ids, texts,
                                                                  strict=True):  # fmt: skip
                id_writer.add_flat(*cutter(*encode_flat(encoder, side_texts, dtype), side_texts))
                RaggedTexts.write(text_writer, side_texts)
            bar.update(len(batch[0]))
        for writer in ids + texts:
            writer.close()
    return {"rows": len(dataset), "cuts": [cutter.facts() for cutter in cutters]}


class PreparedPairs:
    """The splits encoded in ``folder`` (a prepared folder, or one :func:`encode_splits` wrote
    for ``hfattn evaluate``), mapped: :meth:`ids` and :meth:`texts` of a split."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.facts = json.loads((self.folder / FACTS_FILE).read_text())["splits"]

    def __contains__(self, split: str) -> bool:
        return split in self.facts

    def ids(self, split: str) -> tuple[RaggedIds, RaggedIds]:
        """``(sources, targets)``: the token ids of ``split``'s pairs."""
        return tuple(RaggedIds.open(self.folder, f"{split}.{side}_ids") for side in SIDES)

    def texts(self, split: str) -> tuple[RaggedTexts, RaggedTexts]:
        """``(sources, targets)``: the texts of ``split``'s pairs."""
        return tuple(RaggedTexts.open(self.folder, f"{split}.{side}_texts") for side in SIDES)

    def warn_cuts(self) -> None:
        """The warnings of the rows cut when the splits were encoded (one a side and split)."""
        for facts in self.facts.values():
            for cut in facts["cuts"]:
                warn_cut(cut)


__all__ = [
    "ENCODE_BATCH",
    "FACTS_FILE",
    "TOKENIZER_FOLDER",
    "TRAINER_PROGRESS_PAIRS",
    "PreparedPairs",
    "build_prepared",
    "build_tokenizer",
    "data_settings",
    "encode_split",
    "encode_splits",
    "load_tokenizer",
    "prepare_pairs",
    "tokenizer_sample",
]
