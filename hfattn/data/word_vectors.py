"""Word vectors for the classifiers' embeddings: train word2vec / fastText, read GloVe files.

The word embeddings of Navarro Castillo, *Técnicas de ML para PLN* (2022: word2vec CBOW and
skip-gram, fastText) and of Chollet, *Deep Learning with Python* (a frozen GloVe-100 layer) as
three steps:

- :func:`train_word_vectors`: word2vec (CBOW: predict the centre word from the mean of its
  ``2k`` context words; skip-gram: predict each context word from the centre word, better on
  rare words) or fastText (skip-gram / CBOW over character n-grams, so that unseen words get
  vectors too), trained with ``gensim``; deterministic (one worker, a seed).
- :func:`load_word_vectors` / :func:`save_word_vectors`: text files in the GloVe layout (one
  ``word x1 … xd`` line per word, no header) or the word2vec layout (a ``count dim`` header
  first); a malformed file gets an error naming the file and the line.
- :func:`embedding_matrix`: the ``[vocab_size, dim]`` matrix whose row ``i`` is the vector of
  the token with id ``i`` (Chollet, listing 5.7), plus the coverage, ready for
  ``RNNForSequenceClassification.set_embedding_matrix``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import torch

try:
    from gensim.models import FastText, KeyedVectors, Word2Vec
except ImportError as err:  # an extra: pip install 'hfattn[word-vectors]'
    raise ImportError(
        "a recipe's word_vectors: section needs gensim: pip install 'hfattn[word-vectors]'"
    ) from err

from ..models.config_checks import check_choice
from ..storage.file_io import atomic_path

METHODS = ("word2vec", "fasttext")
ARCHITECTURES = ("cbow", "skipgram")
UNKNOWN_INIT = ("zero", "random")


def train_word_vectors(
    texts: Iterable[list[str] | str],
    *,
    method: str = "word2vec",
    architecture: str = "skipgram",
    vector_size: int = 100,
    window: int = 5,
    min_count: int = 1,
    epochs: int = 5,
    negative: int = 5,
    seed: int = 0,
    **options,
) -> KeyedVectors:
    r"""Train word vectors on tokenised texts and return them (``gensim`` ``KeyedVectors``).

    With window ``k`` and negative sampling, skip-gram maximises, for each centre word ``w``
    and context word ``c`` within ``k`` positions,

    .. math:: \log\sigma(u_c^\top v_w) + \sum_{i=1}^{n} \log\sigma(-u_{c_i}^\top v_w),
              \quad c_i \sim P_n

    and CBOW the same with ``v_w`` replaced by the mean of the context words' vectors and the
    centre word as the target. fastText's ``v_w`` is the sum of the vectors of the word's
    character n-grams (3 to 6 characters), so :func:`embedding_matrix` can also fill words
    never seen in training.

    Args:
        texts: the training texts, each a list of tokens (a string is split on whitespace).
        method: ``"word2vec"`` or ``"fasttext"``.
        architecture: ``"cbow"`` or ``"skipgram"``.
        vector_size: the vectors' size ``d``.
        window: ``k``, context words on each side.
        min_count: rarer words get no vector.
        epochs: passes over the texts.
        negative: ``n``, negative samples per positive pair.
        seed: random seed; training uses one worker thread, so the result is reproducible.
        options: further ``gensim`` options (``sample``, ``alpha``, ``min_n``, ``max_n``, …).
    """
    check_choice("method", method, METHODS)
    check_choice("architecture", architecture, ARCHITECTURES)
    sentences = [text.split() if isinstance(text, str) else list(text) for text in texts]
    if not any(sentences):
        raise ValueError("texts must contain at least one token")
    model_cls = FastText if method == "fasttext" else Word2Vec
    model = model_cls(
        sentences=sentences,
        sg=int(architecture == "skipgram"),
        vector_size=vector_size,
        window=window,
        min_count=min_count,
        epochs=epochs,
        negative=negative,
        seed=seed,
        workers=1,
        **options,
    )
    return model.wv


def _has_header(path: Path) -> bool:
    """True when the first line is ``count dim`` (two integers): the word2vec layout."""
    with open(path, encoding="utf-8", errors="replace") as file:
        parts = file.readline().split()
    return len(parts) == 2 and all(p.isdigit() for p in parts)


def _find_malformed_line(path: Path, header: bool) -> str:
    """Describe the first line of ``path`` that is not ``word x1 … xd`` (or the header
    mismatch), as ``"<path>, line <n>: <problem>"``."""
    dim = count = None
    rows = 0
    with open(path, encoding="utf-8", errors="replace") as file:
        for number, line in enumerate(file, 1):
            parts = line.rstrip("\r\n").rstrip(" ").split(" ")
            if header and number == 1:
                count, dim = int(parts[0]), int(parts[1])
                continue
            if dim is None:
                dim = len(parts) - 1
            if len(parts) - 1 != dim or not parts[0]:
                return (
                    f"{path}, line {number}: expected a word and {dim} numbers separated by "
                    f"single spaces; got {len(parts) - 1} fields after {parts[0]!r}"
                )
            for value in parts[1:]:
                try:
                    float(value)
                except ValueError:
                    return f"{path}, line {number}: {value!r} (word {parts[0]!r}) is not a number"
            rows += 1
    if rows == 0:
        return f"{path}: no word vectors in the file"
    if count is not None and count != rows:
        return f"{path}, line 1: the header announces {count} vectors but the file has {rows}"
    return f"{path}: not a word-vector text file"


def load_word_vectors(path: str | os.PathLike, *, header: bool | None = None) -> KeyedVectors:
    """Read a word-vector text file: the GloVe layout (``word x1 … xd`` per line, no header,
    e.g. ``glove.6B.100d.txt``) or the word2vec layout (a ``count dim`` first line).

    Args:
        path: the file (UTF-8).
        header: whether the first line is a ``count dim`` header; ``None`` detects it (a first
            line of exactly two integers).

    Raises:
        FileNotFoundError: no such file.
        ValueError: a malformed file, naming the file and the first bad line.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"word-vector file not found: {path}")
    if header is None:
        header = _has_header(path)
    try:
        return KeyedVectors.load_word2vec_format(path, binary=False, no_header=not header)
    except (ValueError, TypeError, EOFError, IndexError) as error:
        raise ValueError(_find_malformed_line(path, header)) from error


def save_word_vectors(
    vectors: KeyedVectors, path: str | os.PathLike, *, header: bool = False
) -> Path:
    """Write ``vectors`` as a text file: GloVe layout (``header=False``) or word2vec layout
    (``header=True``). Written to a temporary name, then renamed: no half-written file."""
    path = Path(path)
    with atomic_path(path) as tmp:
        vectors.save_word2vec_format(tmp, binary=False, write_header=header)
    return path


def _vector_size(vectors: KeyedVectors | Mapping[str, np.ndarray]) -> int:
    if isinstance(vectors, KeyedVectors):
        return vectors.vector_size
    first = next(iter(vectors.values()), None)
    if first is None:
        raise ValueError("vectors is empty")
    return len(first)


def _lookup(vectors: KeyedVectors | Mapping[str, np.ndarray], word: str):
    """The vector of ``word`` and whether it is in the vectors' vocabulary; fastText vectors
    also build one from character n-grams for other words (returned with ``False``)."""
    if isinstance(vectors, KeyedVectors):
        if vectors.has_index_for(word):
            return vectors[word], True
        if getattr(vectors, "bucket", 0):  # FastTextKeyedVectors with n-gram buckets
            return vectors.get_vector(word), False
        return None, False
    vector = vectors.get(word)
    return vector, vector is not None


def embedding_matrix(
    vectors: KeyedVectors | Mapping[str, np.ndarray],
    vocab: Mapping[str, int],
    dim: int | None = None,
    *,
    num_rows: int | None = None,
    unknown: str = "zero",
    seed: int = 0,
    special_tokens: Iterable[str] = (),
) -> tuple[torch.Tensor, float]:
    """The embedding matrix of a vocabulary from word vectors, and the vocabulary's coverage.

    Row ``vocab[w]`` is the vector of ``w`` when the vectors know ``w`` (Chollet, listing
    5.7). Other rows are zeros (``unknown="zero"``, Chollet's choice) or drawn from
    ``N(0, σ²)`` with ``σ`` the standard deviation of the known vectors' entries
    (``unknown="random"``, seeded by ``seed``); fastText vectors fill them from the word's
    character n-grams instead. ``special_tokens`` (padding, unknown, …) always get zeros.

    Args:
        vectors: ``KeyedVectors`` (from :func:`train_word_vectors` / :func:`load_word_vectors`)
            or a mapping word → vector.
        vocab: token → id, e.g. ``tokenizer.get_vocab()``.
        dim: the expected vector size (checked); default: the vectors' own.
        num_rows: rows of the matrix (the model's ``vocab_size``); default ``max id + 1``.
        unknown: ``"zero"`` or ``"random"``.
        seed: seed of the random rows.
        special_tokens: tokens left at zero and not counted in the coverage.

    Returns:
        ``(matrix [num_rows, dim] float32, coverage)``, ``coverage`` = the share of the
        vocabulary (special tokens excluded) found in the vectors' own vocabulary.
    """
    check_choice("unknown", unknown, UNKNOWN_INIT)
    size = _vector_size(vectors)
    if dim is not None and dim != size:
        raise ValueError(f"dim is {dim} but the word vectors have size {size}")
    if not vocab:
        raise ValueError("vocab is empty")
    rows = max(vocab.values()) + 1 if num_rows is None else num_rows
    if rows <= max(vocab.values()):
        raise ValueError(f"num_rows ({rows}) must exceed the largest id ({max(vocab.values())})")
    matrix = torch.zeros(rows, size)
    filled = torch.zeros(rows, dtype=torch.bool)
    specials = set(special_tokens)
    found = counted = 0
    for word, index in vocab.items():
        if word in specials:
            continue
        counted += 1
        vector, known = _lookup(vectors, word)
        found += known
        if vector is not None:
            matrix[index] = torch.tensor(np.asarray(vector, dtype=np.float32))
            filled[index] = True
    if unknown == "random":
        empty = ~filled
        empty[[vocab[w] for w in specials if w in vocab]] = False
        std = matrix[filled].std().item() if int(filled.sum()) > 1 else 1.0
        generator = torch.Generator().manual_seed(seed)
        noise = torch.randn(rows, size, generator=generator) * (std if math.isfinite(std) else 1.0)
        matrix[empty] = noise[empty]
    return matrix, (found / counted if counted else 0.0)


__all__ = [
    "ARCHITECTURES",
    "METHODS",
    "UNKNOWN_INIT",
    "embedding_matrix",
    "load_word_vectors",
    "save_word_vectors",
    "train_word_vectors",
]
