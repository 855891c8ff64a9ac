"""The translation task (``task: translation``): parallel sentence pairs, a seq2seq tokenizer
built on (a sample of) the training pairs, teacher-forced cross-entropy, BLEU / chrF / exact
match and masked next-token accuracy on held-out pairs, and a few translated sentences as the
sample.

Data sources (:func:`hfattn.data.translation.load_translation_splits`): the Bible (Debian's
SWORD modules), the embedded ``dates`` / ``numbers`` / ``date-normalization`` generators,
``spa.txt`` by path or URL, or a Hub dataset with a ``translation`` column.

Modules:

- ``recipe``: the recipe sections (``tokenizer:``, ``data:``, ``evaluation:``,
  ``generation:``), :class:`TranslationRecipe`, ``METRIC_NAMES`` and ``REPORTED_METRICS``
  (light: no torch, no transformers).
- ``encoding``: the pairs of the ``data:`` section, sources and targets as token ids cut to the
  model's limits (``SourceTooLongError``), references as the tokenizer writes them.
- ``prepared``: the pairs prepared once on disk: the tokenizer trained on a sample of the
  training pairs, every split's ids and texts memory-mapped (``prepare_pairs``).
- ``job``: the model and the ``TrainingJob`` on the prepared pairs (batches, loss, the scoring
  of a split, the sample).
- ``inference``: ``translate_texts`` and the cross-attention of a translation
  (``cross_attention_maps``, ``select_attention``, ``alignment``).
- ``task``: ``TASK``, the :class:`~hfattn.tasks.base.Task` (card facts, job, re-scoring of a
  saved model, generation defaults).

Imports only ``recipe`` (light: no torch), which registers the task with :mod:`hfattn.recipes`.
"""

from .recipe import TASK_RECIPE

__all__ = ["TASK_RECIPE"]
