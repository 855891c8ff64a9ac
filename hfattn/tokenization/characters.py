"""Character-level tokenizer built with the ``tokenizers`` library.

Every character (space and newline included) is one token; ``decode(encode(text)) == text``
for text inside the vocabulary, and each character outside it maps to one ``<unk>``. Text that
spells a special token (``"<eos>"``) is read as its characters, never as that token
(``split_special_tokens``). The result is a ``transformers`` fast tokenizer, saved next to the
model and loaded by ``AutoTokenizer.from_pretrained``.

A corpus of any size gets the same tokenizer without a string of its training text: its
characters are counted a chunk at a time (:class:`CharCounts`, ``np.bincount`` over code
points) and the tokenizer built from the counts (:func:`char_tokenizer_from_counts`, the one
builder :func:`build_char_tokenizer` also calls); the corpus is then encoded by a lookup table
of code points (:func:`char_lookup`, a :class:`CharTable`), which gives the tokenizer's own ids
at numpy speed.

A Python string can hold what no tokenizer encodes: a lone surrogate (``"\udcff"``, what
undecodable bytes on the command line become). :func:`require_text` refuses it with a message
naming the input.

What a tokenizer cannot represent is reported, for any vocabulary (character, word, BPE,
WordPiece): :func:`warn_unknown` names the characters or words of an input that became
``<unk>`` (``hfattn generate``, ``translate`` and ``classify`` call it), and says so plainly
when the whole input did, in the words of :mod:`hfattn.tokenization.input_text` (the Spaces'
too). :func:`ignore_whitespace` makes a character tokenizer read symbols
whatever their spacing (the Reber-grammar classifier's ``tokenizer.whitespace: ignore``).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping

import numpy as np
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from ..storage.ragged import ids_dtype
from .input_text import unknown_pieces, unknown_warning

logger = logging.getLogger(__name__)

SPECIAL_TOKENS = {
    "pad_token": "<pad>",
    "unk_token": "<unk>",
    "bos_token": "<bos>",
    "eos_token": "<eos>",
}
"""Special tokens, in id order 0..3 (matching the ``CharRNNConfig`` defaults)."""
BMP = 0x10000
"""Code points of the Basic Multilingual Plane, U+0000 to U+FFFF (above: emoji, rare scripts)."""
COUNT_SLICE = 1 << 20
"""Code points counted by one ``np.bincount`` (:class:`CharCounts`)."""


def build_char_tokenizer(
    text: str,
    *,
    held_out: Iterable[str] = (),
    min_frequency: int = 1,
    model_max_length: int = 1_000_000,
) -> PreTrainedTokenizerFast:
    """Build a character tokenizer whose vocabulary is the characters of ``text``
    (:func:`char_tokenizer_from_counts` of their counts).

    Args:
        text: the training text; characters seen at least ``min_frequency`` times get an id
            (sorted by code point after the four special tokens).
        held_out: other texts (validation / test) checked against the vocabulary: the number
            of their characters that will map to ``<unk>`` is logged and stored on the
            tokenizer as ``unknown_char_count``.
        min_frequency: rarer characters are left out (and become ``<unk>``).
        model_max_length: the tokenizer's ``model_max_length``.
    """
    return char_tokenizer_from_counts(
        Counter(text),
        held_out=Counter("".join(held_out)),
        min_frequency=min_frequency,
        model_max_length=model_max_length,
    )


def char_tokenizer_from_counts(
    counts: Mapping[str, int],
    *,
    held_out: Mapping[str, int] | None = None,
    min_frequency: int = 1,
    model_max_length: int = 1_000_000,
) -> PreTrainedTokenizerFast:
    """The character tokenizer of a training text given the count of each of its characters
    (a ``Counter``, or :meth:`CharCounts.as_dict` of a corpus counted a chunk at a time): the
    four special tokens, then every character counted at least ``min_frequency`` times, by
    code point. ``held_out`` counts the characters of the held-out texts: those outside the
    vocabulary, and the training characters left out, are logged and stored as the
    tokenizer's ``unknown_char_count`` (see :func:`build_char_tokenizer`).

    Raises:
        ValueError: ``min_frequency`` below 1.
    """
    if min_frequency < 1:
        raise ValueError(f"min_frequency must be >= 1, got {min_frequency}")
    chars = sorted(c for c, n in counts.items() if n >= min_frequency)
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS.values())}
    for ch in chars:
        vocab.setdefault(ch, len(vocab))

    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=SPECIAL_TOKENS["unk_token"]))
    backend.pre_tokenizer = _every_character()
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,
        split_special_tokens=True,
        **SPECIAL_TOKENS,
    )
    unknown = sum(n for c, n in (held_out or {}).items() if c not in vocab) + sum(
        n for n in counts.values() if n < min_frequency
    )
    tokenizer.unknown_char_count = unknown
    logger.info(
        "char tokenizer: %d characters + %d special tokens; %d characters map to <unk>",
        len(chars),
        len(SPECIAL_TOKENS),
        unknown,
    )
    return tokenizer


def _every_character():
    """The pre-tokenizer of the character tokenizer: every character its own piece."""
    return pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")


def code_points(text: str) -> np.ndarray:
    """The Unicode code points of ``text`` as an array, without a Python loop: the bytes of
    an ASCII text (``uint8``), else numpy's UCS-4 copy of the string (``uint32``)."""
    if text.isascii():
        return np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    return np.array(text).reshape(1).view(np.uint32)


class CharCounts:
    """How often each character occurs in the texts :meth:`add` ed: ``np.bincount`` over
    their code points, :data:`COUNT_SLICE` at a time (memory bounded by a slice, any text
    size), for the Basic Multilingual Plane; the rare code points above it (emoji, historic
    scripts) are counted apart."""

    def __init__(self):
        self.bmp = np.zeros(BMP, dtype=np.int64)
        self.astral: Counter[int] = Counter()

    def add(self, text: str) -> None:
        """Count the characters of ``text``."""
        codes = code_points(text)
        if codes.dtype != np.uint8 and len(codes) and codes.max() >= BMP:
            astral = codes >= BMP
            values, counts = np.unique(codes[astral], return_counts=True)
            self.astral.update(dict(zip(values.tolist(), counts.tolist(), strict=True)))
            codes = codes[~astral]
        for start in range(0, len(codes), COUNT_SLICE):
            counted = np.bincount(codes[start : start + COUNT_SLICE])
            self.bmp[: len(counted)] += counted

    def as_dict(self) -> dict[str, int]:
        """``{character: count}`` of the characters seen (what ``Counter(text)`` holds)."""
        counts = {chr(code): int(self.bmp[code]) for code in np.flatnonzero(self.bmp)}
        return counts | {chr(code): n for code, n in sorted(self.astral.items())}


class CharTable:
    """The ids a character tokenizer of :func:`build_char_tokenizer` gives each code point:
    its own id for a character of the vocabulary, ``<unk>``'s for any other (a table for the
    Basic Multilingual Plane, a sorted search above it), so that :meth:`encode` is the
    tokenizer's encoding (no special tokens added, a special token's spelling read as
    characters) at numpy speed. Made by :func:`char_lookup`."""

    def __init__(self, vocab: dict[str, int], unk: int, dtype):
        self.unk = unk
        self.table = np.full(BMP, unk, dtype=dtype)
        astral = {}
        for char, index in vocab.items():
            if ord(char) < BMP:
                self.table[ord(char)] = index
            else:
                astral[ord(char)] = index
        codes = sorted(astral)  # then a sentinel above every code point: searches stay inside
        self.astral_codes = np.array([*codes, 0xFFFFFFFF], dtype=np.uint32)
        self.astral_ids = np.array([*(astral[c] for c in codes), unk], dtype=dtype)

    def encode(self, text: str) -> np.ndarray:
        """The ids of the characters of ``text``."""
        codes = code_points(text)
        if codes.dtype == np.uint8 or not len(codes) or codes.max() < BMP:
            return self.table[codes]
        astral = codes >= BMP
        ids = self.table[np.where(astral, np.uint32(0), codes)]
        wanted = codes[astral]
        at = np.searchsorted(self.astral_codes, wanted)
        ids[astral] = np.where(self.astral_codes[at] == wanted, self.astral_ids[at], self.unk)
        return ids


def char_lookup(tokenizer) -> CharTable | None:
    """The :class:`CharTable` of a character tokenizer of :func:`build_char_tokenizer` (or
    loaded from its saved folder); ``None`` for any other tokenizer (a subword vocabulary, a
    normaliser, special tokens matched in text), which then encodes text itself."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if (
        backend is None
        or not isinstance(backend.model, models.WordLevel)
        or backend.normalizer is not None
        or backend.pre_tokenizer is None
        or backend.pre_tokenizer.__getstate__() != _every_character().__getstate__()
        or not tokenizer.split_special_tokens
        or tokenizer.unk_token_id is None
    ):
        return None
    special = set(tokenizer.all_special_tokens)
    vocab = {t: i for t, i in tokenizer.get_vocab().items() if len(t) == 1 and t not in special}
    return CharTable(vocab, tokenizer.unk_token_id, ids_dtype(len(tokenizer)))


def count_unknown_chars(tokenizer: PreTrainedTokenizerFast, text: str) -> int:
    """Number of characters of ``text`` that are not in the tokenizer's vocabulary."""
    vocab = tokenizer.get_vocab()
    return sum(n for c, n in Counter(text).items() if c not in vocab)


def require_text(text: str, name: str) -> str:
    """Return ``text``, or raise ``ValueError`` naming ``name`` when it holds a lone surrogate:
    not text (no tokenizer encodes it, nothing prints it), most often an undecodable byte of a
    command-line argument (Python maps byte ``0xNN`` to ``U+DCNN``)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        code = ord(text[err.start])
        what = (
            f"byte 0x{code - 0xDC00:02x} is not UTF-8"
            if 0xDC80 <= code <= 0xDCFF
            else f"U+{code:04X} is a lone surrogate, not a character"
        )
        raise ValueError(f"{name} is not valid text: {what} (at character {err.start})") from None
    return text


def ignore_whitespace(tokenizer: PreTrainedTokenizerFast) -> PreTrainedTokenizerFast:
    """Make ``tokenizer`` drop every whitespace character before it tokenizes (a step added to
    its normaliser, so it is saved in ``tokenizer.json`` and holds wherever the tokenizer is
    loaded): with a character vocabulary ``"B P B T"`` and ``"BPBT"`` then give the same ids,
    one per symbol. Returns the tokenizer, changed in place."""
    backend = tokenizer.backend_tokenizer
    drop = normalizers.Replace(Regex(r"\s+"), "")
    backend.normalizer = (
        drop if backend.normalizer is None else normalizers.Sequence([backend.normalizer, drop])
    )
    return tokenizer


def warn_unknown(tokenizer: PreTrainedTokenizerFast, text: str, name: str) -> list[str]:
    """Log a warning naming what of ``text`` (called ``name`` in the message: ``prompt``,
    ``source 2``) the tokenizer maps to ``<unk>``, a stronger one when the whole text does: the
    words of :func:`~hfattn.tokenization.input_text.unknown_warning`, which the Spaces show too;
    returns those pieces (``[]``: nothing to warn about)."""
    pieces, message = unknown_warning(tokenizer, text, name)
    if message is not None:
        logger.warning("%s", message)
    return pieces


def encode_prompt(tokenizer: PreTrainedTokenizerFast, prompt: str) -> list[int]:
    """Ids of a generation prompt: characters outside the vocabulary become ``<unk>`` (with a
    warning naming them, :func:`warn_unknown`), a special token's spelling stays characters,
    and an empty prompt starts from ``<bos>``.

    Raises:
        ValueError: the prompt is not valid text (:func:`require_text`).
    """
    require_text(prompt, "prompt")
    if not prompt:
        return [tokenizer.bos_token_id]
    warn_unknown(tokenizer, prompt, "prompt")
    return tokenizer(prompt, add_special_tokens=False, split_special_tokens=True)["input_ids"]


__all__ = [
    "BMP",
    "SPECIAL_TOKENS",
    "CharCounts",
    "CharTable",
    "build_char_tokenizer",
    "char_lookup",
    "char_tokenizer_from_counts",
    "code_points",
    "count_unknown_chars",
    "encode_prompt",
    "ignore_whitespace",
    "require_text",
    "unknown_pieces",
    "warn_unknown",
]
