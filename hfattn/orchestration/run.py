"""A training run from its recipe to its trained (and published) model: the layer above the
tasks, the engine and the Hub that ties them together.

:func:`run_recipe` takes a recipe loaded by :func:`hfattn.recipes.load_recipe`, which has made
every check that needs no data, once, in order (its fields, the checks before training, the run
folder, the model config: :mod:`hfattn.recipes.run_checks`), asks the recipe's task
(:mod:`hfattn.tasks`) for its training job, trains it (:func:`hfattn.training.engine.train`,
which trusts these checks) and pushes the result when the recipe says so
(:mod:`hfattn.hub.push`). The run folder is held from the first check to the push
(:func:`holding_output_dir`): a second run into it, from the command or from Python, is
refused.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from pathlib import Path

from ..common.machine import hfattn_commit
from ..data.prepared import TrainedOn, resuming
from ..recipes import RecipeError
from ..recipes.run_checks import check_before_training, check_run_folder
from ..recipes.schema import RecipeBase
from ..storage.run_folder import checkpoint_step, read_progress, require_checkpoint
from ..storage.run_lock import held_run_folder
from ..tasks import get_task

logger = logging.getLogger(__name__)


@contextmanager
def holding_output_dir(folder: str | Path) -> Iterator[None]:
    """Hold the run folder ``folder`` for the block: its main process takes the lock
    (:func:`~hfattn.storage.run_lock.held_run_folder`); when that is refused (another run
    holds it, it cannot be written), every process of the run raises the refusal together
    (:func:`~hfattn.training.processes.main_process_error`). A launch whose processes
    Accelerate sees as one each is refused first (each would take itself for the main one).

    Raises:
        ValueError: :func:`~hfattn.training.processes.check_process_group`'s refusal.
        RunFolderBusy, RunWriteError: what the main process met, on every process.
    """
    # accelerate: imported when a run starts
    from ..training.processes import check_process_group, main_process_error

    check_process_group()
    with ExitStack() as held:
        main_process_error(lambda: held.enter_context(held_run_folder(folder)))
        yield


def resumed_data_check(output_dir: str | Path, allow_change: bool) -> AbstractContextManager:
    """The check of a resumed run's data, for the block that builds its job: the prepared data
    must be what the newest checkpoint in ``output_dir`` was trained on (its
    ``prepared_data``), refused before any preparation otherwise, or, with ``allow_change``
    (``--allow-data-change``), said in one warning line
    (:func:`hfattn.data.prepared.resuming`). A checkpoint that records no prepared data resumes
    unchecked, said in one line.

    Raises:
        FileNotFoundError: there is no checkpoint to resume from.
    """
    checkpoint = require_checkpoint(output_dir)
    name, step = read_progress(checkpoint).get("prepared_data"), checkpoint_step(checkpoint)
    if not isinstance(name, str):
        logger.warning(
            "--resume: the checkpoint of step %d does not record the prepared data it was "
            "trained on: the data could not be checked",
            step,
        )
        return nullcontext()
    return resuming(TrainedOn(name, step, allow_change))


def build_job(recipe: RecipeBase):
    """Turn a validated recipe into its task's training job (model, tokenizer, data, ...)."""
    return get_task(recipe.task).build_job(recipe)


def run_recipe(
    recipe: RecipeBase,
    *,
    resume: bool = False,
    overwrite: bool = False,
    callbacks=(),
    planned: RecipeBase | None = None,
    allow_data_change: bool = False,
):
    """Train a recipe loaded by :func:`hfattn.recipes.load_recipe` end to end; push to the Hub
    when ``hub.push_to_hub`` is set.

    ``resume`` continues the run in ``output_dir`` on the prepared data its checkpoint was
    trained on (other data is refused before it is prepared, unless ``allow_data_change``:
    :func:`resumed_data_check`); ``overwrite`` replaces it (a folder that holds another run is
    refused otherwise). The recipe was checked for the run it was loaded
    for (``load_recipe(..., run=Run(...))``, its ``recipe.checks``); the checks of a run with
    other ``resume`` / ``overwrite`` (a recipe loaded without ``run``) are made here, first.
    ``planned`` is the recipe as its file has it, before ``--set`` overrides (default
    ``recipe``): the run records the steps it plans, so a run cut far short of them says so in
    its card.

    Raises:
        TypeError: ``recipe`` was not loaded by :func:`~hfattn.recipes.load_recipe`.
        RecipeError, ValueError, FileExistsError, FileNotFoundError: what
            :func:`~hfattn.recipes.run_checks.check_before_training` and
            :func:`~hfattn.recipes.run_checks.check_run_folder` refuse, before anything is
            loaded.
        RunFolderBusy: another run holds ``output_dir`` (:func:`holding_output_dir`).
        DataChangedError: a resumed run's data is not what its checkpoint was trained on
            (:class:`hfattn.data.prepared.DataChangedError`, a ``ValueError``).
    """
    if recipe.checks is None:
        raise TypeError("run_recipe takes a recipe loaded by hfattn.recipes.load_recipe")
    if not recipe.checks.covers(resume=resume, overwrite=overwrite):
        check_before_training(recipe, resume=resume, overwrite=overwrite)
        check_run_folder(recipe, resume=resume, overwrite=overwrite)
    with holding_output_dir(recipe.output_dir):
        data_check = (
            resumed_data_check(recipe.output_dir, allow_data_change) if resume else nullcontext()
        )
        return _train_and_push(recipe, resume, overwrite, callbacks, planned, data_check)


def _train_and_push(
    recipe: RecipeBase,
    resume: bool,
    overwrite: bool,
    callbacks,
    planned,
    data_check: AbstractContextManager,
):
    """:func:`run_recipe` once its checks are made and its folder is held; the job is built
    under ``data_check`` (:func:`resumed_data_check`)."""
    hfattn_commit()  # the commit of the code that trains, for the results file at the end
    from ..training.engine import train  # the loop and accelerate: imported when a run starts

    task = get_task(recipe.task)
    with data_check:
        job = task.build_job(recipe)
    result = train(
        job,
        recipe.training,
        recipe.output_dir,
        resume=resume,
        overwrite=overwrite,
        recipe_yaml=recipe.to_yaml(),
        recipe_name=recipe.name,
        generation_defaults=task.generation_defaults(recipe),
        callbacks=callbacks,
        planned_training=None if planned is None else planned.training,
    )
    if recipe.hub.push_to_hub and not result.interrupted:  # settings checked before training
        # accelerate (0.5 s) and huggingface_hub's API (0.3 s): only a run that publishes
        from accelerate import PartialState

        from ..hub.push import HubPushError, push_model_folder  # see above
        from ..storage.file_io import FileWriteError

        if PartialState().is_main_process:
            try:
                push_model_folder(
                    result.output_dir,
                    recipe.hub.repo_id,
                    private=recipe.hub.private,
                    space=recipe.hub.space,
                )
            except (HubPushError, FileWriteError) as err:  # a run cut short; a full disk
                raise RecipeError(
                    f"hub.push_to_hub: the model is saved in {result.output_dir} but was not "
                    f"pushed: {err}"
                ) from None
    return result


__all__ = ["build_job", "holding_output_dir", "resumed_data_check", "run_recipe"]
