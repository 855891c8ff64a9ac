r"""The sequence-classification task (``task: classification``): labelled texts, a pretrained
encoder (DistilBERT, MiniLM, … fully fine-tuned or with a LoRA adapter) or an ``rnn-classifier``
over a word-level tokenizer built on the training texts, cross-entropy, and loss / accuracy /
macro-F1 per split with the test confusion matrix.

Data (:func:`hfattn.data.classification.load_classification_data`): the embedded ``genre``
(Shakespeare passage → comedy / history / tragedy / romance), ``reber`` and ``reviews-es``
tasks, a local csv / tsv / json / jsonl file, or a Hub dataset (``imdb``, ``stanfordnlp/sst2``).

Models:

- ``model: <hub id | folder>`` (``model: {pretrained: ..., revision: ...}``): loaded with
  ``AutoModelForSequenceClassification`` and ``num_labels`` / ``id2label`` / ``label2id`` from
  the data (a new head), with its own tokenizer; a ``lora:`` section trains a PEFT adapter
  instead of every weight (keep the head trainable with ``modules_to_save``), and the run
  folder is then the adapter.
- ``model: {type: rnn-classifier, ...}``: :class:`~hfattn.models.RNNClassifierConfig` fields;
  the ``tokenizer:`` section (``word`` / ``char`` / ``bpe``, :mod:`hfattn.tokenization.translation`;
  ``whitespace: ignore`` makes a ``char`` tokenizer read symbols whatever their spacing, as the
  Reber recipe does) is built on the training texts, and ``word_vectors:`` optionally
  initialises the embeddings with word2vec / fastText vectors trained on the training texts or
  read from a GloVe / word2vec text file (:mod:`hfattn.data.word_vectors`);
  ``model.freeze_embeddings`` keeps them fixed.

New texts are labelled by :func:`~hfattn.tasks.classification.inference.classify_texts`
(``hfattn classify``). Texts are cut to ``data.max_length`` tokens when the data is prepared
(once: :mod:`hfattn.data.prepared`); training batches are
length-grouped and padded per batch (:class:`~hfattn.batching.seq2seq.LabelBatches`). The loss is

.. math:: \mathcal{L} = -\frac{1}{B}\sum_{b} \ln \operatorname{softmax}(z_b)_{y_b}

and each scored split reports ``loss``, ``accuracy`` and ``macro_f1``
(:mod:`hfattn.evaluation.classification`); scoring ``test`` writes ``confusion_matrix.json``
next to the model.

Modules:

- ``recipe``: the recipe sections (``tokenizer:``, ``data:``, ``word_vectors:``),
  :class:`ClassificationRecipe`, the choices they check against (``WORD_VECTOR_METHODS``,
  ``UNKNOWN_INIT``, ``WHITESPACE_CHOICES``), ``METRIC_NAMES`` and ``REPORTED_METRICS``
  (light: no torch, no transformers).
- ``encoding``: the labelled splits of the ``data:`` section, the label maps of a model config,
  the tokenizer built on the training texts and the texts as token ids, and the prepared data
  (``prepare_data``: tokenizer, ids, labels and texts of every split, prepared once into the
  prepared-data cache; ``PreparedClassification``: that folder, mapped).
- ``job``: the model (a pretrained checkpoint with a new head, LoRA applied when asked, or a
  fresh ``model.type`` model, its embeddings optionally initialised with word vectors), the
  loss and the ``TrainingJob`` (batches, the scoring of a split, the sample).
- ``inference``: ``classify_texts`` (the labels of new texts, ``hfattn classify``) and
  ``load_classifier`` (a saved classifier or LoRA adapter folder).
- ``task``: ``TASK``, the :class:`~hfattn.tasks.base.Task` (card facts, job, re-scoring of a
  saved model, generation defaults).

Imports only ``recipe`` (light: no torch), which registers the task with :mod:`hfattn.recipes`.
"""

from .recipe import TASK_RECIPE

__all__ = ["TASK_RECIPE"]
