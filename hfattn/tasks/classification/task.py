"""``TASK``, the classification :class:`~hfattn.tasks.base.Task`: the card facts, the prepared
data (:func:`hfattn.tasks.classification.encoding.prepare_data`), the training job
(:func:`hfattn.tasks.classification.job.build_job`) and the re-scoring of a saved model.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from ...data.classification import ClassificationData
from ...data.prepared import Prepared
from ...evaluation.classification import (
    classification_scores,
    predict_logits,
    write_confusion_matrix,
)
from ...evaluation.examples import example_counts, scored_rows
from ...storage.run_folder import CONFUSION_MATRIX_FILE
from ...training.training_job import TrainingJob
from ..base import Task, TaskInfo
from . import job
from .encoding import encode_splits, load_data, prepare_data
from .inference import load_classifier
from .recipe import RECIPE_CLASS, ClassificationRecipe


class ClassificationTask(Task):
    """``task: classification`` — text → one of ``num_labels`` classes."""

    name = "classification"
    recipe_class = RECIPE_CLASS
    default_model_type = "rnn-classifier"
    card = TaskInfo(
        pipeline_tag="text-classification",
        task_name="Text classification",
        auto_class="AutoModelForSequenceClassification",
        usage=(
            'inputs = tokenizer({example}, return_tensors="pt", truncation=True)\n'
            "probabilities = model(**inputs).logits.softmax(-1)[0]\n"
            "print({{model.config.id2label[i]: round(float(p), 3) "
            "for i, p in enumerate(probabilities)}})"
        ),
        intended_use=(
            "Teaching and experimentation: comparing recurrent classifiers, pretrained encoders "
            "and LoRA adapters on the same labelled texts, and inspecting their errors."
        ),
        limitations=(
            "Trained on one small labelled corpus: texts from another domain, period or "
            "language are classified unreliably, texts longer than the training length are "
            "truncated, and the labels must not be used for decisions about people."
        ),
        space_app="classification",
        default_example="Now is the winter of our discontent made glorious summer.",
        architecture_suffixes=("ForSequenceClassification",),
        peft_task_type="SEQ_CLS",
    )

    def build_job(self, recipe: ClassificationRecipe) -> TrainingJob:
        """Map the prepared data, build the model, and wire batches, loss and evaluation
        (:func:`hfattn.tasks.classification.job.build_job`)."""
        return job.build_job(recipe, self)

    def prepare_data(self, recipe: ClassificationRecipe) -> Prepared:
        """The tokenizer, token ids, labels and texts of every split, prepared once
        (:func:`hfattn.tasks.classification.encoding.prepare_data`)."""
        return prepare_data(recipe)

    def generation_defaults(self, recipe: ClassificationRecipe) -> dict:
        """A classifier does not generate: nothing goes into ``generation_config.json``."""
        return {}

    def evaluate_folder(
        self, model_dir: Path, recipe: ClassificationRecipe, splits: list[str], *, data=None
    ) -> dict[str, dict]:
        """Loss, accuracy and macro-F1 of a saved model (or LoRA adapter) folder, on a random
        sample of ``evaluation.final_max_examples`` texts of each split drawn with
        ``data.seed`` (:meth:`~hfattn.recipes.schema.EvaluationSection.example_cap`; ``null``:
        every text); scoring ``test`` rewrites the folder's ``confusion_matrix.json``. The
        texts scored are encoded with the folder's own tokenizer, in batches, into a
        temporary folder."""
        model_dir = Path(model_dir)
        labelled = load_data(recipe.data, data)
        model, tokenizer = load_classifier(model_dir, labelled.label_names)
        max_length = min(recipe.data.max_length, tokenizer.model_max_length)
        e, seed = recipe.evaluation, recipe.data.seed
        sizes = {split: len(labelled.splits[split]) for split in splits}
        rows = {split: scored_rows(sizes[split], e.example_cap(final=True), seed=seed)
                for split in splits}  # fmt: skip
        chosen = ClassificationData(
            {**labelled.splits, **{s: labelled.splits[s].select(rows[s]) for s in splits}},
            labelled.label_names,
        )
        results = {}
        with tempfile.TemporaryDirectory(prefix="hfattn-evaluate-") as folder:
            encoded = encode_splits(folder, chosen, tokenizer, max_length, splits)
            for split in splits:
                logits = predict_logits(
                    model,
                    encoded[split].ids,
                    batch_size=e.batch_size,
                    pad_token_id=tokenizer.pad_token_id,
                    progress=f"{split}: loss",
                )
                labels = encoded[split].labels
                if split == "test":
                    write_confusion_matrix(
                        model_dir / CONFUSION_MATRIX_FILE,
                        logits,
                        labels,
                        labelled.label_names,
                        split=split,
                        data=data or recipe.data.source,
                    )
                results[split] = classification_scores(logits, labels)
                results[split].update(example_counts(rows[split], sizes[split]))
        return results


TASK = ClassificationTask()

__all__ = ["TASK", "ClassificationTask"]
