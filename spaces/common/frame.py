"""Shared frame of the hfattn Gradio Spaces (uploaded next to each app as ``frame.py``).

A Space runs with only ``transformers``, ``torch`` and ``gradio`` installed, so this file
imports nothing from hfattn. It loads the model (from ``$HFATTN_MODEL_ID``, else the first
entry of ``models:`` in the Space's README front matter) on CPU with
``trust_remote_code=True``, enforces input and output caps, and lays out the page: a header
naming the model, the task's inputs and a Run button on the left, its outputs on the right,
examples and the limits underneath. A task app only describes its :class:`Task`.

An input is refused, and warned about, in the words of hfattn's commands (``hfattn translate``,
``classify``, ``generate``): the functions of hfattn's ``tokenization/input_text.py``, uploaded
next to this file as ``input_text.py`` (:func:`refuse_blank`, :func:`warn_unknown`); an
out-of-range slider value is refused in one line, with no traceback in the server's log
(:func:`slider`).

The example inputs are the model's own: ``hfattn push --space`` and ``hfattn demo`` write the
recipe's ``generation.examples`` (or prompt) into the Space's ``examples.json``
(:func:`example_texts`), and an app fills the other inputs of an example row with the model's
saved generation settings (``model.generation_config``), the values its controls start at.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gradio as gr

try:  # in a Space, input_text.py is uploaded next to this file
    import input_text
except ImportError:  # in the hfattn source tree, or with hfattn installed
    from hfattn.tokenization import input_text

logger = logging.getLogger(__name__)

MODEL_ENV = "HFATTN_MODEL_ID"
"""Environment variable naming the model: a Hub repo id or a local model folder."""
EXAMPLES_FILE = "examples.json"
"""The Space's example inputs (a JSON list of strings), next to its ``app.py``: the model's
own, written by hfattn when it stages the Space (the source tree ships generic ones)."""


@dataclass(frozen=True)
class Limits:
    """Caps that keep a CPU Space responsive. Override with ``HFATTN_MAX_INPUT_CHARS`` and
    ``HFATTN_MAX_NEW_TOKENS``."""

    max_input_chars: int = 1000
    max_new_tokens: int = 500

    @classmethod
    def from_env(cls) -> Limits:
        """Defaults, overridden by the environment variables named in the class docstring."""
        return cls(
            **_ints_from_env(
                max_input_chars="HFATTN_MAX_INPUT_CHARS", max_new_tokens="HFATTN_MAX_NEW_TOKENS"
            )
        )


@dataclass(frozen=True)
class QueueSettings:
    """How the Space's Gradio queue admits requests: at most ``concurrency_limit`` run at
    once (one by default: on a CPU Space torch already uses every core for one request),
    the others wait in a queue of at most ``max_size`` requests (``None``: unbounded); only a
    request that finds the queue full is refused. The default size, 100, lets twice the 50
    concurrent clients of the load test (``tests/spaces/test_space_load.py``) wait. Override with
    ``HFATTN_CONCURRENCY_LIMIT`` and ``HFATTN_QUEUE_SIZE`` (``0``: unbounded)."""

    concurrency_limit: int = 1
    max_size: int | None = 100

    @classmethod
    def from_env(cls) -> QueueSettings:
        """Defaults, overridden by the environment variables named in the class docstring."""
        values = _ints_from_env(concurrency_limit="HFATTN_CONCURRENCY_LIMIT")
        values |= _ints_from_env(minimum=0, max_size="HFATTN_QUEUE_SIZE")
        if values.get("max_size") == 0:
            values["max_size"] = None
        return cls(**values)


def _ints_from_env(minimum: int = 1, **envs: str) -> dict[str, int]:
    """``{field: int($ENV)}`` for each ``field=ENV`` whose variable is set and not empty.

    Raises:
        ValueError: naming the variable, when its value is not an integer ≥ ``minimum``.
    """
    allowed = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
    values = {}
    for name, env in envs.items():
        if os.environ.get(env):
            try:
                value = int(os.environ[env])
            except ValueError:
                raise ValueError(f"{env} must be {allowed}, got {os.environ[env]!r}") from None
            if value < minimum:
                raise ValueError(f"{env} must be {allowed}, got {value}")
            values[name] = value
    return values


@dataclass
class Context:
    """What a task's predict function receives first: the loaded model, tokenizer and caps,
    and the engine the task's ``load`` chose to decode with (``None``: the model itself)."""

    model: Any
    tokenizer: Any
    limits: Limits
    model_id: str
    engine: Any = None


@dataclass
class Task:
    """One task's app: its components and its predict function; the frame does the rest.

    ``inputs(context)`` and ``outputs(context)`` create the Gradio components (called inside
    the page layout); ``predict(context, *input_values)`` returns the output value(s), or
    yields successive values to stream them. ``description`` is the page's Markdown text, or a
    function of the :class:`Context` that gives it (words that fit the loaded model).
    ``examples`` are rows of input values, or a function of the context that gives them.
    ``load(model_id)`` returns ``(model, tokenizer)`` for a task that needs more than
    :func:`load_model` with ``auto_class`` (default: that), or ``(model, tokenizer, engine)``
    (:attr:`Context.engine`). ``generates``: the task generates tokens (the page then states
    the new-token cap).
    """

    title: str
    description: str | Callable[[Context], str]
    auto_class: str
    inputs: Callable[[Context], list]
    outputs: Callable[[Context], list]
    predict: Callable[..., Any]
    api_name: str
    button: str = "Run"
    examples: list[list] | Callable[[Context], list[list]] = field(default_factory=list)
    load: Callable[[str], tuple] | None = None
    generates: bool = True


def resolve_model_id(app_dir: str | Path | None = None) -> str:
    """The model to serve: ``$HFATTN_MODEL_ID``, else the first ``models:`` entry of the
    README.md next to the app.

    Raises:
        RuntimeError: when neither names a model.
    """
    if os.environ.get(MODEL_ENV):
        return os.environ[MODEL_ENV]
    readme = Path(app_dir or Path(__file__).parent) / "README.md"
    if readme.is_file():
        from huggingface_hub import SpaceCard

        models = SpaceCard.load(readme).data.models or []
        if models:
            return models[0]
    raise RuntimeError(
        f"no model to serve: set {MODEL_ENV} to a Hub repo id or a model folder, or list it "
        f"under 'models:' in {readme}"
    )


def example_texts(app_dir: str | Path) -> list[str]:
    """The example inputs in the :data:`EXAMPLES_FILE` next to the app (its non-empty strings,
    in order); none when there is no such file."""
    path = Path(app_dir) / EXAMPLES_FILE
    texts = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else []
    return [text for text in texts if isinstance(text, str) and text]


def saved_setting(model, name: str, fallback):
    """The model's saved generation setting ``name`` (``model.generation_config``, what
    ``generation_config.json`` holds), or ``fallback`` when it sets none: where the page's
    controls start (hfattn's commands decode by the same rule)."""
    value = getattr(getattr(model, "generation_config", None), name, None)
    return fallback if value is None else value


def load_model(model_id: str, auto_class: str, **model_kwargs):
    """Load ``(model, tokenizer)`` on CPU in eval mode, trusting the repo's modeling code
    (``model_kwargs`` go to the model's ``from_pretrained``). A PEFT adapter repo loads its
    base model with the adapter applied (transformers does that when peft is installed)."""
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(model_id, trust_remote_code=True)
    model = getattr(transformers, auto_class).from_pretrained(
        model_id, trust_remote_code=True, **model_kwargs
    )
    return model.to("cpu").eval(), tokenizer


def refuse(message: str) -> gr.Error:
    """The error that refuses a request's input: the client sees ``message``; the server logs
    no traceback for it (the input was wrong, not the Space)."""
    if (
        "print_exception" in inspect.signature(gr.Error).parameters
    ):  # (older gradio has no such option)
        return gr.Error(message, print_exception=False)
    return gr.Error(message)


def check_text(text: str | None, limits: Limits, field_name: str = "Input") -> str:
    """Return ``text`` (``""`` for ``None``), or refuse it with a visible message when it is
    longer than ``limits.max_input_chars`` or is not valid text (a lone surrogate, which an API
    client can send as a JSON escape and no tokenizer encodes)."""
    text = text or ""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise refuse(
            f"{field_name} is not valid text: U+{ord(text[err.start]):04X} at character "
            f"{err.start} is a lone surrogate, not a character."
        ) from None
    if len(text) > limits.max_input_chars:
        raise refuse(
            f"{field_name} is {len(text)} characters long; this Space accepts at most "
            f"{limits.max_input_chars}. Please shorten it."
        )
    return text


def check_range(value, field_name: str, low, high):
    """Return ``value``, or refuse it with a message naming the field and its allowed range."""
    if value is None or not low <= value <= high:
        raise refuse(f"{field_name} must be between {low} and {high}, got {value}.")
    return value


def refuse_blank(texts: list[str], item: str, verb: str) -> list[str]:
    """Return ``texts``, or refuse the first that holds nothing but whitespace as the command
    refuses it (``source 1 is blank: there is nothing to translate``)."""
    message = input_text.blank_text_error(texts, item, verb)
    if message is not None:
        raise refuse(message)
    return texts


def warn_unknown(tokenizer, text: str, name: str) -> list[str]:
    """Warn, as the command does, about the parts of ``text`` (called ``name``: ``prompt``,
    ``source 2``) that ``tokenizer`` maps to its unknown token: the same line in the server's
    log and in the page (``gr.Warning``); returns those parts."""
    pieces, message = input_text.unknown_warning(tokenizer, text, name)
    if message is not None:
        logger.warning("%s", message)
        gr.Warning(message)
    return pieces


def slider(minimum, maximum, **kwargs) -> gr.Slider:
    """``gr.Slider(minimum, maximum, **kwargs)`` whose out-of-range value, which an API client
    can send, is refused as :func:`check_range` refuses it: one line naming the slider's label
    and its range, and no traceback in the server's log (gradio's own check prints one). (A
    subclass of ``gr.Slider`` would make gradio write a ``frame.pyi`` next to this file.)"""
    component = gr.Slider(minimum, maximum, **kwargs)
    checked = component.preprocess

    def preprocess(payload):
        check_range(payload, component.label, component.minimum, component.maximum)
        return checked(payload)

    component.preprocess = preprocess
    return component


def _bind(task: Task, context: Context) -> Callable:
    """The event handler: ``task.predict`` with the context bound, keeping it a generator
    function when it streams (Gradio inspects that)."""
    if inspect.isgeneratorfunction(task.predict):

        def handler(*values):
            yield from task.predict(context, *values)

    else:

        def handler(*values):
            return task.predict(context, *values)

    # Expose predict's parameter names (minus the context) as the API's parameter names.
    signature = inspect.signature(task.predict)
    handler.__signature__ = signature.replace(parameters=list(signature.parameters.values())[1:])
    handler.__name__ = handler.__qualname__ = task.api_name
    handler.__doc__ = task.predict.__doc__
    return handler


def build_app(
    task: Task,
    model_id: str | None = None,
    limits: Limits | None = None,
    app_dir=None,
    queue: QueueSettings | None = None,
) -> gr.Blocks:
    """Load the model and build the Space's page for ``task`` (call ``.launch()`` on it),
    its requests queued as ``queue`` says (default: :meth:`QueueSettings.from_env`)."""
    model_id = model_id or resolve_model_id(app_dir)
    limits = limits or Limits.from_env()
    queue = queue or QueueSettings.from_env()
    model, tokenizer, *engine = (task.load or (lambda i: load_model(i, task.auto_class)))(model_id)
    context = Context(model, tokenizer, limits, model_id, *engine)
    link = (
        model_id if Path(model_id).exists() else f"[{model_id}](https://huggingface.co/{model_id})"
    )
    description = task.description(context) if callable(task.description) else task.description
    examples = task.examples(context) if callable(task.examples) else task.examples
    with gr.Blocks(title=f"{task.title}: {model_id}") as demo:
        gr.Markdown(f"# {task.title}\n\nModel: {link}\n\n{description}")
        with gr.Row():
            with gr.Column():
                inputs = task.inputs(context)
                button = gr.Button(task.button, variant="primary")
            with gr.Column():
                outputs = task.outputs(context)
        button.click(_bind(task, context), inputs, outputs, api_name=task.api_name)
        if examples:
            gr.Examples(examples, inputs, cache_examples=False)
        note = f"Runs on CPU. Inputs are limited to {limits.max_input_chars} characters"
        if task.generates:
            note += f" and outputs to {limits.max_new_tokens} new tokens"
        gr.Markdown(note + ".")
    return demo.queue(default_concurrency_limit=queue.concurrency_limit, max_size=queue.max_size)
