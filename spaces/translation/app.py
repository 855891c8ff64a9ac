"""Translation Space: translate sentences with an encoder-decoder published with hfattn and
show where the model looked.

One sentence per line, each translated with beam search (beam width and new-token cap set on
the page); the first sentence's cross-attention is drawn as a heatmap (source tokens across,
output tokens down). Runs with only transformers, torch, gradio and matplotlib installed: the
model comes from ``$HFATTN_MODEL_ID`` or the README's ``models:`` list, with
``trust_remote_code=True``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import gradio as gr
import torch

try:  # in a Space, frame.py is uploaded next to this file
    import frame
except ImportError:  # in the hfattn source tree: spaces/common/frame.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
    import frame

MAX_BEAMS = 8


def _inputs(context: frame.Context) -> list:
    return [
        gr.Textbox(
            label="Source text (one sentence per line)",
            lines=5,
            placeholder="April 22, 2019",
            elem_id="source",
        ),
        gr.Slider(1, MAX_BEAMS, value=4, step=1, label="Beam width"),
        gr.Slider(
            1,
            context.limits.max_new_tokens,
            value=min(64, context.limits.max_new_tokens),
            step=1,
            label="Max new tokens",
        ),
    ]


def _outputs(context: frame.Context) -> list:
    return [
        gr.Textbox(label="Translation (one line per sentence)", lines=5, elem_id="translation"),
        gr.Plot(label="Attention of the first sentence", elem_id="alignment"),
    ]


def _source_ids(context: frame.Context, sentence: str) -> list[int]:
    """Token ids of ``sentence`` (with the tokenizer's special tokens), cut to the longest
    source the model accepts (keeping the final ``<eos>``)."""
    tokenizer, config = context.tokenizer, context.model.config
    ids = tokenizer(sentence)["input_ids"]
    limit = getattr(config, "max_source_positions", None) or getattr(
        config, "max_position_embeddings", None
    )
    if not limit and getattr(tokenizer, "model_max_length", None):
        limit = tokenizer.model_max_length if tokenizer.model_max_length < 1_000_000 else None
    if limit and len(ids) > limit:
        ids = ids[: limit - 1] + [tokenizer.eos_token_id]
    return ids


@torch.no_grad()
def _translate_one(context: frame.Context, sentence: str, num_beams: int, max_new_tokens: int):
    """``(input_ids, generated_ids)`` of one sentence, decoded with beam search."""
    input_ids = torch.tensor([_source_ids(context, sentence)])
    generated = context.model.generate(
        input_ids=input_ids,
        attention_mask=torch.ones_like(input_ids),
        num_beams=num_beams,
        max_new_tokens=max_new_tokens,
        do_sample=False,
    )
    return input_ids, generated


@torch.no_grad()
def _attention(model, input_ids, generated):
    """Cross-attention [output, source] of the decoded output (last layer, mean over heads),
    from one teacher-forced pass; ``None`` when the model has no cross-attention.

    Fused kernels (sdpa) return no weights, so this one pass runs with eager attention."""
    kept = getattr(model.config, "_attn_implementation", None)
    if kept not in (None, "eager"):
        model.set_attn_implementation("eager")
    try:
        out = model(
            input_ids=input_ids,
            attention_mask=torch.ones_like(input_ids),
            decoder_input_ids=generated[:, :-1],
            output_attentions=True,
            return_dict=True,
        )
    finally:
        if kept not in (None, "eager"):
            model.set_attn_implementation(kept)
    cross = getattr(out, "cross_attentions", None)
    if isinstance(cross, (tuple, list)):
        cross = cross[-1] if cross else None
    if cross is None:
        return None
    if cross.dim() == 4:  # [batch, heads, output, source]
        cross = cross.mean(1)
    return cross[0].float().numpy()


def _heatmap(source_tokens: list[str], output_tokens: list[str], weights):
    from matplotlib.figure import Figure

    figure = Figure(
        figsize=(min(4 + 0.45 * len(source_tokens), 20), min(3 + 0.35 * len(output_tokens), 20)),
        layout="constrained",
    )
    axes = figure.add_subplot()
    image = axes.imshow(weights, cmap="viridis", vmin=0.0, aspect="auto", interpolation="nearest")
    axes.set_xticks(range(len(source_tokens)), source_tokens, rotation=60, ha="right")
    axes.set_yticks(range(len(output_tokens)), output_tokens)
    axes.set_xlabel("source token")
    axes.set_ylabel("output token")
    axes.set_title("Cross-attention: output token × source token")
    figure.colorbar(image, ax=axes, label="attention weight")
    return figure


def translate(context: frame.Context, text, num_beams, max_new_tokens):
    """Translate each non-empty line of ``text``; return the translations (one per line) and
    the cross-attention heatmap of the first sentence (``None`` when there is none)."""
    text = frame.check_text(text, context.limits, "Source text")
    num_beams = int(frame.check_range(num_beams, "Beam width", 1, MAX_BEAMS))
    max_new_tokens = int(
        frame.check_range(max_new_tokens, "Max new tokens", 1, context.limits.max_new_tokens)
    )
    model, tokenizer = context.model, context.tokenizer
    translations, figure = [], None
    for line in text.splitlines():
        if not line.strip():
            translations.append("")
            continue
        input_ids, generated = _translate_one(context, line, num_beams, max_new_tokens)
        translations.append(tokenizer.decode(generated[0], skip_special_tokens=True).strip())
        if figure is None:
            weights = _attention(model, input_ids, generated)
            if weights is not None:
                figure = _heatmap(
                    tokenizer.convert_ids_to_tokens(input_ids[0].tolist()),
                    tokenizer.convert_ids_to_tokens(generated[0, 1:].tolist()),
                    weights,
                )
    return "\n".join(translations), figure


TASK = frame.Task(
    title="Translation",
    description=(
        "Type one sentence per line and press **Translate**. A wider beam searches more "
        "candidate translations. The heatmap shows, for the first sentence, how much each "
        "output token attended to each source token."
    ),
    auto_class="AutoModelForSeq2SeqLM",
    inputs=_inputs,
    outputs=_outputs,
    predict=translate,
    api_name="translate",
    button="Translate",
    examples=[["April 22, 2019", 4, 64], ["I love you.\nWhere is the station?", 4, 64]],
)


def build_demo(model_id: str | None = None) -> gr.Blocks:
    """The Space's page for ``model_id`` (default: ``$HFATTN_MODEL_ID`` or the README)."""
    return frame.build_app(TASK, model_id, app_dir=Path(__file__).parent)


if __name__ == "__main__":
    build_demo().launch()
