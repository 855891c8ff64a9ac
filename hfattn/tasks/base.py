"""What a task is: one object that owns a recipe shape, a training job and its Hub facts.

A task module (``hfattn/tasks/<name>.py``) defines ``TASK``, an instance of a :class:`Task`
subclass. :mod:`hfattn.recipes` validates a recipe against ``TASK.recipe_class``, asks
``TASK.build_job(recipe)`` for the :class:`~hfattn.training.engine.TrainingJob` that the engine
trains, and ``TASK.evaluate_folder`` re-scores a saved model; :mod:`hfattn.hub` reads
``TASK.card`` (pipeline tag, Auto class, usage snippet, Space app). The engine knows no task.
"""

from __future__ import annotations

import copy
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from ..recipes import task_recipe

if TYPE_CHECKING:
    from ..training.training_job import TrainingJob


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


def dataset_card_names(source: str, known: dict[str, tuple[str, str]]) -> tuple[str, str]:
    """``(name, type)`` the model card gives the dataset ``source``: its entry in ``known`` (a
    task's embedded sources), else ``source`` itself for both (a Hub id or a file)."""
    return known.get(source, (source, source))


WHOLE_FILE_SPLIT = "train"
"""The split that holds every example of a file scored whole (:func:`scoring_data`): a loader
that holds nothing out puts the whole file in ``train``."""
WHOLE_FILE_SETTINGS = {
    "validation_fraction": 0.0,
    "test_fraction": 0.0,
    "size": None,
    "train_size": sys.maxsize,
}
"""The ``data:`` fields of a file scored whole: nothing held out (fractions 0), nothing left
out (no ``size`` cut, a ``train_size`` no file reaches: ``preprocessing: geron`` keeps no pair
aside either). A section's field that is not among them is not changed."""


def scores_whole_file(source: str | None) -> bool:
    """Whether ``hfattn evaluate --data SOURCE`` scores ``source`` whole: a single local file
    (a ``spa.txt`` / ``.tsv`` of pairs, a text file, a ``.csv`` / ``.jsonl`` of labelled
    texts) is scored in full, every pair, row or character of it, as :data:`WHOLE_FILE_SPLIT`;
    a dataset folder or a Hub id keeps its named splits."""
    return source is not None and Path(source).expanduser().is_file()


def scoring_data(data, source: str | None):
    """The ``data:`` section that scoring a saved model on ``source`` loads: ``data`` itself
    (``None``: the recipe's own data), a copy naming ``source`` (a dataset folder or Hub id:
    its splits as the recipe cuts them), and for a single file (:func:`scores_whole_file`) a
    copy that loads the whole file as :data:`WHOLE_FILE_SPLIT` (:data:`WHOLE_FILE_SETTINGS`).
    The copy is set field by field: a recipe's checks (held-out fractions above 0) are for
    training, and this section is only read by the split loaders."""
    if source is None:
        return data
    scored = copy.copy(data)
    scored.source = source
    if scores_whole_file(source):
        for name, value in WHOLE_FILE_SETTINGS.items():
            if hasattr(scored, name):
                setattr(scored, name, value)
    return scored


def split_settings(data) -> dict:
    """The keywords a split loader takes from a ``data:`` section: the shares of ``train``
    carved out for a missing validation / test split (``validation_fraction``,
    ``test_fraction``), the size of the ``train`` subset kept (``train_size``) and the
    ``seed`` that draws them."""
    names = ("validation_fraction", "test_fraction", "seed", "train_size")
    return {name: getattr(data, name) for name in names}


def model_loss(model, batch: dict, state, stateful: bool):
    """The loss the model computes itself from a padded batch with ``labels`` (cross-entropy of
    a classifier, teacher-forced token cross-entropy of an encoder-decoder), with the logits and
    the labels; no state is carried between batches. The engine's ``compute_loss`` signature:
    returns a :class:`~hfattn.training.training_job.StepLoss`."""
    from ..training.training_job import StepLoss  # torch: ``import hfattn.tasks`` stays light

    out = model(**batch)
    return StepLoss(out.loss, None, out.logits, batch["labels"])


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

    def prepare_data(self, recipe):
        """Prepare the recipe's data (tokenizer and token ids of every split) into the
        prepared-data cache, or find it there (:func:`hfattn.data.prepared.prepare`), without
        building a model: what ``hfattn prepare RECIPE`` runs and what :meth:`build_job` maps.
        Returns the :class:`~hfattn.data.prepared.Prepared` folder."""
        raise NotImplementedError

    def check_data_source(self, source: str) -> None:
        """``data.source`` must name a dataset this task can load: the ``check_data_source`` of
        the task's light ``recipe`` module (what ``hfattn train`` checks before torch is
        imported).

        Raises:
            ValueError, FileNotFoundError: as :func:`hfattn.data.sources.check_source`.
        """
        task_recipe(self.name).check_data_source(source)

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

    def training_job(
        self,
        recipe,
        dataset_names: dict[str, tuple[str, str]],
        metric_names: dict[str, str],
        **parts,
    ) -> TrainingJob:
        """The :class:`~hfattn.training.training_job.TrainingJob` of ``recipe`` made of ``parts``
        (its ``model``, ``tokenizer``, ``batches``, ``compute_loss``, ``evaluate``, ``sample``,
        ...), scored at the end on ``evaluation.splits``, its card metadata naming the data
        source by ``dataset_names`` (:func:`dataset_card_names`) and the metrics by
        ``metric_names``."""
        # torch (seconds): ``import hfattn.tasks`` stays light
        from ..training.training_job import TrainingJob

        dataset = dataset_card_names(recipe.data.source, dataset_names)
        return TrainingJob(
            eval_splits=tuple(recipe.evaluation.splits),
            card_metadata=self.card_metadata(dataset, metric_names),
            **parts,
        )

    def generation_defaults(self, recipe) -> dict:
        """``generate()`` defaults saved in the model's ``generation_config.json``."""
        return {k: v for k, v in recipe.generation.generate_kwargs().items() if k != "seed"}

    def evaluate_folder(
        self, model_dir: Path, recipe, splits: list[str], *, data: str | None = None
    ) -> dict[str, dict]:
        """Score the saved model in ``model_dir`` on ``splits`` of the recipe's data (or of
        ``data``); returns ``{split: {metric: value}}``."""
        raise NotImplementedError


__all__ = [
    "WHOLE_FILE_SETTINGS",
    "WHOLE_FILE_SPLIT",
    "Task",
    "TaskInfo",
    "dataset_card_names",
    "model_loss",
    "scores_whole_file",
    "scoring_data",
    "split_settings",
]
