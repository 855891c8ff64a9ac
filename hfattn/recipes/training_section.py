"""The ``training:`` section of a recipe: the training loop's options
(:class:`TrainingSection`, read by :func:`hfattn.training.engine.train`) and the token-budget
batching of the tasks whose batches come in a few fixed shapes (:class:`TokenBatchingSection`).
Imported through :mod:`hfattn.recipes.schema` with the other sections.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field

from ..common.field_checks import require, require_choice, require_default, require_positive
from ..training.optimizer_names import OPTIMIZER_NAMES, WITHOUT_BETAS
from ..training.schedules import SCHEDULES

MIXED_PRECISION = ("no", "bf16", "fp16", "auto")
TRACKERS = {
    "tensorboard": ("tensorboard", "tensorboardX"),
    "wandb": ("wandb",),
    "trackio": ("trackio",),
    "mlflow": ("mlflow",),
    "comet_ml": ("comet_ml",),
    "aim": ("aim",),
    "clearml": ("clearml",),
    "dvclive": ("dvclive",),
    "swanlab": ("swanlab",),
}
"""The experiment trackers of ``training.report_to`` (Accelerate's ``log_with`` names) and the
packages that provide each (any one of them)."""
ON_NONFINITE_LOSS = ("stop", "skip")


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
    epochs: int | None = 1
    """Passes over the training data (the run ends at ``max_steps`` if that comes first);
    ``null``: no limit of passes, the run ends by ``max_steps`` or ``max_minutes`` (one of them
    is then needed)."""
    max_steps: int | None = None
    """The most optimizer steps; ``null``: as many as ``epochs`` give."""
    max_minutes: float | None = None
    """A budget of training time in minutes: the run stops (evaluated and saved) when it is used
    up, and the learning-rate schedule follows the clock so that it still ends annealed. It
    counts the training steps (with their checkpoints) only, not the evaluations: the periodic
    validations and the final scoring come on top (``eval_runtime_s``, ``final_eval_runtime_s``
    in ``eval_results.json``). With ``epochs: null`` and no ``max_steps`` the run is planned by
    the clock alone: it trains until the clock on any machine, and a ``linear`` or ``cosine``
    schedule runs on the share of the clock used, reaching its end value at the clock
    (:meth:`hfattn.training.clock.TrainingClock.follow_time_budget`)."""
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
    bf16 where the device has bf16 kernels (a bf16 GPU; an x86 CPU with AVX-512 BF16 or AMX),
    else ``no`` (a CPU with AVX2, or AVX-512 without BF16, emulates bf16, several times slower
    than fp32). Autocast keeps bf16
    copies of the weights and activations beside the fp32 ones: a step peaks higher in
    memory than in fp32."""
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
    default); ``null``: no averaging. Needs ``keep_checkpoints >= N``; ``save_every`` sets how
    far apart the averaged checkpoints are. With ``eval_every: null`` the last step is validated
    at the end too, so that the average competes with it."""
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
    report_to: list[str] = field(default_factory=list)
    """Experiment trackers that receive every record of ``metrics.jsonl`` (train and
    validation scalars, by step), through Accelerate's ``log_with``: any of ``tensorboard``,
    ``wandb``, ``trackio``, ``mlflow``, ``comet_ml``, ``aim``, ``clearml``, ``dvclive``,
    ``swanlab`` (the package installed by you). TensorBoard writes its event files into
    ``output_dir/logs/``; a resumed run drops the points logged after its checkpoint
    (``purge_step``), as ``metrics.jsonl`` does. ``metrics.jsonl`` stays the run's record;
    ``[]``: no tracker."""
    compile: bool | str = "auto"
    """Compile the training step with ``torch.compile`` (default mode, TorchInductor): the loss
    step (forward and backward) runs fused kernels, while evaluation, generation,
    checkpoints and the saved weights use the model itself (the same state-dict keys). The
    first steps are slower while it compiles (and once more at the first batch of another
    length); a compiled run pads its translation and classification batches to a multiple of
    8 positions (masked: the loss is the same), so that it compiles a few shapes, and batches
    in length buckets (``training.token_budget``) share one graph (their dimensions marked
    dynamic). ``auto``: on a CUDA device, on for the char-RNN (one batch shape), off for the
    other models (a Transformer in 8 buckets compiled as one static graph a bucket took longer
    to compile than the recipe's eager steps to train; ``benchmarks/NOTES.md``); off on a CPU;
    ``true`` / ``false`` force it. ``regional`` compiles each stack of repeated layers once
    for all its layers (Accelerate's ``compile_regions``): graphs that do not multiply with the
    depth, the code between the layers left eager. ``true`` and ``regional`` are refused for
    ``bahdanau`` and ``rnn-classifier`` models, whose recurrence over padded batches would
    compile anew at every batch length. ``benchmarks/bench_compile.py`` measures each model's
    step both ways."""

    r_drop_alpha: float = 0.0
    """R-Drop (Liang et al. 2021, "R-Drop: Regularized Dropout for Neural Networks"), α: each
    training micro-batch goes through the model twice, each pass with its own dropout masks,
    and the loss is ``½(CE₁ + CE₂) + α · ½(KL(P₁‖P₂) + KL(P₂‖P₁))``, where ``CE`` is each
    pass's loss as the task computes it (label smoothing included) and the KL terms compare the
    two passes' predicted distributions, averaged over the labelled (non-padding) target
    positions (a classifier's examples). It acts through the model's dropout (a model whose
    every dropout rate is 0 is refused: its two passes would agree) and costs a second forward and
    backward a step; the train loss of ``metrics.jsonl`` is this objective, the validation loss
    the plain cross-entropy. A stateful char-RNN runs both passes from the same carried state
    and carries the first pass's on. The paper sets α = 5 for its translation tasks; 0: off."""

    @property
    def forces_compile(self) -> bool:
        """``compile`` is ``true`` or ``regional``: compiled on any device."""
        return self.compile in (True, "regional")

    @property
    def larger_metric_is_better(self) -> bool:
        """``greater_is_better``, or inferred from ``metric_for_best_model``'s name."""
        if self.greater_is_better is not None:
            return self.greater_is_better
        return not self.metric_for_best_model.endswith("loss")

    def __post_init__(self):
        require_choice(self.on_nonfinite_loss, "training.on_nonfinite_loss", ON_NONFINITE_LOSS)
        require(
            self.max_skipped_steps >= 0,
            "training.max_skipped_steps",
            f"must be >= 0, got {self.max_skipped_steps}",
        )
        if self.on_nonfinite_loss == "stop":
            require_default(
                self,
                "training",
                ("max_skipped_steps",),
                "is not used with on_nonfinite_loss: stop (the first non-finite loss stops the "
                "run); set on_nonfinite_loss: skip to skip steps",
            )
        require_choice(self.optimizer, "training.optimizer", OPTIMIZER_NAMES)
        require(
            self.compile in (True, False, "auto", "regional"),
            "training.compile",
            f"must be auto, true, false or regional, got {self.compile!r}",
        )
        require_choice(self.schedule, "training.schedule", tuple(SCHEDULES))
        # YAML 1.1 reads a bare `no` (in the file or in --set) as false, which OmegaConf then
        # stores in this str field as "False": the user wrote "no".
        if self.mixed_precision in (False, "False"):
            self.mixed_precision = "no"
        require_choice(self.mixed_precision, "training.mixed_precision", MIXED_PRECISION)
        require(
            self.epochs is not None or self.max_steps is not None or self.max_minutes is not None,
            "training.epochs",
            "null (no limit of passes) needs training.max_steps or training.max_minutes to end "
            "the run",
        )
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
            bool(self.metric_for_best_model.strip()),
            "training.metric_for_best_model",
            "must name a validation metric such as loss, accuracy or macro_f1",
        )
        require(self.warmup_steps >= 0, "training.warmup_steps", "must be >= 0")
        for tracker in self.report_to:
            require_choice(tracker, "training.report_to", tuple(TRACKERS))
            require(
                any(importlib.util.find_spec(package) for package in TRACKERS[tracker]),
                "training.report_to",
                f"{tracker} needs the {TRACKERS[tracker][0]} package: pip install "
                f"{TRACKERS[tracker][0]}",
            )
        require(self.weight_decay >= 0, "training.weight_decay", "must be >= 0")
        require(
            self.r_drop_alpha >= 0,
            "training.r_drop_alpha",
            f"must be >= 0 (0: off), got {self.r_drop_alpha}",
        )
        require(len(self.betas) == 2, "training.betas", "must be two numbers [beta1, beta2]")
        require(
            all(0 <= b < 1 for b in self.betas),
            "training.betas",
            f"each must be in [0, 1), got {list(self.betas)}",
        )
        if self.optimizer in WITHOUT_BETAS:
            require_default(
                self,
                "training",
                ("betas",),
                f"is not used by optimizer {self.optimizer} (betas are Adam's); leave them out",
            )


@dataclass
class WordDropoutTrainingSection(TrainingSection):
    """``training:`` of the tasks whose inputs are token sequences of a tokenizer hfattn builds
    (translation, and the causal LM of a model built from ``model.type``):
    :class:`TrainingSection` and ``word_dropout``."""

    word_dropout: float = 0.0
    """Word dropout (Sennrich & Zhang 2019, "Revisiting Low-Resource Neural Machine
    Translation"; Nguyen & Salazar 2019, "Transformers without Tears", who use 0.1): during
    training only, each input token (a translation's source tokens and the decoder's input
    tokens, a language model's input characters) is replaced by the tokenizer's ``<unk>`` with
    this probability, independently: ``x̃ = <unk>`` if ``u < p``, ``u ~ U(0, 1)``. The labels
    (the tokens to predict), padding and the special tokens (``<bos>``, ``<eos>``, ``<unk>``)
    are never replaced; evaluations, ``generate`` and the saved model read the tokens as they
    are. Refused for a pretrained model, whose tokenizer is its own (GPT-2's "unknown" token is
    its end-of-text token); 0: off."""

    def __post_init__(self):
        super().__post_init__()
        require(
            0 <= self.word_dropout < 1,
            "training.word_dropout",
            f"must be in [0, 1) (0: off), got {self.word_dropout}",
        )


@dataclass
class TokenBatchingSection(TrainingSection):
    """``training:`` of the tasks whose batches can come in a few fixed shapes (translation,
    classification): :class:`TrainingSection` and ``token_budget`` / ``length_buckets``
    (:mod:`hfattn.batching.token_buckets`)."""

    token_budget: int | None = None
    """Batches of about this many tokens a step (target tokens for translation, as the 25,000
    of Vaswani et al. 2017, §5.1; input tokens for classification), in ``length_buckets``
    fixed shapes: the rows of a bucket's batch are the budget over its mean length, so a
    step's cost is the same whatever its lengths, and a compiled step compiles once a bucket
    (``compile: auto`` then compiles the Transformer on CUDA). The split is padded once into
    tensors (on the GPU when it fits) and a batch is an index gather. At least the length of
    the longest training example (refused once the data is encoded, before the buckets are
    built). ``batch_size`` is not used, and refused when set beside it; ``null``:
    ``batch_size`` examples a batch."""
    length_buckets: int = 8
    """With ``token_budget``, the number of length buckets (fixed batch shapes): their widths
    are chosen to pad the training split least. A split with fewer distinct lengths gets one
    bucket a length (with a warning); without ``token_budget`` it is not used, and refused when
    set."""

    def __post_init__(self):
        super().__post_init__()
        require_positive(self, "training", "token_budget", "length_buckets")
        if self.token_budget is not None:
            require_default(
                self,
                "training",
                ("batch_size",),
                f"is not used with training.token_budget={self.token_budget}: a batch holds "
                "about that many tokens, in rows of its length bucket; leave batch_size at its "
                "default (32)",
            )
        else:
            require_default(
                self,
                "training",
                ("length_buckets",),
                "is not used without training.token_budget: a batch is training.batch_size "
                "examples",
            )


__all__ = [
    "MIXED_PRECISION",
    "ON_NONFINITE_LOSS",
    "TokenBatchingSection",
    "TrainingSection",
    "WordDropoutTrainingSection",
]
