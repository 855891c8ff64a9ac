"""What a model card and a Space need to know about each task (Hub ``pipeline_tag``).

One :class:`TaskInfo` per task: the ``Auto`` class that loads it, the usage snippet of its
card, its intended use and limitations, and the Gradio app (a folder of ``spaces/``) that
demos it. Adding a task means adding one entry to :data:`TASKS`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TaskInfo:
    """Card and Space facts of one task (see :data:`TASKS`)."""

    pipeline_tag: str
    task_name: str
    auto_class: str
    usage: str
    """Python lines run after ``model`` and ``tokenizer`` are loaded; ``{example}`` is replaced
    by an example input (a Python string literal)."""
    intended_use: str
    limitations: str
    space_app: str | None
    """Folder of ``spaces/`` holding this task's Gradio app, or ``None`` when none exists yet."""
    default_example: str = "Hello"


TASKS: dict[str, TaskInfo] = {
    "text-generation": TaskInfo(
        pipeline_tag="text-generation",
        task_name="Causal language modeling",
        auto_class="AutoModelForCausalLM",
        usage=(
            'inputs = tokenizer({example}, return_tensors="pt")\n'
            "output = model.generate(**inputs, max_new_tokens=200, do_sample=True, temperature=0.8, top_k=50)\n"
            "print(tokenizer.decode(output[0], skip_special_tokens=True))"
        ),
        intended_use=(
            "Teaching and experimentation: sampling text in the style of the training corpus, "
            "studying how temperature, top-k and top-p change the samples, and comparing "
            "architectures on the same data."
        ),
        limitations=(
            "A small model trained on a single corpus: it reproduces the corpus' style, "
            "spelling and biases, invents words, has no knowledge of facts and no notion of "
            "truth. Characters (or tokens) outside its vocabulary are mapped to `<unk>`. Not "
            "suitable for any production or decision-making use."
        ),
        space_app="text_generation",
        default_example="ROMEO:",
    ),
    "translation": TaskInfo(
        pipeline_tag="translation",
        task_name="Translation",
        auto_class="AutoModelForSeq2SeqLM",
        usage=(
            'inputs = tokenizer({example}, return_tensors="pt")\n'
            "output = model.generate(**inputs, num_beams=4, max_new_tokens=50)\n"
            "print(tokenizer.decode(output[0], skip_special_tokens=True))"
        ),
        intended_use=(
            "Teaching and experimentation with attention-based encoder-decoders: translating "
            "short sentences of the training domain and inspecting attention maps."
        ),
        limitations=(
            "Trained on a small parallel corpus of short sentences: long or out-of-domain "
            "inputs degrade quickly, rare words become `<unk>`, and outputs must not be relied "
            "on for real translation work."
        ),
        space_app=None,
        default_example="I love you.",
    ),
    "text-classification": TaskInfo(
        pipeline_tag="text-classification",
        task_name="Text classification",
        auto_class="AutoModelForSequenceClassification",
        usage=(
            'inputs = tokenizer({example}, return_tensors="pt")\n'
            "probs = model(**inputs).logits.softmax(-1)[0]\n"
            "print({{model.config.id2label[i]: round(float(p), 3) for i, p in enumerate(probs)}})"
        ),
        intended_use=(
            "Teaching and experimentation: classifying short English texts into the labels "
            "of the training data and comparing architectures on the same data."
        ),
        limitations=(
            "Trained on one dataset: it inherits its label definitions and biases, is "
            "over-confident on out-of-domain text, and must not be used to make decisions "
            "about people."
        ),
        space_app=None,
        default_example="A wonderful, moving film.",
    ),
}

_ARCHITECTURE_SUFFIXES = (
    ("ForCausalLM", "text-generation"),
    ("LMHeadModel", "text-generation"),
    ("ForConditionalGeneration", "translation"),
    ("ForSeq2SeqLM", "translation"),
    ("ForSequenceClassification", "text-classification"),
)

PEFT_TASK_TYPES = {
    "CAUSAL_LM": "text-generation",
    "SEQ_2_SEQ_LM": "translation",
    "SEQ_CLS": "text-classification",
}
"""PEFT ``task_type`` (``adapter_config.json``) → ``pipeline_tag``."""


def task_for_architectures(architectures: list[str] | None) -> TaskInfo:
    """The task of a model from ``config.architectures`` (e.g. ``CharRNNForCausalLM``).

    Raises:
        ValueError: naming the architectures and the supported class-name suffixes.
    """
    for name in architectures or ():
        for suffix, tag in _ARCHITECTURE_SUFFIXES:
            if name.endswith(suffix):
                return TASKS[tag]
    suffixes = ", ".join(s for s, _ in _ARCHITECTURE_SUFFIXES)
    raise ValueError(
        f"config.json 'architectures' is {architectures!r}: cannot tell the task; "
        f"expected a class name ending in one of {suffixes}"
    )


def task_for_peft(task_type: str | None) -> TaskInfo:
    """The task of a PEFT adapter from its ``task_type``.

    Raises:
        ValueError: naming the value and the supported ``task_type`` values.
    """
    if task_type not in PEFT_TASK_TYPES:
        raise ValueError(
            f"adapter_config.json 'task_type' is {task_type!r}; "
            f"expected one of {', '.join(PEFT_TASK_TYPES)}"
        )
    return TASKS[PEFT_TASK_TYPES[task_type]]
