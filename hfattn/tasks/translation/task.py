"""The translation task object: ``TASK``, a :class:`TranslationTask` (card facts, the training
job of :mod:`~hfattn.tasks.translation.job`, the re-scoring of a saved model and the
``generation_config.json`` defaults)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from ... import models  # noqa: F401  (registers the model types with the Auto classes)
from ...data.prepared import Prepared
from ...evaluation.examples import example_counts
from ...training.training_job import TrainingJob
from ..base import Task, TaskInfo
from . import job
from .encoding import load_pair_splits
from .prepared import PreparedPairs, encode_splits, prepare_pairs
from .recipe import RECIPE_CLASS, TranslationRecipe


class TranslationTask(Task):
    """``task: translation`` — source sentence → target sentence with an encoder-decoder."""

    name = "translation"
    recipe_class = RECIPE_CLASS
    default_model_type = "bahdanau"
    card = TaskInfo(
        pipeline_tag="translation",
        task_name="Translation",
        auto_class="AutoModelForSeq2SeqLM",
        usage=(
            'inputs = tokenizer({example}, return_tensors="pt")\n'
            "output = model.generate(**inputs, num_beams=4, max_new_tokens=50)\n"
            "print(tokenizer.decode(output[0], skip_special_tokens=True))"
        ),
        intended_use=(
            "Teaching and experimentation with attention-based encoder-decoders: translating "
            "short sentences of the training domain and inspecting attention maps."
        ),
        limitations=(
            "Trained on a small parallel corpus of short sentences: long or out-of-domain "
            "inputs degrade quickly, rare words become `<unk>`, and outputs must not be relied "
            "on for real translation work."
        ),
        space_app="translation",
        default_example="I love you.",
        architecture_suffixes=("ForConditionalGeneration", "ForSeq2SeqLM", "MTModel"),
        peft_task_type="SEQ_2_SEQ_LM",
    )

    def build_job(self, recipe: TranslationRecipe) -> TrainingJob:
        """Map the prepared pairs and their tokenizer, build the model, and wire batches, loss
        and evaluation (:func:`hfattn.tasks.translation.job.build_job`)."""
        return job.build_job(recipe, self)

    def prepare_data(self, recipe: TranslationRecipe) -> Prepared:
        """The tokenizer trained on a sample of the training pairs and the ids and texts of
        every split, prepared once into the cache
        (:func:`hfattn.tasks.translation.prepared.prepare_pairs`)."""
        return prepare_pairs(recipe)

    def generation_defaults(self, recipe: TranslationRecipe) -> dict:
        """Beam width, length and sampling settings saved in ``generation_config.json``."""
        return {k: v for k, v in job.decoding_kwargs(recipe.generation).items() if v is not None}

    def evaluate_folder(
        self,
        model_dir: Path,
        recipe: TranslationRecipe,
        splits: list[str],
        *,
        data=None,
        num_beams: int | None = None,
        max_new_tokens: int | None = None,
    ) -> dict[str, dict]:
        """Loss, token accuracy, BLEU, chrF and exact match of a saved model, its translations
        decoded with its saved generation settings (``generation_config.json``: what the end
        of ``hfattn train`` scores with) or the ``num_beams`` / ``max_new_tokens`` given
        (:func:`~hfattn.tasks.translation.job.scoring_decoding`), on the pairs of each split
        that ``evaluation.final_max_examples`` bounds
        (:func:`~hfattn.tasks.translation.job.decoded_rows`): only those are encoded."""
        loaded, target_lang = load_pair_splits(recipe.data, data)
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForSeq2SeqLM.from_pretrained(model_dir)
        e = recipe.evaluation
        decoding = job.scoring_decoding(
            model.generation_config.to_dict(),
            e.max_new_tokens,
            num_beams=num_beams,
            max_new_tokens=max_new_tokens,
        )
        beams, seed = decoding["num_beams"], recipe.data.seed
        rows = {
            split: job.decoded_rows(split, len(loaded[split]), e, beams, True, seed)
            for split in splits
        }
        with tempfile.TemporaryDirectory(prefix="hfattn-evaluate-") as folder:
            # the pairs scored, encoded as a training run prepares its held-out splits
            chosen = {split: loaded[split].select(rows[split]) for split in splits}
            encode_splits(tokenizer, chosen, Path(folder), recipe.data, target_lang,
                          cut_train=False)  # fmt: skip
            pairs = PreparedPairs(Path(folder))
            pairs.warn_cuts()
            encoded = job.EncodedSplits(tokenizer, pairs, recipe.data)
            scores = {}
            for split in splits:
                scores[split] = job.score_pairs(model, encoded[split], e.batch_size, decoding)
                scores[split].update(example_counts(rows[split], len(loaded[split])))
            return scores


TASK = TranslationTask()

__all__ = ["TASK", "TranslationTask"]
