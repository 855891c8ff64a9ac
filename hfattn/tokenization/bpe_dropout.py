r"""BPE-dropout (Provilkov et al. 2020, "BPE-Dropout: Simple and Effective Subword
Regularization"): a trained BPE tokenizer's segmentation sampled anew, seeded, for training.

Byte-pair encoding cuts a word into its characters, then applies, step after step, the
applicable merge of lowest rank (the merge learned first). BPE-dropout drops every applicable
merge of a step with probability :math:`p`, independently, and applies the lowest-ranked merge
left; a step whose merges are all dropped ends the word:

.. math:: m_t = \arg\min_{m \in M_t,\ u_m \ge p} \operatorname{rank}(m), \qquad
   u_m \sim \mathcal{U}[0, 1),

:math:`M_t` the merges applicable to the word's pieces at step :math:`t` (ties: the leftmost).
With :math:`p = 0` it is the tokenizer's own segmentation, id for id; with :math:`p = 1` every
word stays in characters. The same word is cut differently each time it is met, so the model
sees many segmentations of it (the paper: 0.1).

``tokenizers`` has the rule built in (``models.BPE(dropout=p)``) but draws from a thread-local
generator that cannot be seeded, so a resumed run could not meet the same ids again.
:class:`BPEDropout` draws from a ``numpy`` generator instead, and so the ids of a text are a
function of the texts, the tokenizer, :math:`p` and the generator's seed; every step of the
rule runs over all the words of a batch at once (numpy arrays, no loop over words). The words
are those of the tokenizer's normalizer and pre-tokenizer (``Metaspace`` pieces), cut once and
kept as ids of the distinct words (:meth:`BPEDropout.words`); a word holding a character the
vocabulary lacks keeps the tokenizer's own pieces (its ``<unk>`` included).
"""

from __future__ import annotations

import json

import numpy as np


class BPEDropout:
    r"""The BPE-dropout sampler (Provilkov et al. 2020, "BPE-Dropout: Simple and Effective
    Subword Regularization") of a trained BPE ``tokenizer`` (a ``transformers`` fast tokenizer
    whose model is ``tokenizers.models.BPE``) at rate ``p``: each step of a word applies
    :math:`\arg\min_{m \in M_t,\ u_m \ge p} \operatorname{rank}(m)`, :math:`u_m \sim
    \mathcal{U}[0, 1)` drawn from the caller's generator, and a step with no merge left ends
    the word (see the module docstring). The tokenizer itself is left as it is: it keeps
    encoding deterministically."""

    def __init__(self, tokenizer, p: float):
        if not 0 <= p < 1:
            raise ValueError(f"the BPE-dropout rate must be in [0, 1), got {p}")
        backend = tokenizer.backend_tokenizer
        model = json.loads(backend.to_str())["model"]
        if model.get("type") != "BPE":
            raise ValueError(f"BPE-dropout needs a BPE tokenizer, not {model.get('type')}")
        self.p = p
        self.backend = backend
        self.eos_token_id = tokenizer.eos_token_id
        self.vocab: dict[str, int] = model["vocab"]
        size = max(self.vocab.values()) + 1
        merges = [m.split(" ", 1) if isinstance(m, str) else m for m in model["merges"]]
        keys = np.array([self.vocab[a] * size + self.vocab[b] for a, b in merges], np.int64)
        order = np.argsort(keys, kind="stable")
        self._size = size
        self._keys = keys[order]
        """The merges as ``left * size + right``, sorted (looked up with ``searchsorted``)."""
        self._ranks = order.astype(np.int64)
        """The rank of each of :attr:`_keys` (its place in the merge list)."""
        self._merged = np.array([self.vocab[a + b] for a, b in merges], np.int64)
        """The id of each merge's result, by rank."""
        self._types: dict[str, int] = {}
        self._symbols: list[np.ndarray] = []
        """The starting pieces of each distinct word: its characters' ids, or the tokenizer's
        own pieces for a word with a character out of the vocabulary."""
        self._fixed: list[bool] = []
        self._cached: tuple = ((), -1)

    def words(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(word ids, words per text)``: the distinct-word id of every word of ``texts`` in
        order (words as the tokenizer's normalizer and pre-tokenizer cut them), and how many
        words each text has."""
        normalizer, pre_tokenizer = self.backend.normalizer, self.backend.pre_tokenizer
        ids, counts = [], np.zeros(len(texts), np.int64)
        for i, text in enumerate(texts):
            if normalizer is not None:
                text = normalizer.normalize_str(text)
            pieces = pre_tokenizer.pre_tokenize_str(text) if pre_tokenizer else [(text, None)]
            counts[i] = len(pieces)
            ids.extend(self._type(piece) for piece, _ in pieces)
        return np.array(ids, np.int64), counts

    def _type(self, word: str) -> int:
        """The id of the distinct ``word`` (its starting pieces kept on first sight)."""
        found = self._types.get(word)
        if found is not None:
            return found
        chars = [self.vocab.get(char) for char in word]
        fixed = None in chars
        if fixed:  # the tokenizer's own pieces: its <unk> for the characters it lacks
            chars = [token.id for token in self.backend.model.tokenize(word)]
        self._types[word] = len(self._symbols)
        self._symbols.append(np.array(chars, np.int64))
        self._fixed.append(fixed)
        return self._types[word]

    def sample(
        self, words: np.ndarray, counts: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ids of texts given as :meth:`words` gives them, each word cut by BPE-dropout
        with ``rng``, ``<eos>`` after each text (the tokenizer's ``$A <eos>``): flat ``values``
        and each text's length."""
        flat, offsets, lengths, fixed = self._table()
        word_lengths = lengths[words]
        # words of similar lengths together (padding below twice the word), fixed ones apart
        widths = 1 << np.ceil(np.log2(np.maximum(word_lengths, 1))).astype(np.int64)
        groups = widths * 2 + fixed[words]
        piece_counts = word_lengths.copy()
        cut = []
        for group in np.unique(groups):
            width, rows = int(group // 2), np.flatnonzero(groups == group)
            columns = np.arange(width)[None, :]
            inside = columns < word_lengths[rows][:, None]
            symbols = np.where(
                inside,
                flat[(offsets[words[rows]][:, None] + columns).clip(max=max(len(flat) - 1, 0))],
                -1,
            )
            if not group % 2:
                symbols, piece_counts[rows] = self._merge(symbols, word_lengths[rows], rng)
            cut.append((rows, symbols))
        text_lengths = np.zeros(len(counts), np.int64)
        text_of = np.repeat(np.arange(len(counts)), counts)
        np.add.at(text_lengths, text_of, piece_counts)
        text_lengths += 1  # <eos>
        values = np.full(int(text_lengths.sum()), self.eos_token_id, np.int64)
        if not len(words):
            return values, text_lengths
        # a word's first piece: its text's start plus the pieces of its text's words before it
        before = np.cumsum(piece_counts) - piece_counts
        first_word = (np.cumsum(counts) - counts).clip(max=len(words) - 1)
        text_start = np.cumsum(text_lengths) - text_lengths
        starts = (text_start - before[first_word])[text_of] + before
        for rows, symbols in cut:
            columns = np.arange(symbols.shape[1])[None, :]
            kept = columns < piece_counts[rows][:, None]
            values[(starts[rows][:, None] + columns)[kept]] = symbols[kept]
        return values, text_lengths

    def starting_lengths(self) -> np.ndarray:
        """The starting pieces of each distinct word (by its id): the most pieces BPE-dropout
        can leave it in."""
        return self._table()[2]

    def _table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The starting pieces of every distinct word so far, flat, with their offsets and
        counts, and which words keep the tokenizer's own pieces."""
        if self._cached[1] != len(self._symbols):
            lengths = np.array([len(s) for s in self._symbols], np.int64)
            flat = np.concatenate(self._symbols) if self._symbols else np.zeros(0, np.int64)
            table = (flat, np.cumsum(lengths) - lengths, lengths, np.array(self._fixed, bool))
            self._cached = (table, len(self._symbols))
        return self._cached[0]

    def _merge(
        self, symbols: np.ndarray, lengths: np.ndarray, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """BPE-dropout on every row of ``symbols`` (rows of starting pieces, ``lengths`` of
        them, padded with ``-1``) at once: step after step, each applicable merge of a row is
        dropped with probability ``p`` and the lowest-ranked one left is applied (the pieces
        after it move left by one); a row with none left is done. Returns the pieces and their
        counts."""
        symbols, lengths = symbols.copy(), lengths.copy()
        active = np.flatnonzero(lengths > 1)
        none = len(self._merged)
        width = symbols.shape[1]
        columns = np.arange(width - 1)
        while len(active):
            rows = symbols[active]
            key = rows[:, :-1] * self._size + rows[:, 1:]
            at = np.searchsorted(self._keys, key).clip(max=max(len(self._keys) - 1, 0))
            found = (self._keys[at] == key) if len(self._keys) else np.zeros(key.shape, bool)
            found &= columns[None, :] < (lengths[active] - 1)[:, None]
            rank = np.where(found, self._ranks[at] if len(self._keys) else none, none)
            if self.p:
                rank[found & (rng.random(key.shape) < self.p)] = none
            best = rank.argmin(axis=1)
            best_rank = rank[np.arange(len(active)), best]
            merging = best_rank < none
            active, rows, best = active[merging], rows[merging], best[merging]
            rows[np.arange(len(active)), best] = self._merged[best_rank[merging]]
            shift = np.arange(width)[None, :]
            source = (shift + (shift > best[:, None])).clip(max=width - 1)
            rows = np.take_along_axis(rows, source, axis=1)
            rows[:, -1] = -1
            symbols[active] = rows
            lengths[active] -= 1
            active = active[lengths[active] > 1]
        return symbols, lengths


__all__ = ["BPEDropout"]
