"""Render a model's README.md (Hub model card) from ``model_cards/model_card_template.md``.

The YAML front matter comes from :class:`huggingface_hub.ModelCardData` (license, language,
``library_name``, ``pipeline_tag``, tags, datasets, ``base_model`` and, only when training
recorded results, ``model-index``); the body from the folder's ``config.json``,
``eval_results.json``, ``recipe.yaml`` and the task and citation tables.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import struct
from pathlib import Path

import yaml
from huggingface_hub import EvalResult, ModelCard, ModelCardData

from .. import __version__
from ..common.assets import asset_dir
from ..common.families import FAMILIES, card_value
from ..export.export_folder import EXPORT_INFO_FILE, export_of
from ..storage.run_folder import CTRANSLATE2_DIR, LOSS_CURVE_FILE, SAMPLES_FILE
from ..storage.run_status import training_shortfall
from .citations import citations_for
from .folder_inspection import HubSettings, ModelFolder

TEMPLATE_NAME = "model_card_template.md"

_META_CONFIG_KEYS = frozenset(
    {
        "architectures",
        "auto_map",
        "dtype",
        "torch_dtype",
        "model_type",
        "transformers_version",
        "use_cache",
        "return_dict",
        "output_attentions",
        "output_hidden_states",
        "initializer_range",
        "id2label",
        "label2id",
        "problem_type",
        "_name_or_path",
    }
)
"""``config.json`` keys that say nothing about the architecture (left out of its table)."""

_ADAPTER_KEYS = (
    "peft_type",
    "r",
    "lora_alpha",
    "lora_dropout",
    "target_modules",
    "modules_to_save",
)


def count_parameters(folder: Path) -> int | None:
    """Number of weights stored in ``folder/*.safetensors``, read from the file headers only.

    Returns ``None`` when there is no safetensors file.
    """
    files = sorted(Path(folder).glob("*.safetensors"))
    if not files:
        return None
    total = 0
    for file in files:
        with open(file, "rb") as handle:
            (size,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(size))
        total += sum(math.prod(v["shape"]) for k, v in header.items() if k != "__metadata__")
    return total


def _human_count(n: int) -> str:
    for unit, scale in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f}{unit} ({n:,})"
    return f"{n:,}"


_format_value = card_value


def _format_seconds(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"


def eval_results_of(folder: ModelFolder, model_name: str) -> list[EvalResult]:
    """The ``EvalResult`` entries of the card's ``model-index`` (empty without results)."""
    data = folder.eval_results
    if not data:
        return []
    return [
        EvalResult(
            task_type=data["task_type"],
            task_name=data.get("task_name") or folder.task.task_name,
            dataset_type=data["dataset_type"],
            dataset_name=data["dataset_name"],
            dataset_split=r["split"],
            metric_type=r["metric_type"],
            metric_name=r.get("metric_name") or r["metric_type"],
            metric_value=r["value"],
        )
        for r in data["results"]
    ]


def card_data_for(folder: ModelFolder, repo_id: str, *, merged: bool = False) -> ModelCardData:
    """The card's front matter for ``folder`` published as ``repo_id``.

    ``merged`` marks a full model made by merging a LoRA adapter into its base model.
    """
    model_name = repo_id.split("/")[-1]
    tags = ["hfattn"]
    if folder.model_type:
        tags.append(folder.model_type)
    if folder.is_adapter:
        tags += ["peft", "lora"]
    if merged:
        tags.append("lora-merged")
    tags += [t for t in folder.hub.tags if t not in tags]
    library = "peft" if folder.is_adapter else "transformers"
    return ModelCardData(
        model_name=model_name,
        license=folder.hub.license,
        license_name=folder.hub.license_name,
        license_link=folder.hub.license_link,
        language=list(folder.hub.language) or None,
        library_name=library,
        pipeline_tag=folder.task.pipeline_tag,
        tags=tags,
        datasets=list(folder.hub.datasets) or None,
        base_model=folder.base_model,
        eval_results=eval_results_of(folder, model_name) or None,
    )


def _attention_row(config: dict) -> tuple[str, str] | None:
    family = FAMILIES.get(config.get("model_type") or "")
    describe = family.describe_attention if family else None
    text = describe(config) if describe else None
    return ("Attention", text) if text else None


def _model_rows(folder: ModelFolder) -> list[tuple[str, str]]:
    config = folder.config
    rows = []
    if folder.model_type:
        rows.append(("Model type", f"`{folder.model_type}`"))
    if config.get("architectures"):
        rows.append(("Architecture", ", ".join(f"`{a}`" for a in config["architectures"])))
    attention = _attention_row(config)
    if attention:
        rows.append(attention)
    rows.append(("Task", f"{folder.task.task_name} (`{folder.task.pipeline_tag}`)"))
    params = count_parameters(folder.path)
    if params is not None:
        label = "Adapter parameters" if folder.is_adapter else "Parameters"
        rows.append((label, _human_count(params)))
    if folder.base_model:
        rows.append(
            ("Base model", f"[`{folder.base_model}`](https://huggingface.co/{folder.base_model})")
        )
    if folder.labels:
        rows.append(("Labels", ", ".join(f"`{name}`" for name in folder.labels)))
    rows.append(("License", license_text(folder.hub)))
    return rows


def license_text(hub: HubSettings) -> str:
    """The card's "License" row: the Hub id (or, for ``other``, the licence's name linked to its
    text), and the data it comes from when the recipe did not set it; "not set" when unknown."""
    if hub.license is None:
        return "not set (the license of the training data is unknown)"
    name = hub.license_name or hub.license
    text = f"[`{name}`]({hub.license_link})" if hub.license_link else f"`{name}`"
    if hub.license_source:
        text += f", the license of the training data (`{hub.license_source}`)"
    return text


def _architecture_rows(folder: ModelFolder) -> list[tuple[str, str]]:
    rows = [
        (key, _format_value(value))
        for key, value in sorted(folder.config.items())
        if key not in _META_CONFIG_KEYS and not key.endswith("_token_id") and value is not None
    ]
    if folder.is_adapter:
        rows += [
            (f"adapter.{key}", _format_value(folder.adapter_config[key]))
            for key in _ADAPTER_KEYS
            if folder.adapter_config.get(key) is not None
        ]
    return rows


def _format_training_value(key: str, value) -> str:
    """A value of ``eval_results.json``'s ``training`` as the card's training table shows it."""
    if key in ("train_runtime_s", "eval_runtime_s", "final_eval_runtime_s", "wall_time_s"):
        return _format_seconds(value)
    if key == "mfu":
        return f"{value:.1%}"
    return _format_value(value)


def _training_rows(folder: ModelFolder) -> list[tuple[str, str]]:
    training = folder.training or {}
    labels = {
        "recipe": "Recipe",
        "global_step": "Optimizer steps",
        "epochs_completed": "Epochs completed",
        "best_step": "Best checkpoint (step)",
        "best_averaged_steps": "Kept model: the average of the checkpoints of steps",
        "stop_reason": "Stopped because",
        "train_runtime_s": "Training time",
        "eval_runtime_s": "Evaluation time during training",
        "final_eval_runtime_s": "Final evaluation time",
        "wall_time_s": "Wall time of the run",
        "max_minutes": "Time budget (minutes)",
        "planned_minutes": "The recipe's time budget (minutes)",
        "train_tokens": "Tokens trained on",
        "train_tokens_per_s": "Tokens per second",
        "train_flops_per_token": "Training FLOPs per token",
        "mfu": "Model FLOPs utilisation (MFU)",
        "peak_flops_source": "Peak FLOP/s of the MFU",
        "hardware": "Hardware",
        "num_processes": "Processes",
        "mixed_precision": "Mixed precision",
    }
    # the peak is said only where there is an MFU (a CPU run has neither)
    hidden = {"peak_flops_per_device"} | (
        {"peak_flops_source"} if training.get("mfu") is None else set()
    )
    rows = []
    for key, label in labels.items():
        if training.get(key) is not None and key not in hidden:
            rows.append((label, _format_training_value(key, training[key])))
    rows += [
        (key, _format_value(value))
        for key, value in training.items()
        if key not in labels and key not in hidden and isinstance(value, (str, int, float))
    ]
    if folder.recipe and not training.get("recipe") and folder.recipe.get("name"):
        rows.insert(0, ("Recipe", str(folder.recipe["name"])))
    return rows


def _summary(folder: ModelFolder) -> str:
    what = f"`{folder.model_type}` model" if folder.model_type else "model"
    if folder.is_adapter:
        what = f"{folder.adapter_config.get('peft_type', 'PEFT')} fine-tune of a {what}"
    sentence = f"A {what} for {folder.task.task_name.lower()} (`{folder.task.pipeline_tag}`)"
    if folder.eval_results:
        sentence += f", trained and evaluated on {folder.eval_results['dataset_name']}"
    return sentence + ", published with hfattn."


PIPELINE_TASKS = frozenset({"text-classification"})
"""Pipeline tags whose card also shows a ``transformers.pipeline`` snippet (full models only:
an adapter's base needs its labels)."""


def example_inputs(folder: ModelFolder) -> list[str]:
    """Example inputs of the model: the recipe's generation prompt or examples, else the
    task's default example (the card's snippets and the Space's examples use them)."""
    generation = (folder.recipe or {}).get("generation")
    if isinstance(generation, dict):  # a causal LM's prompt, or translation examples
        if isinstance(generation.get("prompt"), str) and generation["prompt"]:
            return [generation["prompt"]]
        examples = [e for e in generation.get("examples") or [] if isinstance(e, str) and e]
        if examples:
            return examples
    return [folder.task.default_example]


def _label_kwargs_source(folder: ModelFolder) -> tuple[str, str]:
    """``(labels line, from_pretrained keyword arguments)`` of the snippet that loads a
    classification adapter's base model with the adapter's labels (empty without labels)."""
    if not folder.labels:
        return "", ""
    line = f"labels = {json.dumps(list(folder.labels), ensure_ascii=False)}  # in label-id order\n"
    kwargs = (
        ",\n    num_labels=len(labels),\n    id2label=dict(enumerate(labels)),\n"
        "    label2id={name: i for i, name in enumerate(labels)},\n"
    )
    return line, kwargs


def _ctranslate2_usage(folder: ModelFolder, repo_id: str, example: str) -> dict[str, str]:
    """The card's CTranslate2 section (``usage_ctranslate2``, ``ctranslate2_quantization``)
    when the folder holds its export in ``ct2/``; empty strings otherwise."""
    export = export_of(folder.path / CTRANSLATE2_DIR)
    if export is None:
        return {"usage_ctranslate2": "", "ctranslate2_quantization": ""}
    info = json.loads((export / EXPORT_INFO_FILE).read_text(encoding="utf-8"))
    text = json.loads(example)
    shell = shlex.join(["hfattn", "translate", repo_id, "--engine", "ctranslate2", text])
    usage = (
        f"# shell: {shell}\n"
        "from huggingface_hub import snapshot_download\n"
        "from hfattn.export import CTranslate2Translation\n\n"
        f'folder = snapshot_download("{repo_id}", allow_patterns=["{CTRANSLATE2_DIR}/*"])\n'
        f'translator = CTranslate2Translation(f"{{folder}}/{CTRANSLATE2_DIR}", device="cpu")\n'
        f"print(translator.translate([{example}]))"
    )
    return {
        "usage_ctranslate2": usage,
        "ctranslate2_quantization": info.get("quantization") or "float32",
    }


def _usage(folder: ModelFolder, repo_id: str) -> dict[str, str]:
    task = folder.task
    example = json.dumps(example_inputs(folder)[0], ensure_ascii=False)
    body = task.usage.format(example=example)
    imports = f"from transformers import {task.auto_class}, AutoTokenizer"
    load_tok = f'tokenizer = AutoTokenizer.from_pretrained("{repo_id}")'
    plain = f'{load_tok}\nmodel = {task.auto_class}.from_pretrained("{repo_id}")\n{body}'
    remote_code = needs_remote_code(folder.config)
    # AutoTokenizer reads config.json too, so it needs the remote code as well.
    remote = (
        f"{imports}\n\n{load_tok[:-1]}, trust_remote_code=True)\n"
        f'model = {task.auto_class}.from_pretrained("{repo_id}", trust_remote_code=True)\n{body}'
        if remote_code
        else f"{imports}\n\n{plain}"
    )
    with_hfattn = (
        "import hfattn.models  # registers the hfattn architectures with the Auto classes\n"
        f"{imports}\n\n{plain}"
    )
    base = folder.base_model or "BASE_MODEL_ID"
    labels_line, label_kwargs = _label_kwargs_source(folder)
    load_base = (
        f'base = {task.auto_class}.from_pretrained(\n    "{base}"{label_kwargs})'
        if label_kwargs
        else f'base = {task.auto_class}.from_pretrained("{base}")'
    )
    adapter = (
        f"from peft import PeftModel\n{imports}\n\n{labels_line}{load_tok}\n{load_base}\n"
        f'model = PeftModel.from_pretrained(base, "{repo_id}")\n{body}'
    )
    pipeline = ""
    if task.pipeline_tag in PIPELINE_TASKS and not folder.is_adapter:
        options = ", trust_remote_code=True" if remote_code else ""
        options += ", top_k=None"  # every label's score, not only the best one
        pipeline = (
            "from transformers import pipeline\n\n"
            f'pipe = pipeline("{task.pipeline_tag}", model="{repo_id}"{options})\n'
            f"print(pipe([{example}])[0])  # every label of the first text, best first"
        )
    return {
        **_ctranslate2_usage(folder, repo_id, example),
        "usage_remote": remote,
        "usage_hfattn": with_hfattn,
        "usage_adapter": adapter,
        "usage_pipeline": pipeline,
    }


def needs_remote_code(config: dict) -> bool:
    """Whether loading needs ``trust_remote_code`` (the config carries an ``auto_map``)."""
    return bool(config.get("auto_map"))


def render_model_card(
    folder: ModelFolder,
    repo_id: str,
    *,
    merged: bool = False,
    template_path: str | Path | None = None,
) -> ModelCard:
    """Render the model card of ``folder`` published as ``repo_id``.

    Args:
        folder: the inspected model or adapter folder.
        repo_id: ``owner/name`` on the Hub (used in the usage snippets and as ``model_name``).
        merged: ``folder`` is a full model made by merging a LoRA adapter into its base model.
        template_path: a jinja template; defaults to ``model_cards/model_card_template.md``.
    """

    template = Path(template_path) if template_path else asset_dir("model_cards") / TEMPLATE_NAME
    results = [
        {
            "split": r["split"],
            "metric_name": r.get("metric_name") or r["metric_type"],
            "value": _format_value(r["value"]),
        }
        for r in (folder.eval_results or {}).get("results", [])
    ]
    recipe_yaml = (
        yaml.safe_dump(folder.recipe, sort_keys=False, allow_unicode=True).rstrip()
        if folder.recipe
        else None
    )
    card = ModelCard.from_template(
        card_data_for(folder, repo_id, merged=merged),
        template_path=str(template),
        model_name=repo_id.split("/")[-1],
        repo_id=repo_id,
        summary=_summary(folder),
        is_adapter=folder.is_adapter,
        peft_type=(folder.adapter_config or {}).get("peft_type", "PEFT"),
        base_model=folder.base_model,
        model_rows=_model_rows(folder),
        architecture_rows=_architecture_rows(folder),
        training_rows=_training_rows(folder),
        has_loss_curve=(folder.path / LOSS_CURVE_FILE).is_file(),
        recipe_yaml=recipe_yaml,
        results=results,
        dataset_name=(folder.eval_results or {}).get("dataset_name"),
        task_name=(folder.eval_results or {}).get("task_name") or folder.task.task_name,
        intended_use=folder.task.intended_use,
        limitations=folder.task.limitations,
        needs_remote_code=needs_remote_code(folder.config),
        citations=citations_for(folder.config, (folder.adapter_config or {}).get("peft_type")),
        hfattn_version=__version__,
        **_usage(folder, repo_id),
    )
    content = card.content
    shortfall = training_shortfall(folder.path)
    if shortfall is not None:
        content = insert_in_section(content, RESULTS_HEADING, shortfall_warning(shortfall))
    note = zero_state_note(folder)
    if note is not None:
        content = insert_in_section(content, RESULTS_HEADING, note, at_end=True)
    content = _with_samples(content, folder.path)
    return ModelCard(re.sub(r"\n{3,}", "\n\n", content))


RESULTS_HEADING = "Results"
"""The card section of the scores (the template's ``## Results``)."""


def insert_in_section(content: str, heading: str, block: str, *, at_end: bool = False) -> str:
    """``content`` (Markdown) with ``block`` inserted at the start of its ``## heading``
    section (right under the heading) or, ``at_end``, before the next ``## `` heading;
    unchanged when there is no such section."""
    anchor = f"\n## {heading}\n"
    start = content.find(anchor)
    if start < 0:
        return content
    where = start + len(anchor)
    if at_end:
        end = content.find("\n## ", where)
        where = len(content) if end < 0 else end
    return f"{content[:where]}\n{block.strip()}\n\n{content[where:]}"


def shortfall_warning(shortfall: str) -> str:
    """The warning that opens the results of a run stopped far short of its recipe's schedule
    (``shortfall``: :func:`hfattn.storage.run_status.training_shortfall`'s sentence)."""
    return f"> **Warning: a short run.** {shortfall[0].upper()}{shortfall[1:]}."


def zero_state_note(folder: ModelFolder) -> str | None:
    """What the two losses of a recurrent model mean, for under its results table
    (:func:`hfattn.evaluation.language_modeling.explain_zero_state`, with what guessing
    uniformly scores); ``None`` when the run recorded no zero-state loss."""
    # torch (2 s): hfattn train imports the hub for its checks before training
    from ..evaluation.language_modeling import explain_zero_state

    note = explain_zero_state((folder.eval_results or {}).get("all_metrics") or {})
    vocab = folder.config.get("vocab_size")
    if note is None or not vocab:
        return note
    return f"{note} Guessing uniformly scores ln {vocab} = {math.log(vocab):.2f} nats/char."


def _with_samples(content: str, path: Path) -> str:
    """``content`` with a "Samples" section after the results when the folder holds the
    sample its training run generated (``samples.md``, see
    :mod:`hfattn.tasks.causal_lm.inference`)."""
    samples = path / SAMPLES_FILE
    if not samples.is_file():
        return content
    section = f"## Samples\n\n{samples.read_text(encoding='utf-8').strip()}"
    return insert_in_section(content, RESULTS_HEADING, section, at_end=True)
