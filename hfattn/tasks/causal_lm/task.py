"""``TASK``, the causal-LM :class:`~hfattn.tasks.base.Task`: the card facts, the prepared
corpus (:mod:`hfattn.tasks.causal_lm.corpus`), the training job
(:func:`hfattn.tasks.causal_lm.job.build_job`) and the re-scoring of a saved model.
"""

from __future__ import annotations

from pathlib import Path

from transformers import AutoModelForCausalLM, AutoTokenizer

from ... import models  # noqa: F401  (registers the hfattn model types with the Auto classes)
from ...data.prepared import Prepared
from ...evaluation.language_modeling import evaluate_causal_lm
from ...recipes.model_section import is_pretrained
from ...training.training_job import TrainingJob
from ..base import Task, TaskInfo, scoring_data
from . import job
from .corpus import document_separator, prepare_tokenized_corpus
from .recipe import RECIPE_CLASS, CausalLMRecipe


class CausalLMTask(Task):
    """``task: causal-lm`` — next-token prediction on a text corpus: a char-RNN trained from
    scratch, or a pretrained causal LM (GPT-2) fine-tuned fully or with LoRA."""

    name = "causal-lm"
    recipe_class = RECIPE_CLASS
    default_model_type = "char-rnn"
    card = TaskInfo(
        pipeline_tag="text-generation",
        task_name="Causal language modeling",
        auto_class="AutoModelForCausalLM",
        usage=(
            'inputs = tokenizer({example}, return_tensors="pt")\n'
            "output = model.generate(**inputs, max_new_tokens=200, do_sample=True, "
            "temperature=0.8, top_k=50)\n"
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
        or a pretrained checkpoint, optionally LoRA-wrapped), and wire batches and evaluation
        (:func:`hfattn.tasks.causal_lm.job.build_job`)."""
        return job.build_job(recipe, self)

    def prepare_data(self, recipe: CausalLMRecipe) -> Prepared:
        """Prepare the recipe's corpus (tokenizer and ids of every split) or find it in the
        prepared-data cache, without building a model
        (:func:`hfattn.tasks.causal_lm.job.prepare_corpus`)."""
        return job.prepare_corpus(recipe).prepared

    def evaluate_folder(
        self, model_dir: Path, recipe: CausalLMRecipe, splits: list[str], *, data=None
    ) -> dict[str, dict]:
        """Loss (and for a recurrent model the zero-state loss), perplexity, bits per char and
        next-token accuracy of a saved model (a full model folder, or a LoRA adapter folder:
        transformers loads its base model first), on the recipe's corpus (or ``data``; a
        single file whole, :func:`~hfattn.tasks.base.scoring_data`) encoded with the model's
        own tokenizer, prepared once and memory-mapped; each split's first
        ``evaluation.final_max_examples`` windows of ``evaluation.seq_len`` tokens
        (:meth:`~hfattn.recipes.schema.EvaluationSection.example_cap`; ``null``: every one)."""
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir)
        separator = document_separator(tokenizer, is_pretrained(recipe.model))
        corpus = prepare_tokenized_corpus(
            scoring_data(recipe.data, data), tokenizer, {"type": "saved model"}, separator
        )
        e = recipe.evaluation
        return {
            split: evaluate_causal_lm(
                model,
                corpus.tokens(split),
                batch_size=e.batch_size,
                seq_len=e.seq_len,
                tokenizer=tokenizer,
                max_examples=e.example_cap(final=True),
                progress=split,
            )
            for split in splits
        }


TASK = CausalLMTask()

__all__ = ["TASK", "CausalLMTask"]
