"""How an export decodes: ``generate``'s settings (``generation_config.json``) as CTranslate2's
``translate_batch`` options (:class:`DecodingSettings`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace

DEFAULT_MAX_NEW_TOKENS = 128
"""``max_new_tokens`` when ``generation_config.json`` sets none (``translate_texts``'s default)."""


@dataclass(frozen=True)
class DecodingSettings:
    """How :class:`~hfattn.export.serving.CTranslate2Translation` decodes (``generate``'s
    names): beam width (1 = greedy), the new-token bounds, the length penalty of beam search
    (score / length^α, the end token counted, as ``generate`` does), ``generate``'s stopping
    rule, n-gram blocking and the repetition penalty.

    Greedy search gives ``generate``'s tokens. Beam search explores the same beams (the best
    ``2 × num_beams`` continuations, an end token ending a hypothesis only among the first
    ``num_beams``) and ranks ended hypotheses alike; CTranslate2 stops once
    ``num_beams × patience`` hypotheses have ended (Kasai et al. 2022, "Beam Decoding with
    Controlled Patience"). ``generate`` stops by ``early_stopping``:

    - ``True``: once ``num_beams`` hypotheses have ended, CTranslate2's rule at
      ``patience=1``, so the export decodes exactly as the model.
    - ``False`` (transformers' default) or ``"never"``: while the best running beam could
      still beat the worst of the ``num_beams`` kept hypotheses, which CTranslate2 cannot
      express. With ``length_penalty=0`` the answer is the same (both stop once the best beam
      has ended); with a length penalty ``generate`` may search on and find a longer
      hypothesis. ``patience=2`` comes nearest (how the agreement of each setting on the
      Bible books is measured: ``benchmarks/NOTES.md``).

    ``patience`` ``None`` follows ``early_stopping``: 1 for ``True``, else 2.

    Raises:
        ValueError: a field out of range, named with what it allows.
    """

    num_beams: int = 1
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    min_new_tokens: int = 0
    length_penalty: float = 1.0
    early_stopping: bool | str = False
    no_repeat_ngram_size: int = 0
    repetition_penalty: float = 1.0
    patience: float | None = None

    def __post_init__(self):
        for name, low in (
            ("num_beams", 1),
            ("max_new_tokens", 1),
            ("min_new_tokens", 0),
            ("no_repeat_ngram_size", 0),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}; got {value!r}")
        if self.min_new_tokens > self.max_new_tokens:
            raise ValueError(
                f"min_new_tokens ({self.min_new_tokens}) must be <= max_new_tokens "
                f"({self.max_new_tokens})"
            )
        if not (isinstance(self.early_stopping, bool) or self.early_stopping == "never"):
            raise ValueError(
                f"early_stopping must be True, False or 'never'; got {self.early_stopping!r}"
            )
        positive = {"repetition_penalty": self.repetition_penalty}
        if self.patience is not None:  # None: follow early_stopping (beam_patience)
            positive["patience"] = self.patience
        for name, value in positive.items():
            if not value > 0:
                raise ValueError(f"{name} must be > 0; got {value!r}")

    @property
    def beam_patience(self) -> float:
        """CTranslate2's ``patience``: :attr:`patience`, or the one that follows
        :attr:`early_stopping` (1 for ``True``: ``generate``'s rule exactly; else 2)."""
        if self.patience is not None:
            return float(self.patience)
        return 1.0 if self.early_stopping is True else 2.0

    @classmethod
    def from_generation_config(cls, data: Mapping) -> DecodingSettings:
        """The settings of a ``generation_config.json`` dict (unset ones: the defaults)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known and v is not None})

    def updated(self, **overrides) -> DecodingSettings:
        """A copy with the ``overrides`` that are not ``None``."""
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})

    def ctranslate2_options(self) -> dict:
        """The ``translate_batch`` keyword arguments."""
        return {
            "beam_size": self.num_beams,
            "max_decoding_length": self.max_new_tokens,
            "min_decoding_length": self.min_new_tokens,
            "length_penalty": float(self.length_penalty),
            "no_repeat_ngram_size": self.no_repeat_ngram_size,
            "repetition_penalty": float(self.repetition_penalty),
            "patience": self.beam_patience,
        }
