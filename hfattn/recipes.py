"""Recipes: one YAML file per experiment, validated against a typed schema.

A recipe names the model, tokenizer, data, training, evaluation, generation and Hub
settings. :func:`load_recipe` merges the YAML (and ``--set key=value`` overrides) into the
OmegaConf structured schema below, so unknown keys and wrong types are rejected with the
dotted name of the field before anything is trained; value checks (ranges, choices) follow
in each section's ``__post_init__``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from .training.optim import OPTIMIZERS
from .training.schedules import SCHEDULES

MIXED_PRECISION = ("no", "bf16", "fp16")
TRAINING_MODES = ("stateless", "stateful")
TASKS = ("causal-lm",)


class RecipeError(ValueError):
    """A recipe field is unknown, mistyped or out of range (the message names the field)."""


def _require(condition: bool, field_name: str, message: str) -> None:
    if not condition:
        raise RecipeError(f"{field_name}: {message}")


def _require_choice(value: str, field_name: str, allowed: tuple[str, ...]) -> None:
    _require(value in allowed, field_name, f"{value!r} is not one of {', '.join(allowed)}")


def _require_positive(section: object, prefix: str, *names: str) -> None:
    for name in names:
        value = getattr(section, name)
        _require(value is None or value > 0, f"{prefix}.{name}", f"must be > 0, got {value}")


@dataclass
class TokenizerSection:
    """``tokenizer:`` — ``char`` builds a character vocabulary from the training text."""

    type: str = "char"
    min_frequency: int = 1

    def __post_init__(self):
        _require_choice(self.type, "tokenizer.type", ("char",))
        _require_positive(self, "tokenizer", "min_frequency")


@dataclass
class DataSection:
    """``data:`` — ``source`` is ``shakespeare`` (embedded), a text file path or a Hub dataset id."""

    source: str = "shakespeare"
    text_column: str = "text"
    validation_fraction: float = 0.05
    test_fraction: float = 0.05

    def __post_init__(self):
        for name in ("validation_fraction", "test_fraction"):
            value = getattr(self, name)
            _require(0 < value < 0.5, f"data.{name}", f"must be in (0, 0.5), got {value}")


@dataclass
class TrainingSection:
    """``training:`` — the Accelerate loop (see :mod:`hfattn.training.engine`)."""

    mode: str = "stateless"
    seq_len: int = 100
    window_shift: int | None = None
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
    seed: int = 1337

    def __post_init__(self):
        _require_choice(self.mode, "training.mode", TRAINING_MODES)
        _require_choice(self.optimizer, "training.optimizer", tuple(OPTIMIZERS))
        _require_choice(self.schedule, "training.schedule", tuple(SCHEDULES))
        _require_choice(self.mixed_precision, "training.mixed_precision", MIXED_PRECISION)
        _require_positive(
            self,
            "training",
            "seq_len",
            "window_shift",
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
        _require(self.warmup_steps >= 0, "training.warmup_steps", "must be >= 0")
        _require(self.weight_decay >= 0, "training.weight_decay", "must be >= 0")
        _require(len(self.betas) == 2, "training.betas", "must be two numbers [beta1, beta2]")


@dataclass
class EvaluationSection:
    """``evaluation:`` — splits scored at the end (``validation`` is also scored periodically)."""

    splits: list[str] = field(default_factory=lambda: ["validation", "test"])
    batch_size: int = 32
    seq_len: int = 256

    def __post_init__(self):
        for split in self.splits:
            _require_choice(split, "evaluation.splits", ("train", "validation", "test"))
        _require_positive(self, "evaluation", "batch_size", "seq_len")


@dataclass
class GenerationSection:
    """``generation:`` — the sample printed at the end of training and the CLI defaults."""

    prompt: str = ""
    max_new_tokens: int = 300
    do_sample: bool = True
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    num_beams: int = 1
    seed: int = 0

    def __post_init__(self):
        _require_positive(self, "generation", "max_new_tokens", "temperature", "top_k", "num_beams")
        _require(self.top_p is None or 0 < self.top_p <= 1, "generation.top_p", "must be in (0, 1]")


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
        _require(
            not self.push_to_hub or bool(self.repo_id),
            "hub.repo_id",
            "is required when hub.push_to_hub is true",
        )


@dataclass
class Recipe:
    """A whole experiment. ``model`` holds ``type`` (a registered ``model_type``), an optional
    ``preset`` and any field of that model's config (``vocab_size`` comes from the tokenizer)."""

    name: str = "experiment"
    task: str = "causal-lm"
    output_dir: str | None = None
    model: dict[str, Any] = field(default_factory=lambda: {"type": "char-rnn"})
    tokenizer: TokenizerSection = field(default_factory=TokenizerSection)
    data: DataSection = field(default_factory=DataSection)
    training: TrainingSection = field(default_factory=TrainingSection)
    evaluation: EvaluationSection = field(default_factory=EvaluationSection)
    generation: GenerationSection = field(default_factory=GenerationSection)
    hub: HubSection = field(default_factory=HubSection)

    def __post_init__(self):
        _require_choice(self.task, "task", TASKS)
        if self.output_dir is None:
            self.output_dir = str(Path("runs") / self.name)

    def to_yaml(self) -> str:
        """The resolved recipe as YAML (written next to the trained model)."""
        return OmegaConf.to_yaml(OmegaConf.structured(self))


def load_recipe(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Recipe:
    """Read a recipe YAML, apply ``key=value`` overrides and validate everything.

    Raises:
        RecipeError: naming the offending field (``training.batch_size: ...``).
        FileNotFoundError: when ``path`` does not exist.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"recipe file not found: {path}")
    try:
        merged = OmegaConf.merge(
            OmegaConf.structured(Recipe),
            OmegaConf.load(path),
            OmegaConf.from_dotlist(list(overrides)),
        )
        recipe = OmegaConf.to_object(merged)
    except OmegaConfBaseException as err:
        reason = str(err).splitlines()[0]
        raise RecipeError(f"{getattr(err, 'full_key', None) or path}: {reason}") from None
    validate_model_section(recipe.model)
    return recipe


def validate_model_section(model: dict[str, Any]):
    """Check ``model:`` against the config class of ``model.type`` and build that config.

    Returns the config (with a placeholder vocabulary size)."""
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    import hfattn  # noqa: F401  (registers the model types)

    model = dict(model)
    model_type = model.pop("type", None)
    _require(model_type is not None, "model.type", "is required")
    _require(model_type in CONFIG_MAPPING, "model.type", f"unknown model type {model_type!r}")
    config_cls = CONFIG_MAPPING[model_type]
    _require("vocab_size" not in model, "model.vocab_size", "is set from the tokenizer")
    preset = model.pop("preset", None)
    known = {f.name for f in dataclasses.fields(config_cls)}
    for key in model:
        _require(key in known, f"model.{key}", f"is not a field of {config_cls.__name__}")
    try:
        if preset is not None:
            return config_cls.from_preset(preset, **model)
        return AutoConfig.for_model(model_type, **model)
    except (ValueError, TypeError) as err:
        raise RecipeError(f"model.{err}") from None


__all__ = ["Recipe", "RecipeError", "load_recipe", "validate_model_section"]


JOB_BUILDERS = {"causal-lm": "hfattn.training.causal_lm:build_causal_lm_job"}
"""Task name → ``module:function`` building a :class:`~hfattn.training.engine.TrainingJob`."""


def build_job(recipe: Recipe):
    """Turn a validated recipe into a training job (model, tokenizer, data, evaluation)."""
    import importlib

    module, func = JOB_BUILDERS[recipe.task].split(":")
    return getattr(importlib.import_module(module), func)(recipe)


def run_recipe(recipe: Recipe, *, resume: bool = False, callbacks=()):
    """Train a recipe end to end; push to the Hub when ``hub.push_to_hub`` is set."""
    from .training.causal_lm import generation_kwargs
    from .training.engine import train

    job = build_job(recipe)
    defaults = {k: v for k, v in generation_kwargs(recipe.generation).items() if k != "seed"}
    result = train(
        job,
        recipe.training,
        recipe.output_dir,
        resume=resume,
        recipe_yaml=recipe.to_yaml(),
        recipe_name=recipe.name,
        generation_defaults=defaults,
        callbacks=callbacks,
    )
    if recipe.hub.push_to_hub and not result.interrupted:
        from accelerate import PartialState

        if PartialState().is_main_process:
            from .hub.push import push_model_folder

            push_model_folder(
                result.output_dir,
                recipe.hub.repo_id,
                private=recipe.hub.private,
                space=recipe.hub.space,
            )
    return result
