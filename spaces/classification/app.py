"""Text-classification Space: the label scores of a text under a classifier published with
hfattn, drawn as bars.

Type a text and press **Classify**: every label's probability (the softmax of the model's
logits) is shown as a bar, the most likely first. A recurrent classifier that pools its states
with attention (``pooling: attention``) also shows how much each token weighed in the pooled
vector. Serves a full model (DistilBERT, MiniLM, an ``rnn-classifier`` through its remote
code), a merged LoRA model or a LoRA adapter (its base model with the adapter applied, the
head built for the labels in the adapter's ``labels.json``). Runs with only transformers,
torch and gradio installed (and peft for an adapter): the model comes from
``$HFATTN_MODEL_ID`` or the README's ``models:`` list, with ``trust_remote_code=True``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import gradio as gr
import torch

try:  # in a Space, frame.py is uploaded next to this file
    import frame
except ImportError:  # in the hfattn source tree: spaces/common/frame.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
    import frame

AUTO_CLASS = "AutoModelForSequenceClassification"
LABELS_FILE = "labels.json"
"""An adapter's label names, in label-id order (``{"labels": [...]}``)."""
EXAMPLES_FILE = frame.EXAMPLES_FILE
"""The Space's example texts (a JSON list): ``hfattn push`` / ``hfattn demo`` replace the
source tree's Shakespeare lines with the model card's examples."""


def _repo_file(model_id: str, name: str) -> Path | None:
    """``name`` from the model folder or Hub repo ``model_id``, or ``None`` when it has none."""
    local = Path(model_id)
    if local.is_dir():
        return local / name if (local / name).is_file() else None
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    try:
        return Path(hf_hub_download(model_id, name))
    except EntryNotFoundError:
        return None


def label_kwargs(model_id: str, app_dir: Path = Path(__file__).parent) -> dict:
    """``num_labels`` / ``id2label`` / ``label2id`` from the model's ``labels.json`` (a LoRA
    adapter's labels: its base model's head must be built for them), else from the one staged
    next to the app for an adapter (``hfattn demo`` on a run folder), else ``{}``."""
    path = _repo_file(model_id, LABELS_FILE)
    if path is None and _repo_file(model_id, "adapter_config.json") is not None:
        path = app_dir / LABELS_FILE if (app_dir / LABELS_FILE).is_file() else None
    if path is None:
        return {}
    labels = json.loads(path.read_text(encoding="utf-8")).get("labels")
    if not isinstance(labels, list) or not labels:
        raise ValueError(f"{model_id}: {LABELS_FILE} must hold a non-empty 'labels' list")
    return {
        "num_labels": len(labels),
        "id2label": dict(enumerate(labels)),
        "label2id": {name: i for i, name in enumerate(labels)},
    }


def load(model_id: str):
    """``(model, tokenizer)`` of a classifier or of a classification adapter."""
    return frame.load_model(model_id, AUTO_CLASS, **label_kwargs(model_id))


def pools_with_attention(model) -> bool:
    """Whether the model pools its states with attention (and returns the weights)."""
    return getattr(model.config, "pooling", None) == "attention"


def _inputs(context: frame.Context) -> list:
    return [gr.Textbox(label="Text", lines=6, placeholder="Type a text", elem_id="text")]


def _outputs(context: frame.Context) -> list:
    return [
        gr.Label(label="Label scores", elem_id="scores"),
        gr.HighlightedText(
            label="Attention pooling (weight of each token, relative to the largest)",
            elem_id="attention",
            visible=pools_with_attention(context.model),
        ),
    ]


def _max_length(context: frame.Context) -> int | None:
    """The longest input the model takes (``None``: no limit known)."""
    limit = getattr(context.tokenizer, "model_max_length", None)
    if limit and limit < 1_000_000:
        return int(limit)
    return getattr(context.model.config, "max_position_embeddings", None)


@torch.no_grad()
def classify(context: frame.Context, text):
    """The label probabilities of ``text`` (``{label: probability}``, summing to 1) and, for a
    model with attention pooling, each token with its weight divided by the largest (else
    ``None``). Texts longer than the model's input are cut."""
    text = frame.check_text(text, context.limits, "Text")
    model, tokenizer = context.model, context.tokenizer
    frame.refuse_blank([text], "text", "classify")  # as `hfattn classify` says it
    frame.warn_unknown(tokenizer, text, "text 0")
    limit = _max_length(context)
    inputs = tokenizer(text, return_tensors="pt", truncation=limit is not None, max_length=limit)
    attention = pools_with_attention(model)
    out = model(**inputs, output_attentions=attention, return_dict=True)
    probabilities = out.logits.float().softmax(-1)[0].tolist()
    id2label = model.config.id2label
    scores = {str(id2label.get(i, f"LABEL_{i}")): p for i, p in enumerate(probabilities)}
    weights = None
    if attention and getattr(out, "attentions", None):
        alpha = out.attentions[-1][0].reshape(-1).float()
        tokens = tokenizer.convert_ids_to_tokens(inputs["input_ids"][0].tolist())
        alpha = (alpha / alpha.max()).tolist()
        weights = [(f"{token} ", round(w, 4)) for token, w in zip(tokens, alpha, strict=True)]
    return scores, weights


def _examples(app_dir: Path = Path(__file__).parent) -> list[list[str]]:
    """The rows of ``examples.json`` next to the app (none when it is missing)."""
    return [[text] for text in frame.example_texts(app_dir)]


TASK = frame.Task(
    title="Text classification",
    description=(
        "Type a text and press **Classify**: each bar is the probability the model gives a "
        "label. A recurrent classifier with attention pooling also shows how much each token "
        "counted."
    ),
    auto_class=AUTO_CLASS,
    inputs=_inputs,
    outputs=_outputs,
    predict=classify,
    api_name="classify",
    button="Classify",
    examples=_examples(),
    load=load,
    generates=False,
)


def build_demo(model_id: str | None = None) -> gr.Blocks:
    """The Space's page for ``model_id`` (default: ``$HFATTN_MODEL_ID`` or the README)."""
    return frame.build_app(TASK, model_id, app_dir=Path(__file__).parent)


if __name__ == "__main__":
    build_demo().launch()
