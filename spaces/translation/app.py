"""Translation Space: translate sentences with an encoder-decoder published with hfattn and
show where the model looked.

One sentence per line (unknown characters warned about as ``hfattn translate --file`` does; a
blank line refused, where the command gives an empty line), each translated with beam search
(beam width and new-token cap set on the page, starting at the model's saved
``generation_config``: the recipe's ``num_beams`` and ``max_new_tokens``, else greedy and 128,
as ``hfattn translate`` decodes); the examples are the recipe's ``generation.examples`` (the
Space's ``examples.json``). The first sentence's cross-attention is drawn as a heatmap (source
tokens across, output tokens down) as a Vega-Lite chart that the browser draws (the server only
sends the weights: a matplotlib figure cost ~130 ms of CPU a request, more than decoding). For a
Transformer the page offers a decoder layer (default the last) and a head (default the mean over
heads); a model with a single attention (Bahdanau) has one of each, and the page shows no
choice. Runs with only transformers, torch and gradio installed: the model comes from
``$HFATTN_MODEL_ID`` or the README's ``models:`` list, with ``trust_remote_code=True``.

Engines: when the model (a local folder, or the Hub repo) holds a CTranslate2 export in
``ct2/`` (``hfattn export MODEL --format ctranslate2 MODEL/ct2``, pushed with the model) and
``ctranslate2`` is installed, the sentences are decoded by CTranslate2 (greedy or beam search
as asked, the same new-token cap, the model's tokenizer and source truncation); else by
transformers' ``generate``. Either way the heatmap comes from one teacher-forced pass of the
PyTorch model over the decoded output. ``HFATTN_ENGINE`` (``auto``, the default,
``generate`` or ``ctranslate2``) forces one; the page says which one runs. The decoding is
``translation_engine.py``, beside this file (in hfattn's ``spaces/translation/`` and in every
staged or uploaded Space alike); this file is the page and the attention heatmap.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import gradio as gr
import torch
import translation_engine  # beside this file, on the path as a Space (and hfattn demo) runs it
from gradio.components.plot import PlotData

try:  # in a Space, frame.py is uploaded next to this file
    import frame
except ImportError:  # in the hfattn source tree: spaces/common/frame.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
    import frame

MAX_BEAMS = 8
FALLBACK_NEW_TOKENS = 128
"""The new-token cap when the model's generation config sets none (hfattn's
``tasks.decoding.TRANSLATION_FALLBACK``)."""
APP_DIR = Path(__file__).parent
MEAN = "mean"
"""The head selector's value for the mean over heads."""
GENERATE_LABEL = "transformers generate"

logger = logging.getLogger(__name__)


def _inputs(context: frame.Context) -> list:
    examples = frame.example_texts(APP_DIR)
    return [
        gr.Textbox(
            label="Source text (one sentence per line)",
            lines=5,
            placeholder=examples[0] if examples else "",
            elem_id="source",
        ),
        frame.slider(1, MAX_BEAMS, value=_default_beams(context), step=1, label="Beam width"),
        frame.slider(
            1,
            context.limits.max_new_tokens,
            value=_default_new_tokens(context),
            step=1,
            label="Max new tokens",
        ),
        *_attention_selectors(context),
    ]


def _default_beams(context: frame.Context) -> int:
    """The beam width the page starts with: the model's ``generation_config.num_beams`` (the
    width its recipe chose; 1, greedy, when it sets none), within 1 to :data:`MAX_BEAMS`."""
    beams = frame.saved_setting(context.model, "num_beams", 1)
    return max(1, min(int(beams), MAX_BEAMS))


def _default_new_tokens(context: frame.Context) -> int:
    """The new-token cap the page starts with: the model's ``generation_config.max_new_tokens``
    (its recipe's; :data:`FALLBACK_NEW_TOKENS` when it sets none), within the Space's cap."""
    wanted = frame.saved_setting(context.model, "max_new_tokens", FALLBACK_NEW_TOKENS)
    return max(1, min(int(wanted), context.limits.max_new_tokens))


def _examples(context: frame.Context) -> list[list]:
    """One example row per text of the Space's ``examples.json`` (the recipe's
    ``generation.examples``), decoded with the model's saved beam width and new-token cap."""
    beams, new_tokens = _default_beams(context), _default_new_tokens(context)
    return [[text, beams, new_tokens] for text in frame.example_texts(APP_DIR)]


def _description(context: frame.Context) -> str:
    """The page's instructions; the sentence on choosing a layer and a head only for a model
    that has more than one of either (a Transformer, not Bahdanau's single attention)."""
    text = (
        "Type one sentence per line and press **Translate**. A wider beam searches more "
        "candidate translations. The heatmap shows, for the first sentence, how much each "
        "output token attended to each source token"
    )
    layers, heads = _attention_shape(context)
    if (layers, heads) == (1, 1):
        return text + "."
    return text + (
        f"; pick one of the decoder's {layers} layers and one of its {heads} heads, or the "
        "mean over heads."
    )


def _attention_selectors(context: frame.Context) -> list:
    """The layer and head dropdowns of the heatmap, sized to the model; hidden for a model
    with one attention layer and one head (their single choice is still the API's value)."""
    layers, heads = _attention_shape(context)
    visible = (layers, heads) != (1, 1)
    return [
        gr.Dropdown(  # string values: the API advertises (and accepts) "1", "2", ...
            [(str(layer), str(layer)) for layer in range(1, layers + 1)],
            value=str(layers),
            label="Attention layer (decoder cross-attention)",
            interactive=layers > 1,
            visible=visible,
            elem_id="layer",
        ),
        gr.Dropdown(
            [("mean over heads", MEAN)] + [(str(head), str(head)) for head in range(1, heads + 1)],
            value=MEAN,
            label="Attention head",
            interactive=heads > 1,
            visible=visible,
            elem_id="head",
        ),
    ]


def _outputs(context: frame.Context) -> list:
    # Shown above the translation, not an output of the event: the engine is fixed at start.
    gr.Markdown(f"engine: {engine_label(context)}", elem_id="engine")
    return [
        gr.Textbox(label="Translation (one line per sentence)", lines=5, elem_id="translation"),
        gr.Plot(label="Attention of the first sentence", elem_id="alignment"),
    ]


def engine_label(context: frame.Context) -> str:
    """What decodes: ``"CTranslate2 (<quantization>)"`` or ``"transformers generate"``."""
    return getattr(context.engine, "label", None) or GENERATE_LABEL


def _load(model_id: str):
    """``(model, tokenizer, engine)`` of ``model_id`` (the engine:
    :func:`translation_engine.load_engine`)."""
    choice = translation_engine.engine_choice()  # a bad $HFATTN_ENGINE fails before loading
    model, tokenizer = frame.load_model(model_id, TASK.auto_class)
    return model, tokenizer, translation_engine.load_engine(model_id, choice)


@torch.no_grad()
def _cross_attentions(model, input_ids, decoder_input_ids) -> tuple:
    """The decoder's cross-attention, one [heads, output, source] tensor per layer, from one
    teacher-forced pass (``()`` when the model has none). A model that returns a single
    [batch, output, source] map has one layer with one head.

    Fused kernels (sdpa) return no weights, so this one pass runs with eager attention."""
    kept = getattr(model.config, "_attn_implementation", None)
    if kept not in (None, "eager"):
        model.set_attn_implementation("eager")
    try:
        out = model(
            input_ids=input_ids,
            attention_mask=torch.ones_like(input_ids),
            decoder_input_ids=decoder_input_ids,
            output_attentions=True,
            return_dict=True,
        )
    finally:
        if kept not in (None, "eager"):
            model.set_attn_implementation(kept)
    cross = getattr(out, "cross_attentions", None)
    if cross is None:
        return ()
    layers = cross if isinstance(cross, (tuple, list)) else (cross,)
    if any(w is None for w in layers):
        return ()
    return tuple((w if w.dim() == 4 else w[:, None])[0].float() for w in layers)


def _attention_shape(context: frame.Context) -> tuple[int, int]:
    """``(layers, heads)`` of the model's cross-attention, read from one pass over a one-token
    source (families name these counts differently in their configs); ``(1, 1)`` when the
    model returns no cross-attention."""
    model = context.model
    try:
        maps = _cross_attentions(
            model,
            torch.tensor([translation_engine.source_ids(context, "a") or [0]]),
            torch.tensor([[translation_engine.decoder_start(model)]]),
        )
    except Exception:  # the selectors are a convenience: never stop the page for them
        logger.warning("could not read the cross-attention's shape", exc_info=True)
        maps = ()
    return (len(maps), int(maps[0].shape[0])) if maps else (1, 1)


def _layer_number(layer) -> int | None:
    """The 1-based layer of the selector (``None``: the last one)."""
    if layer is None or layer == "":
        return None
    if isinstance(layer, str) and layer.strip().isdigit():
        layer = int(layer)
    if isinstance(layer, bool) or not isinstance(layer, int) or layer < 1:
        raise frame.refuse(f"Attention layer must be a layer number (1, 2, ...), got {layer!r}.")
    return layer


def _head_number(head) -> int | None:
    """The 1-based head of the selector (``None``: the mean over heads)."""
    if head is None or head == "" or head == MEAN:
        return None
    if isinstance(head, str) and head.strip().isdigit():
        head = int(head)
    if isinstance(head, bool) or not isinstance(head, int) or head < 1:
        raise frame.refuse(
            f"Attention head must be {MEAN!r} or a head number (1, 2, ...), got {head!r}."
        )
    return head


def _attention(model, input_ids, generated, layer: int | None = None, head: int | None = None):
    """``(weights, title)``: the cross-attention [output, source] of the decoded output in
    decoder ``layer`` (1-based, default the last) and ``head`` (1-based, default the mean over
    heads), and the heatmap's title; ``(None, None)`` when the model has no cross-attention.

    Raises:
        gradio.Error: when the model has no such layer or head.
    """
    maps = _cross_attentions(model, input_ids, generated[:, :-1])
    if not maps:
        return None, None
    layers, heads = len(maps), maps[0].shape[0]
    frame.check_range(layer or layers, "Attention layer", 1, layers)
    frame.check_range(head or 1, "Attention head", 1, heads)
    weights = maps[(layer or layers) - 1]
    weights = weights.mean(0) if head is None else weights[head - 1]
    if (layers, heads) == (1, 1):
        title = "Cross-attention: output token × source token"
    else:
        which = f"mean over {heads} heads" if head is None else f"head {head} of {heads}"
        title = f"Cross-attention, layer {layer or layers} of {layers}, {which}"
    return weights.numpy(), title


def _heatmap(
    source_tokens: list[str],
    output_tokens: list[str],
    weights,
    title: str = "Cross-attention: output token × source token",
) -> PlotData:
    """The heatmap of ``weights [output, source]`` as a Vega-Lite spec for ``gr.Plot`` (drawn
    in the browser, a tooltip per cell): one ``rect`` per (output, source) pair, the cells
    placed by position (a repeated token keeps its own row or column) and labelled with the
    tokens, coloured by weight on viridis from 0."""
    cells = [
        {
            "source": j,
            "output": i,
            "source_token": source,
            "output_token": output,
            "weight": round(float(weights[i][j]), 6),
        }
        for i, output in enumerate(output_tokens)
        for j, source in enumerate(source_tokens)
    ]

    def axis(field: str, tokens: list[str], title: str, **extra) -> dict:
        labels = f"{json.dumps(tokens)}[datum.value]"  # the token at each position
        return {
            "field": field,
            "type": "ordinal",
            "title": title,
            "axis": {"labelExpr": labels, **extra},
        }

    spec = {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "title": title,
        "padding": {"top": 28, "left": 5, "right": 5, "bottom": 5},  # below the plot's label
        "data": {"values": cells},
        "mark": "rect",
        "width": {"step": 28},
        "height": {"step": 20},
        "encoding": {
            "x": axis("source", source_tokens, "source token", labelAngle=-60),
            "y": axis("output", output_tokens, "output token"),
            "color": {
                "field": "weight",
                "type": "quantitative",
                "title": "attention weight",
                "scale": {"scheme": "viridis", "domainMin": 0},
            },
            "tooltip": [
                {"field": "source_token", "title": "source"},
                {"field": "output_token", "title": "output"},
                {"field": "weight", "type": "quantitative", "format": ".3f"},
            ],
        },
    }
    return PlotData(type="altair", plot=json.dumps(spec))


def translate(context: frame.Context, text, num_beams, max_new_tokens, layer=None, head=MEAN):
    """Translate each line of ``text``; return the translations (one per line) and the heatmap
    of the first sentence's cross-attention in decoder ``layer`` (1-based, default the last)
    and ``head`` (1-based, or ``"mean"`` over heads, the default); the heatmap is ``None`` when
    the model has no cross-attention. The lines are read as ``hfattn translate --file`` reads
    them, except that a blank one is refused (``source 1 is blank: there is nothing to
    translate``, as the command refuses a blank sentence on its command line), and what of a
    line the tokenizer maps to its unknown token is warned about (``source 0 characters not in
    the vocabulary, ...``), in the command's words."""
    text = frame.check_text(text, context.limits, "Source text")
    lines = frame.refuse_blank(text.splitlines() or [text], "source", "translate")
    num_beams = int(frame.check_range(num_beams, "Beam width", 1, MAX_BEAMS))
    max_new_tokens = int(
        frame.check_range(max_new_tokens, "Max new tokens", 1, context.limits.max_new_tokens)
    )
    layer, head = _layer_number(layer), _head_number(head)
    model, tokenizer = context.model, context.tokenizer
    for i, line in enumerate(lines):
        frame.warn_unknown(tokenizer, line, f"source {i}")
    translations, figure = [], None
    for line in lines:
        input_ids, generated = translation_engine.translate_one(
            context, line, num_beams, max_new_tokens
        )
        translations.append(tokenizer.decode(generated[0], skip_special_tokens=True).strip())
        if figure is None:
            weights, title = _attention(model, input_ids, generated, layer, head)
            if weights is not None:
                figure = _heatmap(
                    tokenizer.convert_ids_to_tokens(input_ids[0].tolist()),
                    tokenizer.convert_ids_to_tokens(generated[0, 1:].tolist()),
                    weights,
                    title,
                )
    return "\n".join(translations), figure


TASK = frame.Task(
    title="Translation",
    description=_description,
    auto_class="AutoModelForSeq2SeqLM",
    inputs=_inputs,
    outputs=_outputs,
    predict=translate,
    api_name="translate",
    button="Translate",
    examples=_examples,
    load=_load,
)


def build_demo(model_id: str | None = None) -> gr.Blocks:
    """The Space's page for ``model_id`` (default: ``$HFATTN_MODEL_ID`` or the README)."""
    return frame.build_app(TASK, model_id, app_dir=Path(__file__).parent)


if __name__ == "__main__":
    build_demo().launch()
