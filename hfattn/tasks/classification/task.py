"""``TASK``, the classification :class:`~hfattn.tasks.base.Task`: the card facts, the training
job (:func:`hfattn.tasks.classification.job.build_job`) and the re-scoring of a saved model.
"""

from __future__ import annotations

from pathlib import Path

from ...evaluation.classification import (
    classification_scores,
    predict_logits,
    write_confusion_matrix,
)
from ...storage.run_folder import CONFUSION_MATRIX_FILE
from ...training.training_job import TrainingJob
from ..base import Task, TaskInfo
from . import job
from .encoding import encode_texts, load_data
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
        """Load the data, build model and tokenizer, and wire batches, loss and evaluation
        (:func:`hfattn.tasks.classification.job.build_job`)."""
        return job.build_job(recipe, self)

    def generation_defaults(self, recipe: ClassificationRecipe) -> dict:
        """A classifier does not generate: nothing goes into ``generation_config.json``."""
        return {}

    def evaluate_folder(
        self, model_dir: Path, recipe: ClassificationRecipe, splits: list[str], *, data=None
    ) -> dict[str, dict]:
        """Loss, accuracy and macro-F1 of a saved model (or LoRA adapter) folder; scoring
        ``test`` rewrites the folder's ``confusion_matrix.json``."""
        model_dir = Path(model_dir)
        labelled = load_data(recipe.data, data)
        model, tokenizer = load_classifier(model_dir, labelled.label_names)
        max_length = min(recipe.data.max_length, tokenizer.model_max_length)
        results = {}
        for split in splits:
            logits = predict_logits(
                model,
                encode_texts(tokenizer, labelled.texts(split), max_length),
                batch_size=recipe.evaluation.batch_size,
                pad_token_id=tokenizer.pad_token_id,
            )
            if split == "test":
                write_confusion_matrix(
                    model_dir / CONFUSION_MATRIX_FILE,
                    logits,
                    labelled.labels(split),
                    labelled.label_names,
                    split=split,
                    data=data or recipe.data.source,
                )
            results[split] = classification_scores(logits, labelled.labels(split))
        return results


TASK = ClassificationTask()

__all__ = ["TASK", "ClassificationTask"]
