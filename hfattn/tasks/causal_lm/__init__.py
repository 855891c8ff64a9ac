"""The causal language-modelling task (``task: causal-lm``): a corpus of plain text, a model
built from a config with a character tokenizer (the char-RNN) or a pretrained causal LM with
its own tokenizer (``model: openai-community/gpt2``, optionally with a ``lora:`` adapter),
stateless, packed or stateful windows, next-token cross-entropy, perplexity / bits per
character, and a sampled continuation of a prompt.

The package:

- :mod:`~hfattn.tasks.causal_lm.recipe` (light, no torch): the recipe sections and
  :class:`~hfattn.tasks.causal_lm.recipe.CausalLMRecipe`, the choices they check against
  (``TRAINING_MODES``, ``TOKENIZER_TYPES``) and the reported metrics (``METRIC_NAMES``,
  ``REPORTED_METRICS``); its docstring says how the ``tokenizer:`` section follows the model.
- :mod:`~hfattn.tasks.causal_lm.job`: the training job: the text splits, the char tokenizer and
  fresh model or the pretrained model with its own tokenizer (eos as pad, LoRA), the windows of
  ``training.mode``, the loss (``causal_lm_loss``), evaluation, the sample and the metric names.
- :mod:`~hfattn.tasks.causal_lm.inference`: ``generate_text`` (a prompt continued with
  ``model.generate``), its setting checks and ``write_sample`` (``samples.md``, shown by the
  model card).
- :mod:`~hfattn.tasks.causal_lm.task`: ``TASK``, the :class:`~hfattn.tasks.base.Task` with the
  card facts, ``build_job`` and ``evaluate_folder``.

Imports only ``recipe`` (light: no torch), which registers the task with :mod:`hfattn.recipes`.
"""

from .recipe import TASK_RECIPE

__all__ = ["TASK_RECIPE"]
