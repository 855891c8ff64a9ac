r"""Corpus BLEU with sacrebleu (Papineni et al. 2002; Post 2018), an ``evaluate`` metric shipped
with hfattn (the Hub copy cannot be downloaded offline).

.. math:: \mathrm{BLEU} = \mathrm{BP}\cdot\exp\Big(\sum_{n=1}^{4}\tfrac14\ln p_n\Big),\qquad
          \mathrm{BP} = \min\big(1, e^{1 - r/c}\big)

with ``p_n`` the clipped n-gram precisions over the corpus, ``c`` the hypothesis length and
``r`` the reference length (sacrebleu's ``13a`` tokenisation; score on a 0-100 scale).
"""

import datasets
import evaluate
import sacrebleu


class SacreBleu(evaluate.Metric):
    """Corpus BLEU (0-100) of detokenised hypotheses against one reference each."""

    def _info(self):
        return evaluate.MetricInfo(
            description="Corpus BLEU computed by sacrebleu (13a tokenisation).",
            citation="Post, 'A Call for Clarity in Reporting BLEU Scores', WMT 2018.",
            inputs_description="predictions: list of strings; references: list of strings",
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),
        )

    def _compute(self, predictions, references, tokenize="13a", lowercase=False):
        bleu = sacrebleu.corpus_bleu(
            predictions, [references], tokenize=tokenize, lowercase=lowercase
        )
        return {
            "score": float(bleu.score),
            "precisions": [float(p) for p in bleu.precisions],
            "bp": float(bleu.bp),
            "sys_len": int(bleu.sys_len),
            "ref_len": int(bleu.ref_len),
        }
