"""The cases of ``benchmarks/bench_data_scale.py``: each recipe on each corpus, the corpora by
label (full size and ``--quick``), and the corpus of a case made (or reused) under the work
folder with the cost of its preparation key."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.lib.scale_corpora import bible_jsonl, bible_pairs, shakespeare_text
from hfattn.data.prepared import source_identity

ROOT = Path(__file__).resolve().parents[2]
"""The repository root: the cases' recipes are its ``recipes/<name>.yaml``."""


@dataclass(frozen=True)
class Corpus:
    """A corpus of the cases: the embedded plays (``text_bytes``, ``repeats`` and
    ``jsonl_rows`` unset), a text of ``text_bytes`` (:func:`shakespeare_text`), Bible pairs
    repeated ``repeats`` times (:func:`bible_pairs`, the first ``base_rows`` verses or all) or
    a JSON Lines file of ``jsonl_rows`` pairs (:func:`bible_jsonl`)."""

    label: str
    text_bytes: int | None = None
    repeats: int | None = None
    base_rows: int | None = None
    jsonl_rows: int | None = None

    @property
    def pairs(self) -> bool:
        """Whether the corpus is sentence pairs (else a text)."""
        return self.repeats is not None or self.jsonl_rows is not None


CORPORA = {
    "4.4MB": Corpus("4.4MB"),
    "100MB": Corpus("100MB", text_bytes=100_000_000),
    "1GB": Corpus("1GB", text_bytes=1_000_000_000),
    "31k": Corpus("31k", repeats=1),
    "290k": Corpus("290k", repeats=10),
    "1.45M": Corpus("1.45M", repeats=50),
    "4.5M": Corpus("4.5M", repeats=155),
    "1M": Corpus("1M", jsonl_rows=1_000_000),
}
"""The corpora by label: the plays as the recipe ships them (``data.source: shakespeare``),
texts of the training plays repeated, the Bible's 29,004 training verses repeated (a
``save_to_disk`` folder with the Bible's own held-out books, or ``1M``: a JSON Lines file with
no held-out split)."""
QUICK_CORPORA = {
    "4.4MB": Corpus("4.4MB", text_bytes=150_000),
    "100MB": Corpus("100MB", text_bytes=300_000),
    "1GB": Corpus("1GB", text_bytes=450_000),
    "31k": Corpus("31k", repeats=1, base_rows=1000),
    "290k": Corpus("290k", repeats=2, base_rows=1000),
    "1.45M": Corpus("1.45M", repeats=3, base_rows=1000),
    "4.5M": Corpus("4.5M", repeats=4, base_rows=1000),
    "1M": Corpus("1M", jsonl_rows=3000),
}
"""``--quick``: the same labels on tiny corpora (a few hundred kB, a few thousand pairs)."""

CHAR = "char_rnn_shakespeare"
LUONG = "bahdanau_bible_en_es"
VASWANI = "vaswani_bible_en_es_base"
CHOLLET = "vaswani_spa_eng_chollet"


@dataclass(frozen=True)
class Case:
    """One recipe on one corpus in ``processes`` processes, watched for ``steps`` steps."""

    name: str
    recipe: str
    corpus: str
    steps: int = 100
    processes: int = 1
    command: str = "train"
    """``train`` (watched to step :attr:`steps`), ``prepare`` (``hfattn prepare``, watched to
    its exit: the data path alone) or ``model`` (``training.max_steps`` set to :attr:`steps`,
    watched to its exit: to the saved model, final evaluation included)."""


CASES = {
    case.name: case
    for case in (
        *(Case(f"char-rnn/{size}", CHAR, size) for size in ("4.4MB", "100MB", "1GB")),
        *(Case(f"luong/{size}", LUONG, size) for size in ("31k", "290k", "1.45M", "4.5M")),
        *(
            Case(f"vaswani/{size}", VASWANI, size, steps=3)
            for size in ("31k", "290k", "1.45M", "4.5M")
        ),
        *(
            Case(f"vaswani-prepare/{size}", VASWANI, size, command="prepare")
            for size in ("31k", "1.45M", "4.5M")
        ),
        Case("luong-2proc/1.45M", LUONG, "1.45M", processes=2),
        Case("char-rnn-model/100MB", CHAR, "100MB", command="model"),
        Case("chollet-model/1M", CHOLLET, "1M", command="model"),
    )
}
"""Every case by name. The paper-base Transformer's step takes a minute or more on a 2-core CPU
(25,000 target tokens) and holds about 17 GB there: its ``train`` cases are watched for 3 steps
(time to the first step, memory), not 100, and have no steady steps/s; its ``prepare`` cases
measure its data path alone (``hfattn prepare``: the tokenizer and every split encoded), which
is all of the first step's wait that the data makes. The pairs' ``model`` case trains Chollet's
Transformer (``recipes/vaswani_spa_eng_chollet.yaml``, the small Transformer a user takes for
pairs of their own): the Bible recipes score their held-out books whole, at beam 4, by
design."""


KEY_REPEATS = 7
"""Calls of :func:`~hfattn.data.prepared.source_identity` timed for a corpus's ``key_ms``."""


def key_ms(source: str) -> float:
    """The median milliseconds of the source's part of the preparation key
    (:func:`~hfattn.data.prepared.source_identity`: each file's size, modification time and a
    digest of sampled blocks), over :data:`KEY_REPEATS` calls: what every run, a reused
    preparation's included, spends to know its data."""
    times = []
    for _ in range(KEY_REPEATS):
        began = time.perf_counter()
        source_identity(source)
        times.append(time.perf_counter() - began)
    return round(statistics.median(times) * 1000, 2)


def make_corpus(corpus: Corpus, work: Path) -> dict:
    """The corpus under ``work/corpora`` (made, or reused when there), described, with the
    cost of its preparation key (:func:`key_ms`); the embedded plays are ``data.source:
    shakespeare``."""
    if corpus.text_bytes is None and not corpus.pairs:
        return {"source": "shakespeare", "label": corpus.label, "made_of": "the Shakespeare "
                "plays as the recipe ships them (data.source: shakespeare)"}  # fmt: skip
    folder = work / "corpora"
    if corpus.jsonl_rows is not None:
        made = bible_jsonl(folder / f"bible-{corpus.jsonl_rows}.jsonl", corpus.jsonl_rows)
    elif corpus.pairs:
        base = "" if corpus.base_rows is None else f"-first{corpus.base_rows}"
        made = bible_pairs(folder / f"bible{base}-x{corpus.repeats}", corpus.repeats,
                           corpus.base_rows)  # fmt: skip
    else:
        made = shakespeare_text(folder / f"shakespeare-{corpus.text_bytes}.txt", corpus.text_bytes)
    return {"source": made["path"], "label": corpus.label, **made,
            "key_ms": key_ms(made["path"])}  # fmt: skip
