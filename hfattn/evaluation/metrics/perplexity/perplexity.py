r"""Language-model loss, perplexity and bits per token from summed negative log-likelihoods.

Each example is one batch: ``nll_sum`` = Σ −ln p(x_t | x_<t) over its ``num_tokens`` tokens.

.. math:: L = \frac{\sum \mathrm{nll\_sum}}{\sum \mathrm{num\_tokens}},\quad
          \mathrm{PPL} = e^{L},\quad \mathrm{bits} = L / \ln 2
"""

import math

import datasets
import evaluate


class Perplexity(evaluate.Metric):
    """Mean NLL in nats per token, its exponential (perplexity), bits per token, token count."""

    def _info(self):
        return evaluate.MetricInfo(
            description="Loss (nats/token), perplexity and bits per token from summed NLLs.",
            citation="",
            inputs_description="nll_sum: summed NLL of a batch; num_tokens: its token count",
            features=datasets.Features(
                {"nll_sum": datasets.Value("float64"), "num_tokens": datasets.Value("int64")}
            ),
        )

    def _compute(self, nll_sum, num_tokens):
        total = sum(num_tokens)
        if total == 0:
            raise ValueError("num_tokens: no tokens were scored")
        loss = sum(nll_sum) / total
        return {
            "loss": loss,
            "perplexity": math.exp(loss),
            "bits_per_token": loss / math.log(2),
            "num_tokens": total,
        }
