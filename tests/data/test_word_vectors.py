"""Word vectors: word2vec / fastText training, GloVe and word2vec text files, the embedding
matrix of a vocabulary, and a classifier over frozen vectors."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from hfattn import RNNClassifierConfig, RNNForSequenceClassification
from hfattn.data.word_vectors import (
    embedding_matrix,
    load_word_vectors,
    save_word_vectors,
    train_word_vectors,
)

ANIMALS = ["cat", "dog", "horse", "cow"]
VEHICLES = ["car", "bus", "truck", "van"]


def two_topic_corpus(n: int = 1500, seed: int = 0) -> list[list[str]]:
    """Animals and vehicles used in different contexts (the distributional hypothesis)."""
    rng = random.Random(seed)
    texts = []
    for _ in range(n):
        if rng.random() < 0.5:
            texts.append(["a", rng.choice(ANIMALS), "eats", "grass", "and", "sleeps", "outside"])
        else:
            texts.append(["a", rng.choice(VEHICLES), "drives", "on", "the", "busy", "road"])
    return texts


def cosine(a, b) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def mean_cosine(vectors, pairs) -> float:
    return float(np.mean([cosine(vectors[a], vectors[b]) for a, b in pairs]))


def topic_gap(vectors) -> float:
    """Mean cosine of same-topic pairs minus that of cross-topic pairs, computed here."""
    same = [(a, b) for group in (ANIMALS, VEHICLES) for a in group for b in group if a < b]
    cross = [(a, b) for a in ANIMALS for b in VEHICLES]
    return mean_cosine(vectors, same) - mean_cosine(vectors, cross)


@pytest.fixture(scope="module")
def corpus():
    return two_topic_corpus()


@pytest.mark.parametrize("method", ["word2vec", "fasttext"])
@pytest.mark.parametrize("architecture", ["cbow", "skipgram"])
def test_words_in_the_same_contexts_get_closer_vectors(corpus, method, architecture):
    vectors = train_word_vectors(
        corpus, method=method, architecture=architecture, vector_size=16, window=2, epochs=10
    )
    assert vectors.vector_size == 16
    assert set(ANIMALS + VEHICLES) <= set(vectors.key_to_index)
    assert topic_gap(vectors) > 0.3  # measured: 0.50 (fastText CBOW) to 0.74
    # each animal's nearest neighbour among the eight nouns is another animal
    for word in ANIMALS:
        others = [w for w in ANIMALS + VEHICLES if w != word]
        assert max(others, key=lambda w: cosine(vectors[word], vectors[w])) in ANIMALS


def test_training_is_deterministic_and_rejects_bad_choices(corpus):
    a = train_word_vectors(corpus[:200], vector_size=8, epochs=2, seed=3)
    b = train_word_vectors(corpus[:200], vector_size=8, epochs=2, seed=3)
    np.testing.assert_array_equal(a.vectors, b.vectors)
    c = train_word_vectors(corpus[:200], vector_size=8, epochs=2, seed=4)
    assert not np.array_equal(a.vectors, c.vectors)
    # a string is a whitespace-tokenised text, not a sequence of characters
    d = train_word_vectors([" ".join(t) for t in corpus[:200]], vector_size=8, epochs=2, seed=3)
    np.testing.assert_array_equal(a.vectors, d.vectors)
    with pytest.raises(ValueError, match="architecture must be one of cbow, skipgram"):
        train_word_vectors(corpus[:10], architecture="glove")
    with pytest.raises(ValueError, match="method must be one of word2vec, fasttext"):
        train_word_vectors(corpus[:10], method="glove")


# --------------------------------------------------------------------------- files

GLOVE_TEXT = "the 0.1 -0.2 0.3\ncat 1.5 2.5 -3.25\nnaïve 0 0 1e-3\n"
EXPECTED = {"the": [0.1, -0.2, 0.3], "cat": [1.5, 2.5, -3.25], "naïve": [0.0, 0.0, 1e-3]}


@pytest.mark.parametrize("text", [GLOVE_TEXT, "3 3\n" + GLOVE_TEXT], ids=["glove", "word2vec"])
def test_text_files_load_in_both_layouts(tmp_path, text):
    path = tmp_path / "vectors.txt"
    path.write_text(text, encoding="utf-8")
    vectors = load_word_vectors(path)
    assert vectors.index_to_key == list(EXPECTED)
    for word, values in EXPECTED.items():
        np.testing.assert_allclose(vectors[word], values, rtol=1e-6)


@pytest.mark.parametrize("header", [False, True])
def test_saved_vectors_read_back_unchanged(corpus, tmp_path, header):
    vectors = train_word_vectors(corpus[:300], vector_size=8, epochs=1)
    path = save_word_vectors(vectors, tmp_path / "out.txt", header=header)
    first = path.read_text(encoding="utf-8").splitlines()[0].split()
    assert (len(first) == 2) is header  # "count dim" or the first word's vector
    assert not list(tmp_path.glob("*.tmp"))
    loaded = load_word_vectors(path, header=header)
    assert loaded.index_to_key == vectors.index_to_key
    np.testing.assert_allclose(loaded.vectors, vectors.vectors, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "text, message",
    [
        (GLOVE_TEXT + "dog 1.0 2.0\n", "line 4: expected a word and 3 numbers"),
        ("the 0.1 0.2 0.3\ncat 0.4 x 0.6\n", "line 2: 'x' (word 'cat') is not a number"),
        ("the 0.1 0.2 0.3\n\ncat 0.4 0.5 0.6\n", "line 2: expected a word and 3 numbers"),
        ("5 3\n" + GLOVE_TEXT, "line 1: the header announces 5 vectors but the file has 3"),
        ("", "no word vectors in the file"),
    ],
)
def test_malformed_files_name_the_file_and_the_line(tmp_path, text, message):
    path = tmp_path / "bad.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError) as error:
        load_word_vectors(path)
    assert str(path) in str(error.value) and message in str(error.value)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="glove.6B.100d.txt"):
        load_word_vectors(tmp_path / "glove.6B.100d.txt")


# --------------------------------------------------------------------------- matrix

VOCAB = {"<pad>": 0, "<unk>": 1, "the": 2, "cat": 3, "zebra": 4, "naïve": 5, "quokka": 6}


@pytest.fixture
def glove(tmp_path):
    path = tmp_path / "glove.txt"
    path.write_text(GLOVE_TEXT, encoding="utf-8")
    return load_word_vectors(path)


def test_embedding_matrix_copies_known_words_and_zeroes_the_rest(glove):
    matrix, coverage = embedding_matrix(glove, VOCAB, 3, special_tokens=["<pad>", "<unk>"])
    assert matrix.shape == (7, 3) and matrix.dtype == torch.float32
    for word, values in EXPECTED.items():
        torch.testing.assert_close(matrix[VOCAB[word]], torch.tensor(values))
    for word in ("<pad>", "<unk>", "zebra", "quokka"):
        assert matrix[VOCAB[word]].abs().sum() == 0
    assert coverage == pytest.approx(3 / 5)  # the, cat, naïve of 5 non-special words
    _, with_specials = embedding_matrix(glove, VOCAB)
    assert with_specials == pytest.approx(3 / 7)


def test_unknown_words_can_get_seeded_random_rows(glove):
    a, _ = embedding_matrix(glove, VOCAB, unknown="random", seed=1, special_tokens=["<pad>"])
    b, _ = embedding_matrix(glove, VOCAB, unknown="random", seed=1, special_tokens=["<pad>"])
    c, _ = embedding_matrix(glove, VOCAB, unknown="random", seed=2, special_tokens=["<pad>"])
    torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert not torch.equal(a[VOCAB["zebra"]], c[VOCAB["zebra"]])
    assert a[VOCAB["<pad>"]].abs().sum() == 0 and a[VOCAB["<unk>"]].abs().sum() > 0
    torch.testing.assert_close(a[VOCAB["cat"]], torch.tensor(EXPECTED["cat"]))
    # random rows have the spread of the known vectors' entries
    known = {"w": np.ones(4)} | {f"x{i}": np.zeros(4) for i in range(3)}
    vocab = {word: i for i, word in enumerate(known)} | {f"u{i}": 4 + i for i in range(2000)}
    big, coverage = embedding_matrix(known, vocab, unknown="random")
    assert coverage == pytest.approx(4 / 2004)
    known_std = float(np.std(np.stack(list(known.values())), ddof=1))  # 4 ones in 16: 0.447
    assert big[4:].std().item() == pytest.approx(known_std, rel=0.05)


def test_embedding_matrix_checks_its_arguments(glove):
    with pytest.raises(ValueError, match="dim is 100 but the word vectors have size 3"):
        embedding_matrix(glove, VOCAB, 100)
    with pytest.raises(ValueError, match="unknown must be one of zero, random"):
        embedding_matrix(glove, VOCAB, unknown="mean")
    with pytest.raises(ValueError, match="num_rows"):
        embedding_matrix(glove, VOCAB, num_rows=5)
    matrix, _ = embedding_matrix(glove, VOCAB, num_rows=10)
    assert matrix.shape == (10, 3)


def test_fasttext_fills_unseen_words_from_character_ngrams(corpus):
    vectors = train_word_vectors(corpus, method="fasttext", vector_size=16, window=2, epochs=5)
    vocab = {"<pad>": 0, "horse": 1, "horses": 2}
    matrix, coverage = embedding_matrix(vectors, vocab, special_tokens=["<pad>"])
    assert coverage == 0.5  # "horses" was never seen ...
    assert matrix[2].abs().sum() > 0  # ... but its n-grams give it a vector near "horse"
    assert cosine(matrix[2].numpy(), vectors["horse"]) > cosine(matrix[2].numpy(), vectors["bus"])


# --------------------------------------------------------------------------- classifier


def test_frozen_pretrained_vectors_stay_unchanged_while_the_classifier_trains(glove, tmp_path):
    matrix, _ = embedding_matrix(glove, VOCAB, 3, special_tokens=["<pad>", "<unk>"])
    config = RNNClassifierConfig(
        vocab_size=len(VOCAB), embedding_dim=3, hidden_size=4, bidirectional=True,
        freeze_embeddings=True,
    )  # fmt: skip
    model = RNNForSequenceClassification(config)
    model.set_embedding_matrix(matrix)
    with pytest.raises(ValueError, match=r"\[vocab_size, embedding_dim\] = \(7, 3\)"):
        model.set_embedding_matrix(torch.zeros(7, 4))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)  # every parameter handed over
    ids = torch.tensor([[2, 3, 5, 0], [4, 6, 2, 3]])
    loss = model(input_ids=ids, attention_mask=(ids != 0).long(), labels=torch.tensor([1, 0])).loss
    loss.backward()
    optimizer.step()
    assert model.embeddings.weight.grad is None
    torch.testing.assert_close(model.embeddings.weight, matrix, rtol=0, atol=0)
    changed = [n for n, p in model.named_parameters() if not torch.equal(p, before[n])]
    assert "embeddings.weight" not in changed and "classifier.weight" in changed
    assert any(n.startswith("rnn.") for n in changed)
    # the vectors and the freeze survive saving
    model.save_pretrained(tmp_path / "model")
    loaded = RNNForSequenceClassification.from_pretrained(tmp_path / "model")
    assert not loaded.embeddings.weight.requires_grad
    torch.testing.assert_close(loaded.embeddings.weight, matrix, rtol=0, atol=0)
