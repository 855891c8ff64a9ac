"""A sweep as ``hfattn sweep`` is given it (:class:`Sweep`), checked before anything slow is
loaded (:func:`check_sweep`): the recipe and its search space
(:func:`~hfattn.recipes.search_space.load_search_space`, before torch is imported), then the
model config of each searched ``model.*`` value. :func:`hfattn.orchestration.sweep.run_sweep`
runs it. Neither Optuna nor the training layer is imported here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..recipes import RecipeError, check_recipe_values
from ..recipes.schema import RecipeBase
from ..recipes.search_space import SearchParam, check_model_configs, load_search_space

TRIAL_SETTINGS = (
    "evaluation.splits=[validation]",
    "hub.push_to_hub=false",
    "hub.repo_id=null",
    "hub.private=false",
    "hub.space=false",
)
"""What every trial sets over the recipe: scored on the validation split only, never pushed
(the settings of a push unset with it). The checks of a sweep are those of its trials: the
sweep of a recipe that pushes needs no Hub token."""
OPTUNA_MISSING = "hfattn sweep needs Optuna: pip install 'hfattn[sweep]'"
"""What a sweep says where Optuna is not installed."""


@dataclass(frozen=True)
class Sweep:
    """A sweep as ``hfattn sweep`` is given it, checked (:func:`check_sweep`)."""

    recipe: Path
    """The recipe file."""
    overrides: tuple[str, ...]
    """Its ``--set`` items (the searched fields aside)."""
    params: tuple[SearchParam, ...]
    """The search space."""
    base: RecipeBase
    """The recipe with its overrides, checked: what the trials share."""
    trials: int
    """How many trials are to be results (COMPLETE or PRUNED) in the study."""
    folder: Path
    """The sweep folder: the trials' run folders, the study (by default) and the outputs."""
    study: str
    """The study's name."""
    storage: str | None = None
    """A database URL for the study; ``None``: SQLite in :attr:`folder`."""
    seed: int | None = None
    """The seed of this process's sampler; ``None``: a fresh draw each time."""

    @property
    def metric(self) -> str:
        """What trials are compared by: the recipe's ``training.metric_for_best_model``."""
        return self.base.training.metric_for_best_model

    @property
    def direction(self) -> str:
        """``"maximize"`` or ``"minimize"``, as the recipe compares checkpoints."""
        return "maximize" if self.base.training.larger_metric_is_better else "minimize"

    def settings(self) -> dict:
        """What the study records of the sweep, which a continuation must share."""
        return {
            "space": {p.name: p.as_dict() for p in self.params},
            "metric": self.metric,
            "direction": self.direction,
            "recipe": self.base.to_yaml(),
        }


def check_sweep(
    recipe: str | Path,
    space: str | Path,
    trials: int,
    *,
    overrides: tuple[str, ...] = (),
    folder: str | Path | None = None,
    study: str | None = None,
    storage: str | None = None,
    seed: int | None = None,
) -> Sweep:
    """The :class:`Sweep` of these ``hfattn sweep`` arguments, every check that needs no data
    made: the recipe with its ``overrides`` and every field and value of the search space
    ``space`` (:func:`~hfattn.recipes.search_space.load_search_space`, a fraction of a second,
    before torch is imported), then the model config of each value of a ``model.*`` field
    (:func:`~hfattn.recipes.search_space.check_model_configs`: torch, seconds). ``folder``
    defaults to the recipe's ``output_dir`` + ``-sweep``, ``study`` to the recipe's name.

    Raises:
        RecipeError: ``--trials`` below 1; a field or value of the space the recipe refuses.
        FileNotFoundError: no recipe or space file.
    """
    if trials < 1:
        raise RecipeError(f"--trials: a number of trials >= 1, got {trials}")
    checked = (*overrides, *TRIAL_SETTINGS)  # the recipe as its trials train it
    params = load_search_space(space, recipe, checked)
    base = check_recipe_values(recipe, overrides)
    check_model_configs(params, recipe, checked)  # the config classes: torch, no data
    return Sweep(
        recipe=Path(recipe),
        overrides=tuple(overrides),
        params=tuple(params),
        base=base,
        trials=trials,
        folder=Path(folder if folder is not None else f"{base.output_dir}-sweep"),
        study=study or base.name,
        storage=storage,
        seed=seed,
    )


__all__ = ["OPTUNA_MISSING", "TRIAL_SETTINGS", "Sweep", "check_sweep"]
