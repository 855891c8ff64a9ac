"""What the Space load sends to each of the three apps (text generation, translation,
classification), and how an answer under load is checked: reduced to what must not change, it
must equal the app's answer to the same input with no load (``benchmarks/lib/space_load.py``,
``benchmarks/lib/space_memory.py``)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any


def _text_summary(args: tuple, answer: Any) -> Hashable:
    """A text-generation answer: the prompt and a continuation."""
    prompt = args[0]
    if not isinstance(answer, str) or not answer.startswith(prompt) or answer == prompt:
        raise ValueError(f"expected {prompt!r} and a continuation, got {answer!r}")
    return answer


def _translation_summary(args: tuple, answer: Any) -> Hashable:
    """A translation answer: one non-empty line per source line and the heatmap."""
    text, plot = answer
    lines = text.split("\n")
    if len(lines) != len(args[0].split("\n")) or not all(lines):
        raise ValueError(f"expected one translation per line of {args[0]!r}, got {text!r}")
    if not plot or plot.get("type") != "altair":
        raise ValueError(f"expected the attention heatmap, got {str(plot)[:80]!r}")
    return text


def _classification_summary(args: tuple, answer: Any) -> Hashable:
    """A classification answer: label probabilities summing to 1, the best one first, and the
    token weights (attention pooling) when the model has them."""
    scores, weights = answer
    confidences = [(c["label"], c["confidence"]) for c in scores["confidences"]]
    if abs(sum(p for _, p in confidences) - 1.0) > 1e-5 or scores["label"] != confidences[0][0]:
        raise ValueError(f"expected probabilities summing to 1, best first, got {scores!r}")
    tokens = tuple((w["token"], round(w["class_or_confidence"], 6)) for w in weights or ())
    return scores["label"], tuple((label, round(p, 6)) for label, p in confidences), tokens


@dataclass(frozen=True)
class Scenario:
    """What the load sends to one Space app (``spaces/<app>/``): its endpoint, the distinct
    inputs the clients cycle through, and ``summary(args, answer)``, the answer reduced to
    what must not change under load (raises ``ValueError`` on a malformed answer)."""

    app: str
    api_name: str
    inputs: tuple[tuple, ...]
    summary: Callable[[tuple, Any], Hashable]

    def requests(self, n: int) -> list[tuple]:
        """``n`` requests cycling through :attr:`inputs`."""
        return [self.inputs[i % len(self.inputs)] for i in range(n)]


NEW_TOKENS = 8
"""New tokens per request: the load measures the queue, not long generations."""
SCENARIOS = {
    "text_generation": Scenario(
        "text_generation",
        "/generate",
        tuple(
            (prompt, 0.0, 50, 0.95, NEW_TOKENS)  # greedy: the same prompt gives the same text
            for prompt in ("ROMEO:", "JULIET:", "HAMLET:", "KING LEAR:", "First Citizen:")
        ),
        _text_summary,
    ),
    "translation": Scenario(
        "translation",
        "/translate",
        tuple(
            (date, 2, 16)
            for date in ("April 22, 2019", "3 May 2001", "December 31, 1999", "June 5, 1987")
        ),
        _translation_summary,
    ),
    "classification": Scenario(
        "classification",
        "/classify",
        tuple(
            (text,)
            for text in ("B T B T S X S E T E", "B P B P T V V E P E", "B T B T S X S E P E")
        ),
        _classification_summary,
    ),
}
"""The three apps' load: short greedy generations, two-beam translations of dates, Reber
strings for a recurrent classifier."""
