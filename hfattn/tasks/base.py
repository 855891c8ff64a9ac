"""What a task is: one object that owns a recipe shape, a training job and its Hub facts.

A task module (``hfattn/tasks/<name>.py``) defines ``TASK``, an instance of a :class:`Task`
subclass. :mod:`hfattn.recipes` validates a recipe against ``TASK.recipe_class``, asks
``TASK.build_job(recipe)`` for the :class:`~hfattn.training.engine.TrainingJob` that the engine
trains, and ``TASK.evaluate_folder`` re-scores a saved model; :mod:`hfattn.hub` reads
``TASK.card`` (pipeline tag, Auto class, usage snippet, Space app). The engine knows no task.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from ..recipes import task_recipe_module


@dataclass(frozen=True)
class TaskInfo:
    """Card and Space facts of one task."""

    pipeline_tag: str
    task_name: str
    auto_class: str
    usage: str
    """Python lines run after ``model`` and ``tokenizer`` are loaded; ``{example}`` is replaced
    by an example input (a Python string literal)."""
    intended_use: str
    limitations: str
    space_app: str | None
    """Folder of ``spaces/`` holding this task's Gradio app, or ``None`` when none exists yet."""
    default_example: str = "Hello"
    architecture_suffixes: tuple[str, ...] = ()
    """Model class-name endings (``ForCausalLM``) whose folders belong to this task."""
    peft_task_type: str | None = None
    """PEFT ``task_type`` of this task's adapters (``CAUSAL_LM``)."""


def model_loss(model, batch: dict, state, stateful: bool):
    """The loss the model computes itself from a padded batch with ``labels`` (cross-entropy of
    a classifier, teacher-forced token cross-entropy of an encoder-decoder); no state is
    carried between batches. The engine's ``compute_loss`` signature."""
    return model(**batch).loss, None


class Task:
    """Base class of the tasks: subclasses set the class attributes and implement the methods."""

    name: ClassVar[str]
    """The recipe's ``task:`` value."""
    recipe_class: ClassVar[type]
    """A dataclass subclassing :class:`hfattn.recipes.schema.RecipeBase`."""
    card: ClassVar[TaskInfo]
    default_model_type: ClassVar[str]

    def build_job(self, recipe):
        """Data, tokenizer, model, batches, loss, evaluation and sample of ``recipe``, a recipe
        loaded by :func:`hfattn.recipes.load_recipe` (its model built from
        ``recipe.model_config``; nothing is validated again)."""
        raise NotImplementedError

    def check_data_source(self, source: str) -> None:
        """``data.source`` must name a dataset this task can load: the ``check_data_source`` of
        the task's light ``recipe`` module (what ``hfattn train`` checks before torch is
        imported).

        Raises:
            ValueError, FileNotFoundError: as :func:`hfattn.data.sources.check_source`.
        """
        task_recipe_module(self.name).check_data_source(source)

    def card_metadata(self, dataset: tuple[str, str], metric_names: dict[str, str]) -> dict:
        """The task / dataset / metric names that training records in ``eval_results.json``
        (and the card's ``model-index``): ``dataset`` is ``(name, type)``; ``metric_names``
        maps every reported metric to its display name."""
        return {
            "task_type": self.card.pipeline_tag,
            "task_name": self.card.task_name,
            "dataset_name": dataset[0],
            "dataset_type": dataset[1],
            "metric_names": metric_names,
            "reported_metrics": tuple(metric_names),
        }

    def generation_defaults(self, recipe) -> dict:
        """``generate()`` defaults saved in the model's ``generation_config.json``."""
        return {k: v for k, v in recipe.generation.generate_kwargs().items() if k != "seed"}

    def evaluate_folder(
        self, model_dir: Path, recipe, splits: list[str], *, data: str | None = None
    ) -> dict[str, dict]:
        """Score the saved model in ``model_dir`` on ``splits`` of the recipe's data (or of
        ``data``); returns ``{split: {metric: value}}``."""
        raise NotImplementedError


__all__ = ["Task", "TaskInfo", "model_loss"]
