"""The translation task (``task: translation``): parallel sentence pairs, a seq2seq tokenizer,
teacher-forced cross-entropy, BLEU / chrF / exact match, and translated samples."""

from __future__ import annotations

from .base import Task, TaskInfo


class TranslationTask(Task):
    """``task: translation`` — source sentence → target sentence with an encoder-decoder."""

    name = "translation"
    default_model_type = "bahdanau"
    card = TaskInfo(
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
        architecture_suffixes=("ForConditionalGeneration", "ForSeq2SeqLM"),
        peft_task_type="SEQ_2_SEQ_LM",
    )


TASK = TranslationTask()
