"""The translation training job: the pairs prepared on disk with their tokenizer
(:mod:`~hfattn.tasks.translation.prepared`), model from the ``model:`` section,
teacher-forced batches and loss, the scoring of a split (loss, token accuracy, BLEU, chrF,
exact match) and the translated sample.

A run scores its validation split at every ``training.eval_every`` steps from the split's
prepared ids and texts (:class:`EncodedSplit`, kept by :class:`EncodedSplits`), on the pairs
``evaluation.max_examples`` bounds (``evaluation.final_max_examples`` at the end): its
teacher-forced batches are cut from those pairs sorted by length (little padding) and
gathered from the mapped ids, and their translations decode in batches of sources sorted by
length (:func:`~hfattn.tasks.translation.inference.translate_texts` with the ids already
encoded).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from transformers import AutoModelForSeq2SeqLM

from ...batching.protocol import Batches
from ...batching.resampled import ResampledBatches
from ...batching.seq2seq import PairBatches, pad_ragged_pairs
from ...batching.token_buckets import BucketedBatches
from ...evaluation.examples import example_counts, scored_rows
from ...evaluation.translation import source_limit, teacher_forced_scores, text_scores
from ...models.seq2seq_utils import shift_tokens_right
from ...recipes.model_section import sized_model_config
from ...storage.ragged import RaggedIds, RaggedTexts
from ...training.regularization import WordDropout
from ...training.training_job import TrainingJob
from ..base import Task, model_loss
from .encoding import DATASET_NAMES, RowCutter, reference_text
from .inference import translate_texts
from .prepared import PreparedPairs, load_tokenizer
from .recipe import (
    LARGE_FINAL_SPLIT,
    METRIC_NAMES,
    PairDataSection,
    TranslationEvaluationSection,
    TranslationGenerationSection,
    TranslationRecipe,
)
from .sampling import SampledPairs

logger = logging.getLogger(__name__)

translation_loss = model_loss
"""Teacher-forced token cross-entropy of a padded batch (the model shifts the labels, unless
the batch gives ``decoder_input_ids``: :func:`dropped_words`)."""


def dropped_words(
    batch: dict, word_dropout: WordDropout, pad_token_id: int, decoder_start_token_id: int
) -> dict:
    r"""A padded training batch of pairs with word dropout (:class:`WordDropout
    <hfattn.training.regularization.WordDropout>`, Sennrich & Zhang 2019) on the source ids
    and on the decoder's input ids, ``y_in = [start, y_1, …, y_{T-1}]`` (the labels shifted
    right, as the model shifts them, :func:`~hfattn.models.seq2seq_utils.shift_tokens_right`),
    given as ``decoder_input_ids``; the labels, the tokens the decoder predicts, are left as
    they are. The job's ``noise``: the engine calls it on training batches only."""
    decoder_input_ids = shift_tokens_right(batch["labels"], pad_token_id, decoder_start_token_id)
    return {
        **batch,
        "input_ids": word_dropout(batch["input_ids"]),
        "decoder_input_ids": word_dropout(decoder_input_ids),
    }


class EncodedSplit:
    """One split's pairs as :func:`score_split` reads them: the source and target ids and
    texts of the prepared split (:meth:`PreparedPairs.ids
    <hfattn.tasks.translation.prepared.PreparedPairs.ids>`; the sources as the tokenizer gives
    them, the targets cut to ``data.max_target_length``), and what is made of them once and
    kept for the next scoring: the sources cut to each limit asked for
    (:class:`~hfattn.tasks.translation.encoding.RowCutter`), the references
    (:func:`~hfattn.tasks.translation.encoding.reference_text`), the length order of the
    teacher-forced batches and the first pairs a capped validation scores (:meth:`scored`)."""

    def __init__(
        self,
        tokenizer,
        source_ids: RaggedIds,
        target_ids: RaggedIds,
        source_texts: RaggedTexts,
        target_texts: RaggedTexts,
        data: PairDataSection,
        name: str = "split",
    ):
        self.tokenizer, self.data, self.name = tokenizer, data, name
        self.source_ids, self.target_ids = source_ids, target_ids
        self.source_texts, self.target_texts = source_texts, target_texts
        self._sources: dict[int | None, RaggedIds] = {}
        self._references: list[str] | None = None
        self._order: np.ndarray | None = None
        self._first: dict[int, EncodedSplit] = {}

    def __len__(self) -> int:
        return len(self.target_ids)

    def scored(self, rows: Sequence[int]) -> EncodedSplit:
        """The pairs ``rows`` (:func:`decoded_rows`) as a split of their own, read into memory
        (a cap bounds them), or this split itself when they are all of its pairs; the first
        ``N`` pairs are kept for the next scoring (every capped validation reads them)."""
        if isinstance(rows, range) and rows.start == 0 and len(rows) == len(self):
            return self
        first = isinstance(rows, range) and rows.start == 0
        if first and len(rows) in self._first:
            return self._first[len(rows)]
        source_texts, target_texts = (
            RaggedTexts(texts.data.take(rows)) for texts in (self.source_texts, self.target_texts)
        )
        pairs = EncodedSplit(self.tokenizer, self.source_ids.take(rows),
                             self.target_ids.take(rows), source_texts, target_texts, self.data,
                             self.name)  # fmt: skip
        if first:
            self._first[len(rows)] = pairs
        return pairs

    def sources(self, limit: int | None) -> RaggedIds:
        """The source ids cut to ``limit`` tokens, as :func:`encode_sources` gives them (too
        long sources warned about once per limit)."""
        if limit not in self._sources:
            cutter = RowCutter("source", limit, self.tokenizer.eos_token_id)
            self._sources[limit] = cutter.cut_ids(self.source_ids, self.source_texts)
        return self._sources[limit]

    def targets(self) -> RaggedIds:
        """The label ids, cut to ``data.max_target_length`` when the split was prepared."""
        return self.target_ids

    def references(self) -> list[str]:
        """Every target as the tokenizer can write it back (what BLEU compares with)."""
        if self._references is None:
            self._references = [reference_text(self.tokenizer, t) for t in self.target_texts]
        return self._references

    def teacher_forced_batches(self, batch_size: int) -> Iterator[dict]:
        """The pairs (sources cut to ``data.max_source_length``) sorted by source then target
        length and padded (:func:`~hfattn.batching.seq2seq.pad_ragged_pairs`) in batches of
        ``batch_size``: neighbours in length share a batch, so little of it is padding."""
        sources, targets = self.sources(self.data.max_source_length), self.targets()
        if self._order is None:
            self._order = np.lexsort((targets.lengths, sources.lengths))
        pad = self.tokenizer.pad_token_id
        for begin in range(0, len(self._order), batch_size):
            yield pad_ragged_pairs(sources, targets, self._order[begin : begin + batch_size], pad)


class EncodedSplits:
    """The splits of a run's prepared ``pairs``
    (:class:`~hfattn.tasks.translation.prepared.PreparedPairs`), each made an
    :class:`EncodedSplit` on its first scoring and kept for the next."""

    def __init__(self, tokenizer, pairs: PreparedPairs, data: PairDataSection):
        self.tokenizer, self.pairs, self.data = tokenizer, pairs, data
        self._splits: dict[str, EncodedSplit] = {}

    def __getitem__(self, split: str) -> EncodedSplit:
        if split not in self._splits:
            self._splits[split] = EncodedSplit(
                self.tokenizer, *self.pairs.ids(split), *self.pairs.texts(split), self.data, split
            )
        return self._splits[split]


def score_split(
    model,
    split: EncodedSplit,
    evaluation: TranslationEvaluationSection,
    decoding: dict | None = None,
    *,
    final: bool = False,
) -> dict:
    """Loss, perplexity, token accuracy, BLEU, chrF and exact match on the pairs of one encoded
    ``split`` that :func:`decoded_rows` chooses (``final``: the end of training and ``hfattn
    evaluate``), every score on the same pairs (:func:`score_pairs`), with ``num_examples``
    and, for a sample, ``sampled_from`` (:func:`~hfattn.evaluation.examples.example_counts`);
    the translations decode with ``decoding`` (``generate()`` keyword arguments, see
    :func:`scoring_decoding`), by default ``evaluation.num_beams`` and
    ``evaluation.max_new_tokens`` (the periodic validations of a training run)."""
    if decoding is None:
        decoding = {"num_beams": evaluation.num_beams, "max_new_tokens": evaluation.max_new_tokens}
    beams = decoding.get("num_beams") or 1
    rows = decoded_rows(split.name, len(split), evaluation, beams, final, split.data.seed)
    scores = score_pairs(model, split.scored(rows), evaluation.batch_size, decoding)
    scores.update(example_counts(rows, len(split)))
    return scores


def score_pairs(model, pairs: EncodedSplit, batch_size: int, decoding: dict) -> dict:
    """Loss, perplexity, token accuracy, BLEU, chrF and exact match on every pair of
    ``pairs``, ``batch_size`` pairs a batch: the teacher-forced pass with a bar counting the
    pairs (``validation: loss``), then the translations decoded with ``decoding`` with
    another (``validation: decoding``)."""
    tokenizer = pairs.tokenizer
    scores = teacher_forced_scores(model, pairs.teacher_forced_batches(batch_size),
                                   total=len(pairs), progress=f"{pairs.name}: loss")  # fmt: skip
    source_ids = pairs.sources(source_limit(model, tokenizer))

    def translate(texts, rows):  # the sources of these rows, already encoded
        return translate_texts(
            model,
            tokenizer,
            texts,
            batch_size=batch_size,
            source_ids=source_ids.take(rows).tolist(),
            progress=f"{pairs.name}: decoding",
            **decoding,
        )

    scores.update(
        decoded_scores(
            translate,
            tokenizer,
            pairs.source_texts,
            pairs.target_texts,
            range(len(pairs)),
            references=pairs.references(),
        )
    )
    return scores


def decoded_rows(
    name: str,
    size: int,
    evaluation: TranslationEvaluationSection,
    num_beams: int,
    final: bool,
    seed: int,
) -> Sequence[int]:
    """The rows of split ``name`` (``size`` pairs) that are scored, their loss and their
    translations: the first ``evaluation.max_examples`` (``null``: all); at the end of training
    and by ``hfattn evaluate`` (``final``), with ``evaluation.final_max_examples`` set, a
    random sample of that many drawn with ``seed`` (in split order,
    :func:`~hfattn.evaluation.examples.scored_rows`), and without it a warning when more than
    :data:`~hfattn.tasks.translation.recipe.LARGE_FINAL_SPLIT` pairs are decoded."""
    if final and evaluation.final_max_examples is not None:
        return scored_rows(size, evaluation.final_max_examples, seed=seed)
    rows = scored_rows(size, evaluation.max_examples)
    if final and len(rows) > LARGE_FINAL_SPLIT:
        logger.warning("%s: decoding %s pairs at beam %d; set evaluation.final_max_examples to "
                       "sample fewer", name, f"{len(rows):,}", num_beams)  # fmt: skip
    return rows


def decoded_scores(
    translate,
    tokenizer,
    sources,
    targets,
    rows: Sequence[int],
    *,
    references: list[str] | None = None,
) -> dict:
    """BLEU, chrF and exact match of ``translate`` (``(texts, rows)`` -> the translations of
    the sources of ``rows``: the model's ``generate()``, or a CTranslate2 export) on the pairs
    ``rows`` (:func:`decoded_rows`), against the references as ``tokenizer`` writes them
    (:func:`~hfattn.tasks.translation.encoding.reference_text`; ``references``: those of all
    ``targets``, written before), ``num_examples`` (the pairs decoded) and, for a sample of
    the split, ``sampled_from`` (its pairs)."""
    predictions = translate([sources[i] for i in rows], rows)
    if references is None:
        written = [reference_text(tokenizer, targets[i]) for i in rows]
    else:
        written = [references[i] for i in rows]
    return {**text_scores(predictions, written), **example_counts(rows, len(sources))}


def build_job(recipe: TranslationRecipe, task: Task) -> TrainingJob:
    """Map the prepared pairs (``task.prepare_data``: prepared once, then reused), build the
    model, and wire batches, loss and evaluation; ``task`` gives the card metadata the job
    records."""
    d = recipe.data
    prepared = task.prepare_data(recipe)
    pairs = PreparedPairs(prepared.folder)
    pairs.warn_cuts()
    tokenizer = load_tokenizer(prepared.folder)
    config = sized_model_config(recipe, tokenizer)
    if getattr(config, "decoder_vocab_size", None) is not None:  # Marian's separate size
        config.decoder_vocab_size = len(tokenizer)
    config.decoder_start_token_id = tokenizer.bos_token_id
    if hasattr(config, "max_source_positions") and "max_source_positions" not in recipe.model:
        config.max_source_positions = d.max_source_length
    torch.manual_seed(recipe.training.seed)
    model = AutoModelForSeq2SeqLM.from_config(config)

    batches = training_batches(recipe, tokenizer, pairs)
    t = recipe.training
    noise = None
    if t.word_dropout:
        noise = functools.partial(dropped_words,
                                  word_dropout=WordDropout.of_tokenizer(t.word_dropout, tokenizer),
                                  pad_token_id=tokenizer.pad_token_id,
                                  decoder_start_token_id=config.decoder_start_token_id)  # fmt: skip
    e, g = recipe.evaluation, recipe.generation

    encoded = EncodedSplits(tokenizer, pairs, d)

    def evaluate(model, split: str) -> dict:
        return score_split(model, encoded[split], e)

    final_decoding = scoring_decoding(decoding_kwargs(g), e.max_new_tokens)

    def final_evaluate(model, split: str) -> dict:
        return score_split(model, encoded[split], e, final_decoding, final=True)

    periodic = {"num_beams": e.num_beams, "max_new_tokens": e.max_new_tokens, "do_sample": False}
    # the validations' pairs (no final sample) decoded as they are: the engine reuses their
    # scores of the same weights
    same_scoring = final_decoding == periodic and e.final_max_examples is None

    examples = list(g.examples) or pairs.texts("test")[0][:3]

    def sample(model) -> str:
        kwargs = decoding_kwargs(g)
        torch.manual_seed(g.seed)  # a sampled translation is reproducible, as a causal LM's
        translations = translate_texts(model, tokenizer, examples, **kwargs)
        return "\n".join(f"{s}  →  {t}" for s, t in zip(examples, translations, strict=True))

    return task.training_job(
        recipe,
        DATASET_NAMES,
        METRIC_NAMES,
        model=model,
        tokenizer=tokenizer,
        batches=batches,
        compute_loss=translation_loss,
        evaluate=evaluate,
        final_evaluate=None if same_scoring else final_evaluate,
        sample=sample,
        data_preparation=prepared.record(),
        noise=noise,
    )


def training_batches(recipe: TranslationRecipe, tokenizer, pairs: PreparedPairs) -> Batches:
    """The training batches: length buckets of ``training.token_budget``
    (:class:`~hfattn.batching.token_buckets.BucketedBatches`) or length-grouped pairs
    (:class:`~hfattn.batching.seq2seq.PairBatches`) of the prepared ids; with
    ``tokenizer.bpe_dropout``, of the ids each epoch draws
    (:class:`~hfattn.tasks.translation.sampling.SampledPairs`), the buckets' shapes chosen on
    epoch 0's and their last one as wide as the longest ids an epoch can bring
    (:meth:`~hfattn.tasks.translation.sampling.SampledPairs.longest`;
    :class:`~hfattn.batching.resampled.ResampledBatches`)."""
    t, d, pad = recipe.training, recipe.data, tokenizer.pad_token_id

    def batcher(sources, targets, layout=None):
        if t.token_budget is not None:
            return BucketedBatches(sources, targets, token_budget=t.token_budget,
                                   num_buckets=t.length_buckets, pad_token_id=pad, seed=t.seed,
                                   layout=layout)  # fmt: skip
        return PairBatches(sources, targets, t.batch_size, pad_token_id=pad, seed=t.seed,
                           max_tokens=t.max_tokens, group_by_length=t.group_by_length)  # fmt: skip

    if not recipe.tokenizer.bpe_dropout:
        return batcher(*pairs.ids("train"))
    limits = (d.max_source_length, d.max_target_length)
    sampled = SampledPairs(tokenizer, pairs.texts("train"), recipe.tokenizer.bpe_dropout,
                           t.seed, limits)  # fmt: skip
    longest, min_rows = sampled.longest(), None  # the longest pair an epoch can bring
    if t.token_budget is not None:
        widths, rows = batcher(*sampled(0)).layout
        layout = (widths[:-1] + [longest], rows)
        return ResampledBatches(sampled, lambda s, r: batcher(s, r, layout))
    if t.max_tokens is not None:
        min_rows = min(t.batch_size, t.max_tokens // sum(longest))
    return ResampledBatches(sampled, batcher, min_rows)


def decoding_kwargs(generation: TranslationGenerationSection) -> dict:
    """``generate()`` keyword arguments of the ``generation:`` section: no ``seed``, no
    ``temperature`` / ``top_k`` / ``top_p`` unless it samples, ``early_stopping`` /
    ``length_penalty`` only for beam search and ``no_repeat_ngram_size`` only when set."""
    kwargs = generation.generate_kwargs()
    kwargs.pop("seed")
    if not kwargs["do_sample"]:
        for name in ("temperature", "top_k", "top_p"):
            kwargs.pop(name)
    if generation.num_beams > 1:
        kwargs["early_stopping"] = generation.early_stopping
        kwargs["length_penalty"] = generation.length_penalty
    if generation.no_repeat_ngram_size:
        kwargs["no_repeat_ngram_size"] = generation.no_repeat_ngram_size
    return kwargs


SCORING_SETTINGS = ("num_beams", "max_new_tokens", "no_repeat_ngram_size")
"""The saved generation settings a scored translation decodes with (beam search adds
:data:`BEAM_SETTINGS`); sampling settings are left out: scores are deterministic."""
BEAM_SETTINGS = ("early_stopping", "length_penalty")


def scoring_decoding(settings: dict, default_max_new_tokens: int, **overrides) -> dict:
    """The ``generate()`` keyword arguments a split is scored with at the end of training and
    by ``hfattn evaluate``: the model's generation settings ``settings`` (the ``generation:``
    section, as :func:`decoding_kwargs` gives it, or a saved ``generation_config.json``) with
    the ``overrides`` that are not ``None`` (``num_beams``, ``max_new_tokens``), greedy or beam
    search (never sampling); ``max_new_tokens`` unset in both: ``default_max_new_tokens``."""
    merged = {**settings, **{k: v for k, v in overrides.items() if v is not None}}
    kwargs = {k: merged[k] for k in SCORING_SETTINGS if merged.get(k) is not None}
    kwargs.setdefault("num_beams", 1)
    kwargs.setdefault("max_new_tokens", default_max_new_tokens)
    if kwargs["num_beams"] > 1:
        kwargs.update({k: merged[k] for k in BEAM_SETTINGS if merged.get(k) is not None})
    if not kwargs.get("no_repeat_ngram_size"):
        kwargs.pop("no_repeat_ngram_size", None)
    return {**kwargs, "do_sample": False}


__all__ = [
    "BEAM_SETTINGS",
    "SCORING_SETTINGS",
    "EncodedSplit",
    "EncodedSplits",
    "build_job",
    "decoded_rows",
    "decoded_scores",
    "decoding_kwargs",
    "dropped_words",
    "score_pairs",
    "score_split",
    "scoring_decoding",
    "training_batches",
    "translation_loss",
]
