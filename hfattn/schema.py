"""The recipe sections every task shares, and the checks that name a bad field.

A recipe is ``name``, ``task``, ``output_dir``, ``model`` (validated against the model's config
class), ``training`` (the engine's options, :class:`TrainingSection`; a task may subclass it to
add its own batching fields), ``evaluation`` / ``generation`` (bases here, extended by each
task), the task's own ``tokenizer`` and ``data`` sections (bases here where tasks share them:
:class:`BuiltTokenizerSection`, :class:`SplitTextDataSection`), and ``hub``. Each task module
(:mod:`hfattn.tasks`) declares its recipe class as a subclass of :class:`RecipeBase`; OmegaConf
then rejects unknown keys and wrong types with the dotted name of the field, and every
section's ``__post_init__`` checks values (ranges, choices).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from .training.schedules import SCHEDULES

MIXED_PRECISION = ("no", "bf16", "fp16")
ON_NONFINITE_LOSS = ("stop", "skip")
SPLITS = ("train", "validation", "test")
TOKENIZER_KINDS = ("word", "char", "bpe")
"""The tokenizers a ``tokenizer:`` section can build on the training texts."""


class RecipeError(ValueError):
    """A recipe field is unknown, mistyped or out of range (the message names the field)."""


def require(condition: bool, field_name: str, message: str) -> None:
    """Raise :class:`RecipeError` ``"<field_name>: <message>"`` unless ``condition``."""
    if not condition:
        raise RecipeError(f"{field_name}: {message}")


def require_choice(value: str | None, field_name: str, allowed: tuple[str, ...]) -> None:
    """``value`` must be one of ``allowed`` (the message lists them)."""
    require(value in allowed, field_name, f"{value!r} is not one of {', '.join(allowed)}")


def require_positive(section: object, prefix: str, *names: str) -> None:
    """Every named field of ``section`` must be ``None`` or > 0."""
    for name in names:
        value = getattr(section, name)
        require(value is None or value > 0, f"{prefix}.{name}", f"must be > 0, got {value}")


def require_fraction(section: object, prefix: str, *names: str, high: float = 0.5) -> None:
    """Every named field of ``section`` must lie in the open interval (0, ``high``)."""
    for name in names:
        value = getattr(section, name)
        require(0 < value < high, f"{prefix}.{name}", f"must be in (0, {high}), got {value}")


def require_reported_metric(metric: str, reported: Sequence[str]) -> None:
    """``training.metric_for_best_model`` must be ``loss`` or one of ``reported``, the metrics
    the task's validation reports (the message lists them)."""
    choices = tuple(dict.fromkeys(("loss", *reported)))
    require(
        metric in choices,
        "training.metric_for_best_model",
        f"{metric!r} is not one of {', '.join(choices)} (what this task's validation reports)",
    )


@dataclass
class TrainingSection:
    """``training:`` — the Accelerate loop (see :mod:`hfattn.training.engine`).

    ``on_nonfinite_loss``: on a NaN / infinite training loss, ``stop`` (keep the last good
    checkpoint) or ``skip`` that optimizer step (its gradients are dropped; counted in
    ``metrics.jsonl`` and ``eval_results.json``); after ``max_skipped_steps`` skipped steps the
    next one stops the run."""

    batch_size: int = 32
    gradient_accumulation_steps: int = 1
    epochs: int = 1
    max_steps: int | None = None
    max_minutes: float | None = None
    optimizer: str = "adamw"
    learning_rate: float = 1e-3
    weight_decay: float = 0.0
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    schedule: str = "constant"
    warmup_steps: int = 0
    max_grad_norm: float | None = 1.0
    mixed_precision: str = "no"
    log_every: int = 50
    eval_every: int | None = 500
    save_every: int | None = 500
    keep_checkpoints: int = 2
    load_best_at_end: bool = True
    metric_for_best_model: str = "loss"
    """The validation metric that picks the best checkpoint (``loss``, or e.g. ``macro_f1``,
    ``accuracy``, ``bleu``: any number the task's evaluation reports)."""
    greater_is_better: bool | None = None
    """Whether a larger ``metric_for_best_model`` is better; ``None``: not for names ending in
    ``loss``, yes otherwise (as ``transformers.TrainingArguments``)."""
    seed: int = 1337
    on_nonfinite_loss: str = "stop"
    max_skipped_steps: int = 10

    @property
    def larger_metric_is_better(self) -> bool:
        """``greater_is_better``, or inferred from ``metric_for_best_model``'s name."""
        if self.greater_is_better is not None:
            return self.greater_is_better
        return not self.metric_for_best_model.endswith("loss")

    def __post_init__(self):
        from .training.optim import OPTIMIZERS  # torch: not needed to import the sections

        require_choice(self.on_nonfinite_loss, "training.on_nonfinite_loss", ON_NONFINITE_LOSS)
        require(
            self.max_skipped_steps >= 0,
            "training.max_skipped_steps",
            f"must be >= 0, got {self.max_skipped_steps}",
        )
        require_choice(self.optimizer, "training.optimizer", tuple(OPTIMIZERS))
        require_choice(self.schedule, "training.schedule", tuple(SCHEDULES))
        # YAML 1.1 reads a bare `no` (in the file or in --set) as false, which OmegaConf then
        # stores in this str field as "False": the user wrote "no".
        if self.mixed_precision in (False, "False"):
            self.mixed_precision = "no"
        require_choice(self.mixed_precision, "training.mixed_precision", MIXED_PRECISION)
        require_positive(
            self,
            "training",
            "batch_size",
            "gradient_accumulation_steps",
            "epochs",
            "max_steps",
            "max_minutes",
            "learning_rate",
            "log_every",
            "eval_every",
            "save_every",
            "keep_checkpoints",
            "max_grad_norm",
        )
        require(
            bool(self.metric_for_best_model.strip()),
            "training.metric_for_best_model",
            "must name a validation metric such as loss, accuracy or macro_f1",
        )
        require(self.warmup_steps >= 0, "training.warmup_steps", "must be >= 0")
        require(self.weight_decay >= 0, "training.weight_decay", "must be >= 0")
        require(len(self.betas) == 2, "training.betas", "must be two numbers [beta1, beta2]")
        require(
            all(0 <= b < 1 for b in self.betas),
            "training.betas",
            f"each must be in [0, 1), got {list(self.betas)}",
        )


@dataclass
class BuiltTokenizerSection:
    """``tokenizer:`` — a tokenizer built on the training texts
    (:func:`hfattn.translation_tokenizers.build_translation_tokenizer`): ``word`` (Keras
    ``TextVectorization``-like, the ``vocab_size`` most frequent words), ``char`` or ``bpe``.
    ``lowercase`` / ``strip_punctuation`` default to the kind's own (word: both on; char and
    bpe: both off). Tasks subclass it for their own defaults and fields."""

    type: str = "word"
    vocab_size: int = 8000
    lowercase: bool | None = None
    strip_punctuation: bool | None = None
    min_frequency: int = 1

    def __post_init__(self):
        require_choice(self.type, "tokenizer.type", TOKENIZER_KINDS)
        require_positive(self, "tokenizer", "vocab_size", "min_frequency")

    def normalization_options(self) -> dict[str, bool]:
        """The ``lowercase`` / ``strip_punctuation`` keyword arguments the recipe sets (those
        left ``null`` are omitted, so the tokenizer kind's defaults apply)."""
        return {
            name: value
            for name, value in (
                ("lowercase", self.lowercase),
                ("strip_punctuation", self.strip_punctuation),
            )
            if value is not None
        }


@dataclass
class SplitTextDataSection:
    """``data:`` — texts from ``source`` (an embedded corpus, a local file or a Hub dataset id;
    ``text_column`` names the text column of a file or dataset), with ``validation_fraction`` /
    ``test_fraction`` carved out of ``train`` where the source has no such split. Tasks
    subclass it for their own default source, fractions and fields."""

    source: str = ""
    text_column: str = "text"
    validation_fraction: float = 0.1
    test_fraction: float = 0.1

    def __post_init__(self):
        require_fraction(self, "data", "validation_fraction", "test_fraction")


@dataclass
class EvaluationSection:
    """``evaluation:`` — splits scored at the end (``validation`` is also scored periodically)."""

    splits: list[str] = field(default_factory=lambda: ["validation", "test"])
    batch_size: int = 32

    def __post_init__(self):
        for split in self.splits:
            require_choice(split, "evaluation.splits", SPLITS)
        require_positive(self, "evaluation", "batch_size")


@dataclass
class GenerationSection:
    """``generation:`` — ``generate()`` settings: the sample shown after training and the
    defaults saved in ``generation_config.json``."""

    max_new_tokens: int = 300
    do_sample: bool = True
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    num_beams: int = 1
    seed: int = 0

    def __post_init__(self):
        require_positive(self, "generation", "max_new_tokens", "temperature", "top_k", "num_beams")
        require(self.top_p is None or 0 < self.top_p <= 1, "generation.top_p", "must be in (0, 1]")

    def generate_kwargs(self) -> dict:
        """``generate()`` keyword arguments (``seed`` included: callers seed torch with it)."""
        return {
            "max_new_tokens": self.max_new_tokens,
            "do_sample": self.do_sample,
            "temperature": self.temperature,
            "top_k": self.top_k,
            "top_p": self.top_p,
            "num_beams": self.num_beams,
            "seed": self.seed,
        }


@dataclass
class HubSection:
    """``hub:`` — publishing at the end of training and the model card's metadata."""

    push_to_hub: bool = False
    repo_id: str | None = None
    private: bool = False
    space: bool = False
    license: str = "mit"
    language: list[str] = field(default_factory=lambda: ["en"])
    tags: list[str] = field(default_factory=list)
    datasets: list[str] = field(default_factory=list)
    base_model: str | None = None

    def __post_init__(self):
        require(
            not self.push_to_hub or bool(self.repo_id),
            "hub.repo_id",
            "is required when hub.push_to_hub is true",
        )


@dataclass
class LoraSection:
    """``lora:`` — a PEFT LoRA adapter on the named linear layers (module-name suffixes, as
    in ``peft.LoraConfig``); ``modules_to_save`` stay fully trainable (a classification
    head); ``fan_in_fan_out`` for GPT-2's ``Conv1D`` layers.

    The update of a frozen ``W`` is ``W + (alpha / r) · B A`` with ``A ∈ R^{r×in}``,
    ``B ∈ R^{out×r}`` (``B`` starts at zero)."""

    r: int = 8
    alpha: int = 16
    dropout: float = 0.1
    target_modules: list[str] | None = None
    modules_to_save: list[str] | None = None
    fan_in_fan_out: bool = False
    bias: str = "none"

    def __post_init__(self):
        require(self.r > 0, "lora.r", f"must be > 0, got {self.r}")
        require(self.alpha > 0, "lora.alpha", f"must be > 0, got {self.alpha}")
        require(0 <= self.dropout < 1, "lora.dropout", f"must be in [0, 1), got {self.dropout}")
        require(
            self.bias in ("none", "all", "lora_only"),
            "lora.bias",
            f"{self.bias!r} is not one of none, all, lora_only",
        )


@dataclass
class RecipeBase:
    """The sections every recipe has. A task's recipe class adds ``tokenizer``, ``data`` and
    its own ``training`` / ``evaluation`` / ``generation`` types.

    ``model`` holds ``type`` (a registered ``model_type``), an optional ``preset`` and any
    field of that model's config (``vocab_size`` comes from the tokenizer), or ``pretrained``
    (a Hub id or local folder, :mod:`hfattn.pretrained`; ``model: <id>`` is shorthand for it).
    ``lora`` (optional) trains a PEFT LoRA adapter instead of every weight."""

    name: str = "experiment"
    task: str = "causal-lm"
    output_dir: str | None = None
    model: dict[str, Any] = field(default_factory=dict)
    lora: LoraSection | None = None
    hub: HubSection = field(default_factory=HubSection)

    def __post_init__(self):
        if self.output_dir is None:
            self.output_dir = str(Path("runs") / self.name)

    def to_yaml(self) -> str:
        """The resolved recipe as YAML (written next to the trained model)."""
        return OmegaConf.to_yaml(OmegaConf.structured(self))


__all__ = [
    "SPLITS",
    "TOKENIZER_KINDS",
    "BuiltTokenizerSection",
    "EvaluationSection",
    "GenerationSection",
    "HubSection",
    "LoraSection",
    "RecipeBase",
    "RecipeError",
    "SplitTextDataSection",
    "TrainingSection",
    "require",
    "require_choice",
    "require_fraction",
    "require_positive",
    "require_reported_metric",
]
