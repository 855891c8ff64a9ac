"""A translation pipeline for sequence-to-sequence models, which transformers 5 dropped.

transformers 5 removed its ``translation``, ``summarization`` and ``text2text-generation``
pipelines, and refuses those task names (``KeyError``) before it reads its pipeline registry,
so no pipeline registered under them can be reached. None of the tasks it kept loads an
encoder-decoder that reads text: ``text-generation`` loads ``AutoModelForCausalLM``,
``any-to-any`` a multimodal model with a processor.

:class:`TranslationPipeline` is the pipeline that task had (text in, ``generate()``, text out,
``[{"translation_text": ...}]`` per input). Importing :mod:`hfattn.models` registers it as the
task :data:`TASK` (``pipeline("hfattn-translation", model=folder)``) for every
``AutoModelForSeq2SeqLM``: hfattn's Bahdanau and Vaswani models, Marian, ... It can also be
built directly: ``TranslationPipeline(model=model, tokenizer=tokenizer)``.

This module imports only transformers (remote-code safe, like its siblings).
"""

from __future__ import annotations

from transformers import AutoModelForSeq2SeqLM, Pipeline
from transformers.pipelines import PIPELINE_REGISTRY

TASK = "hfattn-translation"
"""The task name ``pipeline()`` knows :class:`TranslationPipeline` by."""


class TranslationPipeline(Pipeline):
    """Translate text with a sequence-to-sequence model: ``tokenizer(text)`` → ``generate()`` →
    ``tokenizer.decode(ids, skip_special_tokens=True)``.

    ``translator("Jesus wept.")`` returns ``[{"translation_text": ...}]`` (one entry per
    returned sequence: ``num_return_sequences``); a list of texts gives one such list per text.
    Generation parameters (``num_beams``, ``max_new_tokens``, ``do_sample``, ...) passed to
    ``pipeline(...)`` or to a call go to ``generate()``, on top of the model's
    ``generation_config.json``. ``truncation=True`` cuts sources to the tokenizer's
    ``model_max_length``.
    """

    _pipeline_calls_generate = True
    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    _load_tokenizer = True

    def _sanitize_parameters(self, truncation: bool | None = None, **generate_kwargs):
        preprocess_params = {} if truncation is None else {"truncation": truncation}
        return preprocess_params, generate_kwargs, {}

    def preprocess(self, text, truncation: bool = False) -> dict:
        """The source's ``input_ids`` and ``attention_mask`` (``[1, length]`` tensors)."""
        if not isinstance(text, str):
            raise TypeError(
                f"translation pipeline: the input must be a string or a list of strings; "
                f"got {type(text).__name__}"
            )
        encoded = self.tokenizer(text, return_tensors="pt", truncation=truncation)
        return {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}

    def _forward(self, model_inputs: dict, **generate_kwargs) -> dict:
        generate_kwargs = self._prepare_generate_kwargs(generate_kwargs)
        return {"output_ids": self.model.generate(**model_inputs, **generate_kwargs)}

    def postprocess(self, model_outputs: dict) -> list[dict[str, str]]:
        return [
            {"translation_text": self.tokenizer.decode(ids, skip_special_tokens=True)}
            for ids in model_outputs["output_ids"]
        ]


def register_translation_pipeline() -> None:
    """Register :class:`TranslationPipeline` as the task :data:`TASK` (for
    ``AutoModelForSeq2SeqLM``); idempotent. Run when :mod:`hfattn.models` is imported."""
    if TASK not in PIPELINE_REGISTRY.get_supported_tasks():
        PIPELINE_REGISTRY.register_pipeline(
            TASK, pipeline_class=TranslationPipeline, pt_model=AutoModelForSeq2SeqLM, type="text"
        )


__all__ = ["TASK", "TranslationPipeline", "register_translation_pipeline"]
