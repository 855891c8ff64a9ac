"""Papers each ``model_type`` implements, cited in its model card.

Each model family names its papers by BibTeX key (:attr:`hfattn.common.families.Family.papers`);
the BibTeX entries live in ``citations.bib`` beside this module, verbatim as a card prints
them, and each :class:`Citation` names its entry by key. A model type that names none gets a
card without a references section.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..common.families import FAMILIES

BIBTEX_FILE = Path(__file__).with_name("citations.bib")
"""The BibTeX entries of every paper cited, as a card prints them."""


def read_bibtex(path: Path = BIBTEX_FILE) -> dict[str, str]:
    """The entries of the BibTeX file ``path`` by key (``@type{key,`` … ``}``), each verbatim."""
    entries = re.split(r"\n\s*\n(?=@)", path.read_text("utf-8").strip())
    return {re.match(r"@\w+\{([^,]+),", entry).group(1): entry for entry in entries}


BIBTEX = read_bibtex()


@dataclass(frozen=True)
class Citation:
    """One paper (or post): a one-line reference for the card body and its BibTeX entry."""

    key: str
    """The BibTeX key of its entry in :data:`BIBTEX_FILE`."""
    reference: str
    url: str

    @property
    def bibtex(self) -> str:
        """Its BibTeX entry."""
        return BIBTEX[self.key]


HOCHREITER_1997 = Citation(
    "hochreiter1997lstm",
    "Hochreiter & Schmidhuber (1997). Long Short-Term Memory. Neural Computation 9(8).",
    "https://doi.org/10.1162/neco.1997.9.8.1735",
)
CHO_2014 = Citation(
    "cho2014gru",
    "Cho et al. (2014). Learning Phrase Representations using RNN Encoder-Decoder for "
    "Statistical Machine Translation. EMNLP.",
    "https://arxiv.org/abs/1406.1078",
)
GRAVES_2013 = Citation(
    "graves2013generating",
    "Graves (2013). Generating Sequences With Recurrent Neural Networks. arXiv:1308.0850.",
    "https://arxiv.org/abs/1308.0850",
)
GRAVE_2017 = Citation(
    "grave2017improving",
    "Grave, Joulin & Usunier (2017). Improving Neural Language Models with a Continuous Cache. "
    "ICLR.",
    "https://arxiv.org/abs/1612.04426",
)
KARPATHY_2015 = Citation(
    "karpathy2015unreasonable",
    "Karpathy (2015). The Unreasonable Effectiveness of Recurrent Neural Networks (blog post).",
    "https://karpathy.github.io/2015/05/21/rnn-effectiveness/",
)
BAHDANAU_2015 = Citation(
    "bahdanau2015neural",
    "Bahdanau, Cho & Bengio (2015). Neural Machine Translation by Jointly Learning to Align "
    "and Translate. ICLR.",
    "https://arxiv.org/abs/1409.0473",
)
LUONG_2015 = Citation(
    "luong2015effective",
    "Luong, Pham & Manning (2015). Effective Approaches to Attention-based Neural Machine "
    "Translation. EMNLP.",
    "https://arxiv.org/abs/1508.04025",
)
VASWANI_2017 = Citation(
    "vaswani2017attention",
    "Vaswani et al. (2017). Attention Is All You Need. NeurIPS.",
    "https://arxiv.org/abs/1706.03762",
)
HU_2022 = Citation(
    "hu2022lora",
    "Hu et al. (2022). LoRA: Low-Rank Adaptation of Large Language Models. ICLR.",
    "https://arxiv.org/abs/2106.09685",
)

PAPERS: dict[str, Citation] = {
    c.key: c for c in (GRAVES_2013, KARPATHY_2015, BAHDANAU_2015, LUONG_2015, VASWANI_2017)
}
"""BibTeX key → the entry, for the papers that model families name."""

CITATIONS: dict[str, tuple[Citation, ...]] = {
    model_type: tuple(PAPERS[key] for key in family.papers)
    for model_type, family in FAMILIES.items()
}
"""``model_type`` → the papers its architecture implements, most specific first."""

CELL_CITATIONS: dict[str, tuple[Citation, ...]] = {
    "lstm": (HOCHREITER_1997,),
    "gru": (CHO_2014,),
}
"""Recurrent cell (the config's ``cell`` or ``rnn_type`` field) → the paper that introduced it."""

CACHE_CITATIONS: tuple[Citation, ...] = (GRAVE_2017,)
"""The papers of the continuous cache, cited when the config turns it on
(``neural_cache_size > 0``)."""

ADAPTER_CITATIONS: dict[str, tuple[Citation, ...]] = {"LORA": (HU_2022,)}
"""PEFT ``peft_type`` → the papers of the adaptation method (added to the base model's)."""


def citations_for(config: dict, peft_type: str | None = None) -> list[Citation]:
    """The citations of a model given its ``config.json`` (and of its adapter method, if any):
    the model type's papers, its recurrent cell's, then its continuous cache's, without
    duplicates."""
    cell = str(config.get("cell") or config.get("rnn_type") or "").lower()
    candidates = (
        *ADAPTER_CITATIONS.get(peft_type or "", ()),
        *CITATIONS.get(config.get("model_type") or "", ()),
        *CELL_CITATIONS.get(cell, ()),
        *(CACHE_CITATIONS if config.get("neural_cache_size") else ()),
    )
    found: list[Citation] = []
    for citation in candidates:
        if citation not in found:
            found.append(citation)
    return found
