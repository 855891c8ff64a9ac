"""Large corpora made of the embedded ones, for ``benchmarks/bench_data_scale.py``.

- :func:`shakespeare_text`: a UTF-8 text of a given size made of the Shakespeare training plays
  (:func:`hfattn.data.shakespeare.load_shakespeare`, the ``train`` split of the char-RNN
  recipe) repeated: whole copies, then the start of one more cut at a line end, so that the file
  is at most the size asked and is written one copy at a time (the 1 GB text never sits in
  memory);
- :func:`bible_pairs`: a ``save_to_disk`` ``DatasetDict`` whose ``train`` split is the Bible's
  training verses (:func:`hfattn.data.translation.load_translation_splits`, ``"bible"``)
  repeated ``repeats`` times, with the Bible's own ``validation`` and ``test`` books: the
  repeats are ``concatenate_datasets`` of the one memory-mapped table, which ``save_to_disk``
  writes out in Arrow record batches, so that 4.5 M pairs take no more memory than 29 k;
- :func:`bible_jsonl`: a JSON Lines file of ``rows`` pairs (``{"translation": {"en": ...,
  "es": ...}}`` a line), the Bible's training verses repeated and cut at ``rows``, each copy's
  number put before both sides of its pairs (``"7. In the beginning..."`` / ``"7. En el
  principio..."``) so that no two pairs are the same, with no held-out split of its own: what a
  user's file of pairs is, from which hfattn carves the validation and test splits. Written a
  copy of the verses at a time.

Each is written under a temporary name and renamed (:mod:`hfattn.storage.file_io`), and reused
when already there: a corpus that exists is complete. Each returns what it made: its path, its
size, the seconds spent making it (0 when reused) and this process's peak RSS so far
(``ru_maxrss``, a high-water mark: read right after the build, it bounds the build's memory).
"""

from __future__ import annotations

import json
import resource
import time
from pathlib import Path

from hfattn.storage.file_io import atomic_dir, atomic_path

SHAKESPEARE_TRAIN = "the Shakespeare training plays repeated"
BIBLE_TRAIN = "the Bible's training books repeated"
BIBLE_NUMBERED = "the Bible's training books repeated, each copy numbered"
GB = 1e9


def peak_rss_gb() -> float:
    """This process's peak resident memory so far, in GB (``ru_maxrss`` is in kB on Linux)."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GB, 3)


def training_plays() -> bytes:
    """The training plays of the char-RNN recipe (``data.source: shakespeare``, ``train``),
    one after the other with a blank line between two, as UTF-8."""
    from hfattn.data.shakespeare import load_shakespeare

    return "\n".join(load_shakespeare("train")).encode("utf-8")


def shakespeare_text(path: Path, size_bytes: int) -> dict:
    """The text file ``path`` of at most ``size_bytes`` bytes made of :func:`training_plays`
    repeated (see the module docstring); made once, reused after."""
    began = time.monotonic()
    made = not path.is_file()
    plays = training_plays()
    if made:
        with atomic_path(path) as tmp, open(tmp, "wb") as out:
            left = size_bytes
            while left >= len(plays):
                out.write(plays)
                left -= len(plays)
            out.write(plays[: plays.rfind(b"\n", 0, left) + 1])
    size = path.stat().st_size
    return {"path": str(path), "bytes": size, "copies": round(size / len(plays), 3),
            "made_of": SHAKESPEARE_TRAIN, "made": made,
            "seconds": round(time.monotonic() - began, 1) if made else 0.0,
            "builder_peak_rss_gb": peak_rss_gb()}  # fmt: skip


def bible_pairs(folder: Path, repeats: int, base_rows: int | None = None) -> dict:
    """The ``save_to_disk`` folder ``folder`` whose ``train`` split is the Bible's training
    verses (the first ``base_rows`` of them, or all) repeated ``repeats`` times (see the
    module docstring); made once, reused after.

    Raises:
        hfattn.data.bible.BibleNotInstalledError: the SWORD modules are not installed.
    """
    import datasets

    began = time.monotonic()
    made = not (folder / "dataset_dict.json").is_file()
    if made:
        from hfattn.data.translation import load_translation_splits

        bible = load_translation_splits("bible")
        train = bible["train"]
        if base_rows is not None:
            train = train.select(range(base_rows))
        if train._indices is not None:  # a selection: its rows as one table (small: <= 29 k)
            train = train.flatten_indices(keep_in_memory=True)
        repeated = datasets.concatenate_datasets([train] * repeats)
        splits = {"train": repeated, "validation": bible["validation"], "test": bible["test"]}
        with atomic_dir(folder) as tmp:
            datasets.DatasetDict(splits).save_to_disk(str(tmp), max_shard_size="500MB")
    loaded = datasets.load_from_disk(str(folder))
    rows = {split: len(loaded[split]) for split in loaded}
    return {"path": str(folder), "pairs": rows["train"], "repeats": repeats,
            "base_pairs": rows["train"] // repeats, "split_pairs": rows,
            "made_of": BIBLE_TRAIN, "made": made,
            "seconds": round(time.monotonic() - began, 1) if made else 0.0,
            "builder_peak_rss_gb": peak_rss_gb()}  # fmt: skip


def bible_jsonl(path: Path, rows: int) -> dict:
    """The JSON Lines file ``path`` of ``rows`` pairs made of the Bible's training verses
    repeated (see the module docstring); made once, reused after.

    Raises:
        hfattn.data.bible.BibleNotInstalledError: the SWORD modules are not installed.
    """
    from hfattn.data.translation import load_translation_splits

    began = time.monotonic()
    made = not path.is_file()
    verses = load_translation_splits("bible")["train"]["translation"]
    base = len(verses)
    if made:
        with atomic_path(path) as tmp, open(tmp, "wb") as out:
            for copy in range(-(-rows // base)):
                numbered = [{lang: f"{copy + 1}. {text}" for lang, text in pair.items()}
                            for pair in verses[: rows - copy * base]]  # fmt: skip
                out.write("".join(json.dumps({"translation": pair}, ensure_ascii=False) + "\n"
                                  for pair in numbered).encode("utf-8"))  # fmt: skip
    with open(path, "rb") as file:
        count = sum(chunk.count(b"\n") for chunk in iter(lambda: file.read(1 << 24), b""))
    return {"path": str(path), "pairs": count, "bytes": path.stat().st_size,
            "repeats": round(count / base, 3), "made_of": BIBLE_NUMBERED,
            "held_out": "none of its own (hfattn carves validation and test)", "made": made,
            "seconds": round(time.monotonic() - began, 1) if made else 0.0,
            "builder_peak_rss_gb": peak_rss_gb()}  # fmt: skip


__all__ = [
    "BIBLE_NUMBERED",
    "BIBLE_TRAIN",
    "SHAKESPEARE_TRAIN",
    "bible_jsonl",
    "bible_pairs",
    "shakespeare_text",
    "training_plays",
]
