"""A training run from its recipe to its trained (and published) model: the layer above the
tasks, the engine and the Hub that ties them together.

Each check of a run is made once, in this order:

1. :func:`check_before_training`: every check that needs neither data, model nor the run
   folder (the flags, the schedule against its steps, ``training.metric_for_best_model``,
   ``data.source``, the ``hub`` settings). ``hfattn train`` makes it on the
   :func:`hfattn.recipes.recipe_outline` of the file, which imports neither the task nor torch,
   so that these errors come in a fraction of a second;
2. :func:`hfattn.recipes.load_recipe`: every field, the model section built into its config;
3. :func:`check_run_folder`: ``output_dir`` (a run there is refused without ``--overwrite``)
   or, with ``--resume``, the run's checkpoint and stored recipe: a bad field is reported
   before "this folder holds a run".

:func:`run_recipe` then asks the recipe's task (:mod:`hfattn.tasks`) for its training job,
trains it (:func:`hfattn.training.engine.train`, which trusts these checks) and pushes the
result when the recipe says so (:mod:`hfattn.hub.push`); called on its own, it makes checks 1
and 3 first.
"""

from __future__ import annotations

import logging

from ..common.field_checks import RecipeError, require, require_reported_metric
from ..common.machine import hfattn_commit
from ..data.licenses import data_license
from ..recipes import task_recipe
from ..recipes.schema import LICENSE_FORM, HubSection, RecipeBase
from ..recipes.training_section import unused_batching_field
from ..storage.run_folder import (
    RESUME_AND_OVERWRITE,
    FieldChange,
    check_output_dir,
    check_resume,
)
from ..tasks import get_task
from ..training.schedules import check_schedule_steps

logger = logging.getLogger(__name__)


def build_job(recipe: RecipeBase):
    """Turn a validated recipe into its task's training job (model, tokenizer, data, ...)."""
    return get_task(recipe.task).build_job(recipe)


def check_before_training(recipe, *, resume: bool = False, overwrite: bool = False) -> None:
    """Every check of a training run that needs no data, tokenizer, model or run folder, made
    before any of them is loaded: the flags, the schedule against its steps,
    ``training.metric_for_best_model``, ``data.source`` and the ``hub`` settings; a batching
    field that the run does not use is a warning
    (:func:`~hfattn.recipes.training_section.unused_batching_field`).

    ``recipe`` is a loaded recipe (:func:`run_recipe` called on its own), or the
    :func:`~hfattn.recipes.recipe_outline` of a recipe file (``hfattn train``, before it
    imports the task). Where a check needs the data (the epochs' steps against
    ``training.warmup_steps``), the engine makes it once the data is loaded.

    Raises:
        RecipeError: both ``resume`` and ``overwrite``; a schedule that does not fit its steps;
            a ``metric_for_best_model`` the task's validation does not report; a bad ``hub``
            section (repo id, no token, no licence for the card).
        ValueError: ``data.source`` names no dataset (:mod:`hfattn.data.sources`).
        FileNotFoundError: a ``data.source`` path that does not exist.
    """
    if resume and overwrite:
        raise RecipeError(RESUME_AND_OVERWRITE)
    try:
        check_schedule_steps(recipe.training, resume=resume)
    except ValueError as err:
        raise RecipeError(str(err)) from None
    require_reported_metric(
        recipe.training.metric_for_best_model, task_recipe(recipe.task).reported_metrics
    )
    check_data_source(recipe.task, recipe.data.source)
    check_hub_settings(recipe.hub, recipe.data.source)
    unused = unused_batching_field(recipe.training)
    if unused is not None:
        logger.warning(unused)


def check_run_folder(
    recipe: RecipeBase, *, resume: bool = False, overwrite: bool = False
) -> list[FieldChange]:
    """The run folder ``recipe.output_dir``, checked once the recipe is fully loaded (a bad
    field is reported as such, not as a run to ``--overwrite``): with ``resume``, its newest
    checkpoint and stored recipe (:func:`hfattn.storage.run_folder.check_resume`; the changed
    resumable fields are returned); else a folder that holds a run is refused unless
    ``overwrite`` (:func:`hfattn.storage.run_folder.check_output_dir`; the engine clears it).

    Raises:
        FileExistsError: ``output_dir`` holds a run, without ``resume`` or ``overwrite``.
        FileNotFoundError: ``resume`` and ``output_dir`` holds no checkpoint.
        hfattn.storage.run_folder.RunFolderError: ``resume`` with a recipe that differs from the
            run's stored one in more than :data:`hfattn.storage.run_folder.RESUMABLE_FIELDS`.
    """
    if resume:
        return check_resume(recipe.output_dir, recipe.to_yaml())
    check_output_dir(recipe.output_dir, overwrite)
    return []


def check_data_source(task: str, source: str | None) -> None:
    """``data.source`` (``None``: the task's embedded default) must name a dataset that the
    task can load: the ``check_data_source`` of the task's light ``recipe`` module
    (:func:`hfattn.recipes.task_recipe`; :meth:`hfattn.tasks.Task.check_data_source`
    is the same check).

    Raises:
        ValueError, FileNotFoundError: as :func:`hfattn.data.sources.check_source`.
    """
    if source is not None:
        task_recipe(task).check_data_source(source)


def check_hub_settings(hub: HubSection, data_source: str | None = None) -> None:
    """With ``hub.push_to_hub``, the repo id must be one the Hub accepts, a token must be
    at hand and the card must have a licence (``hub.license``, else the declared licence of
    ``data_source``): all fail now, not after training.

    Raises:
        RecipeError: ``hub: repo_id must be 'owner/name' ...``, ``hub: no Hugging Face
            token ...`` or ``hub.license: not set and the license of data.source ...``.
    """
    if not hub.push_to_hub:
        return
    # huggingface_hub's API (0.3 s): only a run that publishes needs it
    from ..hub.push import HubPushError, resolve_token, validate_repo_id

    try:
        validate_repo_id(hub.repo_id)
        resolve_token()
    except HubPushError as err:
        raise RecipeError(f"hub: {err}") from None
    require(
        hub.license is not None or data_license(data_source) is not None,
        "hub.license",
        f"not set and the license of data.source {data_source!r} is unknown: the model card "
        f"needs one to publish ({LICENSE_FORM}, e.g. --set hub.license=apache-2.0)",
    )


def run_recipe(
    recipe: RecipeBase,
    *,
    resume: bool = False,
    overwrite: bool = False,
    callbacks=(),
    planned: RecipeBase | None = None,
    checked: bool = False,
):
    """Train a recipe (loaded by :func:`hfattn.recipes.load_recipe`) end to end; push to the
    Hub when ``hub.push_to_hub`` is set.

    ``resume`` continues the run in ``output_dir``; ``overwrite`` replaces it (a folder that
    holds another run is refused otherwise). ``planned`` is the recipe as its file has it,
    before ``--set`` overrides (default ``recipe``): the run records the steps it plans, so a
    run cut far short of them says so in its card. ``checked``: the caller has made
    :func:`check_before_training` and :func:`check_run_folder` (``hfattn train`` does, on
    the recipe's outline and on the loaded recipe); otherwise they are made here, first.

    Raises:
        RecipeError, ValueError, FileExistsError, FileNotFoundError: what
            :func:`check_before_training` and :func:`check_run_folder` refuse, before
            anything is loaded.
        hfattn.storage.run_folder.RunFolderError: as :func:`check_run_folder`.
    """
    if not checked:
        check_before_training(recipe, resume=resume, overwrite=overwrite)
        check_run_folder(recipe, resume=resume, overwrite=overwrite)
    hfattn_commit()  # the commit of the code that trains, for the results file at the end
    # torch (2-3 s): hfattn train imports this module for the checks before training, which
    # answer in a fraction of a second
    from ..training.engine import train

    task = get_task(recipe.task)
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


__all__ = [
    "build_job",
    "check_before_training",
    "check_data_source",
    "check_hub_settings",
    "check_run_folder",
    "run_recipe",
]
