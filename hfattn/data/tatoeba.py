"""``spa.txt``: the Anki / Tatoeba English–Spanish sentence pairs, and Chollet's and Géron's
preprocessings.

The file (``spa-eng.zip`` on manythings.org / the TensorFlow bucket) has one pair per line::

    Go.<TAB>Ve.<TAB>CC-BY 2.0 (France) Attribution: tatoeba.org #2877272 (CM) & #4986655 (cueyayotl)

The third field (attribution) is optional and ignored. A line without a tab, or with an empty
or blank side, is malformed: it is skipped, and one warning counts them and shows the first
(its line number and text).

Two preprocessings reproduce Chollet's and Géron's (:data:`PREPROCESSINGS`):

- ``"chollet"`` (*Deep Learning with Python*, 2nd ed., ch. 11): both sides lower-cased and
  stripped of punctuation (``string.punctuation`` plus ``¿`` and ``¡``; the brackets of the
  target markers are kept), the target wrapped as ``"[start] … [end]"``; pairs shuffled (seed)
  and split 70/15/15. Its model settings: vocabulary 15,000, sequence length 20.
- ``"geron"`` (*Hands-On ML*, 3rd ed., ch. 16): ``¡`` and ``¿`` removed (the tokenizer
  lower-cases and strips the rest); pairs shuffled (seed), the first 100,000 are ``train``, the
  rest is cut into ``validation`` and ``test`` in the ratio of the two fractions. Its model
  settings: vocabulary 1,000, sequence length 50 (tokenizer / truncation settings).
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import random
import re
import string
import zipfile
from collections import Counter
from pathlib import Path
from urllib.parse import urlparse

from ..storage.file_io import atomic_path
from ..storage.file_reads import read_utf8_text
from .cache import hfattn_cache_dir
from .held_out import HELD_OUT, capped
from .pair_splits import deal_by_pair, pair_keys

logger = logging.getLogger(__name__)

CHOLLET = {"vocab_size": 15_000, "sequence_length": 20}
"""Chollet's settings: top-15,000 words per language, sequences of 20 tokens."""

GERON = {"vocab_size": 1_000, "max_length": 50, "train_size": 100_000}
"""Géron's settings: vocabulary 1,000, sequences of 50 tokens, the first 100,000 shuffled pairs
for training."""

PREPROCESSINGS = {"chollet": CHOLLET, "geron": GERON}
"""Chollet's and Géron's preprocessings by name, with their model/tokenizer settings."""

CHOLLET_STRIP_CHARS = (string.punctuation + "¿¡").replace("[", "").replace("]", "")
"""Characters removed by :func:`chollet_standardize` (Keras' ``string.punctuation + "¿"``,
plus ``¡``; ``[`` and ``]`` are kept for the ``[start]`` / ``[end]`` markers)."""

_CHOLLET_STRIP = re.compile(f"[{re.escape(CHOLLET_STRIP_CHARS)}]")


def chollet_standardize(text: str) -> str:
    """Chollet's ``custom_standardization``: lower-case, remove :data:`CHOLLET_STRIP_CHARS`
    (``"¿Cómo estás?"`` → ``"cómo estás"``); whitespace is also collapsed."""
    return " ".join(_CHOLLET_STRIP.sub("", text.lower()).split())


def chollet_pair(pair: dict[str, str], source_lang: str, target_lang: str) -> dict[str, str]:
    """One pair as Chollet feeds it: both sides standardized, the target as
    ``"[start] … [end]"``."""
    return {
        source_lang: chollet_standardize(pair[source_lang]),
        target_lang: f"[start] {chollet_standardize(pair[target_lang])} [end]",
    }


def geron_pair(pair: dict[str, str], source_lang: str, target_lang: str) -> dict[str, str]:
    """One pair as Géron feeds it: ``¡`` and ``¿`` removed from both sides."""
    return {
        lang: pair[lang].replace("¡", "").replace("¿", "") for lang in (source_lang, target_lang)
    }


PAIR_TRANSFORMS = {"chollet": chollet_pair, "geron": geron_pair}
"""The text side of each preprocessing (applies to any source)."""


def read_spa_txt(
    path: str | Path, *, source_lang: str = "en", target_lang: str = "es"
) -> list[dict[str, str]]:
    """The pairs of a tab-separated ``spa.txt`` (or a ``.zip`` holding one) as
    ``[{source_lang: col 1, target_lang: col 2}, ...]``, in file order. Malformed lines (no tab,
    an empty or blank side) are skipped, with one warning that counts them and shows the
    first."""
    path = Path(path)
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as zf:
            members = [n for n in zf.namelist() if n.endswith(".txt") and "_about" not in n]
            if not members:
                raise ValueError(f"data.source: no .txt file inside {path}")
            text = zf.read(members[0]).decode("utf-8")
    else:
        text = read_utf8_text(path)
    pairs, malformed = [], []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < 2 or not fields[0].strip() or not fields[1].strip():
            malformed.append((number, line))
            continue
        pairs.append({source_lang: fields[0].strip(), target_lang: fields[1].strip()})
    if malformed:
        number, line = malformed[0]
        logger.warning(
            "%s: %d malformed line(s) skipped (expected %s<TAB>%s[<TAB>attribution], both "
            "sides non-empty), the first at line %d: %r",
            path,
            len(malformed),
            source_lang,
            target_lang,
            number,
            line[:80],
        )
    return pairs


def download(url: str) -> Path:
    """Download ``url`` once into ``$HF_HOME/hfattn/downloads/<hash>/<file name>`` (atomically)
    and return the local path (the cached file on later calls)."""
    import urllib.request

    name = Path(urlparse(url).path).name or "download"
    target = hfattn_cache_dir() / "downloads" / hashlib.sha256(url.encode()).hexdigest()[:16] / name
    if not target.is_file():
        logger.info("downloading %s into %s", url, target)
        with atomic_path(target) as tmp, urllib.request.urlopen(url, timeout=60) as response:
            tmp.write_bytes(response.read())
    return target


def _group_split(
    pairs: list[dict[str, str]],
    source_lang: str,
    counts: tuple[int, int],
    rng: random.Random,
    max_pairs: int | None = None,
) -> dict[str, list[dict[str, str]]]:
    """Split ``pairs`` so every translation of one source sentence falls in the same split:
    ``counts`` = (validation, test) source sentences, drawn in shuffled order, each split
    holding at most ``max_pairs`` pairs (the leading sources whose translations fit)."""
    sources = sorted({p[source_lang] for p in pairs})
    rng.shuffle(sources)
    translations = Counter(p[source_lang] for p in pairs)
    where, start = {}, 0
    for split, count in zip(("validation", "test"), counts, strict=True):
        drawn = sources[start : start + count]
        if max_pairs is not None:
            held = itertools.accumulate(translations[s] for s in drawn)
            drawn = drawn[: sum(1 for total in held if total <= max_pairs)]
        where.update({s: split for s in drawn})
        start += len(drawn)
    out: dict[str, list[dict[str, str]]] = {"train": [], "validation": [], "test": []}
    for p in pairs:
        out[where.get(p[source_lang], "train")].append(p)
    return out


def split_spa_pairs(
    pairs: list[dict[str, str]],
    *,
    preprocessing: str | None,
    source_lang: str = "en",
    target_lang: str = "es",
    seed: int = 0,
    validation_fraction: float = 0.15,
    test_fraction: float = 0.15,
    max_held_out_pairs: int | None = None,
    train_size: int | None = None,
    group_by_source: bool = False,
    what: str = "pairs",
) -> dict[str, list[dict[str, str]]]:
    """Shuffle (``seed``) and split the pairs of a file, applying ``preprocessing``.

    ``None`` and ``"chollet"``: ``train`` / ``validation`` / ``test`` by the fractions (70/15/15
    by default). ``"geron"``: the first ``train_size`` (default 100,000) shuffled pairs are
    ``train`` and the rest is cut into ``validation`` / ``test`` in the ratio of the
    fractions. Each held-out split holds at most ``max_held_out_pairs`` pairs (``None``: no
    bound): the pairs it does not take go to ``train``, or with ``"geron"`` (whose ``train``
    keeps ``train_size`` pairs) are left out, said in one line. ``group_by_source=True`` keeps
    all translations of one source sentence in one split (the seeds do not: ``"Go."`` has
    several translations that may land in different splits); the fractions then count source
    sentences. Either way each exact duplicate pair (after ``preprocessing``) lies in one split
    only: without grouping, a copy goes to the split of the pair's first copy in shuffled order
    (:func:`hfattn.data.pair_splits.deal_by_pair`, one line names ``what`` and counts the
    copies moved, and those dropped rather than swell a held-out split past its bound).
    """
    if preprocessing is not None and preprocessing not in PREPROCESSINGS:
        raise ValueError(
            f"data.preprocessing must be one of {', '.join(PREPROCESSINGS)} or None; "
            f"got {preprocessing!r}"
        )
    rng = random.Random(seed)
    pairs = list(pairs)
    if preprocessing:
        transform = PAIR_TRANSFORMS[preprocessing]
        pairs = [transform(p, source_lang, target_lang) for p in pairs]
    if preprocessing == "geron":
        train_size = GERON["train_size"] if train_size is None else train_size
        held = 1.0 - min(1.0, train_size / max(1, len(pairs)))
        total = validation_fraction + test_fraction
        val_share = validation_fraction / total * held if total else held
        test_share = test_fraction / total * held if total else 0.0
    else:
        val_share, test_share = validation_fraction, test_fraction
    if group_by_source:
        n_sources = len({p[source_lang] for p in pairs})
        counts = (round(n_sources * val_share), round(n_sources * test_share))
        return _group_split(pairs, source_lang, counts, rng, max_held_out_pairs)
    rng.shuffle(pairs)
    n = len(pairs)
    if preprocessing == "geron":
        n_train = min(n, train_size)
        n_test = (
            round((n - n_train) * (test_share / (val_share + test_share))) if n > n_train else 0
        )
        n_val = n - n_train - n_test
    else:
        n_val, n_test = int(n * val_share), int(n * test_share)
    n_val, n_test = capped(n_val, max_held_out_pairs), capped(n_test, max_held_out_pairs)
    if preprocessing != "geron":
        n_train = n - n_val - n_test
    import numpy as np  # on use: recipe parsing imports this module

    keys = pair_keys((p[source_lang] for p in pairs), (p[target_lang] for p in pairs), n)
    left_out = n - n_train - n_val - n_test  # geron: the pairs beyond the capped splits
    if left_out:
        logger.info(
            "%s: %d pairs left out (train keeps data.train_size %d pairs, each held-out split "
            "at most data.max_held_out_pairs %d)",
            what, left_out, n_train, max_held_out_pairs,
        )  # fmt: skip
    cuts = [("train", n_train), ("validation", n_val), ("left out", left_out), ("test", n_test)]
    limits = {} if max_held_out_pairs is None else dict.fromkeys(HELD_OUT, max_held_out_pairs)
    rows = deal_by_pair(keys, np.arange(n), cuts, what=what, limits=limits)
    return {split: [pairs[i] for i in rows[split]] for split in ("train", *HELD_OUT)}


__all__ = [
    "CHOLLET",
    "CHOLLET_STRIP_CHARS",
    "GERON",
    "PAIR_TRANSFORMS",
    "PREPROCESSINGS",
    "chollet_pair",
    "chollet_standardize",
    "download",
    "geron_pair",
    "read_spa_txt",
    "split_spa_pairs",
]
