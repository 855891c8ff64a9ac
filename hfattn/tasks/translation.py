"""The translation task (``task: translation``): parallel sentence pairs, a seq2seq tokenizer
built on the training pairs, teacher-forced cross-entropy, BLEU / chrF / exact match and masked
next-token accuracy on held-out pairs, and a few translated sentences as the sample.

Data sources (:func:`hfattn.data.translation.load_translation_splits`): the Bible (Debian's
SWORD modules), the embedded ``dates`` / ``numbers`` / ``date-normalization`` generators,
``spa.txt`` by path or URL, or a Hub dataset with a ``translation`` column.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..data.seq2seq import PairBatches, pad_pairs
from ..evaluation.translation import (
    encode_sources,
    teacher_forced_scores,
    text_scores,
    translate_texts,
)
from ..schema import (
    BuiltTokenizerSection,
    EvaluationSection,
    GenerationSection,
    RecipeBase,
    TrainingSection,
    require,
    require_choice,
    require_positive,
)
from ..training.job import TrainingJob
from .base import Task, TaskInfo, model_loss

logger = logging.getLogger(__name__)

PREPROCESSINGS = ("chollet", "geron")
ON_TOO_LONG = ("warn", "error")

DATASET_NAMES = {
    "bible": ("Bible en-es (World English Bible / Reina-Valera 1909)", "sword-bible-en-es"),
    "dates": ("CLDR dates en-es (babel)", "hfattn-dates-en-es"),
    "numbers": ("Numbers in words en-es (num2words)", "hfattn-numbers-en-es"),
    "date-normalization": ("Date normalisation (Géron)", "hfattn-date-normalization"),
}

METRIC_NAMES = {
    "bleu": "BLEU (sacrebleu)",
    "chrf": "chrF",
    "exact_match": "Exact match",
    "token_accuracy": "Masked next-token accuracy",
    "loss": "Loss (nats/token)",
}


# ---- recipe sections -----------------------------------------------------------------------
@dataclass
class Seq2SeqTokenizerSection(BuiltTokenizerSection):
    """``tokenizer:`` — built on the training pairs (:class:`~hfattn.schema.BuiltTokenizerSection`):
    one vocabulary for both languages (``joint``) or one per language merged into one id
    space."""

    joint: bool = True


@dataclass
class PairDataSection:
    """``data:`` — ``source`` is ``bible``, ``dates``, ``numbers``, ``date-normalization``, a
    ``spa.txt`` path or URL, or a Hub dataset id / local dataset folder; pairs whose source
    (target) is longer than ``max_source_length`` (``max_target_length``) tokens are cut, with a
    warning (``on_too_long: warn``) or refused (``error``)."""

    source: str = "dates"
    source_lang: str = "en"
    target_lang: str | None = None
    size: int | None = None
    seed: int = 0
    preprocessing: str | None = None
    validation_fraction: float = 0.15
    test_fraction: float = 0.15
    train_size: int | None = None
    max_source_length: int = 128
    max_target_length: int = 128
    on_too_long: str = "warn"

    def __post_init__(self):
        if self.preprocessing is not None:
            require_choice(self.preprocessing, "data.preprocessing", PREPROCESSINGS)
        require_choice(self.on_too_long, "data.on_too_long", ON_TOO_LONG)
        require_positive(self, "data", "size", "train_size", "max_source_length")
        require(self.max_target_length > 1, "data.max_target_length", "must be > 1")
        for name in ("validation_fraction", "test_fraction"):
            value = getattr(self, name)
            require(0 <= value < 0.5, f"data.{name}", f"must be in [0, 0.5), got {value}")


@dataclass
class TranslationEvaluationSection(EvaluationSection):
    """``evaluation:`` — teacher-forced loss and token accuracy on every pair of a split; BLEU,
    chrF and exact match of decoded translations (``num_beams``) on at most ``max_examples``
    pairs (``null``: all)."""

    num_beams: int = 1
    max_new_tokens: int = 128
    max_examples: int | None = None

    def __post_init__(self):
        super().__post_init__()
        require_positive(self, "evaluation", "num_beams", "max_new_tokens", "max_examples")


@dataclass
class TranslationGenerationSection(GenerationSection):
    """``generation:`` — decoding defaults (beam search) and ``examples``, the sentences
    translated after training (default: the first three test sources)."""

    do_sample: bool = False
    num_beams: int = 4
    max_new_tokens: int = 64
    examples: list[str] = field(default_factory=list)


@dataclass
class TranslationRecipe(RecipeBase):
    """A translation experiment (see ``recipes/bahdanau_dates_en_es.yaml``)."""

    task: str = "translation"
    model: dict[str, Any] = field(default_factory=lambda: {"type": "bahdanau"})
    tokenizer: Seq2SeqTokenizerSection = field(default_factory=Seq2SeqTokenizerSection)
    data: PairDataSection = field(default_factory=PairDataSection)
    training: TrainingSection = field(default_factory=TrainingSection)
    evaluation: TranslationEvaluationSection = field(default_factory=TranslationEvaluationSection)
    generation: TranslationGenerationSection = field(default_factory=TranslationGenerationSection)


# ---- pieces ----------------------------------------------------------------------------------
def load_pairs(data: PairDataSection, source: str | None = None) -> dict[str, tuple[list, list]]:
    """``{split: (sources, targets)}`` of the recipe's data (or of ``source``)."""
    from ..data.translation import load_translation_splits

    splits = load_translation_splits(
        source or data.source,
        source_lang=data.source_lang,
        target_lang=data.target_lang,
        size=data.size,
        seed=data.seed,
        preprocessing=data.preprocessing,
        validation_fraction=data.validation_fraction,
        test_fraction=data.test_fraction,
        train_size=data.train_size,
    )
    target_lang = target_language(splits["train"], data.source_lang)
    return {
        split: (
            [row[data.source_lang] for row in dataset["translation"]],
            [row[target_lang] for row in dataset["translation"]],
        )
        for split, dataset in splits.items()
    }


def target_language(dataset, source_lang: str) -> str:
    """The language key of the ``translation`` column that is not ``source_lang``."""
    languages = list(dataset.features["translation"])
    others = [lang for lang in languages if lang != source_lang]
    if len(others) != 1:
        raise ValueError(
            f"data.source_lang: {source_lang!r} with languages {languages}: expected one other"
        )
    return others[0]


def reference_text(tokenizer, text: str) -> str:
    """``text`` as the tokenizer can write it back: its normaliser applied (lowercase, stripped
    punctuation for word-level), words joined by single spaces where ``decode`` does so, but
    out-of-vocabulary words kept — the reference that BLEU and exact match compare with."""
    from tokenizers import models

    backend = tokenizer.backend_tokenizer
    if backend.normalizer is not None:
        text = backend.normalizer.normalize_str(text)
    if isinstance(backend.model, models.WordLevel) and backend.decoder is None:
        pieces = backend.pre_tokenizer.pre_tokenize_str(text) if backend.pre_tokenizer else []
        text = " ".join(piece for piece, _ in pieces) if pieces else text
    return " ".join(text.split())


def encode_targets(tokenizer, texts: list[str], limit: int, on_too_long: str) -> list[list[int]]:
    """Label ids of ``texts`` (ending in ``<eos>``), cut to ``limit`` tokens like the sources."""
    with_eos = tokenizer(text_target=list(texts))["input_ids"]
    too_long = [i for i, ids in enumerate(with_eos) if len(ids) > limit]
    if too_long:
        require(
            on_too_long == "warn",
            "data.max_target_length",
            f"target {too_long[0]} has {len(with_eos[too_long[0]])} tokens (> {limit})",
        )
        logger.warning("%d target(s) longer than %d tokens were truncated", len(too_long), limit)
        for i in too_long:
            with_eos[i] = with_eos[i][: limit - 1] + [tokenizer.eos_token_id]
    return with_eos


translation_loss = model_loss
"""Teacher-forced token cross-entropy of a padded batch (the model shifts the labels)."""


def score_split(
    model, tokenizer, sources, targets, evaluation: TranslationEvaluationSection, data
) -> dict:
    """Loss, perplexity, token accuracy, BLEU, chrF and exact match on one split."""
    src_ids = encode_sources(tokenizer, sources, data.max_source_length, on_too_long="warn")
    tgt_ids = encode_targets(tokenizer, targets, data.max_target_length, "warn")
    step = evaluation.batch_size
    batches = (
        pad_pairs(src_ids[k : k + step], tgt_ids[k : k + step], tokenizer.pad_token_id)
        for k in range(0, len(src_ids), step)
    )
    scores = teacher_forced_scores(model, batches)
    n = len(sources) if evaluation.max_examples is None else evaluation.max_examples
    predictions = translate_texts(
        model,
        tokenizer,
        sources[:n],
        batch_size=evaluation.batch_size,
        num_beams=evaluation.num_beams,
        max_new_tokens=evaluation.max_new_tokens,
    )
    references = [reference_text(tokenizer, t) for t in targets[:n]]
    scores.update(text_scores(predictions, references))
    scores["num_examples"] = n
    return scores


class TranslationTask(Task):
    """``task: translation`` — source sentence → target sentence with an encoder-decoder."""

    name = "translation"
    recipe_class = TranslationRecipe
    default_model_type = "bahdanau"
    card = TaskInfo(
        pipeline_tag="translation",
        task_name="Translation",
        auto_class="AutoModelForSeq2SeqLM",
        usage=(
            'inputs = tokenizer({example}, return_tensors="pt")\n'
            "output = model.generate(**inputs, num_beams=4, max_new_tokens=50)\n"
            "print(tokenizer.decode(output[0], skip_special_tokens=True))"
        ),
        intended_use=(
            "Teaching and experimentation with attention-based encoder-decoders: translating "
            "short sentences of the training domain and inspecting attention maps."
        ),
        limitations=(
            "Trained on a small parallel corpus of short sentences: long or out-of-domain "
            "inputs degrade quickly, rare words become `<unk>`, and outputs must not be relied "
            "on for real translation work."
        ),
        space_app="translation",
        default_example="I love you.",
        architecture_suffixes=("ForConditionalGeneration", "ForSeq2SeqLM", "MTModel"),
        peft_task_type="SEQ_2_SEQ_LM",
    )

    def build_tokenizer(self, recipe: TranslationRecipe, sources, targets):
        """The seq2seq tokenizer of the ``tokenizer:`` section, built on the training pairs."""
        from ..translation_tokenizers import build_translation_tokenizer

        t, d = recipe.tokenizer, recipe.data
        target_lang = d.target_lang or "target"
        pairs = [{d.source_lang: s, target_lang: g} for s, g in zip(sources, targets, strict=True)]
        return build_translation_tokenizer(
            pairs,
            kind=t.type,
            vocab_size=t.vocab_size,
            joint=t.joint,
            source_lang=d.source_lang,
            target_lang=target_lang,
            min_frequency=t.min_frequency,
            model_max_length=d.max_source_length,
            **t.normalization_options(),
        )

    def build_job(self, recipe: TranslationRecipe) -> TrainingJob:
        """Load the pairs, build tokenizer and model, and wire batches, loss and evaluation."""
        from transformers import AutoModelForSeq2SeqLM

        from ..recipes import validate_model_section

        d = recipe.data
        pairs = load_pairs(d)
        train_sources, train_targets = pairs["train"]
        tokenizer = self.build_tokenizer(recipe, train_sources, train_targets)
        config = validate_model_section(recipe.model)
        config.vocab_size = len(tokenizer)
        if getattr(config, "decoder_vocab_size", None) is not None:  # Marian's separate size
            config.decoder_vocab_size = len(tokenizer)
        for name in ("pad_token_id", "unk_token_id", "bos_token_id", "eos_token_id"):
            setattr(config, name, getattr(tokenizer, name))
        config.decoder_start_token_id = tokenizer.bos_token_id
        if hasattr(config, "max_source_positions") and "max_source_positions" not in recipe.model:
            config.max_source_positions = d.max_source_length
        torch.manual_seed(recipe.training.seed)
        model = AutoModelForSeq2SeqLM.from_config(config)

        batches = PairBatches(
            encode_sources(
                tokenizer, train_sources, d.max_source_length, on_too_long=d.on_too_long
            ),
            encode_targets(tokenizer, train_targets, d.max_target_length, d.on_too_long),
            recipe.training.batch_size,
            pad_token_id=tokenizer.pad_token_id,
            seed=recipe.training.seed,
        )
        e, g = recipe.evaluation, recipe.generation

        def evaluate(model, split: str) -> dict:
            sources, targets = pairs[split]
            return score_split(model, tokenizer, sources, targets, e, d)

        examples = list(g.examples) or pairs["test"][0][:3]

        def sample(model) -> str:
            kwargs = _decoding_kwargs(g)
            translations = translate_texts(model, tokenizer, examples, **kwargs)
            return "\n".join(f"{s}  →  {t}" for s, t in zip(examples, translations, strict=True))

        dataset = DATASET_NAMES.get(d.source, (d.source,) * 2)
        return TrainingJob(
            model=model,
            tokenizer=tokenizer,
            batches=batches,
            compute_loss=translation_loss,
            evaluate=evaluate,
            eval_splits=tuple(e.splits),
            sample=sample,
            card_metadata=self.card_metadata(dataset, METRIC_NAMES),
        )

    def generation_defaults(self, recipe: TranslationRecipe) -> dict:
        """Beam width, length and sampling settings saved in ``generation_config.json``."""
        return {k: v for k, v in _decoding_kwargs(recipe.generation).items() if v is not None}

    def evaluate_folder(
        self, model_dir: Path, recipe: TranslationRecipe, splits: list[str], *, data=None
    ) -> dict[str, dict]:
        """Loss, token accuracy, BLEU, chrF and exact match of a saved model."""
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        import hfattn.models  # noqa: F401  (registers the model types)

        pairs = load_pairs(recipe.data, data)
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForSeq2SeqLM.from_pretrained(model_dir)
        return {
            split: score_split(model, tokenizer, *pairs[split], recipe.evaluation, recipe.data)
            for split in splits
        }


def _decoding_kwargs(generation: TranslationGenerationSection) -> dict:
    kwargs = generation.generate_kwargs()
    kwargs.pop("seed")
    if not kwargs["do_sample"]:
        for name in ("temperature", "top_k", "top_p"):
            kwargs.pop(name)
    return kwargs


TASK = TranslationTask()

__all__ = [
    "TASK",
    "TranslationRecipe",
    "TranslationTask",
    "load_pairs",
    "reference_text",
    "score_split",
    "translation_loss",
]
