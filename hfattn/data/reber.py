"""Reber grammars: Géron's *Hands-On ML* ch. 16 exercise 8 as an embedded classification task.

The **Reber grammar** is the 7-state automaton of Reber (1967), in the version with explicit
begin/end symbols ``B`` … ``E`` used by Hochreiter & Schmidhuber (1997) and by Géron. A
string is valid iff it is a path from state 0 to the accepting end (``None``) of
:data:`REBER_TRANSITIONS`::

    0 -B-> 1      1 -T-> 2 | -P-> 3      2 -S-> 2 | -X-> 4      3 -T-> 3 | -V-> 5
    4 -X-> 3 | -S-> 6      5 -P-> 4 | -V-> 6      6 -E-> end

e.g. ``BTXSE``, ``BPVVE``, ``BTSSXXTVVE``. Every state's outgoing symbols differ, so the
automaton is deterministic and :func:`is_reber` is one pass over the string.

The **embedded Reber grammar** wraps a Reber string ``r``: ``B c r c E`` with ``c`` ∈ {T, P}
the *same* symbol on both sides (e.g. Géron's ``BPBTSXXVPSEPE`` = ``B P BTSXXVPSE P E``).
Telling ``BT…TE`` from ``BT…PE`` needs memory across the whole inner string: the long-range
dependency that makes it an RNN test.

A **near-miss** is a valid string with one mutation — a symbol of :data:`ALPHABET` substituted
(a different one), inserted or deleted at a uniform position, or, for the embedded grammar,
one of the two embedding symbols swapped (T ↔ P), the kind drawn uniformly too — kept only if
the recogniser rejects it (a mutation can land on another valid string, e.g. ``BTSSXSE`` →
``BTSXSE``; those are redrawn). The swap is there because uniform edits almost never test
the long-range dependency: very few near-misses of uniform edits are ``BT…PE`` / ``BP…TE``
with a valid inner string, so a classifier that sees only local context (a linear SVM on
symbol 1–3-grams) misses only those and looks nearly perfect (``benchmarks/NOTES.md`` says how it
is counted). With the swap a quarter of the near-misses need the long-range memory.

:func:`load_reber` builds the classification task ``reber``: balanced embedded-Reber strings
(label 1 ``valid``) and near-misses (label 0 ``invalid``), :data:`REBER_SPLIT_SIZES` examples
per split, written one symbol per word (``"B P B T S X X V P S E P E"``) so that a word-level
tokenizer reads symbols and a char-level one reads symbols and spaces. The recipe
(``recipes/rnn_classifier_reber.yaml``) reads them with a char-level tokenizer that ignores
whitespace (``tokenizer: {type: char, whitespace: ignore}``): one token per symbol, so a
string typed as it is written, ``BPBTXSEPE``, is the same input as ``B P B T X S E P E`` (a
word tokenizer would read it as one unknown word). Everything is drawn from one
``random.Random(seed)``: the same seed gives the same splits.
"""

from __future__ import annotations

import random

from .classification import ClassificationData
from .licenses import HFATTN_GENERATED

REBER_TRANSITIONS: dict[int, dict[str, int | None]] = {
    0: {"B": 1},
    1: {"T": 2, "P": 3},
    2: {"S": 2, "X": 4},
    3: {"T": 3, "V": 5},
    4: {"X": 3, "S": 6},
    5: {"P": 4, "V": 6},
    6: {"E": None},
}
"""State → {symbol: next state}; ``None`` is the accepting end (after the final ``E``)."""

ALPHABET = "BEPSTVX"
"""Every symbol of both grammars (the alphabet of the mutations)."""

EMBEDDING_SYMBOLS = "TP"
"""The symbol ``c`` repeated around the inner string of an embedded Reber string ``BcrcE``."""

MUTATIONS = ("substitute", "insert", "delete")
"""The single edits that turn a valid string into a near-miss."""

EMBEDDED_MUTATIONS = (*MUTATIONS, "swap-embedding")
"""The edits of an embedded string: also ``B c r c E`` → ``B c r c' E`` or ``B c' r c E``
(``c' ≠ c``, which side uniform): a substitution that only a long-range view detects."""

LABEL_NAMES = ["invalid", "valid"]
"""Class names of :func:`load_reber`: 0 = near-miss, 1 = grammatical."""

DATA_LICENSES = {"reber": HFATTN_GENERATED}
"""Strings drawn by this module: hfattn's licence (see :mod:`hfattn.data.licenses`)."""

REBER_SPLIT_SIZES = {"train": 10_000, "validation": 1_000, "test": 2_000}
"""Examples per split of :func:`load_reber` (half valid, half near-misses in each)."""


def reber_string(rng: random.Random) -> str:
    """A random Reber string: from state 0, follow a uniformly drawn outgoing edge of
    :data:`REBER_TRANSITIONS` until the end. The shortest strings are ``BTXSE`` and ``BPVVE``,
    each of probability (1/2)³ = 1/8; the loops (S at 2, T at 3, X–V–P through 3, 5, 4)
    make longer ones geometrically rarer."""
    symbols, state = [], 0
    while state is not None:
        symbol = rng.choice(sorted(REBER_TRANSITIONS[state]))
        symbols.append(symbol)
        state = REBER_TRANSITIONS[state][symbol]
    return "".join(symbols)


def embedded_reber_string(rng: random.Random) -> str:
    """A random embedded Reber string ``B c r c E``: ``c`` uniform in T/P, ``r`` from
    :func:`reber_string`."""
    c = rng.choice(EMBEDDING_SYMBOLS)
    return f"B{c}{reber_string(rng)}{c}E"


def is_reber(string: str) -> bool:
    """Whether ``string`` is accepted by the Reber automaton: every symbol is an edge of the
    current state and the last one (only the last one) reaches the end."""
    state: int | None = 0
    for symbol in string:
        if state is None or symbol not in REBER_TRANSITIONS[state]:
            return False
        state = REBER_TRANSITIONS[state][symbol]
    return state is None


def is_embedded_reber(string: str) -> bool:
    """Whether ``string`` is ``B c r c E`` with ``c`` ∈ {T, P} twice the same and ``r`` a Reber
    string (:func:`is_reber`)."""
    return (
        len(string) >= 4
        and string[0] == "B"
        and string[1] in EMBEDDING_SYMBOLS
        and string[-2] == string[1]
        and string[-1] == "E"
        and is_reber(string[2:-2])
    )


def mutate(string: str, rng: random.Random, *, embedded: bool = False) -> str:
    """``string`` with one edit of a kind drawn uniformly from :data:`MUTATIONS` (or
    :data:`EMBEDDED_MUTATIONS` when ``embedded``): substitute the symbol at a uniform position
    by another symbol of :data:`ALPHABET`, insert a uniform symbol at one of the ``len + 1``
    gaps, delete a uniform position, or swap the embedding symbol (T ↔ P) at position 1 or
    ``len − 2``."""
    kind = rng.choice(EMBEDDED_MUTATIONS if embedded else MUTATIONS)
    if kind == "insert":
        i = rng.randrange(len(string) + 1)
        return string[:i] + rng.choice(ALPHABET) + string[i:]
    if kind == "swap-embedding":
        i = rng.choice((1, len(string) - 2))
        other = {"T": "P", "P": "T"}.get(string[i], rng.choice(EMBEDDING_SYMBOLS))
        return string[:i] + other + string[i + 1 :]
    i = rng.randrange(len(string))
    if kind == "delete":
        return string[:i] + string[i + 1 :]
    other = rng.choice([s for s in ALPHABET if s != string[i]])
    return string[:i] + other + string[i + 1 :]


def near_miss(rng: random.Random, *, embedded: bool = True, max_tries: int = 1000) -> str:
    """A string one :func:`mutate` away from a fresh valid string that the recogniser rejects
    (mutations that happen to give a valid string are redrawn).

    Raises:
        RuntimeError: no invalid mutation in ``max_tries`` draws (cannot happen for these
            grammars: deleting the final ``E`` is always invalid).
    """
    generate, accepts = (
        (embedded_reber_string, is_embedded_reber) if embedded else (reber_string, is_reber)
    )
    for _ in range(max_tries):
        candidate = mutate(generate(rng), rng, embedded=embedded)
        if not accepts(candidate):
            return candidate
    raise RuntimeError(f"no invalid mutation in {max_tries} tries")


def reber_examples(n: int, rng: random.Random, *, embedded: bool = True) -> list[tuple[str, int]]:
    """``n`` shuffled ``(string, label)`` pairs: ``n // 2`` valid strings (label 1) and the rest
    near-misses (label 0), of the embedded grammar unless ``embedded=False``."""
    generate = embedded_reber_string if embedded else reber_string
    valid = [(generate(rng), 1) for _ in range(n // 2)]
    invalid = [(near_miss(rng, embedded=embedded), 0) for _ in range(n - n // 2)]
    examples = valid + invalid
    rng.shuffle(examples)
    return examples


def as_text(string: str) -> str:
    """One symbol per word: ``"BTXSE"`` → ``"B T X S E"`` (the text column of the task)."""
    return " ".join(string)


def load_reber(seed: int):
    """The embedded ``reber`` classification task: :data:`REBER_SPLIT_SIZES` balanced examples
    per split (texts by :func:`as_text`, labels :data:`LABEL_NAMES`), all drawn from
    ``random.Random(seed)`` in the order train, validation, test.

    Returns:
        :class:`hfattn.data.classification.ClassificationData`.
    """

    rng = random.Random(seed)
    splits = {}
    for split, size in REBER_SPLIT_SIZES.items():
        examples = reber_examples(size, rng)
        splits[split] = ([as_text(s) for s, _ in examples], [y for _, y in examples])
    return ClassificationData.from_lists(splits, LABEL_NAMES)


__all__ = [
    "ALPHABET",
    "DATA_LICENSES",
    "EMBEDDED_MUTATIONS",
    "LABEL_NAMES",
    "MUTATIONS",
    "REBER_SPLIT_SIZES",
    "REBER_TRANSITIONS",
    "as_text",
    "embedded_reber_string",
    "is_embedded_reber",
    "is_reber",
    "load_reber",
    "mutate",
    "near_miss",
    "reber_examples",
    "reber_string",
]
