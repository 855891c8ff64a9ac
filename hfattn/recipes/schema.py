"""The recipe sections every task shares (their checks name a bad field:
:mod:`hfattn.common.field_checks`).

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

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from omegaconf import OmegaConf

from ..common.family_facts import load_models_module
from ..common.field_checks import (
    RecipeError,
    require,
    require_choice,
    require_fraction,
    require_positive,
    require_reported_metric,
)
from ..training.schedules import SCHEDULES

MIXED_PRECISION = ("no", "bf16", "fp16", "auto")
ON_NONFINITE_LOSS = ("stop", "skip")
SPLITS = ("train", "validation", "test")
TOKENIZER_KINDS = ("word", "char", "bpe", "unigram")
"""The tokenizers a ``tokenizer:`` section can build on the training texts."""


@dataclass
class TrainingSection:
    """``training:`` — the Accelerate loop (see :mod:`hfattn.training.engine`).

    ``on_nonfinite_loss``: on a NaN / infinite training loss, ``stop`` (keep the last good
    checkpoint) or ``skip`` that optimizer step (its gradients are dropped; counted in
    ``metrics.jsonl`` and ``eval_results.json``); after ``max_skipped_steps`` skipped steps the
    next one stops the run."""

    batch_size: int = 32
    """Examples per micro-batch, over all processes (divisible by their number)."""
    gradient_accumulation_steps: int = 1
    """Micro-batches whose gradients are summed into one optimizer step."""
    epochs: int = 1
    """Passes over the training data (the run ends at ``max_steps`` if that comes first)."""
    max_steps: int | None = None
    """The most optimizer steps; ``null``: as many as ``epochs`` give."""
    max_minutes: float | None = None
    """A budget of training time in minutes: the run stops (evaluated and saved) when it is used
    up, and the learning-rate schedule follows the clock so that it still ends annealed. It
    counts the training steps (with their checkpoints) only, not the evaluations: the periodic
    validations and the final scoring come on top (``eval_runtime_s``, ``final_eval_runtime_s``
    in ``eval_results.json``)."""
    optimizer: str = "adamw"
    """The optimizer by name: ``adamw``, ``nadam`` (Géron ch. 16), ``rmsprop`` (Chollet ch. 11),
    ``radam`` (Liu et al. 2020), ``sgd`` or ``muon`` (Jordan et al. 2024: Muon on the hidden
    weight matrices, AdamW with ``betas`` on embeddings, output layer and biases)."""
    learning_rate: float = 1e-3
    """The peak learning rate (the factor of ``schedule``; for ``noam``, a multiplier)."""
    weight_decay: float = 0.0
    """Decoupled weight decay (AdamW) or L2 penalty (the others)."""
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    """Adam's ``[beta1, beta2]``."""
    schedule: str = "constant"
    """The learning-rate schedule: ``constant``, ``linear``, ``cosine``, ``noam`` (Vaswani et
    al. 2017, §5.3), or a warmup of Ma & Yarats (2021) (``warmup_linear``, ...)."""
    warmup_steps: int = 0
    """Steps of linear (or the schedule's own) warmup to the peak learning rate."""
    max_grad_norm: float | None = 1.0
    """Clip the gradients' global L2 norm to this; ``null``: no clipping."""
    mixed_precision: str = "no"
    """``no``, ``bf16`` (CPU and recent GPUs) or ``fp16`` (GPU), as in Accelerate, or ``auto``:
    bf16 where the device has bf16 kernels (a bf16 GPU; a CPU with AVX-512 or AMX), else
    ``no`` (an AVX2-only CPU emulates bf16, many times slower than fp32)."""
    log_every: int = 50
    """Write the mean train loss and the learning rate to ``metrics.jsonl`` every N steps."""
    eval_every: int | None = 500
    """Score the validation split every N steps (and keep the best model); ``null``: only at
    the end."""
    save_every: int | None = 500
    """Write a resumable checkpoint every N steps (and always when the run stops)."""
    keep_checkpoints: int = 2
    """How many of the newest checkpoints are kept."""
    average_checkpoints: int | None = None
    """At the end of training, average the weights of the newest N checkpoints (Vaswani et
    al. 2017, §6.1), score the average on the validation split and keep it as the model when
    it beats the best checkpoint by ``metric_for_best_model`` (with ``load_best_at_end``, the
    default); ``null``: no averaging. Needs
    ``keep_checkpoints >= N`` and ``eval_every``; ``save_every`` sets how far apart the
    averaged checkpoints are."""
    load_best_at_end: bool = True
    """Load the weights of the best validation before the final evaluation and save."""
    metric_for_best_model: str = "loss"
    """The validation metric that picks the best checkpoint (``loss``, or e.g. ``macro_f1``,
    ``accuracy``, ``bleu``: any number the task's evaluation reports)."""
    greater_is_better: bool | None = None
    """Whether a larger ``metric_for_best_model`` is better; ``None``: not for names ending in
    ``loss``, yes otherwise (as ``transformers.TrainingArguments``)."""
    seed: int = 1337
    """Seeds Python, NumPy and torch (weights, dropout, shuffling)."""
    on_nonfinite_loss: str = "stop"
    """On a NaN / infinite training loss: ``stop`` or ``skip`` that optimizer step."""
    max_skipped_steps: int = 10
    """With ``on_nonfinite_loss: skip``, the most steps skipped before the run stops."""
    reuse_freed_memory: bool = False
    """On a CPU under glibc (Linux), keep the memory a training step frees in the process's
    heap for the next step, instead of glibc's fresh ``mmap`` (and page faults) for every
    block above 32 MiB, such as a batch's logits over the vocabulary
    (:mod:`hfattn.training.host_memory`). The process keeps its peak heap while it trains;
    ignored on a GPU, and with a warning where the C library is not glibc."""
    compile: bool | str = "auto"
    """Compile the training step with ``torch.compile`` (default mode, TorchInductor): the loss
    step (forward and backward) runs fused kernels, while evaluation, generation,
    checkpoints and the saved weights use the model itself (the same state-dict keys). The
    first steps are slower while it compiles (and once more at the first batch of another
    length); a compiled run pads its translation and classification batches to a multiple of
    8 positions (masked: the loss is the same), so that it compiles a few shapes. ``auto``:
    on a CUDA device, on for the char-RNN (one batch shape) and for the Vaswani Transformer
    when ``training.token_budget`` is set (its batches in ``length_buckets`` fixed shapes: one
    static graph a bucket, each compiled once), off for the other models and for a
    Transformer without buckets (its batch lengths vary: each compile takes about a minute
    on a GPU); off on a CPU; ``true`` / ``false`` force it. ``true`` is refused for
    ``bahdanau`` and ``rnn-classifier`` models, whose recurrence over padded batches would
    compile anew at every batch length.
    ``benchmarks/bench_compile.py`` measures each model's step both ways."""

    @property
    def larger_metric_is_better(self) -> bool:
        """``greater_is_better``, or inferred from ``metric_for_best_model``'s name."""
        if self.greater_is_better is not None:
            return self.greater_is_better
        return not self.metric_for_best_model.endswith("loss")

    def __post_init__(self):
        from ..training.optim import OPTIMIZERS  # torch: not needed to import the sections

        require_choice(self.on_nonfinite_loss, "training.on_nonfinite_loss", ON_NONFINITE_LOSS)
        require(
            self.max_skipped_steps >= 0,
            "training.max_skipped_steps",
            f"must be >= 0, got {self.max_skipped_steps}",
        )
        require_choice(self.optimizer, "training.optimizer", tuple(OPTIMIZERS))
        require(
            self.compile in (True, False, "auto"),
            "training.compile",
            f"must be auto, true or false, got {self.compile!r}",
        )
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
        if self.average_checkpoints is not None:
            require(
                2 <= self.average_checkpoints <= self.keep_checkpoints,
                "training.average_checkpoints",
                f"must be from 2 to training.keep_checkpoints={self.keep_checkpoints} "
                f"(the checkpoints kept), got {self.average_checkpoints}",
            )
            require(
                self.eval_every is not None,
                "training.average_checkpoints",
                "needs training.eval_every: the average competes with the best validated "
                "checkpoint",
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
class TokenBatchingSection(TrainingSection):
    """``training:`` of the tasks whose batches can come in a few fixed shapes (translation,
    classification): :class:`TrainingSection` and ``token_budget`` / ``length_buckets``
    (:mod:`hfattn.data.token_buckets`)."""

    token_budget: int | None = None
    """Batches of about this many tokens a step (target tokens for translation, as the 25,000
    of Vaswani et al. 2017, §5.1; input tokens for classification), in ``length_buckets``
    fixed shapes: the rows of a bucket's batch are the budget over its mean length, so a
    step's cost is the same whatever its lengths, and a compiled step compiles once a bucket
    (``compile: auto`` then compiles the Transformer on CUDA). The split is padded once into
    tensors (on the GPU when it fits) and a batch is an index gather. ``batch_size`` is not
    used; ``null``: ``batch_size`` examples a batch."""
    length_buckets: int = 8
    """With ``token_budget``, the number of length buckets (fixed batch shapes): their widths
    are chosen to pad the training split least."""

    def __post_init__(self):
        super().__post_init__()
        require_positive(self, "training", "token_budget", "length_buckets")


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

    def __post_init__(self):
        require_fraction(self, "data", "validation_fraction", "test_fraction")


@dataclass
class EvaluationSection:
    """``evaluation:`` — splits scored at the end (``validation`` is also scored periodically)."""

    splits: list[str] = field(default_factory=lambda: ["validation", "test"])
    """Splits scored at the end of training (and by ``hfattn evaluate``)."""
    batch_size: int = 32
    """Examples per evaluation batch."""

    def __post_init__(self):
        for split in self.splits:
            require_choice(split, "evaluation.splits", SPLITS)
        require_positive(self, "evaluation", "batch_size")


@dataclass
class GenerationSection:
    """``generation:`` — ``generate()`` settings: the sample shown after training and the
    defaults saved in ``generation_config.json``."""

    max_new_tokens: int = 300
    """Tokens generated after the prompt."""
    do_sample: bool = True
    """Sample (with ``temperature``, ``top_k``, ``top_p``) instead of greedy / beam search."""
    temperature: float = 1.0
    """Divides the logits before sampling: below 1 sharper, above 1 flatter."""
    top_k: int | None = None
    """Sample among the ``k`` most likely tokens only."""
    top_p: float | None = None
    """Sample among the most likely tokens whose probabilities sum to ``p`` (nucleus)."""
    num_beams: int = 1
    """Beam search with this many beams (1: greedy or sampling)."""
    seed: int = 0
    """Seeds torch before the sample after training, so it is reproducible."""

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
        require_license(self.license, self.license_name)


@dataclass
class LoraSection:
    """``lora:`` — a PEFT LoRA adapter on the named linear layers (module-name suffixes, as
    in ``peft.LoraConfig``); ``modules_to_save`` stay fully trainable (a classification
    head); ``fan_in_fan_out`` for GPT-2's ``Conv1D`` layers.

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
    """``true`` for weights stored as ``(in, out)``, as GPT-2's ``Conv1D``."""
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
                and training.compile is True
                and model_type in load_models_module("families").UNROLLED_PER_LENGTH
            ),
            "training.compile",
            f"model.type {model_type} runs its recurrence over padded batches of varying "
            "length, which torch.compile unrolls position by position: every new batch length "
            "is compiled anew (minutes each) until torch._dynamo's recompile_limit, then runs "
            "eagerly; train it with training.compile: false",
        )

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
    "LICENSES_URL",
    "LICENSE_FORM",
    "LICENSE_ID",
    "LoraSection",
    "RecipeBase",
    "RecipeError",
    "SplitTextDataSection",
    "TrainingSection",
    "require",
    "require_choice",
    "require_fraction",
    "require_license",
    "require_positive",
    "require_reported_metric",
]
