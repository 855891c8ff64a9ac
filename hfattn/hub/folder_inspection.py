"""Read and validate what a saved model folder says about itself.

A folder is either a full model (``config.json`` + ``*.safetensors`` + tokenizer files, as
written by ``save_pretrained`` or an hfattn training run) or a PEFT adapter
(``adapter_config.json`` + ``adapter_model.safetensors``). A training run adds
``recipe.yaml`` (whose ``hub:`` section holds the card metadata) and ``eval_results.json``;
a classification run adds ``confusion_matrix.json`` (which names the labels).

A sequence-classification adapter has no ``config.json`` (one would make transformers take the
folder for a full model), so its label names travel in ``labels.json``
(``{"labels": ["comedy", ...]}``, label id order): loading the base model with those
``num_labels`` / ``id2label`` / ``label2id`` gives the head the adapter's weights fit.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..data.licenses import data_license
from ..recipes.schema import RecipeError, require_license
from ..storage.file_reads import read_safetensors
from ..storage.location import looks_like_hub_id
from ..storage.model_folder import (
    ADAPTER_CONFIG_FILE,
    ADAPTER_WEIGHTS_FILE,
    CONFIG_FILE,
    LABELS_FILE,
    TOKENIZER_FILES,
)
from ..storage.run_folder import (
    CONFUSION_MATRIX_FILE,
    EVAL_RESULTS_FILE,
    RunFolderError,
    read_recipe,
)
from .tasks import TaskInfo, task_for_architectures, task_for_peft

CLASSIFICATION_PEFT_TASK = "SEQ_CLS"


class ModelFolderError(ValueError):
    """The folder cannot be published as it is; the message says which file or field and why."""


@dataclass(frozen=True)
class HubSettings:
    """The ``hub:`` section of a recipe (defaults apply to folders without a recipe).

    The licence is the recipe's ``hub.license`` (with ``license_name`` / ``license_link``), else
    the declared licence of its ``data.source`` (:func:`hfattn.data.licenses.data_license`;
    ``license_source`` then names that source), else ``None``: unknown, and
    :func:`hfattn.hub.push_model_folder` refuses to publish until one is given."""

    license: str | None = None
    license_name: str | None = None
    license_link: str | None = None
    license_source: str | None = None
    """The ``data.source`` whose declared licence this is; ``None`` when the recipe (or
    ``hfattn push --license``) set it, or when there is none."""
    data_source: str | None = None
    """The recipe's ``data.source`` (``None`` for a folder without a recipe)."""
    language: tuple[str, ...] = ("en",)
    tags: tuple[str, ...] = ()
    datasets: tuple[str, ...] = ()
    base_model: str | None = None

    @classmethod
    def from_recipe(cls, recipe: dict | None) -> HubSettings:
        """Validate the recipe's ``hub:`` mapping (missing keys take the defaults) and resolve
        the licence (see the class docstring)."""
        section = (recipe or {}).get("hub") or {}
        if not isinstance(section, dict):
            raise ModelFolderError(
                f"recipe.yaml 'hub' must be a mapping, got {type(section).__name__}"
            )
        values = {}
        for name in ("license", "license_name", "license_link", "base_model"):
            value = section.get(name)
            if value is not None and not (isinstance(value, str) and value.strip()):
                raise ModelFolderError(
                    f"recipe.yaml hub.{name} must be a non-empty string, got {value!r}"
                )
            if value is not None:
                values[name] = value.strip()
        data = (recipe or {}).get("data")
        source = data.get("source") if isinstance(data, dict) else None
        values["data_source"] = source if isinstance(source, str) else None
        values.update(_license_fields(values, values["data_source"]))
        for name in ("language", "tags", "datasets"):
            value = section.get(name)
            if value is None:
                continue
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
                raise ModelFolderError(
                    f"recipe.yaml hub.{name} must be a list of non-empty strings, got {value!r}"
                )
            values[name] = tuple(value)
        return cls(**values)


def _license_fields(section: dict, source: str | None) -> dict:
    """The licence fields of :class:`HubSettings`: the recipe's, checked
    (:func:`hfattn.recipes.schema.require_license`), else those declared for the data ``source``."""

    try:
        require_license(section.get("license"), section.get("license_name"))
    except RecipeError as err:
        raise ModelFolderError(f"recipe.yaml {err}") from None
    declared = data_license(source) if section.get("license") is None else None
    if declared is None:
        return {}
    return {
        "license": declared.license,
        "license_name": declared.name,
        "license_link": declared.link,
        "license_source": source,
    }


@dataclass(frozen=True)
class ModelFolder:
    """A validated model or adapter folder, with everything the card and the Space need."""

    path: Path
    config: dict
    """``config.json`` of the model (of the adapter's base model when it is available locally,
    else ``{}``)."""
    task: TaskInfo
    adapter_config: dict | None = None
    eval_results: dict | None = None
    """``eval_results.json`` when it records at least one result, else ``None``."""
    training: dict | None = None
    """The ``training`` facts of ``eval_results.json`` (steps, runtime, hardware, ...)."""
    recipe: dict | None = None
    hub: HubSettings = field(default_factory=HubSettings)
    labels: tuple[str, ...] | None = None
    """Class names in label-id order (classification models and adapters), else ``None``."""

    def label_kwargs(self) -> dict:
        """``num_labels`` / ``id2label`` / ``label2id`` for ``from_pretrained`` (empty without
        labels): what loading an adapter's base model needs for the adapter's head."""
        if not self.labels:
            return {}
        return {
            "num_labels": len(self.labels),
            "id2label": dict(enumerate(self.labels)),
            "label2id": {name: i for i, name in enumerate(self.labels)},
        }

    @property
    def is_adapter(self) -> bool:
        """Whether this is a PEFT adapter folder (``adapter_config.json`` present)."""
        return self.adapter_config is not None

    @property
    def model_type(self) -> str | None:
        """``config.model_type`` (of the base model for adapters), or ``None`` when unknown."""
        return self.config.get("model_type")

    @property
    def base_model(self) -> str | None:
        """The Hub id of the model this one derives from (recipe ``hub.base_model`` first, then
        the adapter's ``base_model_name_or_path`` when it looks like a Hub id), or ``None``."""
        if self.hub.base_model:
            return self.hub.base_model
        if self.adapter_config:
            name = self.adapter_config.get("base_model_name_or_path")
            if name and looks_like_hub_id(name):
                return name
        return None


def read_json(path: Path) -> dict:
    """Parse a JSON object file, with an error naming the file when it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelFolderError(f"{path}: not readable JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ModelFolderError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def validate_eval_results(data: dict, source: str = EVAL_RESULTS_FILE) -> dict:
    """Check the ``eval_results.json`` schema written by training; return it unchanged.

    Required: ``task_type``, ``dataset_name``, ``dataset_type`` (strings) and ``results``, a
    non-empty list of ``{"split", "metric_type", "value"}`` (``metric_name`` optional).
    """
    for key in ("task_type", "dataset_name", "dataset_type"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise ModelFolderError(
                f"{source}: '{key}' must be a non-empty string, got {data.get(key)!r}"
            )
    results = data.get("results")
    if not isinstance(results, list) or not results:
        raise ModelFolderError(f"{source}: 'results' must be a non-empty list, got {results!r}")
    for i, result in enumerate(results):
        if not isinstance(result, dict):
            raise ModelFolderError(f"{source}: results[{i}] must be an object, got {result!r}")
        for key in ("split", "metric_type"):
            if not isinstance(result.get(key), str) or not result[key]:
                raise ModelFolderError(
                    f"{source}: results[{i}].{key} must be a non-empty string, got "
                    f"{result.get(key)!r}"
                )
        value = result.get("value")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ModelFolderError(f"{source}: results[{i}].value must be a number, got {value!r}")
        if not math.isfinite(value):
            raise ModelFolderError(
                f"{source}: results[{i}].value is {value} ({result.get('split')} "
                f"{result.get('metric_type')}): refusing to publish a non-finite result"
            )
    training = data.get("training")
    if training is not None and not isinstance(training, dict):
        raise ModelFolderError(f"{source}: 'training' must be an object, got {training!r}")
    return data


def verify_weights(path: Path) -> None:
    """Read every tensor of every ``*.safetensors`` file of ``path``
    (:func:`hfattn.storage.file_reads.read_safetensors`): a truncated or corrupt file, or a NaN /
    infinite value, is an error naming the file (and the tensor)."""
    import torch

    for file in sorted(path.glob("*.safetensors")):
        try:
            broken = next(
                (
                    name
                    for name, tensor in read_safetensors(file)
                    if tensor.is_floating_point() and not torch.isfinite(tensor).all()
                ),
                None,
            )
        except Exception as exc:  # safetensors raises its own error types for bad files
            raise ModelFolderError(f"{file}: not a readable safetensors file ({exc})") from None
        if broken is not None:
            raise ModelFolderError(
                f"{file}: tensor {broken!r} holds NaN or infinite values; "
                "refusing to publish broken weights"
            )


def _check_remote_code(config: dict, path: Path) -> None:
    """A custom ``model_type`` needs ``auto_map`` + its modeling files to load without hfattn."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    model_type = config.get("model_type")
    if model_type in CONFIG_MAPPING_NAMES:
        return
    auto_map = config.get("auto_map")
    if not isinstance(auto_map, dict) or not auto_map:
        raise ModelFolderError(
            f"{path / CONFIG_FILE}: model_type {model_type!r} is not built into transformers and "
            "the config has no 'auto_map', so the model would not load without hfattn; save it "
            "with `import hfattn.models` done first (the models register for remote code)"
        )
    for reference in auto_map.values():
        module = str(reference).split("--")[-1].split(".")[0]
        if not (path / f"{module}.py").is_file():
            raise ModelFolderError(
                f"{path}: auto_map names {reference!r} but {module}.py is missing from the folder"
            )


def _label_list(value, source: Path) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ModelFolderError(
            f"{source}: 'labels' must be a non-empty list of strings, got {value!r}"
        )
    return tuple(value)


def read_labels(path: Path, config: dict, adapter_config: dict | None) -> tuple[str, ...] | None:
    """The class names of a classification folder, in label-id order: ``config.json``
    ``id2label`` for a full model; for a ``SEQ_CLS`` adapter ``labels.json``, else the labels
    of the run's ``confusion_matrix.json``. ``None`` for other models.

    Raises:
        ModelFolderError: a ``SEQ_CLS`` adapter that records no label names, or a malformed
            ``id2label`` / ``labels.json``.
    """
    if adapter_config is None:
        id2label = config.get("id2label")
        if not config.get("architectures") or not any(
            a.endswith("ForSequenceClassification") for a in config["architectures"]
        ):
            return None
        if not isinstance(id2label, dict) or not id2label:
            return None
        try:
            order = sorted(id2label, key=int)
        except (TypeError, ValueError):
            raise ModelFolderError(
                f"{path / CONFIG_FILE}: id2label keys must be label ids, got {list(id2label)}"
            ) from None
        return tuple(str(id2label[k]) for k in order)
    if adapter_config.get("task_type") != CLASSIFICATION_PEFT_TASK:
        return None
    for name in (LABELS_FILE, CONFUSION_MATRIX_FILE):
        if (path / name).is_file():
            return _label_list(read_json(path / name).get("labels"), path / name)
    raise ModelFolderError(
        f"{path}: a sequence-classification adapter needs its label names to be loaded; write "
        f'{LABELS_FILE} with {{"labels": [...]}} in label-id order (hfattn train records them '
        f"in {CONFUSION_MATRIX_FILE} when it scores the test split)"
    )


def inspect_folder(path: str | Path) -> ModelFolder:
    """Validate a model or adapter folder and read its metadata.

    Raises:
        ModelFolderError: the folder is missing, is not a model/adapter folder, lacks weights or
            a tokenizer, or one of its JSON/YAML files is invalid (the message names which).
    """
    path = Path(path)
    if not path.is_dir():
        raise ModelFolderError(f"model folder {path} does not exist or is not a directory")
    adapter_config = None
    if (path / ADAPTER_CONFIG_FILE).is_file():
        adapter_config = read_json(path / ADAPTER_CONFIG_FILE)
        if not (path / ADAPTER_WEIGHTS_FILE).is_file():
            raise ModelFolderError(
                f"{path}: {ADAPTER_CONFIG_FILE} present but {ADAPTER_WEIGHTS_FILE} missing"
            )
        task = task_for_peft(adapter_config.get("task_type"))
        base = adapter_config.get("base_model_name_or_path")
        config = (
            read_json(Path(base) / CONFIG_FILE)
            if base and (Path(base) / CONFIG_FILE).is_file()
            else {}
        )
    else:
        if not (path / CONFIG_FILE).is_file():
            raise ModelFolderError(
                f"{path} is not a model folder: config.json missing (expected the output of "
                "save_pretrained or of an hfattn training run)"
            )
        config = read_json(path / CONFIG_FILE)
        if not any(path.glob("*.safetensors")):
            raise ModelFolderError(f"{path}: no *.safetensors weights (save with save_pretrained)")
        try:
            task = task_for_architectures(config.get("architectures"))
        except ValueError as exc:
            raise ModelFolderError(f"{path / CONFIG_FILE}: {exc}") from None
        _check_remote_code(config, path)
    if not any(any(path.glob(pattern)) for pattern in TOKENIZER_FILES):
        raise ModelFolderError(
            f"{path}: no tokenizer ({' or '.join(TOKENIZER_FILES)}); save the tokenizer next to "
            f"the model"
        )
    eval_results, training = None, None
    if (path / EVAL_RESULTS_FILE).is_file():
        recorded = read_json(path / EVAL_RESULTS_FILE)
        # A run evaluated on no split records no results: the card then says so.
        if recorded.get("results"):
            eval_results = validate_eval_results(recorded, str(path / EVAL_RESULTS_FILE))
        training = recorded.get("training") if isinstance(recorded.get("training"), dict) else None
    try:
        recipe = read_recipe(path)
    except RunFolderError as err:  # not YAML, not a mapping: the message names the file
        raise ModelFolderError(str(err)) from None
    return ModelFolder(
        path=path,
        config=config,
        task=task,
        adapter_config=adapter_config,
        eval_results=eval_results,
        training=training,
        recipe=recipe,
        hub=HubSettings.from_recipe(recipe),
        labels=read_labels(path, config, adapter_config),
    )
