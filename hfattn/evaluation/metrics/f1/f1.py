r"""F1 score of a classifier, an ``evaluate`` metric shipped with hfattn (the Hub copy cannot be
downloaded offline).

For a class :math:`c` with :math:`TP_c` true positives, :math:`FP_c` false positives and
:math:`FN_c` false negatives,

.. math:: P_c = \frac{TP_c}{TP_c + FP_c}, \quad R_c = \frac{TP_c}{TP_c + FN_c}, \quad
          F1_c = \frac{2 P_c R_c}{P_c + R_c} = \frac{2\,TP_c}{2\,TP_c + FP_c + FN_c}

and :math:`F1_c = 0` when :math:`TP_c = 0` (scikit-learn's ``zero_division=0``).

- ``average="macro"`` (default): :math:`\frac{1}{|C|}\sum_c F1_c`, every class weighing the same;
- ``"weighted"``: :math:`\sum_c \frac{n_c}{N} F1_c` with :math:`n_c` the references of class
  :math:`c`;
- ``"micro"``: :math:`\frac{2\sum_c TP_c}{\sum_c (2\,TP_c + FP_c + FN_c)}` (= accuracy for
  single-label data);
- ``None``: the list of :math:`F1_c`.

:math:`C` is ``labels`` when given, else every class that occurs in the references or the
predictions (sorted), as in scikit-learn.
"""

import datasets
import evaluate
import numpy as np

AVERAGES = ("macro", "weighted", "micro", None)


class F1(evaluate.Metric):
    """Per-class F1 and its macro / weighted / micro averages."""

    def _info(self):
        return evaluate.MetricInfo(
            description="F1 = harmonic mean of precision and recall, averaged over classes.",
            citation="",
            inputs_description=(
                "predictions, references: lists of integer class ids; average: 'macro' "
                "(default), 'weighted', 'micro' or None; labels: the classes to average over"
            ),
            features=datasets.Features(
                {"predictions": datasets.Value("int64"), "references": datasets.Value("int64")}
            ),
        )

    def _compute(self, predictions, references, average="macro", labels=None):
        if average not in AVERAGES:
            raise ValueError(f"average: {average!r} is not one of macro, weighted, micro, None")
        predictions = np.asarray(predictions, dtype=np.int64)
        references = np.asarray(references, dtype=np.int64)
        classes = (
            np.asarray(sorted(set(labels)), dtype=np.int64)
            if labels is not None
            else np.union1d(predictions, references)
        )
        if classes.size == 0:
            return {"f1": 0.0 if average is not None else []}
        hit = predictions[:, None] == classes[None, :]
        true = references[:, None] == classes[None, :]
        tp = (hit & true).sum(0)
        fp = (hit & ~true).sum(0)
        fn = (~hit & true).sum(0)
        denominator = 2 * tp + fp + fn
        per_class = np.where(tp > 0, 2 * tp / np.maximum(denominator, 1), 0.0)
        if average is None:
            return {"f1": [float(v) for v in per_class]}
        if average == "micro":
            total = denominator.sum()
            return {"f1": float(2 * tp.sum() / total) if total else 0.0}
        if average == "weighted":
            support = true.sum(0)
            return {
                "f1": float((per_class * support).sum() / support.sum()) if support.sum() else 0.0
            }
        return {"f1": float(per_class.mean())}
