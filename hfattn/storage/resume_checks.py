"""The checks of a run folder that already holds a run, made before anything slow is loaded:
``hfattn train RECIPE --resume`` is compared with the recipe the run stored (:func:`check_resume`:
only :data:`RESUMABLE_FIELDS` may differ), so two different runs are never mixed in one folder;
without ``--resume``, a folder that holds a run is refused unless ``--overwrite`` replaces it
(:func:`check_output_dir`, :func:`clear_output_dir`).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml

from .location import absolute_source
from .run_folder import (
    RUN_FILES,
    RunFolderError,
    checkpoints_dir,
    read_recipe,
    recipe_path,
    require_checkpoint,
    resume_command,
)

RESUMABLE_FIELDS = (
    "training.max_steps",
    "training.max_minutes",
    "training.log_every",
    "training.eval_every",
    "training.save_every",
    "training.keep_checkpoints",
    "training.average_checkpoints",
    "training.reuse_freed_memory",
    "training.report_to",
    "evaluation.max_examples",
    "evaluation.final_max_examples",
    "evaluation.batch_size",
    "hub",
)
"""The recipe fields a resumed run may change (its budget, its logging, eval and checkpoint
intervals, how many checkpoints it keeps and averages at the end, whether it keeps freed host
memory for reuse, the trackers it reports to, how many examples its evaluations score and in
what batches, and every ``hub.*`` field, which says how to publish the run, not how it
trains); any other difference means another run. A run whose training has ended is finished
with the evaluation bounds given on resume, with no training step: ``--set
evaluation.final_max_examples=200`` scores a smaller final evaluation."""
RESUME_AND_OVERWRITE = (
    "--resume continues the run in output_dir and --overwrite replaces it: give one, not both"
)
"""The refusal of ``--resume`` together with ``--overwrite``."""
IGNORED_FIELDS = ("output_dir",)
"""Fields not compared on resume (the folder is the run, wherever it now lies)."""


@dataclass
class FieldChange:
    """One recipe field whose value differs between the stored and the given recipe."""

    name: str
    stored: object
    given: object

    def __str__(self) -> str:
        return f"{self.name}: {_show(self.stored)} vs {_show(self.given)}"


def _show(value) -> str:
    """``value`` as it is spelt in YAML (``64``, ``null``, ``[a, b]``)."""
    if value is _ABSENT:
        return "<absent>"
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return text.removesuffix("...").strip()


_ABSENT = object()


def _flatten(data, prefix: str = "") -> dict[str, object]:
    if isinstance(data, dict) and data:
        flat: dict[str, object] = {}
        for key, value in data.items():
            flat.update(_flatten(value, f"{prefix}{key}."))
        return flat
    return {prefix[:-1]: data}


def recipe_differences(stored: dict, given: dict) -> list[FieldChange]:
    """The fields (dotted names, sorted) whose values differ between two recipe mappings,
    :data:`IGNORED_FIELDS` left out; a ``data.source`` path is compared as the absolute path it
    names (:func:`~hfattn.storage.location.absolute_source`)."""
    a, b = _flatten(stored), _flatten(given)
    changes = []
    for name in sorted(a.keys() | b.keys()):
        if name in IGNORED_FIELDS or name.split(".")[0] in IGNORED_FIELDS:
            continue
        old, new = a.get(name, _ABSENT), b.get(name, _ABSENT)
        if name == "data.source" and isinstance(old, str) and isinstance(new, str):
            old, new = absolute_source(old), absolute_source(new)  # a run stored it relative
        if old != new:
            changes.append(FieldChange(name, old, new))
    return changes


def is_resumable(name: str) -> bool:
    """Whether the dotted recipe field ``name`` may change on resume: it is one of
    :data:`RESUMABLE_FIELDS` or lies in a section listed there (``hub.license``)."""
    return any(name == field or name.startswith(f"{field}.") for field in RESUMABLE_FIELDS)


def check_resume(folder: str | Path, recipe_yaml: str) -> list[FieldChange]:
    """Check that the run in ``folder`` can be resumed with the resolved recipe
    ``recipe_yaml``; return the changed :data:`RESUMABLE_FIELDS` (the stored recipe is
    rewritten with them when training starts).

    Cheap (reads two small files): called before the model and data are loaded.

    Raises:
        FileNotFoundError: there is no checkpoint to resume from.
        RunFolderError: the recipe differs from the stored one in other fields (the message names
        them: ``model.hidden_size: 64 vs
            128``).
    """
    folder = Path(folder)
    require_checkpoint(folder)
    stored = read_recipe(folder)
    if stored is None:
        return []
    changes = recipe_differences(stored, yaml.safe_load(recipe_yaml))
    other = [c for c in changes if not is_resumable(c.name)]
    if other:
        raise RunFolderError(
            f"--resume: the recipe differs from the run's in {folder} "
            f"({recipe_path(folder)} vs given): {'; '.join(map(str, other))}. Only "
            f"{', '.join(RESUMABLE_FIELDS)} may change on resume: continue the run as it "
            f"was with `{resume_command(folder)}`, or train the new recipe into "
            "another output_dir (--set output_dir=runs/NAME)"
        )
    return changes


def check_output_dir(output_dir: str | Path, overwrite: bool) -> None:
    """Refuse a folder that already holds a training run (checkpoints or saved weights) unless
    ``overwrite``: made before anything is loaded (:func:`clear_output_dir` clears it later).

    Raises:
        FileExistsError: naming what the folder holds and the three ways on.
    """
    output_dir = Path(output_dir)
    held = [p.name for p in (checkpoints_dir(output_dir), *output_dir.glob("*.safetensors"))]
    held = [name for name in held if (output_dir / name).exists()]
    if held and not overwrite:
        raise FileExistsError(
            f"output_dir {output_dir} already holds a run ({', '.join(held)}); continue it "
            f"with `{resume_command(output_dir)}`, replace it with --overwrite, or pick "
            "another output_dir (--set output_dir=runs/NAME)"
        )


def clear_output_dir(output_dir: str | Path) -> None:
    """Remove the run that ``output_dir`` holds (``--overwrite``, once :func:`check_output_dir`
    has been made): its checkpoints, weights and run files (on the main process); any other
    file stays."""
    output_dir = Path(output_dir)
    from accelerate import PartialState  # 1.5 s; only a run that clears a folder needs it

    if PartialState().is_main_process:
        shutil.rmtree(checkpoints_dir(output_dir), ignore_errors=True)
        for path in [*output_dir.glob("*.safetensors"), *(output_dir / n for n in RUN_FILES)]:
            path.unlink(missing_ok=True)
    PartialState().wait_for_everyone()


__all__ = [
    "IGNORED_FIELDS",
    "RESUMABLE_FIELDS",
    "RESUME_AND_OVERWRITE",
    "FieldChange",
    "check_output_dir",
    "check_resume",
    "clear_output_dir",
    "is_resumable",
    "recipe_differences",
]
