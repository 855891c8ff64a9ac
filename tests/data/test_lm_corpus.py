"""The causal-LM corpus prepared on disk (hfattn/tasks/causal_lm/corpus.py): the streamed text
splits, the vectorised char counts and encoding, the prepared folder's reuse and misses, the
batchers over the memory-mapped ids, and memory bounded by a chunk, not by the corpus."""

from __future__ import annotations

import json
import random
import tracemalloc
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from hfattn.batching.lm import PackedBlocks, StreamBatches, WindowBatches, encode_corpus
from hfattn.data import text as text_module
from hfattn.data.text import load_text_splits, open_text_splits
from hfattn.orchestration.run import build_job
from hfattn.recipes import load_recipe
from hfattn.storage.ragged import RaggedWriter
from hfattn.tasks.causal_lm import corpus as corpus_module
from hfattn.tasks.causal_lm.corpus import (
    TOKENIZER_FOLDER,
    prepare_char_corpus,
    prepare_tokenized_corpus,
    safe_cut,
)
from hfattn.tasks.causal_lm.recipe import TextDataSection
from hfattn.tasks.causal_lm.task import TASK
from hfattn.tokenization.characters import (
    CharCounts,
    build_char_tokenizer,
    char_lookup,
    char_tokenizer_from_counts,
    ignore_whitespace,
)
from tests.helpers.recipe_helpers import write_recipe

MIXED = "ab\ncd\r\nÉté naïve — ’tis 😀 𝔘𝔫𝔦 <eos> <unk>\t\x00 漢字 ab\n"
"""Characters of every kind: ASCII, \\r\\n, Latin-1, BMP punctuation and CJK, non-BMP
(emoji, mathematical letters), a special token's spelling, a tab and a NUL."""


def random_text(rng: random.Random, n: int, alphabet: str = MIXED) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


# ---- the text splits ------------------------------------------------------------------------
@pytest.mark.parametrize("chunk_bytes", [1, 5, 64, 1 << 20])
def test_a_text_file_is_cut_exactly_as_the_decoded_text_was(tmp_path, monkeypatch, chunk_bytes):
    """The parts of a text file are the slices ``text[:n_train]`` ... of its decoded text,
    multi-byte characters included, whatever the chunk and count-block sizes."""
    monkeypatch.setattr(text_module, "COUNT_BLOCK_BYTES", 7)
    text = random_text(random.Random(chunk_bytes), 3000)
    path = tmp_path / "mixed.txt"
    path.write_bytes(text.encode("utf-8"))
    parts = load_text_splits(
        str(path), validation_fraction=0.13, test_fraction=0.21, chunk_bytes=chunk_bytes
    )
    n = len(text)
    n_test, n_val = int(n * 0.21), int(n * 0.13)  # the fractions count characters
    n_train = n - n_val - n_test
    assert parts == {
        "train": [text[:n_train]],
        "validation": [text[n_train : n_train + n_val]],
        "test": [text[n_train + n_val :]],
    }
    splits = open_text_splits(str(path), validation_fraction=0.13, test_fraction=0.21)
    assert [splits.num_chars(s) for s in ("train", "validation", "test")] == [
        n_train,
        n_val,
        n_test,
    ]


def test_a_text_file_is_read_in_chunks_and_bad_utf8_names_its_line(tmp_path):
    path = tmp_path / "big.txt"
    good = "line of text é\n" * 400
    path.write_bytes(good.encode() + b"caf\xe9\n")
    batches = list(open_text_splits(str(path), chunk_bytes=256).batches("train"))
    assert len(batches) > 10 and all(len(b.texts[0].encode()) <= 256 + 3 for b in batches)
    assert [b.continued for b in batches] == [False] + [True] * (len(batches) - 1)
    assert [b.open_end for b in batches] == [True] * (len(batches) - 1) + [False]
    with pytest.raises(ValueError) as err:
        load_text_splits(str(path), validation_fraction=0.0, test_fraction=0.0, chunk_bytes=64)
    assert str(err.value).startswith(f"{path}, line 401, column 4: byte 0xe9 is not UTF-8")


def test_an_empty_held_out_part_is_one_empty_document(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("abcdef")
    parts = load_text_splits(str(path), validation_fraction=0.0, test_fraction=0.5)
    assert parts == {"train": ["abc"], "validation": [""], "test": ["def"]}


def test_table_rows_are_joined_and_cut_a_batch_at_a_time(tmp_path, monkeypatch):
    """Rows read :data:`ROWS_PER_BATCH` at a time give the text of all rows joined by
    newlines, cut by character fraction."""
    import pandas as pd

    monkeypatch.setattr(text_module, "ROWS_PER_BATCH", 3)
    rows = [f"{i}:" + random_text(random.Random(i), i % 7) for i in range(40)]
    path = tmp_path / "rows.csv"
    pd.DataFrame({"text": [r.replace("\x00", "") for r in rows]}).to_csv(path, index=False)
    rows = list(pd.read_csv(path, keep_default_na=False)["text"])
    joined = "\n".join(rows)
    parts = load_text_splits(str(path), validation_fraction=0.2, test_fraction=0.3)
    n = len(joined)
    n_train, n_val = n - int(n * 0.2) - int(n * 0.3), int(n * 0.2)
    assert parts == {
        "train": [joined[:n_train]],
        "validation": [joined[n_train : n_train + n_val]],
        "test": [joined[n_train + n_val :]],
    }


# ---- the char tokenizer: counts and lookup -------------------------------------------------
def test_counts_build_the_tokenizer_that_the_text_builds():
    rng = random.Random(0)
    train, held_out = random_text(rng, 5000, MIXED[:30]), random_text(rng, 800)
    counts = CharCounts()
    for start in range(0, len(train), 777):
        counts.add(train[start : start + 777])
    assert counts.as_dict() == Counter(train)
    held = CharCounts()
    held.add(held_out)
    for min_frequency in (1, 40):
        from_text = build_char_tokenizer(train, held_out=[held_out], min_frequency=min_frequency)
        from_counts = char_tokenizer_from_counts(
            counts.as_dict(), held_out=held.as_dict(), min_frequency=min_frequency
        )
        assert from_counts.get_vocab() == from_text.get_vocab()
        assert from_counts.unknown_char_count == from_text.unknown_char_count > 0


def test_the_lookup_table_encodes_as_the_tokenizer_does(tmp_path):
    """Random text with unknown characters, newlines, \\r, non-BMP characters and a special
    token's spelling: the table's ids are the tokenizer's own, built or loaded from disk."""
    from transformers import AutoTokenizer

    rng = random.Random(1)
    known = "ab\ncd\r<eos>😀漢 "  # part of MIXED: the rest maps to <unk>
    tokenizer = build_char_tokenizer(random_text(rng, 500, known))
    tokenizer.save_pretrained(tmp_path / "tok")
    loaded = AutoTokenizer.from_pretrained(tmp_path / "tok")
    for tok in (tokenizer, loaded):
        table = char_lookup(tok)
        for text in (random_text(rng, 3000), "plain ascii\n", "", "😀", "𝔘"):
            expected = tok(text, add_special_tokens=False)["input_ids"]
            assert table.encode(text).tolist() == expected, text
    assert tokenizer.unk_token_id in table.encode(MIXED).tolist()
    assert char_lookup(ignore_whitespace(build_char_tokenizer("ab"))) is None


def test_subword_pieces_encode_as_the_whole_text():
    """A long document is cut just before a newline or space that follows a non-space: the
    byte-level BPE ids of the pieces are those of the whole text."""
    from tests.helpers.tiny_pretrained import tiny_gpt2_tokenizer

    tokenizer = tiny_gpt2_tokenizer(chars=20_000)
    rng = random.Random(2)
    words = ["ROMEO:", "\n", "\n\n", "  ", " ", "thee", "'s", "’tis", "é", "—", "\t", "1984", "!"]
    text = "".join(rng.choice(words) for _ in range(3000))
    whole = tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
    cuts = sorted({safe_cut(text, limit) for limit in range(0, len(text), 23)} - {0})
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    assert len(pieces) > 100 and "".join(pieces) == text
    assert all(text[c] in "\n " and not text[c - 1].isspace() for c in cuts)
    encoded = tokenizer(pieces, add_special_tokens=False)["input_ids"]
    assert [i for piece in encoded for i in piece] == whole


# ---- the prepared corpus --------------------------------------------------------------------
@pytest.mark.slow
def test_the_char_corpus_is_the_old_encoding_of_the_embedded_plays():
    """The shipped recipe's data: the same tokenizer and the same ids as the tokenizer built
    from the joined training plays and ``encode_corpus`` of every split."""
    corpus = prepare_char_corpus(TextDataSection(source="shakespeare"))
    splits = load_text_splits("shakespeare")
    held_out = splits["validation"] + splits["test"]
    tokenizer = build_char_tokenizer("".join(splits["train"]), held_out=held_out)
    assert corpus.tokenizer.get_vocab() == tokenizer.get_vocab()
    assert corpus.tokenizer.unknown_char_count == tokenizer.unknown_char_count
    for split, documents in splits.items():
        old = encode_corpus(tokenizer, documents).numpy()
        assert np.array_equal(corpus.tokens(split), old), split
        assert corpus.ids[split].lengths.tolist() == [len(d) + 1 for d in documents]


def test_a_long_text_read_in_chunks_is_the_old_encoding(tmp_path):
    rng = random.Random(3)
    path = tmp_path / "long.txt"
    text = random_text(rng, 20_000, "abc\n" * 20 + MIXED)  # MIXED's characters the rare ones
    path.write_bytes(text.encode())
    data = TextDataSection(source=str(path), validation_fraction=0.1, test_fraction=0.1)
    corpus = prepare_char_corpus(data, min_frequency=200, chunk_bytes=100)
    splits = load_text_splits(str(path), validation_fraction=0.1, test_fraction=0.1)
    tokenizer = build_char_tokenizer(
        splits["train"][0], held_out=splits["validation"] + splits["test"], min_frequency=200
    )
    assert corpus.tokenizer.get_vocab() == tokenizer.get_vocab()
    assert corpus.facts["unknown_chars"] == tokenizer.unknown_char_count > 0
    for split, documents in splits.items():
        assert np.array_equal(corpus.tokens(split), encode_corpus(tokenizer, documents).numpy())


def test_a_subword_corpus_read_in_chunks_is_the_old_encoding(tmp_path, monkeypatch):
    """A pretrained tokenizer encodes chunks carried over to a safe cut, in small pieces and
    batches: the ids of the whole documents, the separator first."""
    from tests.helpers.tiny_pretrained import tiny_gpt2_tokenizer

    monkeypatch.setattr(corpus_module, "PIECE_CHARS", 40)
    monkeypatch.setattr(corpus_module, "ENCODE_BATCH_CHARS", 100)
    tokenizer = tiny_gpt2_tokenizer(chars=20_000)
    rng = random.Random(4)
    words = ["ROMEO:", "\n", "\n\n", " ", "thee", "’tis", "é", "—", "1984", "!", "😀"]
    path = tmp_path / "words.txt"
    path.write_text("".join(rng.choice(words) for _ in range(4000)), encoding="utf-8")
    data = TextDataSection(source=str(path), validation_fraction=0.1, test_fraction=0.1)
    eos = tokenizer.eos_token_id
    corpus = prepare_tokenized_corpus(data, tokenizer, {"name": "tiny"}, eos, chunk_bytes=64)
    splits = load_text_splits(str(path), validation_fraction=0.1, test_fraction=0.1)
    for split, documents in splits.items():
        old = encode_corpus(tokenizer, documents, eos).numpy()
        assert np.array_equal(corpus.tokens(split), old), split
    assert corpus.facts["characters"] == {s: len(d[0]) for s, d in splits.items()}


def test_a_second_job_reuses_the_prepared_corpus(tmp_path, monkeypatch):
    """``prepare_data`` then two ``build_job``: one preparation, then the same folder mapped
    (the same tokenizer and ids), recorded as reused; eval_results' record comes from it."""
    monkeypatch.setenv("HFATTN_PREPARED_DIR", str(tmp_path / "cache"))
    recipe = load_recipe(write_recipe(tmp_path))
    prepared = TASK.prepare_data(recipe)
    assert not prepared.reused and (prepared.folder / TOKENIZER_FOLDER).is_dir()
    jobs = [build_job(load_recipe(write_recipe(tmp_path))) for _ in range(2)]
    for job in jobs:
        assert job.data_preparation["reused"] is True
        assert job.data_preparation["folder"] == str(prepared.folder)
    first, second = jobs
    assert first.tokenizer.get_vocab() == second.tokenizer.get_vocab()
    assert first.tokenizer.unknown_char_count == second.tokenizer.unknown_char_count
    ids = [np.concatenate([w.numpy().ravel() for w in job.batches.epoch(0)]) for job in jobs]
    assert np.array_equal(*ids) and len(ids[0]) > 1000
    facts = json.loads((prepared.folder / "corpus.json").read_text())
    assert facts["tokens"]["train"] == len(first.batches.ids)
    assert list((tmp_path / "cache").iterdir()) != []  # the cache is where the variable says


def test_a_pretrained_recipe_maps_the_ids_of_its_own_tokenizer(tmp_path, monkeypatch):
    """GPT-2's recipe: ``prepare_data`` loads the tokenizer alone, ``build_job`` the model and
    its tokenizer (eos made pad) and maps the same folder: the ids of ``encode_corpus`` with the
    model's tokenizer, eos between documents."""
    from transformers import AutoTokenizer

    from tests.helpers.tiny_pretrained import tiny_gpt2_folder

    monkeypatch.setenv("HFATTN_PREPARED_DIR", str(tmp_path / "cache"))
    base = tiny_gpt2_folder(tmp_path)
    path = tmp_path / "plays.txt"
    path.write_text("ROMEO:\nBut, soft! what light through yonder window breaks?\n\n" * 40)
    overrides = {
        "model.pretrained": base,
        "data.source": path,
        "output_dir": tmp_path / "run",
        "training.block_size": 32,
        "evaluation.seq_len": 32,
        "generation.max_new_tokens": 12,
        "hub.base_model": "openai-community/gpt2",
    }
    recipe_file = Path(__file__).parents[2] / "recipes" / "gpt2_shakespeare.yaml"
    recipe = load_recipe(recipe_file, [f"{k}={v}" for k, v in overrides.items()])
    prepared = TASK.prepare_data(recipe)
    job = build_job(recipe)
    assert not prepared.reused and job.data_preparation["reused"] is True
    assert job.data_preparation["folder"] == str(prepared.folder)
    tokenizer = AutoTokenizer.from_pretrained(base)
    splits = load_text_splits(str(path), validation_fraction=0.05, test_fraction=0.05)
    old = encode_corpus(tokenizer, splits["train"], tokenizer.eos_token_id).numpy()
    assert np.array_equal(job.batches.ids, old)


def test_a_changed_source_or_min_frequency_prepares_anew(tmp_path, monkeypatch):
    monkeypatch.setenv("HFATTN_PREPARED_DIR", str(tmp_path / "cache"))
    path = tmp_path / "input.txt"
    path.write_text("ROMEO: abc\n" * 200)
    data = TextDataSection(source=str(path), validation_fraction=0.1, test_fraction=0.1)
    first = prepare_char_corpus(data)
    assert prepare_char_corpus(data).prepared.folder == first.prepared.folder
    rarer = prepare_char_corpus(data, min_frequency=300)
    assert not rarer.prepared.reused and rarer.prepared.folder != first.prepared.folder
    assert len(rarer.tokenizer) < len(first.tokenizer)
    path.write_text("JULIET: xyz\n" * 200)  # the file rewritten
    changed = prepare_char_corpus(data)
    assert not changed.prepared.reused
    assert changed.prepared.folder not in (first.prepared.folder, rarer.prepared.folder)
    assert "x" in changed.tokenizer.get_vocab() and "x" not in first.tokenizer.get_vocab()


# ---- batchers over the map -------------------------------------------------------------------
class OldStreams:
    """The stateful batcher as it was: the streams stacked (copied) from a tensor."""

    def __init__(self, ids, batch_size, seq_len):
        stream_len = (len(ids) - 1) // batch_size
        self.streams = torch.stack(
            [ids[i * stream_len : (i + 1) * stream_len + 1] for i in range(batch_size)]
        )
        self.seq_len = seq_len

    def epoch(self, start=0):
        windows = -(-(self.streams.shape[1] - 1) // self.seq_len)
        for k in range(start, windows):
            yield self.streams[:, k * self.seq_len : (k + 1) * self.seq_len + 1]


def old_windows(ids, batch_size, seq_len, shift, seed, epoch, start=0):
    """The stateless batcher as it was: every start listed, then indexed in a tensor."""
    starts = torch.arange(0, len(ids) - seq_len - 1, shift or seq_len)
    generator = torch.Generator().manual_seed(seed + epoch)
    order = starts[torch.randperm(len(starts), generator=generator)]
    offsets = torch.arange(seq_len + 1)
    for k in range(start, len(starts) // batch_size):
        rows = order[k * batch_size : (k + 1) * batch_size]
        yield ids[rows[:, None] + offsets]


def test_batchers_over_the_map_give_the_old_batches_bit_for_bit(tmp_path):
    values = np.random.default_rng(5).integers(0, 300, size=5003).astype(np.uint16)
    with RaggedWriter(tmp_path, "split", np.uint16) as writer:
        writer.add_flat(values[:2000], [2000])
        writer.extend_row(values[2000:])  # one document written in two pieces
        mapped = writer.close()
    assert isinstance(mapped.values, np.memmap) and mapped.lengths.tolist() == [5003]
    ids = torch.from_numpy(values.astype(np.int64))

    def same(new, old):
        new, old = list(new), list(old)
        assert len(new) == len(old) > 0
        for a, b in zip(new, old, strict=True):
            assert a.dtype == torch.long and torch.equal(a, b)

    streams = StreamBatches(mapped.values, batch_size=7, seq_len=30)
    same(streams.epoch(0), OldStreams(ids, 7, 30).epoch())
    same(streams.epoch(1, start=5), OldStreams(ids, 7, 30).epoch(start=5))
    for shift in (None, 1, 13):
        windows = WindowBatches(mapped.values, 8, 20, shift=shift, seed=3)
        for epoch in (0, 2):
            same(windows.epoch(epoch), old_windows(ids, 8, 20, shift, 3, epoch))
        same(windows.epoch(1, start=4), old_windows(ids, 8, 20, shift, 3, 1, start=4))
    blocks = PackedBlocks(mapped.values, 4, 64, seed=9)
    same(blocks.epoch(1), old_windows(ids, 4, 64, 64, 9, 1))


# ---- memory ------------------------------------------------------------------------------------
def test_preparing_a_large_text_holds_a_chunk_not_the_corpus(tmp_path, monkeypatch):
    """Preparing a 10 MB and a 20 MB text, read in 128 kB chunks, allocates (tracemalloc:
    Python objects and numpy arrays) the same peak, a small multiple of the chunk and far
    below the corpus: neither the text, nor its ids, nor a list of them is ever held whole."""
    monkeypatch.setattr("hfattn.tokenization.characters.COUNT_SLICE", 1 << 16)
    chunk = 1 << 17
    block = (random_text(random.Random(6), 2000) + "plain ascii text\n" * 500).encode()
    peaks = []
    for megabytes in (10, 20):
        monkeypatch.setenv("HFATTN_PREPARED_DIR", str(tmp_path / f"cache{megabytes}"))
        path = tmp_path / f"big{megabytes}.txt"
        with open(path, "wb") as handle:
            while handle.tell() < megabytes << 20:
                handle.write(block)
        data = TextDataSection(source=str(path), validation_fraction=0.05, test_fraction=0.05)
        tracemalloc.start()
        try:
            corpus = prepare_char_corpus(data, chunk_bytes=chunk)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        assert sum(corpus.facts["characters"].values()) > 0.9 * path.stat().st_size
    assert abs(peaks[1] - peaks[0]) < chunk  # twice the corpus, the same peak
    assert peaks[1] < 32 * chunk < path.stat().st_size / 5, peaks
