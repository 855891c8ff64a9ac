"""Text-generation Space: sample from a causal language model published with hfattn.

Prompt, temperature (0 = greedy), top-k (0 = off), top-p and the number of new tokens, which
start at the model's saved ``generation_config`` (the recipe's ``generation:`` section; unset
ones as ``hfattn generate`` takes them: temperature 1, no top-k or top-p, 300 new tokens); the
examples are the recipe's prompt (the Space's ``examples.json``). The output streams as it is
generated. Runs with only transformers, torch and gradio installed: the model comes from
``$HFATTN_MODEL_ID`` or the README's ``models:`` list, with ``trust_remote_code=True``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from threading import Thread

import gradio as gr

try:  # in a Space, frame.py is uploaded next to this file
    import frame
except ImportError:  # in the hfattn source tree: spaces/common/frame.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "common"))
    import frame


APP_DIR = Path(__file__).parent
FALLBACK = {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "max_new_tokens": 300}
"""The settings the page starts at when the model's generation config sets none (hfattn's
``tasks.decoding.TEXT_GENERATION_FALLBACK``; top-k 0 and top-p 1 are off)."""


def saved_settings(context: frame.Context) -> dict:
    """``{temperature, top_k, top_p, max_new_tokens}`` the page starts at: the model's saved
    generation settings (temperature 0 when it decodes greedily, ``do_sample: false``), else
    :data:`FALLBACK`, each within its control's range."""
    model = context.model
    settings = {name: frame.saved_setting(model, name, value) for name, value in FALLBACK.items()}
    if frame.saved_setting(model, "do_sample", True) is False:
        settings["temperature"] = 0.0
    return {
        "temperature": min(max(float(settings["temperature"]), 0.0), 2.0),
        "top_k": min(max(int(settings["top_k"]), 0), 200),
        "top_p": min(max(float(settings["top_p"]), 0.05), 1.0),
        "max_new_tokens": min(
            max(int(settings["max_new_tokens"]), 1), context.limits.max_new_tokens
        ),
    }


def _inputs(context: frame.Context) -> list:
    start = saved_settings(context)
    examples = frame.example_texts(APP_DIR)
    return [
        gr.Textbox(
            label="Prompt",
            lines=4,
            placeholder=examples[0] if examples else "",
            elem_id="prompt",
        ),
        frame.slider(
            0.0, 2.0, value=start["temperature"], step=0.05, label="Temperature (0 = greedy)"
        ),
        frame.slider(0, 200, value=start["top_k"], step=1, label="Top-k (0 = off)"),
        frame.slider(0.05, 1.0, value=start["top_p"], step=0.05, label="Top-p"),
        frame.slider(
            1,
            context.limits.max_new_tokens,
            value=start["max_new_tokens"],
            step=1,
            label="New tokens",
        ),
    ]


def _examples(context: frame.Context) -> list[list]:
    """One example row per prompt of the Space's ``examples.json`` (the recipe's
    ``generation.prompt``), with the settings the page starts at (:func:`saved_settings`)."""
    start = saved_settings(context)
    settings = [start[name] for name in ("temperature", "top_k", "top_p", "max_new_tokens")]
    return [[prompt, *settings] for prompt in frame.example_texts(APP_DIR)]


def _outputs(context: frame.Context) -> list:
    return [gr.Textbox(label="Generated text", lines=14, elem_id="output")]


GREEDY_BELOW = 1e-4
"""Temperatures below this (0 included) decode greedily: sampling there is greedy to float
precision, and dividing the logits by a far smaller temperature overflows (hfattn's
``generate_text`` follows the same rule)."""


def _fit_context(context: frame.Context, ids, max_new_tokens: int):
    """The last prompt tokens that leave room for ``max_new_tokens`` in a model with a fixed
    number of positions (GPT-2); all of them for a recurrent model.

    Raises:
        gradio.Error: when the new tokens alone exceed the model's positions.
    """
    limit = getattr(context.model.config, "max_position_embeddings", None)
    if not limit:
        return ids
    if max_new_tokens >= limit:
        raise frame.refuse(
            f"New tokens must be below {limit} for this model (it reads at most {limit} "
            f"positions), got {max_new_tokens}."
        )
    return ids[:, -(limit - max_new_tokens) :]


def generate(context: frame.Context, prompt, temperature, top_k, top_p, max_new_tokens):
    """Stream ``prompt`` followed by the generated continuation (yields the growing text).
    A prompt longer than a fixed-context model reads is cut to its last tokens."""
    from transformers import TextIteratorStreamer

    prompt = frame.check_text(prompt, context.limits, "Prompt")
    temperature = frame.check_range(temperature, "Temperature", 0.0, 2.0)
    top_k = int(frame.check_range(top_k, "Top-k", 0, 200))
    top_p = frame.check_range(top_p, "Top-p", 0.0, 1.0)
    max_new_tokens = int(
        frame.check_range(max_new_tokens, "New tokens", 1, context.limits.max_new_tokens)
    )
    model, tokenizer = context.model, context.tokenizer
    frame.warn_unknown(tokenizer, prompt, "prompt")  # as `hfattn generate` warns

    ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids
    if ids.shape[1] == 0:  # empty prompt: start from <bos>
        start = (
            tokenizer.bos_token_id
            if tokenizer.bos_token_id is not None
            else model.config.bos_token_id
        )
        ids = ids.new_full((1, 1), start)
    ids = _fit_context(context, ids, max_new_tokens)
    sampling = {"do_sample": False}
    if temperature >= GREEDY_BELOW:
        sampling = {"do_sample": True, "temperature": temperature, "top_k": top_k, "top_p": top_p}
    streamer = TextIteratorStreamer(
        tokenizer, skip_prompt=True, skip_special_tokens=True, timeout=120
    )
    failure: list[BaseException] = []

    def run():
        try:
            model.generate(
                input_ids=ids,
                attention_mask=ids.new_ones(ids.shape),
                max_new_tokens=max_new_tokens,
                pad_token_id=tokenizer.pad_token_id,
                streamer=streamer,
                **sampling,
            )
        except BaseException as exc:  # surface it below instead of hanging the stream
            failure.append(exc)
            streamer.end()

    worker = Thread(target=run, daemon=True)
    worker.start()
    text = prompt
    for piece in streamer:
        if piece:
            text += piece
            yield text
    worker.join()
    if failure:
        raise gr.Error(f"Generation failed: {failure[0]}")
    yield text


TASK = frame.Task(
    title="Text generation",
    description=(
        "Type a prompt and press **Generate**. Temperature 0 decodes greedily; higher values "
        "sample more freely. Top-k and top-p restrict sampling to the most likely tokens."
    ),
    auto_class="AutoModelForCausalLM",
    inputs=_inputs,
    outputs=_outputs,
    predict=generate,
    api_name="generate",
    button="Generate",
    examples=_examples,
)


def build_demo(model_id: str | None = None) -> gr.Blocks:
    """The Space's page for ``model_id`` (default: ``$HFATTN_MODEL_ID`` or the README)."""
    return frame.build_app(TASK, model_id, app_dir=Path(__file__).parent)


if __name__ == "__main__":
    build_demo().launch()
