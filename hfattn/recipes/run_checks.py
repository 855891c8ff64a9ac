"""The checks of a recipe to be trained that its fields alone do not make, none of which needs
data, a model or torch: the flags, the schedule against its steps,
``training.metric_for_best_model``, ``data.source`` and the ``hub`` settings
(:func:`check_before_training`), and the run folder (:func:`check_run_folder`), made by
:func:`hfattn.recipes.load_recipe` for a recipe to train.

What a push accepts is decided here too, for :mod:`hfattn.hub.push` as for the recipe: the form
of a repo id (:func:`repo_id_problem`) and the token at hand (:func:`hub_token`).
"""

from __future__ import annotations

import os
import re

from ..common.field_checks import RecipeError, require, require_reported_metric
from ..data.licenses import data_license
from ..storage.resume_checks import (
    RESUME_AND_OVERWRITE,
    FieldChange,
    check_output_dir,
    check_resume,
)
from ..storage.run_lock import check_not_busy
from ..training.schedules import check_schedule_steps
from .registry import task_recipe
from .schema import LICENSE_FORM, HubSection

REPO_ID_PATTERN = re.compile(
    r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?/[A-Za-z0-9](?:[A-Za-z0-9._-]{0,94}[A-Za-z0-9])?$"
)
"""A repo id the Hub accepts: ``owner/name``, letters, digits, ``-``, ``_`` and ``.``."""


def repo_id_problem(repo_id) -> str | None:
    """Why ``repo_id`` is no ``owner/name`` the Hub accepts, or ``None`` when it is one."""
    if (
        isinstance(repo_id, str)
        and REPO_ID_PATTERN.match(repo_id)
        and "--" not in repo_id
        and ".." not in repo_id
    ):
        return None
    return (
        f"repo_id must be 'owner/name' (letters, digits, '-', '_' and '.', no '--' or '..', "
        f"at most 96 characters each side), got {repo_id!r}"
    )


NO_TOKEN = (
    "no Hugging Face token: set HF_TOKEN to a token with write access "
    "(https://huggingface.co/settings/tokens) or run `hf auth login`; nothing was uploaded"
)
"""Why a push cannot start without a token."""


def hub_token(token: str | None = None) -> str | None:
    """The token to push with: ``token``, else ``$HF_TOKEN`` or the saved login; ``None`` when
    there is none."""
    from huggingface_hub import get_token  # 0.3 s: only a run that publishes asks

    return token or os.environ.get("HF_TOKEN") or get_token() or None


def check_before_training(recipe, *, resume: bool = False, overwrite: bool = False) -> None:
    """Every check of a training run that needs no data, tokenizer, model or run folder: the
    flags, the schedule against its steps, ``training.metric_for_best_model``, ``data.source``
    and the ``hub`` settings. ``recipe`` has the fields of a recipe's
    :func:`~hfattn.recipes.recipe_outline`. Where a check needs the data (the epochs' steps
    against ``training.warmup_steps``), the engine makes it once the data is loaded.

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


def check_run_folder(recipe, *, resume: bool = False, overwrite: bool = False) -> list[FieldChange]:
    """The run folder ``recipe.output_dir``: with ``resume``, its newest checkpoint and stored
    recipe (:func:`hfattn.storage.resume_checks.check_resume`; the changed resumable fields are
    returned); else a folder that holds a run is refused unless ``overwrite``
    (:func:`hfattn.storage.resume_checks.check_output_dir`; the engine clears it).

    Raises:
        hfattn.storage.run_lock.RunFolderBusy: another ``hfattn train`` holds the folder.
        FileExistsError: ``output_dir`` holds a run, without ``resume`` or ``overwrite``.
        FileNotFoundError: ``resume`` and ``output_dir`` holds no checkpoint.
        hfattn.storage.run_folder.RunFolderError: ``resume`` with a recipe that differs from the
            run's stored one in more than :data:`hfattn.storage.resume_checks.RESUMABLE_FIELDS`.
    """
    check_not_busy(recipe.output_dir)
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
    problem = repo_id_problem(hub.repo_id)
    require(problem is None, "hub", str(problem))
    require(hub_token() is not None, "hub", NO_TOKEN)
    require(
        hub.license is not None or data_license(data_source) is not None,
        "hub.license",
        f"not set and the license of data.source {data_source!r} is unknown: the model card "
        f"needs one to publish ({LICENSE_FORM}, e.g. --set hub.license=apache-2.0)",
    )


__all__ = [
    "NO_TOKEN",
    "REPO_ID_PATTERN",
    "check_before_training",
    "check_data_source",
    "check_hub_settings",
    "check_run_folder",
    "hub_token",
    "repo_id_problem",
]
