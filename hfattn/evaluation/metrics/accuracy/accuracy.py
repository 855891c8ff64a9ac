"""Accuracy = (1/N) Σ 1[prediction_i = reference_i], an ``evaluate`` metric shipped with hfattn
(the Hub copy cannot be downloaded offline)."""

import datasets
import evaluate
import numpy as np


class Accuracy(evaluate.Metric):
    """Fraction of predictions equal to their reference (next-character or label accuracy)."""

    def _info(self):
        return evaluate.MetricInfo(
            description="Fraction of predictions equal to the reference.",
            citation="",
            inputs_description="predictions, references: lists of integer ids",
            features=datasets.Features(
                {"predictions": datasets.Value("int64"), "references": datasets.Value("int64")}
            ),
        )

    def _compute(self, predictions, references):
        predictions = np.asarray(predictions)
        references = np.asarray(references)
        return {"accuracy": float((predictions == references).mean()) if len(references) else 0.0}
