r"""chrF (Popović 2015) with sacrebleu, an ``evaluate`` metric shipped with hfattn.

Character n-gram F-score (n = 1..6, β = 2), averaged over n and computed over the corpus:

.. math:: \mathrm{chrF}_\beta = (1+\beta^2)\,\frac{\mathrm{chrP}\cdot\mathrm{chrR}}
          {\beta^2\,\mathrm{chrP} + \mathrm{chrR}}

on a 0-100 scale.
"""

import datasets
import evaluate
import sacrebleu


class ChrF(evaluate.Metric):
    """Corpus chrF (0-100) of hypotheses against one reference each."""

    def _info(self):
        return evaluate.MetricInfo(
            description="Character n-gram F-score computed by sacrebleu.",
            citation=(
                "Popović, 'chrF: character n-gram F-score for automatic MT evaluation', WMT 2015."
            ),
            inputs_description="predictions: list of strings; references: list of strings",
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),
        )

    def _compute(self, predictions, references, char_order=6, word_order=0, beta=2):
        chrf = sacrebleu.corpus_chrf(
            predictions, [references], char_order=char_order, word_order=word_order, beta=beta
        )
        return {"score": float(chrf.score)}
