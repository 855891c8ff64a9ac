r"""Classic text-classification baselines of Navarro Castillo, *Técnicas de ML para PLN*
(Oviedo, 2022, ch. 2–3): bag of words / TF-IDF with
Naive Bayes or a linear SVM, on the same data, splits and metric files as the neural recipes.

Every vectorizer starts from the counts :math:`f(t, d)` of scikit-learn's ``CountVectorizer``
(lowercased, optional stop words removed, n-grams of 1 to ``ngram_max`` tokens), fitted on
``train`` only. Tokens (:data:`TOKEN_PATTERNS`) are ``words`` — scikit-learn's default
``\b\w\w+\b``, words of two or more characters, as in Navarro Castillo's code — or
``symbols``: every run of non-space characters, one-character ones included (the Reber task's
``"B P B T …"``).

- ``count``: :math:`x_{d,t} = f(t, d)` (bag of words).
- ``tfidf``: scikit-learn's ``TfidfVectorizer`` default, i.e. what Navarro Castillo's code computes
  (``TfidfTransformer()``): :math:`x_{d,t} = f(t, d)\,\bigl(\ln\frac{1 + n}{1 + \mathrm{df}(t)}
  + 1\bigr)`, each row then scaled to unit L2 norm (:math:`n` training documents,
  :math:`\mathrm{df}(t)` of them containing :math:`t`).
- ``tfidf-thesis``: the formula written in Navarro Castillo's §2.3.3,
  :class:`ThesisTfidfTransformer`: :math:`\mathrm{tf}(t, d) = f(t, d) / |d|`,
  :math:`\mathrm{idf}(t, C) = \ln(|C| / \mathrm{df}(t))`,
  :math:`x_{d,t} = \mathrm{tf}\cdot\mathrm{idf}` without normalisation; :math:`|d| = \sum_t
  f(t, d)` counts the document's kept tokens and :math:`C` is the training set.

Classifiers: ``nb`` — ``MultinomialNB()`` (Laplace smoothing α = 1), Navarro Castillo's §3.2;
``svm`` — ``SVC(kernel="linear")`` (hinge loss, C = 1, libsvm), Navarro Castillo's §3.3 exactly;
``linear-svc`` — ``LinearSVC()`` (squared hinge, liblinear, seeded), the usual "linear SVC".

Metrics per evaluated split (the neural classification task's names): ``accuracy``
:math:`\frac1N\sum_i 1[\hat y_i = y_i]`, ``macro_f1`` :math:`\frac1{|C|}\sum_c \frac{2TP_c}{2TP_c
+ FP_c + FN_c}` (hfattn's bundled ``evaluate`` modules) and ``num_examples``; the confusion
matrix :math:`M_{tp} = |\{i: y_i = t, \hat y_i = p\}|` (rows true, columns predicted, as
Navarro Castillo prints it).

One difference from Navarro Castillo's code, on purpose: it fits the vectorizer and TF-IDF on all 14
reviews before splitting (the test reviews' words and document frequencies leak into the
features); here they are fitted on ``train`` and only applied to the held-out splits.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from ...common.machine import machine_words, provenance
from ...data.reviews_es import STOP_WORDS_ES
from ...recipes.schema import RecipeError, require, require_choice
from ...storage.file_io import atomic_write_json
from ...storage.run_folder import CONFUSION_MATRIX_FILE, EVAL_RESULTS_FILE

VECTORIZERS = ("count", "tfidf", "tfidf-thesis")
CLASSIFIERS = ("nb", "svm", "linear-svc")
STOP_WORD_LISTS = ("none", "spanish", "english")
"""``none``; ``spanish``: :data:`hfattn.data.reviews_es.STOP_WORDS_ES` (Snowball, 313 words);
``english``: scikit-learn's built-in English list."""

TOKEN_PATTERNS = {"words": r"(?u)\b\w\w+\b", "symbols": r"\S+"}
"""Token kinds → ``CountVectorizer`` ``token_pattern``."""

DEFAULT_TOKENS = {"reber": "symbols"}
"""The token kind used for a data source when none is asked for (else ``words``)."""

DEFAULT_STOP_WORDS = {"reviews-es": "spanish"}
"""The stop-word list used for a data source when none is asked for (else ``none``)."""


class ThesisTfidfTransformer(TransformerMixin, BaseEstimator):
    r"""Counts → the TF-IDF written in Navarro Castillo's §2.3.3:
    :math:`x_{d,t} = \frac{f(t,d)}{|d|}\,\ln\frac{|C|}{\mathrm{df}(t)}`.

    ``fit`` learns ``idf_`` from the document frequencies of the count matrix (a term seen in
    no fitted document gets idf 0: it cannot be scored); ``transform`` divides each row by its
    total count :math:`|d|` (an empty document stays a zero row) and multiplies by ``idf_``.
    A term in every document gets idf :math:`\ln 1 = 0`, unlike scikit-learn's smoothed idf.
    """

    def fit(self, X, y=None):
        X = sp.csr_matrix(X)
        n_docs = X.shape[0]
        df = np.asarray((X > 0).sum(axis=0)).ravel()
        self.idf_ = np.zeros(X.shape[1])
        seen = df > 0
        self.idf_[seen] = np.log(n_docs / df[seen])
        return self

    def transform(self, X):
        check_is_fitted(self, "idf_")
        X = sp.csr_matrix(X, dtype=np.float64)
        lengths = np.asarray(X.sum(axis=1)).ravel()
        inverse = np.divide(1.0, lengths, out=np.zeros_like(lengths), where=lengths > 0)
        return sp.csr_matrix(sp.diags(inverse) @ X @ sp.diags(self.idf_))


def stop_words_of(name: str) -> list[str] | str | None:
    """The ``stop_words`` argument of ``CountVectorizer`` for a :data:`STOP_WORD_LISTS` name."""
    require_choice(name, "--stop-words", STOP_WORD_LISTS)
    if name == "spanish":
        return list(STOP_WORDS_ES)
    return None if name == "none" else name


def build_pipeline(
    vectorizer: str,
    classifier: str,
    *,
    stop_words: str = "none",
    tokens: str = "words",
    ngram_max: int = 1,
    seed: int = 0,
):
    """The scikit-learn ``Pipeline`` counts → weighting → classifier (see the module docstring).

    Raises:
        RecipeError: an unknown vectorizer, classifier or stop-word list (naming the option).
    """
    from sklearn.feature_extraction.text import CountVectorizer, TfidfTransformer
    from sklearn.naive_bayes import MultinomialNB
    from sklearn.pipeline import Pipeline
    from sklearn.svm import SVC, LinearSVC

    require_choice(vectorizer, "--vectorizer", VECTORIZERS)
    require_choice(classifier, "--classifier", CLASSIFIERS)
    require_choice(tokens, "--tokens", tuple(TOKEN_PATTERNS))
    require(ngram_max >= 1, "--ngram-max", f"must be >= 1, got {ngram_max}")
    counts = CountVectorizer(
        stop_words=stop_words_of(stop_words),
        token_pattern=TOKEN_PATTERNS[tokens],
        ngram_range=(1, ngram_max),
    )
    steps = [("counts", counts)]
    if vectorizer == "tfidf":
        steps.append(("weights", TfidfTransformer()))
    elif vectorizer == "tfidf-thesis":
        steps.append(("weights", ThesisTfidfTransformer()))
    model = {
        "nb": lambda: MultinomialNB(),
        "svm": lambda: SVC(kernel="linear"),
        "linear-svc": lambda: LinearSVC(random_state=seed),
    }[classifier]()
    steps.append(("classifier", model))
    return Pipeline(steps)


@dataclass
class BaselineResult:
    """What :func:`run_baseline` measured."""

    vectorizer: str
    classifier: str
    stop_words: str
    tokens: str
    ngram_max: int
    label_names: list[str]
    metrics: dict[str, dict] = field(default_factory=dict)
    """``{split: {"accuracy", "macro_f1", "num_examples"}}``."""
    confusion: dict[str, list[list[int]]] = field(default_factory=dict)
    """``{split: M}`` with ``M[true][predicted]``."""
    predictions: dict[str, list[int]] = field(default_factory=dict)
    vocabulary_size: int = 0
    train_examples: int = 0
    fit_seconds: float = 0.0


def run_baseline(
    data,
    *,
    vectorizer: str = "tfidf",
    classifier: str = "nb",
    stop_words: str = "none",
    tokens: str = "words",
    ngram_max: int = 1,
    splits: tuple[str, ...] | list[str] = ("validation", "test"),
    seed: int = 0,
) -> BaselineResult:
    """Fit the pipeline on ``data.splits["train"]`` and score it on ``splits``.

    Args:
        data: a :class:`hfattn.data.classification.ClassificationData`.

    Raises:
        RecipeError: an unknown option or split, or a split without examples.
    """
    # torch and transformers (3 s): only the classification baselines need them
    from ...evaluation.classification import confusion_matrix, label_scores

    for split in splits:
        require(
            split in data.splits,
            "evaluation.splits",
            f"{split!r} is not a split of the data ({', '.join(data.splits)})",
        )
        require(len(data.splits[split]) > 0, "evaluation.splits", f"the {split} split is empty")
    pipeline = build_pipeline(
        vectorizer, classifier, stop_words=stop_words, tokens=tokens, ngram_max=ngram_max, seed=seed
    )
    start = time.perf_counter()
    try:
        pipeline.fit(data.texts("train"), data.labels("train"))
    except ValueError as err:
        if "empty vocabulary" not in str(err):
            raise
        raise RecipeError(
            f"--tokens: no {tokens!r} token left in the training texts after the "
            f"{stop_words!r} stop words (words are 2+ characters; try --tokens symbols)"
        ) from None
    result = BaselineResult(
        vectorizer=vectorizer,
        classifier=classifier,
        stop_words=stop_words,
        tokens=tokens,
        ngram_max=ngram_max,
        label_names=list(data.label_names),
        vocabulary_size=len(pipeline.named_steps["counts"].vocabulary_),
        train_examples=len(data.splits["train"]),
        fit_seconds=time.perf_counter() - start,
    )
    for split in dict.fromkeys(splits):
        references = data.labels(split)
        predictions = [int(p) for p in pipeline.predict(data.texts(split))]
        result.predictions[split] = predictions
        result.confusion[split] = confusion_matrix(predictions, references, len(data.label_names))
        result.metrics[split] = label_scores(predictions, references)
    return result


def default_output_dir(recipe, vectorizer: str, classifier: str, root: str | Path | None = None):
    """``<root>/<recipe name>-baseline-<vectorizer>-<classifier>``, ``root`` defaulting to the
    parent of the recipe's ``output_dir`` (``runs/baseline_reviews_es-baseline-tfidf-nb``):
    next to the neural run, never inside it, so a pushed model folder holds no baseline files
    and each combination keeps its own folder."""
    root = Path(recipe.output_dir).parent if root is None else Path(root)
    return root / f"{recipe.name}-baseline-{vectorizer}-{classifier}"


def write_baseline(
    output_dir: str | Path,
    result: BaselineResult,
    *,
    recipe_name: str,
    card_metadata: dict,
    data_name: str,
) -> list[Path]:
    """Write ``eval_results.json`` (the schema the training engine writes: task / dataset
    names, ``results`` rows of the reported metrics, ``all_metrics``, and a ``training`` block
    describing the baseline, with its :func:`~hfattn.common.machine.provenance`) and
    ``confusion_matrix.json`` (``{"split", "data", "labels", "matrix"}`` of the last evaluated
    split, as the classification task writes it, plus ``"splits"``: every evaluated split's
    matrix), atomically. ``card_metadata`` is the
    classification task's :meth:`~hfattn.tasks.base.Task.card_metadata`. Returns the paths."""
    output_dir = Path(output_dir)
    reported = card_metadata["reported_metrics"]
    names = card_metadata["metric_names"]
    origin = provenance()
    eval_results = {
        "task_type": card_metadata.get("task_type"),
        "task_name": card_metadata.get("task_name"),
        "dataset_name": card_metadata.get("dataset_name"),
        "dataset_type": card_metadata.get("dataset_type"),
        "results": [
            {
                "split": split,
                "metric_type": name,
                "metric_name": names.get(name, name),
                "value": value,
            }
            for split, scores in result.metrics.items()
            for name, value in scores.items()
            if name in reported and isinstance(value, float) and math.isfinite(value)
        ],
        "all_metrics": result.metrics,
        "training": {
            "recipe": recipe_name,
            "method": f"baseline: {result.vectorizer} + {result.classifier}",
            "vectorizer": result.vectorizer,
            "classifier": result.classifier,
            "stop_words": result.stop_words,
            "tokens": result.tokens,
            "ngram_max": result.ngram_max,
            "vocabulary_size": result.vocabulary_size,
            "train_examples": result.train_examples,
            "train_runtime_s": round(result.fit_seconds, 3),
            "stop_reason": "completed",
            "hardware": f"{machine_words(origin['machine'])} (scikit-learn)",
            "num_processes": 1,
            "provenance": origin,
        },
    }
    last = list(result.confusion)[-1]
    confusion = {
        "split": last,
        "data": data_name,
        "labels": list(result.label_names),
        "matrix": result.confusion[last],
        "splits": result.confusion,
    }
    paths = [output_dir / EVAL_RESULTS_FILE, output_dir / CONFUSION_MATRIX_FILE]
    atomic_write_json(paths[0], eval_results)
    atomic_write_json(paths[1], confusion)
    return paths


__all__ = [
    "CLASSIFIERS",
    "DEFAULT_STOP_WORDS",
    "DEFAULT_TOKENS",
    "STOP_WORD_LISTS",
    "TOKEN_PATTERNS",
    "VECTORIZERS",
    "BaselineResult",
    "ThesisTfidfTransformer",
    "build_pipeline",
    "default_output_dir",
    "run_baseline",
    "stop_words_of",
    "write_baseline",
]
