"""Character-level tokenizer built with the ``tokenizers`` library.

Every character (space and newline included) is one token; ``decode(encode(text)) == text``
for text inside the vocabulary, and each character outside it maps to one ``<unk>``. Text that
spells a special token (``"<eos>"``) is read as its characters, never as that token
(``split_special_tokens``). The result is a ``transformers`` fast tokenizer, saved next to the
model and loaded by ``AutoTokenizer.from_pretrained``.

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
from collections.abc import Iterable

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from .input_text import unknown_pieces, unknown_warning

logger = logging.getLogger(__name__)

SPECIAL_TOKENS = {
    "pad_token": "<pad>",
    "unk_token": "<unk>",
    "bos_token": "<bos>",
    "eos_token": "<eos>",
}
"""Special tokens, in id order 0..3 (matching the ``CharRNNConfig`` defaults)."""


def build_char_tokenizer(
    text: str,
    *,
    held_out: Iterable[str] = (),
    min_frequency: int = 1,
    model_max_length: int = 1_000_000,
) -> PreTrainedTokenizerFast:
    """Build a character tokenizer whose vocabulary is the characters of ``text``.

    Args:
        text: the training text; characters seen at least ``min_frequency`` times get an id
            (sorted by code point after the four special tokens).
        held_out: other texts (validation / test) checked against the vocabulary: the number
            of their characters that will map to ``<unk>`` is logged and stored on the
            tokenizer as ``unknown_char_count``.
        min_frequency: rarer characters are left out (and become ``<unk>``).
        model_max_length: the tokenizer's ``model_max_length``.
    """
    if min_frequency < 1:
        raise ValueError(f"min_frequency must be >= 1, got {min_frequency}")
    counts = Counter(text)
    chars = sorted(c for c, n in counts.items() if n >= min_frequency)
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS.values())}
    for ch in chars:
        vocab.setdefault(ch, len(vocab))

    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=SPECIAL_TOKENS["unk_token"]))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,
        split_special_tokens=True,
        **SPECIAL_TOKENS,
    )
    unknown = count_unknown_chars(tokenizer, "".join(held_out)) + sum(
        n for c, n in counts.items() if n < min_frequency
    )
    tokenizer.unknown_char_count = unknown
    logger.info(
        "char tokenizer: %d characters + %d special tokens; %d characters map to <unk>",
        len(chars),
        len(SPECIAL_TOKENS),
        unknown,
    )
    return tokenizer


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
    "SPECIAL_TOKENS",
    "build_char_tokenizer",
    "count_unknown_chars",
    "encode_prompt",
    "ignore_whitespace",
    "require_text",
    "unknown_pieces",
    "warn_unknown",
]
