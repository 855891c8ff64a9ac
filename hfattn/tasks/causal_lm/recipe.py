"""The causal-LM recipe (``task: causal-lm``): its sections, the choices they check against,
and the metrics its validation reports.

The ``tokenizer:`` section follows the model: ``type: auto`` (the default) is ``char`` for a
model built from a config and ``pretrained`` (the checkpoint's own tokenizer, loaded from the
same folder or Hub id) for a pretrained one; naming the other type is an error, since a
pretrained model's embeddings only fit its own vocabulary. GPT-2 ships no pad token: the
``eos`` token doubles as pad (packed training never pads; ``generate`` needs the id).

Light by design: parsing a recipe imports this module, and it imports neither torch,
transformers nor datasets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ...common.field_checks import require, require_choice, require_default, require_positive
from ...data.tables import TABLE_FORMATS
from ...data.text import EMBEDDED, check_text_source
from ...recipes.model_section import is_pretrained
from ...recipes.registry import register_task_recipe
from ...recipes.schema import (
    EvaluationSection,
    GenerationSection,
    RecipeBase,
    SplitTextDataSection,
    WordDropoutTrainingSection,
)

TRAINING_MODES = ("stateless", "packed", "stateful")

TOKENIZER_TYPES = ("auto", "char", "pretrained")

METRIC_NAMES = {
    "loss": "Loss (nats/char)",
    "perplexity": "Perplexity",
    "bits_per_char": "Bits per character",
    "accuracy": "Next-character accuracy",
}
"""Display names of the metrics of a character model (one token = one character)."""

SUBWORD_METRIC_NAMES = {
    **METRIC_NAMES,
    "loss": "Loss (nats/token)",
    "perplexity": "Perplexity (per token)",
    "accuracy": "Next-token accuracy",
}
"""Display names of the metrics of a subword model (GPT-2): bits per character stay per
character, so both kinds compare in one table."""

REPORTED_METRICS = tuple(METRIC_NAMES)
"""The choices of ``training.metric_for_best_model`` (``loss`` included)."""


@dataclass
class LMTokenizerSection:
    """``tokenizer:`` — ``char`` builds a character vocabulary from the training text;
    ``pretrained`` is the pretrained model's own tokenizer; ``auto`` picks the one that fits
    ``model:`` (see the module docstring)."""

    type: str = "auto"
    min_frequency: int = 1

    def __post_init__(self):
        require_choice(self.type, "tokenizer.type", TOKENIZER_TYPES)
        require_positive(self, "tokenizer", "min_frequency")


@dataclass
class TextDataSection(SplitTextDataSection):
    """``data:`` — ``source`` is ``shakespeare`` (embedded), a text file path or a Hub dataset
    id. The embedded plays have their own held-out splits: ``text_column``, the fractions and
    ``max_held_out_chars`` are refused with them; a plain text file has no columns:
    ``text_column`` is refused with it."""

    source: str = "shakespeare"
    validation_fraction: float = 0.05
    test_fraction: float = 0.05
    max_held_out_chars: int | None = 500_000
    """The most characters of each held-out split (validation, test) carved out of a source
    that has none (a text file, a table file or dataset without that split): a split takes its
    fraction's share of the characters, at most this many, so that every evaluation of a large
    corpus reads a bounded text. A source's own held-out splits (the embedded plays, a
    dataset's ``validation`` / ``test``) are the user's data and are kept whole. ``null``: no
    bound, the fractions alone."""

    embedded_sources: ClassVar[tuple[str, ...]] = tuple(EMBEDDED)
    file_fields: ClassVar[tuple[str, ...]] = (
        *SplitTextDataSection.file_fields,
        "max_held_out_chars",
    )

    def __post_init__(self):
        require_positive(self, "data", "max_held_out_chars")  # its value, then its use
        super().__post_init__()
        path = Path(self.source).expanduser()
        if path.is_file() and path.suffix.lower() not in TABLE_FORMATS:
            require_default(
                self,
                "data",
                ("text_column",),
                f"is not used by the plain text file {self.source} (a table file or a dataset "
                "has columns)",
            )


@dataclass
class LMTrainingSection(WordDropoutTrainingSection):
    """``training:`` — the engine's options, word dropout
    (:class:`~hfattn.recipes.schema.WordDropoutTrainingSection`) and how the corpus is cut into
    windows:
    ``stateless`` (shuffled windows of ``seq_len`` tokens every ``window_shift`` tokens),
    ``packed`` (the corpus cut into shuffled blocks of ``block_size`` tokens, documents
    joined by the separator token: GPT-2 fine-tuning) or ``stateful`` (contiguous streams,
    the recurrent state carried between batches). A field that the mode does not read is
    refused: ``seq_len`` in mode ``packed``, ``block_size`` in the others, ``window_shift``
    outside ``stateless``."""

    mode: str = "stateless"
    seq_len: int = 100
    window_shift: int | None = None
    block_size: int = 256

    def __post_init__(self):
        super().__post_init__()
        require_choice(self.mode, "training.mode", TRAINING_MODES)
        require_positive(self, "training", "seq_len", "window_shift", "block_size")
        require(
            self.mode != "packed" or self.window_shift is None,
            "training.window_shift",
            "does not apply to mode packed (blocks tile the corpus); use mode stateless",
        )
        require(
            self.mode != "stateful" or self.window_shift is None,
            "training.window_shift",
            "does not apply to mode stateful (each stream reads on where its last window "
            "ended); use mode stateless",
        )
        used, unused = (
            ("block_size", "seq_len") if self.mode == "packed" else ("seq_len", "block_size")
        )
        require_default(
            self,
            "training",
            (unused,),
            f"is not used in mode {self.mode}: its windows are training.{used} tokens long",
        )

    @property
    def window_field(self) -> tuple[str, int]:
        """``(field, tokens)`` of the training input length: ``block_size`` when packed."""
        if self.mode == "packed":
            return "training.block_size", self.block_size
        return "training.seq_len", self.seq_len


@dataclass
class LMEvaluationSection(EvaluationSection):
    """``evaluation:`` — held-out text read as contiguous streams of ``seq_len`` windows
    (a Transformer scores each window on its own, so ``seq_len`` is its context)."""

    seq_len: int = 256
    """Tokens a window: a model without a recurrent state (GPT-2) scores each window on its own,
    so it is the context; a model that carries its state (the char-RNN) scores the same for any
    length, which sets the positions a pass reads (its memory) and the unit that
    ``max_examples`` counts."""

    def __post_init__(self):
        super().__post_init__()
        require_positive(self, "evaluation", "seq_len")


@dataclass
class TextGenerationSection(GenerationSection):
    """``generation:`` — the prompt continued after training (empty: start from ``<bos>``)."""

    prompt: str = ""


@dataclass
class CausalLMRecipe(RecipeBase):
    """A causal-LM experiment (see ``recipes/char_rnn_shakespeare.yaml``)."""

    task: str = "causal-lm"
    model: dict[str, Any] = field(default_factory=lambda: {"type": "char-rnn"})
    tokenizer: LMTokenizerSection = field(default_factory=LMTokenizerSection)
    data: TextDataSection = field(default_factory=TextDataSection)
    training: LMTrainingSection = field(default_factory=LMTrainingSection)
    evaluation: LMEvaluationSection = field(default_factory=LMEvaluationSection)
    generation: TextGenerationSection = field(default_factory=TextGenerationSection)

    def __post_init__(self):
        super().__post_init__()
        pretrained = is_pretrained(self.model)
        wanted = "pretrained" if pretrained else "char"
        require(
            self.tokenizer.type in ("auto", wanted),
            "tokenizer.type",
            f"{self.tokenizer.type!r} does not fit "
            + (
                f"the pretrained model {self.model['pretrained']!r}, which brings its own "
                "tokenizer: use auto or pretrained (or leave the tokenizer section out)"
                if pretrained
                else "a model built from a config (model.type): use auto or char"
            ),
        )
        require(
            not pretrained or self.tokenizer.min_frequency == 1,
            "tokenizer.min_frequency",
            "applies to the char tokenizer only (a pretrained model brings its own vocabulary)",
        )
        require(
            not pretrained or self.training.word_dropout == 0,
            "training.word_dropout",
            "applies to a model built from model.type (char tokenizer, <unk> as replacement), "
            "not to a pretrained model, whose tokenizer and embeddings are its own",
        )
        require(
            pretrained or self.lora is None,
            "lora",
            "applies to a pretrained model (model: <hub id | folder>), not to one trained from "
            "scratch",
        )


RECIPE_CLASS = CausalLMRecipe


TASK_RECIPE = register_task_recipe(
    "causal-lm", RECIPE_CLASS, REPORTED_METRICS, check_text_source, embedded_sources=EMBEDDED
)
"""The task ``causal-lm`` as recipe parsing knows it (:mod:`hfattn.recipes.registry`).
``data.source`` must name a text corpus it can load, checked before any data is read
(:func:`hfattn.data.text.check_text_source`)."""

__all__ = [
    "TASK_RECIPE",
    "METRIC_NAMES",
    "RECIPE_CLASS",
    "REPORTED_METRICS",
    "SUBWORD_METRIC_NAMES",
    "TOKENIZER_TYPES",
    "TRAINING_MODES",
    "CausalLMRecipe",
    "LMEvaluationSection",
    "LMTokenizerSection",
    "LMTrainingSection",
    "TextDataSection",
    "TextGenerationSection",
]
