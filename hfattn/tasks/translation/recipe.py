"""The translation recipe (``task: translation``): its sections, the choices they check
against, and the metrics its validation reports.

Light by design: parsing a recipe imports this module, and it imports neither torch,
transformers nor datasets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...common.extras import Extra
from ...common.field_checks import require, require_choice, require_default, require_positive
from ...data.bible import EXTRA as BIBLE_EXTRA
from ...data.bible import SOURCES as BIBLE_SOURCES
from ...data.translation import EMBEDDED, check_pair_source
from ...recipes.model_section import is_pretrained
from ...recipes.registry import register_task_recipe
from ...recipes.schema import (
    BuiltTokenizerSection,
    EvaluationSection,
    GenerationSection,
    RecipeBase,
    TokenBatchingSection,
    WordDropoutTrainingSection,
)

PREPROCESSINGS = ("chollet", "geron")
ON_TOO_LONG = ("warn", "error")
GROUP_BY_LENGTH = ("source", "target")

METRIC_NAMES = {
    "bleu": "BLEU (sacrebleu)",
    "chrf": "chrF",
    "exact_match": "Exact match",
    "token_accuracy": "Masked next-token accuracy",
    "loss": "Loss (nats/token)",
}
"""Every metric the validation reports → its display name (the card's ``model-index``)."""

REPORTED_METRICS = tuple(METRIC_NAMES)
"""The choices of ``training.metric_for_best_model`` (``loss`` included)."""


@dataclass
class Seq2SeqTokenizerSection(BuiltTokenizerSection):
    """``tokenizer:`` — built on the training pairs
    (:class:`~hfattn.recipes.schema.BuiltTokenizerSection`):
    one vocabulary for both languages (``joint``) or one per language merged into one id
    space, trained on at most ``sample_pairs`` training pairs."""

    joint: bool = True
    sample_pairs: int | None = 500_000
    """The tokenizer is trained on at most this many training pairs: a random sample drawn
    with ``data.seed`` (kept in corpus order) when the training split has more, else every
    pair (the Bible's 29 k: the shipped recipes train on all of theirs); every pair is then
    encoded with it. It bounds the memory and the seconds of a large corpus's tokenizer (the
    measured times: the translation page's "Large corpora"); ``null``: every pair."""

    bpe_dropout: float = 0.0
    r"""BPE-dropout (Provilkov et al. 2020, "BPE-Dropout: Simple and Effective Subword
    Regularization"; 0.1 in the paper): every epoch cuts the training pairs anew, each
    applicable merge of a BPE step dropped with this probability, so that the model meets many
    segmentations of each word; validation, test, translation and the saved tokenizer keep the
    deterministic one. Seeded with ``training.seed`` and the epoch: a resumed run meets the
    same ids. ``type: bpe`` only; 0: off (the translation page's "Small corpora")."""

    def __post_init__(self):
        super().__post_init__()
        require_positive(self, "tokenizer", "sample_pairs")
        require(
            0 <= self.bpe_dropout < 1,
            "tokenizer.bpe_dropout",
            f"must be in [0, 1) (0: off), got {self.bpe_dropout}",
        )
        require(
            not self.bpe_dropout or self.type == "bpe",
            "tokenizer.bpe_dropout",
            f"is for type bpe (merges to drop); type {self.type} has none (unigram sampling "
            "is not offered: tokenizers cannot seed it)",
        )


@dataclass
class PairDataSection:
    """``data:`` — ``source`` is ``bible``, ``dates``, ``numbers``, ``date-normalization``, a
    table file (``.jsonl`` / ``.json`` / ``.csv`` / ``.parquet``, a ``.tsv`` whose first line
    names the languages), a ``spa.txt`` path or URL (any other file), or a Hub dataset id /
    local dataset folder (:mod:`hfattn.data.translation`; ``docs/data.md``); pairs whose source
    (target) is longer than ``max_source_length`` (``max_target_length``) tokens are cut, with a
    warning (``on_too_long: warn``) or refused (``error``). An embedded source has its own
    pairs: ``translation_column`` and ``train_size`` are refused with it, and with the Bible,
    whose held-out splits are whole books, the fractions and ``max_held_out_pairs`` too."""

    source: str = "dates"
    source_lang: str = "en"
    target_lang: str | None = None
    """The language key of the targets; ``null``: the source's own (the one language beside
    ``source_lang`` in a table or dataset, an error where it has more; ``es`` for
    ``spa.txt``)."""
    translation_column: str = "translation"
    """The column of ``{language: text}`` dicts in a table file, a dataset folder or a Hub
    dataset. A source without it is read from two flat text columns named by ``source_lang``
    and ``target_lang`` (``en``, ``fr``)."""
    size: int | None = None
    seed: int = 0
    preprocessing: str | None = None
    validation_fraction: float = 0.15
    test_fraction: float = 0.15
    max_held_out_pairs: int | None = 3000
    """The most pairs of each held-out split (validation, test) carved out of a source that has
    none (``dates``, ``numbers``, ``date-normalization``, ``spa.txt``, a table file, a dataset
    without that split): a split takes its fraction's share of the pairs, at most this many,
    the size of a WMT dev or test set; the copies of a duplicate pair that would swell a split
    past it are dropped from the data. A source's own held-out splits (the Bible's books, a
    dataset's ``validation`` / ``test``) are the user's data and are kept whole. ``null``: no
    bound, the fractions alone."""
    train_size: int | None = None
    """With ``preprocessing: geron``, the pairs of a ``spa.txt`` file that go to ``train`` (the
    rest is cut into validation and test; ``null``: 100,000, Géron's); refused otherwise
    (``size`` keeps fewer pairs of any source)."""
    max_source_length: int = 128
    max_target_length: int = 128
    on_too_long: str = "warn"

    def __post_init__(self):
        if self.preprocessing is not None:
            require_choice(self.preprocessing, "data.preprocessing", PREPROCESSINGS)
        require_choice(self.on_too_long, "data.on_too_long", ON_TOO_LONG)
        require(
            isinstance(self.translation_column, str) and self.translation_column.strip() != "",
            "data.translation_column",
            f"must be a column name, got {self.translation_column!r}",
        )
        require_positive(
            self, "data", "size", "train_size", "max_source_length", "max_held_out_pairs"
        )
        require(self.max_target_length > 1, "data.max_target_length", "must be > 1")
        for name in ("validation_fraction", "test_fraction"):
            value = getattr(self, name)
            require(0 <= value < 0.5, f"data.{name}", f"must be in [0, 0.5), got {value}")
        if self.source in EMBEDDED:
            require_default(
                self,
                "data",
                ("translation_column", "train_size"),
                f"is not used by the embedded source {self.source} (it has its own pairs)",
            )
        if self.source in BIBLE_SOURCES:
            require_default(
                self,
                "data",
                ("validation_fraction", "test_fraction", "max_held_out_pairs"),
                f"is not used by {self.source}: its held-out splits are whole books",
            )
        if self.preprocessing != "geron":
            require_default(
                self,
                "data",
                ("train_size",),
                "is not used without data.preprocessing: geron (the pairs of a spa.txt file "
                "in train); data.size keeps fewer pairs",
            )


@dataclass
class TranslationTrainingSection(WordDropoutTrainingSection, TokenBatchingSection):
    """``training:`` — :class:`~hfattn.recipes.schema.TokenBatchingSection`, word dropout
    (:class:`~hfattn.recipes.schema.WordDropoutTrainingSection`), the length that groups pairs
    into batches (``group_by_length``) and batches cut by size: ``max_tokens`` (``null``:
    ``batch_size`` pairs a batch)."""

    group_by_length: str = "source"
    """The length each pool of 50 batches is sorted by before it is cut into batches:
    ``source``, or ``target`` (ties broken by the source length). ``target`` pads the
    decoder's positions least: with an RNN encoder, whose packed sequences skip padding, it
    trains more target tokens a second, since the output layer scores every padded target
    position against the whole vocabulary."""

    max_tokens: int | None = None
    """Cut the length-grouped batches by size instead of by count (fairseq's
    ``--max-tokens``): a batch takes pairs while its rows times its widest source plus widest
    target stay within ``max_tokens`` padded tokens, so short sentences come many to a batch
    and long ones few; ``batch_size`` then caps the rows. Must be at least
    ``data.max_source_length + data.max_target_length``; ``null``: ``batch_size`` pairs a
    batch."""

    def __post_init__(self):
        super().__post_init__()
        require_positive(self, "training", "max_tokens")
        require_choice(self.group_by_length, "training.group_by_length", GROUP_BY_LENGTH)
        require(
            self.max_tokens is None or self.token_budget is None,
            "training.max_tokens",
            "cannot be set with training.token_budget: pick one way to cut batches by size",
        )
        if self.token_budget is not None:
            require_default(
                self,
                "training",
                ("group_by_length",),
                "is not used with training.token_budget (length buckets group the pairs by "
                "source and target length)",
            )


LARGE_FINAL_SPLIT = 5_000
"""Pairs above which the decoding of a held-out split at the end of training (with the saved
beam search) is said in a warning naming ``evaluation.final_max_examples``: a beam of 4 over
15,000 pairs once took 70 minutes."""


@dataclass
class TranslationEvaluationSection(EvaluationSection):
    """``evaluation:`` — teacher-forced loss and token accuracy, and BLEU, chrF and exact match
    of the translations decoded with ``num_beams`` and ``max_new_tokens`` at each validation,
    all on the same pairs of a split: the first ``max_examples`` at each validation, a random
    sample of ``final_max_examples`` at the end (:class:`~hfattn.recipes.schema.EvaluationSection`;
    ``null``: every pair)."""

    max_examples: int | None = 500
    """The pairs of the validation split each periodic validation scores, its loss and its
    translations (the first ones; ``null``: every pair): decoding is the slow part of a
    validation, and 500 pairs keep it to seconds on a GPU and well under a minute on a CPU,
    however large the split."""
    final_max_examples: int | None = 1000
    """The pairs of a split scored at the end of training and by ``hfattn evaluate``: a random
    sample of this many drawn with ``data.seed`` (``sampled_from`` in ``eval_results.json`` says
    out of how many; ``null``: every pair). The end decodes with the saved beam search, the
    slowest phase of a run on a large corpus; a recipe whose held-out splits are a fixed
    benchmark (the Bible's books) sets it to ``null``."""
    num_beams: int = 1
    """The beam width of the translations decoded at each validation (the end of training
    decodes with the saved ``generation:`` settings)."""
    max_new_tokens: int = 128
    """The most tokens of a translation decoded at each validation, and at the end when the
    saved ``generation:`` settings set none."""

    def __post_init__(self):
        super().__post_init__()
        require_positive(self, "evaluation", "num_beams", "max_new_tokens")


@dataclass
class TranslationGenerationSection(GenerationSection):
    """``generation:`` — decoding defaults (beam search) and ``examples``, the sentences
    translated after training (default: the first three test sources)."""

    do_sample: bool = False
    num_beams: int = 4
    max_new_tokens: int = 64
    early_stopping: bool | str = False
    """Beam search stops once ``num_beams`` hypotheses have ended (``true``); goes on while
    the best running beam, scored at its current length, could still beat the worst of them
    (``false``, transformers' default); or while any could at the longest length
    (``"never"``). ``true`` is CTranslate2's rule too, so an ``hfattn export`` decodes
    exactly as the model. Beam search only: refused with ``num_beams: 1``."""
    length_penalty: float = 1.0
    """Beam search ranks ended hypotheses by ``log P(y) / |y|^length_penalty`` (``|y|``
    counts the end token): above 0 favours longer translations, below 0 shorter ones. Beam
    search only: refused with ``num_beams: 1``."""
    no_repeat_ngram_size: int = 0
    """Forbid any n-gram of this many target tokens to occur twice in a translation (greedy
    and beam search; ``generate``'s ``no_repeat_ngram_size``); 0: no constraint. It stops the
    loops an undertrained decoder falls into ("y el fin, y el fin, …")."""
    examples: list[str] = field(default_factory=list)

    def __post_init__(self):
        super().__post_init__()
        require(
            isinstance(self.no_repeat_ngram_size, int)
            and not isinstance(self.no_repeat_ngram_size, bool)
            and self.no_repeat_ngram_size >= 0,
            "generation.no_repeat_ngram_size",
            f"must be an integer >= 0 (0: off), got {self.no_repeat_ngram_size!r}",
        )
        require(
            isinstance(self.early_stopping, bool) or self.early_stopping == "never",
            "generation.early_stopping",
            f'{self.early_stopping!r} is not one of true, false, "never"',
        )
        require(
            isinstance(self.length_penalty, (int, float))
            and not isinstance(self.length_penalty, bool),
            "generation.length_penalty",
            f"must be a number, got {self.length_penalty!r}",
        )
        if self.num_beams == 1:
            require_default(
                self,
                "generation",
                ("early_stopping", "length_penalty"),
                "is not used without beam search (generation.num_beams > 1)",
            )


@dataclass
class TranslationRecipe(RecipeBase):
    """A translation experiment (see ``recipes/bahdanau_dates_en_es.yaml``)."""

    task: str = "translation"
    model: dict[str, Any] = field(default_factory=lambda: {"type": "bahdanau"})
    tokenizer: Seq2SeqTokenizerSection = field(default_factory=Seq2SeqTokenizerSection)
    data: PairDataSection = field(default_factory=PairDataSection)
    training: TranslationTrainingSection = field(default_factory=TranslationTrainingSection)
    evaluation: TranslationEvaluationSection = field(default_factory=TranslationEvaluationSection)
    generation: TranslationGenerationSection = field(default_factory=TranslationGenerationSection)

    def __post_init__(self):
        super().__post_init__()
        require(
            not is_pretrained(self.model),
            "model.pretrained",
            "does not apply to the translation task, which builds its model from model.type "
            "(random weights) and its tokenizer from the training pairs",
        )
        require(
            self.lora is None,
            "lora",
            "does not apply to the translation task: LoRA freezes trained weights, and this "
            "task trains a model.type from random weights; to adapt a trained translation "
            "model, wrap it in peft.LoraConfig in your own code (docs/models/index.md, LoRA "
            "target modules)",
        )
        widest = self.data.max_source_length + self.data.max_target_length
        require(
            self.training.max_tokens is None or self.training.max_tokens >= widest,
            "training.max_tokens",
            f"must be at least data.max_source_length + data.max_target_length ({widest}) so "
            f"that the longest pair fits in a batch, got {self.training.max_tokens}",
        )

    def required_extras(self) -> list[tuple[str, Extra]]:
        """The base recipe's extras, and ``bible`` for a Bible ``data.source``."""
        extras = super().required_extras()
        if self.data.source in BIBLE_SOURCES:
            extras.append((f"data.source: {self.data.source!r}", BIBLE_EXTRA))
        return extras


RECIPE_CLASS = TranslationRecipe


TASK_RECIPE = register_task_recipe(
    "translation", RECIPE_CLASS, REPORTED_METRICS, check_pair_source, embedded_sources=EMBEDDED
)
"""The task ``translation`` as recipe parsing knows it (:mod:`hfattn.recipes.registry`).
``data.source`` must name sentence pairs it can load, checked before any data is read
(:func:`hfattn.data.translation.check_pair_source`)."""

__all__ = [
    "LARGE_FINAL_SPLIT",
    "TASK_RECIPE",
    "METRIC_NAMES",
    "ON_TOO_LONG",
    "PREPROCESSINGS",
    "RECIPE_CLASS",
    "REPORTED_METRICS",
    "PairDataSection",
    "Seq2SeqTokenizerSection",
    "TranslationEvaluationSection",
    "TranslationGenerationSection",
    "TranslationRecipe",
    "TranslationTrainingSection",
]
