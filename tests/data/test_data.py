"""Corpora and batching: the embedded plays, files, dataset folders, streams and windows."""

import re

import pytest
import torch

from hfattn.batching.lm import StreamBatches, WindowBatches, encode_corpus
from hfattn.data.shakespeare import SPLITS, load_shakespeare, play_files, play_text, split_plays
from hfattn.data.text import load_text_splits
from hfattn.tokenization.characters import build_char_tokenizer


def test_plays_are_split_by_whole_play():
    assert len(play_files()) == 38
    train, val, test = (set(split_plays(s)) for s in ("train", "validation", "test"))
    assert val == set(SPLITS["validation"]) and test == set(SPLITS["test"])
    assert not (train & val or train & test or val & test)
    assert len(train | val | test) == 38
    with pytest.raises(ValueError, match="split must be one of"):
        split_plays("dev")


def test_play_text_uses_speaker_colon_layout():
    text = play_text("macbeth")
    blocks = text.strip().split("\n\n")
    assert len(blocks) > 500
    for block in blocks:
        speaker, *lines = block.split("\n")
        assert re.fullmatch(r"[^\n:]+:", speaker), speaker
        assert lines and all(line and not line.startswith(("_", "#", "**")) for line in lines)
    assert "MACBETH:\n" in text and "Enter" not in text.split("\n")[0]
    assert sum(map(len, load_shakespeare("test"))) > 150_000


def test_local_file_and_dataset_folder(tmp_path):
    f = tmp_path / "input.txt"
    f.write_text("abcdefghij" * 10)
    parts = load_text_splits(str(f), validation_fraction=0.1, test_fraction=0.2)
    assert [len(parts[s][0]) for s in ("train", "validation", "test")] == [70, 10, 20]
    assert "".join(parts[s][0] for s in ("train", "validation", "test")) == f.read_text()
    folder = tmp_path / "tiny_shakespeare"
    folder.mkdir()
    for split in ("train", "validation", "test"):
        (folder / f"{split}.txt").write_text(f"{split} line one\n{split} line two\n")
    parts = load_text_splits(str(folder))  # the `datasets` path, as for a Hub id
    assert parts["validation"] == ["validation line one", "validation line two"]
    with pytest.raises(FileNotFoundError, match="data.source"):
        load_text_splits("missing/input.txt")


def test_stream_batches_are_contiguous_streams():
    ids = torch.arange(1, 102)
    batches = StreamBatches(ids, batch_size=4, seq_len=6)
    windows = list(batches.epoch(0))
    assert len(windows) == len(batches) == 5  # 25 tokens per stream: 4 windows of 6 + 1 of 1
    for prev, nxt in zip(windows, windows[1:], strict=False):
        assert torch.equal(prev[:, -1], nxt[:, 0])  # last target == next first input
    # row i reads stream i in order, and every row has the same length
    row0 = torch.cat([windows[0][0]] + [w[0, 1:] for w in windows[1:]])
    assert torch.equal(row0, ids[:26])
    assert list(batches.epoch(1, start=3))[0].tolist() == windows[3].tolist()


def test_window_batches_shuffle_deterministically_and_resume():
    ids = torch.arange(200)
    batches = WindowBatches(ids, batch_size=4, seq_len=9, shift=3, seed=7)
    e0, e0_again, e1 = (list(batches.epoch(e)) for e in (0, 0, 1))
    assert all(torch.equal(a, b) for a, b in zip(e0, e0_again, strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(e0, e1, strict=True))
    assert torch.equal(list(batches.epoch(0, start=2))[0], e0[2])
    for window in e0:
        assert window.shape == (4, 10)
        assert torch.equal(window[:, 1:] - window[:, :-1], torch.ones(4, 9, dtype=torch.long))


def test_encode_corpus_marks_document_starts_with_bos():
    tok = build_char_tokenizer("ab\n")
    ids = encode_corpus(tok, ["ab", "b\n"])
    assert ids.tolist() == [
        tok.bos_token_id,
        *tok("ab")["input_ids"],
        tok.bos_token_id,
        *tok("b\n")["input_ids"],
    ]


def test_a_latin1_corpus_is_one_line_naming_the_file_and_the_line(tmp_path, capsys):
    from hfattn.cli import main
    from tests.helpers.recipe_helpers import write_recipe

    corpus = tmp_path / "latin1.txt"
    corpus.write_bytes("ROMEO:\nBut soft!\nJULIET:\nAy me, caf\u00e9!\n".encode("latin-1"))
    with pytest.raises(ValueError) as err:
        load_text_splits(str(corpus))
    message = str(err.value)
    assert message.startswith(f"{corpus}, line 4, column 11: byte 0xe9 is not UTF-8")
    assert "must be UTF-8" in message and "\n" not in message
    recipe = write_recipe(tmp_path, data={"source": str(corpus)})
    assert main(["train", str(recipe)]) == 2
    assert capsys.readouterr().err.strip() == f"error: {message}"
    assert not (tmp_path / "run" / "model.safetensors").exists()
