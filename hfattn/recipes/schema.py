"""The recipe sections every task shares (their checks name a bad field:
:mod:`hfattn.common.field_checks`).

A recipe is ``name``, ``task``, ``output_dir``, ``model`` (validated against the model's config
class), ``training`` (the engine's options, :class:`TrainingSection`, declared in
:mod:`hfattn.recipes.training_section` and imported here; a task may subclass it to add its own
batching fields), ``evaluation`` / ``generation`` (bases here, extended by each task), the
task's own ``tokenizer`` and ``data`` sections (bases here where tasks share them:
:class:`BuiltTokenizerSection`, :class:`SplitTextDataSection`), and ``hub``. Each task module
(:mod:`hfattn.tasks`) declares its recipe class as a subclass of :class:`RecipeBase`; OmegaConf
then rejects unknown keys and wrong types with the dotted name of the field, and every
section's ``__post_init__`` checks values (ranges, choices).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from omegaconf import OmegaConf

from ..common.extras import Extra, require_extras
from ..common.families import UNROLLED_PER_LENGTH
from ..common.field_checks import (
    RecipeError,
    require,
    require_choice,
    require_default,
    require_fraction,
    require_positive,
    require_reported_metric,
)
from ..storage.location import absolute_source
from .registry import embedded_sources
from .training_section import (
    MIXED_PRECISION,
    ON_NONFINITE_LOSS,
    TokenBatchingSection,
    TrainingSection,
    WordDropoutTrainingSection,
)

SPLITS = ("train", "validation", "test")
TOKENIZER_KINDS = ("word", "char", "bpe", "unigram")
"""The tokenizers a ``tokenizer:`` section can build on the training texts."""


@dataclass
class BuiltTokenizerSection:
    """``tokenizer:`` — a tokenizer built on the training texts
    (:func:`hfattn.tokenization.translation.build_translation_tokenizer`): ``word`` (Keras
    ``TextVectorization``-like, the ``vocab_size`` most frequent words), ``char``, ``bpe``
    (byte-pair encoding) or ``unigram`` (a unigram language model over pieces, Kudo 2018).
    ``lowercase`` / ``strip_punctuation`` default to the kind's own (word: both on; the others:
    both off). Tasks subclass it for their own defaults and fields."""

    type: str = "word"
    """``word``, ``char``, ``bpe`` or ``unigram``."""
    vocab_size: int = 8000
    """The most tokens kept (special tokens included), by frequency in the training texts."""
    lowercase: bool | None = None
    """Lower-case the texts first; ``null``: the kind's default."""
    strip_punctuation: bool | None = None
    """Drop punctuation first; ``null``: the kind's default."""
    min_frequency: int = 1
    """Tokens seen fewer times in the training texts are left out (1 for ``unigram``, which
    keeps pieces by likelihood)."""

    def __post_init__(self):
        require_choice(self.type, "tokenizer.type", TOKENIZER_KINDS)
        require_positive(self, "tokenizer", "vocab_size", "min_frequency")
        require(
            self.type != "unigram" or self.min_frequency == 1,
            "tokenizer.min_frequency",
            f"{self.min_frequency} with type unigram: a unigram model keeps pieces by "
            "likelihood, not count; leave it at 1",
        )

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
    """An embedded corpus by name, a local file (``.txt``, ``.csv``, ``.jsonl``, ...) or a Hub
    dataset id; a name that is none of these fails before anything is loaded."""
    text_column: str = "text"
    """The text column of a file or dataset."""
    validation_fraction: float = 0.1
    """Share of ``train`` held out for validation where the source has no such split."""
    test_fraction: float = 0.1
    """Share of ``train`` held out for the test where the source has no such split."""

    embedded_sources: ClassVar[tuple[str, ...]] = ()
    """The task's embedded corpora: each has its own texts and held-out splits, so the
    :attr:`file_fields` are refused with one."""
    file_fields: ClassVar[tuple[str, ...]] = ("text_column", "validation_fraction", "test_fraction")
    """The fields that describe a file or dataset source: its columns and the splits carved
    out of it."""

    def __post_init__(self):
        require_fraction(self, "data", "validation_fraction", "test_fraction")
        if self.source in self.embedded_sources:
            require_default(
                self,
                "data",
                self.file_fields,
                f"is not used by the embedded source {self.source} (it has its own texts and "
                "held-out splits)",
            )


@dataclass
class EvaluationSection:
    """``evaluation:`` — splits scored at the end (``validation`` is also scored periodically)
    and how many examples of a split each scoring reads, every score (the loss included) on
    the same examples, as the ``max_eval_samples`` of Hugging Face's example scripts."""

    splits: list[str] = field(default_factory=lambda: ["validation", "test"])
    """Splits scored at the end of training (and by ``hfattn evaluate``)."""
    batch_size: int = 32
    """Examples per evaluation batch."""
    max_examples: int | None = None
    """The most examples of the validation split that each periodic validation scores, its
    loss included (``null``: every one). An example is a pair of a translation split (the
    first ones), a row of a classification split (a random sample drawn with ``data.seed``:
    a file is often sorted by label) or a window of ``evaluation.seq_len`` tokens of a
    causal-LM split (its first ``max_examples × seq_len`` tokens, read as the evaluation's
    streams; the zero-state passages are spread over them). ``num_examples`` in
    ``eval_results.json`` and ``metrics.jsonl`` says how many were scored."""
    final_max_examples: int | None = None
    """The most examples of a split scored at the end of training and by ``hfattn evaluate``
    (``--max-examples`` overrides it), as ``max_examples`` counts them, except that a
    translation split gives a random sample of that many pairs drawn with ``data.seed``
    (``sampled_from`` in ``eval_results.json`` says out of how many); ``null``: as
    ``max_examples``, and with both ``null`` every example. Scores already computed with the
    final weights at a validation are reused only when the two score the same examples."""

    def __post_init__(self):
        for split in self.splits:
            require_choice(split, "evaluation.splits", SPLITS)
        require_positive(self, "evaluation", "batch_size", "max_examples", "final_max_examples")

    def example_cap(self, final: bool = False) -> int | None:
        """The most examples of a split scored: ``max_examples`` at a periodic validation,
        ``final_max_examples`` at the end of training and by ``hfattn evaluate`` (``final``;
        ``null``: ``max_examples``); ``None``: every example."""
        if final and self.final_max_examples is not None:
            return self.final_max_examples
        return self.max_examples


@dataclass
class GenerationSection:
    """``generation:`` — ``generate()`` settings: the sample shown after training and the
    defaults saved in ``generation_config.json``."""

    max_new_tokens: int = 300
    """Tokens generated after the prompt."""
    do_sample: bool = True
    """Sample (with ``temperature``, ``top_k``, ``top_p``) instead of greedy / beam search."""
    temperature: float = 1.0
    """Divides the logits before sampling: below 1 sharper, above 1 flatter. ``temperature``,
    ``top_k``, ``top_p`` and ``seed`` apply to sampling only: refused with ``do_sample:
    false``."""
    top_k: int | None = None
    """Sample among the ``k`` most likely tokens only."""
    top_p: float | None = None
    """Sample among the most likely tokens whose probabilities sum to ``p`` (nucleus)."""
    num_beams: int = 1
    """Beam search with this many beams (1: greedy or sampling)."""
    seed: int = 0
    """Seeds torch before the sample after training, so that a sampled one is reproducible."""

    sampling_fields: ClassVar[tuple[str, ...]] = ("temperature", "top_k", "top_p", "seed")
    """The fields that only sampling reads: refused when set with ``do_sample: false``."""

    def __post_init__(self):
        require_positive(self, "generation", "max_new_tokens", "temperature", "top_k", "num_beams")
        require(self.top_p is None or 0 < self.top_p <= 1, "generation.top_p", "must be in (0, 1]")
        if not self.do_sample:
            require_default(
                self,
                "generation",
                self.sampling_fields,
                "is not used without generation.do_sample: true (greedy and beam search "
                "take the most likely tokens)",
            )

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


LICENSE_ID = re.compile(r"[a-z0-9][a-z0-9.+-]*")
"""The form of a Hub license id (``apache-2.0``, ``mit``, ``cc-by-4.0``, ``other``)."""
LICENSES_URL = "https://huggingface.co/docs/hub/repositories-licenses"
"""The Hub's list of license ids."""
LICENSE_FORM = (
    "a Hub license id: lowercase letters, digits, '.', '-' and '+', e.g. apache-2.0, mit, "
    f"cc-by-4.0, or other with license_name (the list: {LICENSES_URL})"
)
"""What a ``license`` may be, as the errors say it."""


def require_license(license: str | None, license_name: str | None, prefix: str = "hub") -> None:
    """``license`` must be ``None`` (not set) or a Hub license id (:data:`LICENSE_ID`),
    ``license: other`` needs a ``license_name`` (the Hub's form for a licence it does not list),
    and a ``license_name`` needs a ``license``.

    Raises:
        RecipeError: ``hub.license: 'Apache 2.0' is not a Hub license id: lowercase ...``.
    """
    require(
        license is None or bool(LICENSE_ID.fullmatch(str(license))),
        f"{prefix}.license",
        f"{license!r} is not {LICENSE_FORM}",
    )
    require(
        license != "other" or bool(license_name),
        f"{prefix}.license_name",
        "is required with license: other (the licence's short name, e.g. my-license; "
        "license_link may point at its text)",
    )
    require(
        license is not None or not license_name,
        f"{prefix}.license_name",
        f"{license_name!r} names a licence but {prefix}.license is not set: set it to other",
    )


@dataclass
class HubSection:
    """``hub:`` — publishing at the end of training and the model card's metadata.

    ``license`` is the card's Hub license id; left unset (``null``) the card takes the
    declared licence of the recipe's embedded ``data.source``
    (:func:`hfattn.data.licenses.data_license`), and a model trained on data of unknown licence
    (a file, a URL, a Hub dataset) is not published until it is set. ``license_name`` and
    ``license_link`` name a licence the Hub does not list (with ``license: other``)."""

    push_to_hub: bool = False
    repo_id: str | None = None
    private: bool = False
    space: bool = False
    license: str | None = None
    license_name: str | None = None
    license_link: str | None = None
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
        if not self.push_to_hub:
            require_default(
                self,
                "hub",
                ("repo_id", "private", "space"),
                "is not used without hub.push_to_hub: true (hfattn push RUN takes --repo-id, "
                "--private and --space)",
            )
        require_license(self.license, self.license_name)


PEFT = Extra("peft", "peft")
"""The extra that a ``lora:`` section needs (:meth:`RecipeBase.required_extras`)."""


@dataclass
class LoraSection:
    """``lora:`` — a PEFT LoRA adapter on the named linear layers (module-name suffixes, as
    in ``peft.LoraConfig``); ``modules_to_save`` stay fully trainable (a classification
    head); ``fan_in_fan_out`` for GPT-2's ``Conv1D`` layers. LoRA freezes trained weights: the
    causal-LM and classification tasks take it for a pretrained model (``model: <hub id |
    folder>``, a run folder of hfattn's included); it is refused for a model built from
    ``model.type`` and by the translation task.

    The update of a frozen ``W`` is ``W + (alpha / r) · B A`` with ``A ∈ R^{r×in}``,
    ``B ∈ R^{out×r}`` (``B`` starts at zero)."""

    r: int = 8
    """The rank of the update ``B A``."""
    alpha: int = 16
    """The update is scaled by ``alpha / r``."""
    dropout: float = 0.1
    """Dropout on the adapter's input."""
    target_modules: list[str] | None = None
    """Suffixes of the linear layers that get an adapter; ``null``: PEFT's default for the
    architecture."""
    modules_to_save: list[str] | None = None
    """Modules trained in full and saved with the adapter (a new classification head)."""
    fan_in_fan_out: bool = False
    """``true`` for weights stored as ``(in, out)``, as GPT-2's ``Conv1D``; a value that does not
    fit the layers targeted is refused once the model is loaded."""
    bias: str = "none"
    """Which biases train: ``none``, ``all`` or ``lora_only``."""

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
    (a Hub id or local folder, :mod:`hfattn.tasks.pretrained`; ``model: <id>`` is shorthand for it).
    ``lora`` (optional) trains a PEFT LoRA adapter instead of every weight."""

    model_config: ClassVar[Any] = None
    """The model config that ``model:`` builds, once, when the recipe is loaded
    (:func:`hfattn.recipes.load_recipe`; its vocabulary size a placeholder until the task's
    tokenizer sets it), or ``None`` for a pretrained checkpoint. Not a recipe field: it is
    neither read from the YAML nor written back (:meth:`to_yaml`)."""

    checks: ClassVar[Any] = None
    """What the recipe was checked for (:class:`hfattn.recipes.RecipeChecks`), set by
    :func:`hfattn.recipes.load_recipe` alone: the mark of a recipe a run takes. Not a recipe
    field."""

    name: str = "experiment"
    task: str = "causal-lm"
    output_dir: str | None = None
    model: dict[str, Any] = field(default_factory=dict)
    lora: LoraSection | None = None
    hub: HubSection = field(default_factory=HubSection)

    def __post_init__(self):
        if self.output_dir is None:
            self.output_dir = str(Path("runs") / self.name)
        training = getattr(self, "training", None)
        model_type = self.model.get("type") if isinstance(self.model, dict) else None
        require(
            not (
                training is not None
                and training.forces_compile
                and model_type in UNROLLED_PER_LENGTH
            ),
            "training.compile",
            f"model.type {model_type} runs its recurrence over padded batches of varying "
            "length, which torch.compile unrolls position by position: every new batch length "
            "is compiled anew (minutes each) until torch._dynamo's recompile_limit, then runs "
            "eagerly; train it with training.compile: false",
        )
        require_extras(self.required_extras())  # before any data is read

    def checked_model_config(self, config):
        """``config`` (built from ``model:``; ``None`` for a pretrained checkpoint) once the
        fields that act through the model are checked against it. R-Drop
        (``training.r_drop_alpha``, Liang et al. 2021) pulls together the predictions of two
        dropout masks: in a model whose every dropout rate is 0 both passes agree, the KL term
        is 0 and the second pass is cost alone, so that recipe is refused."""
        alpha = getattr(getattr(self, "training", None), "r_drop_alpha", 0)
        if config is not None and alpha:
            rates = {key: value for key, value in config.to_dict().items()
                     if "dropout" in key and isinstance(value, int | float)}  # fmt: skip
            require(
                any(rates.values()),
                "training.r_drop_alpha",
                f"compares the outputs of two dropout masks, and model.type {config.model_type} "
                f"has every dropout rate at 0 ({', '.join(sorted(rates))}): set one "
                "(model.dropout=0.1) or leave r_drop_alpha at 0",
            )
        return config

    def required_extras(self) -> list[tuple[str, Extra]]:
        """``(what, extra)`` for each optional extra this recipe needs (``("lora", PEFT)``), which
        the recipe checks require before any data is read
        (:func:`hfattn.common.extras.require_extras`); a task's recipe class adds its own."""
        return [("lora", PEFT)] if self.lora is not None else []

    def to_yaml(self) -> str:
        """The resolved recipe as YAML (written next to the trained model): a ``data.source``
        that names a local file or folder is written as its absolute path
        (:func:`~hfattn.storage.location.absolute_source`), so that ``hfattn evaluate RUN`` and
        ``hfattn train --resume RUN`` load the same data from any working folder."""
        config = OmegaConf.structured(self)
        source = getattr(getattr(self, "data", None), "source", None)
        if isinstance(source, str):
            config.data.source = absolute_source(source, embedded_sources(self.task))
        return OmegaConf.to_yaml(config)


__all__ = [
    "MIXED_PRECISION",
    "PEFT",
    "ON_NONFINITE_LOSS",
    "SPLITS",
    "TOKENIZER_KINDS",
    "BuiltTokenizerSection",
    "EvaluationSection",
    "GenerationSection",
    "HubSection",
    "LICENSES_URL",
    "LICENSE_FORM",
    "LICENSE_ID",
    "LoraSection",
    "RecipeBase",
    "RecipeError",
    "SplitTextDataSection",
    "TokenBatchingSection",
    "TrainingSection",
    "WordDropoutTrainingSection",
    "require",
    "require_choice",
    "require_default",
    "require_fraction",
    "require_license",
    "require_positive",
    "require_reported_metric",
]
