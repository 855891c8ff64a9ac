r"""Exact match = (1/N) Σ 1[prediction_i = reference_i] on whitespace-normalised strings, an
``evaluate`` metric shipped with hfattn."""

import datasets
import evaluate


def _normalise(text: str) -> str:
    return " ".join(text.split())


class ExactMatch(evaluate.Metric):
    """Fraction of predictions identical to their reference (after collapsing whitespace)."""

    def _info(self):
        return evaluate.MetricInfo(
            description="Fraction of predictions equal to the reference string.",
            citation="",
            inputs_description="predictions: list of strings; references: list of strings",
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),
        )

    def _compute(self, predictions, references):
        hits = [
            _normalise(p) == _normalise(r) for p, r in zip(predictions, references, strict=True)
        ]
        return {"exact_match": sum(hits) / len(hits) if hits else 0.0}
