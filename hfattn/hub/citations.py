"""Papers each ``model_type`` implements, cited in its model card.

Each model family names its papers by BibTeX key (:attr:`hfattn.models.families.Family.papers`);
this module holds the entries. A model type that names none gets a card without a references
section.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..family_facts import load_models_module


@dataclass(frozen=True)
class Citation:
    """One paper (or post): a one-line reference for the card body and its BibTeX entry."""

    reference: str
    url: str
    bibtex: str

    @property
    def key(self) -> str:
        """The BibTeX key (``vaswani2017attention`` of ``@inproceedings{vaswani2017attention,``)."""
        return self.bibtex.split("{", 1)[1].split(",", 1)[0]


HOCHREITER_1997 = Citation(
    reference="Hochreiter & Schmidhuber (1997). Long Short-Term Memory. Neural Computation 9(8).",
    url="https://doi.org/10.1162/neco.1997.9.8.1735",
    bibtex="""@article{hochreiter1997lstm,
  title   = {Long Short-Term Memory},
  author  = {Hochreiter, Sepp and Schmidhuber, J{\\"u}rgen},
  journal = {Neural Computation},
  volume  = {9},
  number  = {8},
  pages   = {1735--1780},
  year    = {1997}
}""",
)

CHO_2014 = Citation(
    reference=(
        "Cho et al. (2014). Learning Phrase Representations using RNN Encoder-Decoder for "
        "Statistical Machine Translation. EMNLP."
    ),
    url="https://arxiv.org/abs/1406.1078",
    bibtex="""@inproceedings{cho2014gru,
  title     = {Learning Phrase Representations using {RNN} Encoder-Decoder for Statistical Machine Translation},
  author    = {Cho, Kyunghyun and van Merri{\\"e}nboer, Bart and Gulcehre, Caglar and Bahdanau, Dzmitry and Bougares, Fethi and Schwenk, Holger and Bengio, Yoshua},
  booktitle = {EMNLP},
  year      = {2014}
}""",
)

GRAVES_2013 = Citation(
    reference="Graves (2013). Generating Sequences With Recurrent Neural Networks. arXiv:1308.0850.",
    url="https://arxiv.org/abs/1308.0850",
    bibtex="""@article{graves2013generating,
  title   = {Generating Sequences With Recurrent Neural Networks},
  author  = {Graves, Alex},
  journal = {arXiv preprint arXiv:1308.0850},
  year    = {2013}
}""",
)

KARPATHY_2015 = Citation(
    reference="Karpathy (2015). The Unreasonable Effectiveness of Recurrent Neural Networks (blog post).",
    url="https://karpathy.github.io/2015/05/21/rnn-effectiveness/",
    bibtex="""@misc{karpathy2015unreasonable,
  title        = {The Unreasonable Effectiveness of Recurrent Neural Networks},
  author       = {Karpathy, Andrej},
  year         = {2015},
  howpublished = {\\url{https://karpathy.github.io/2015/05/21/rnn-effectiveness/}}
}""",
)

BAHDANAU_2015 = Citation(
    reference=(
        "Bahdanau, Cho & Bengio (2015). Neural Machine Translation by Jointly Learning to Align "
        "and Translate. ICLR."
    ),
    url="https://arxiv.org/abs/1409.0473",
    bibtex="""@inproceedings{bahdanau2015neural,
  title     = {Neural Machine Translation by Jointly Learning to Align and Translate},
  author    = {Bahdanau, Dzmitry and Cho, Kyunghyun and Bengio, Yoshua},
  booktitle = {ICLR},
  year      = {2015}
}""",
)

LUONG_2015 = Citation(
    reference=(
        "Luong, Pham & Manning (2015). Effective Approaches to Attention-based Neural Machine "
        "Translation. EMNLP."
    ),
    url="https://arxiv.org/abs/1508.04025",
    bibtex="""@inproceedings{luong2015effective,
  title     = {Effective Approaches to Attention-based Neural Machine Translation},
  author    = {Luong, Thang and Pham, Hieu and Manning, Christopher D.},
  booktitle = {EMNLP},
  year      = {2015}
}""",
)

VASWANI_2017 = Citation(
    reference="Vaswani et al. (2017). Attention Is All You Need. NeurIPS.",
    url="https://arxiv.org/abs/1706.03762",
    bibtex="""@inproceedings{vaswani2017attention,
  title     = {Attention Is All You Need},
  author    = {Vaswani, Ashish and Shazeer, Noam and Parmar, Niki and Uszkoreit, Jakob and Jones, Llion and Gomez, Aidan N. and Kaiser, {\\L}ukasz and Polosukhin, Illia},
  booktitle = {NeurIPS},
  year      = {2017}
}""",
)

HU_2022 = Citation(
    reference="Hu et al. (2022). LoRA: Low-Rank Adaptation of Large Language Models. ICLR.",
    url="https://arxiv.org/abs/2106.09685",
    bibtex="""@inproceedings{hu2022lora,
  title     = {{LoRA}: Low-Rank Adaptation of Large Language Models},
  author    = {Hu, Edward J. and Shen, Yelong and Wallis, Phillip and Allen-Zhu, Zeyuan and Li, Yuanzhi and Wang, Shean and Wang, Lu and Chen, Weizhu},
  booktitle = {ICLR},
  year      = {2022}
}""",
)

PAPERS: dict[str, Citation] = {
    c.key: c for c in (GRAVES_2013, KARPATHY_2015, BAHDANAU_2015, LUONG_2015, VASWANI_2017)
}
"""BibTeX key → the entry, for the papers that model families name."""

CITATIONS: dict[str, tuple[Citation, ...]] = {
    model_type: tuple(PAPERS[key] for key in family.papers)
    for model_type, family in load_models_module("families").FAMILIES.items()
}
"""``model_type`` → the papers its architecture implements, most specific first."""

CELL_CITATIONS: dict[str, tuple[Citation, ...]] = {
    "lstm": (HOCHREITER_1997,),
    "gru": (CHO_2014,),
}
"""Recurrent cell (the config's ``cell`` or ``rnn_type`` field) → the paper that introduced it."""

ADAPTER_CITATIONS: dict[str, tuple[Citation, ...]] = {"LORA": (HU_2022,)}
"""PEFT ``peft_type`` → the papers of the adaptation method (added to the base model's)."""


def citations_for(config: dict, peft_type: str | None = None) -> list[Citation]:
    """The citations of a model given its ``config.json`` (and of its adapter method, if any):
    the model type's papers, then its recurrent cell's, without duplicates."""
    cell = str(config.get("cell") or config.get("rnn_type") or "").lower()
    candidates = (
        *ADAPTER_CITATIONS.get(peft_type or "", ()),
        *CITATIONS.get(config.get("model_type") or "", ()),
        *CELL_CITATIONS.get(cell, ()),
    )
    found: list[Citation] = []
    for citation in candidates:
        if citation not in found:
            found.append(citation)
    return found
