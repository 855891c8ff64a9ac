"""The training pairs cut anew every epoch by BPE-dropout (``tokenizer.bpe_dropout``;
:class:`~hfattn.tokenization.bpe_dropout.BPEDropout`): :class:`SampledPairs`.

The prepared folder keeps the training texts beside their deterministic ids
(:mod:`~hfattn.tasks.translation.prepared`); held-out splits, evaluation, translation and the
saved tokenizer use those ids and never sample. For epoch :math:`e` both sides of every
training pair are cut by BPE-dropout, :data:`~hfattn.tasks.translation.prepared.ENCODE_BATCH`
pairs at a time, with a bar once it takes two seconds, from a ``numpy`` generator seeded with
``(training.seed, e, side)``: the ids of an epoch are a function of the seed and the epoch, so a
resumed run (or every process of a launch) draws the same ones. The words of the texts are
read once, on the first epoch, and kept in memory (8 bytes a word). A sampled sequence
longer than ``data.max_source_length`` (``data.max_target_length``) is cut to it, as the
prepared training pairs are (:func:`~hfattn.tasks.translation.encoding.cut_flat`).
"""

from __future__ import annotations

import numpy as np

from ...common.progress import progress_bar
from ...storage.ragged import RaggedIds, RaggedTexts, ids_dtype
from ...tokenization.bpe_dropout import BPEDropout
from .encoding import cut_flat
from .prepared import ENCODE_BATCH


class SampledPairs:
    """The training pairs ``texts`` (``(sources, targets)``, the prepared texts) cut by
    BPE-dropout (Provilkov et al. 2020, "BPE-Dropout: Simple and Effective Subword
    Regularization") at rate ``p`` with ``tokenizer`` for each epoch :math:`e`
    (:meth:`__call__`), from a generator seeded with ``(seed, e, side)``, each side cut to its
    entry of ``limits`` (see the module docstring)."""

    def __init__(
        self,
        tokenizer,
        texts: tuple[RaggedTexts, RaggedTexts],
        p: float,
        seed: int,
        limits: tuple[int | None, int | None],
    ):
        self.sampler = BPEDropout(tokenizer, p)
        self.texts, self.seed, self.limits = texts, seed, limits
        self.dtype = ids_dtype(len(tokenizer))
        self._words: list[list[tuple[np.ndarray, np.ndarray]]] | None = None
        self._last: tuple[int, tuple[RaggedIds, RaggedIds]] | None = None

    def words(self) -> list[list[tuple[np.ndarray, np.ndarray]]]:
        """Each side's words, a ``(word ids, words per text)`` a batch of pairs, read once."""
        if self._words is None:
            total = 2 * len(self.texts[0])
            with progress_bar(total=total, desc="reading words", unit="text") as bar:
                self._words = [self._batches(side, bar) for side in self.texts]
        return self._words

    def longest(self) -> tuple[int, int]:
        """The most ids a source and a target can have in any epoch: each side's longest text
        in characters (a word's starting pieces) plus ``<eos>``, at most its limit."""
        words = self.words()  # read first: the starting lengths are those of the words read
        starts, bounds = self.sampler.starting_lengths(), []
        for batches, limit in zip(words, self.limits, strict=True):
            most = 1
            for word_ids, counts in batches:
                text = np.zeros(len(counts), np.int64)
                np.add.at(text, np.repeat(np.arange(len(counts)), counts), starts[word_ids])
                most = max(most, int(text.max(initial=0)) + 1)
            bounds.append(most if limit is None else min(most, limit))
        return bounds[0], bounds[1]

    def _batches(self, texts: RaggedTexts, bar) -> list[tuple[np.ndarray, np.ndarray]]:
        words = []
        for begin in range(0, len(texts), ENCODE_BATCH):
            batch = [texts[i] for i in range(begin, min(begin + ENCODE_BATCH, len(texts)))]
            words.append(self.sampler.words(batch))
            bar.update(len(batch))
        return words

    def __call__(self, epoch: int) -> tuple[RaggedIds, RaggedIds]:
        """``(sources, targets)``: the ids of epoch ``epoch`` (the last epoch's kept)."""
        if self._last is not None and self._last[0] == epoch:
            return self._last[1]
        words = self.words()
        total = 2 * len(self.texts[0])
        with progress_bar(total=total, desc=f"BPE-dropout, epoch {epoch}", unit="text") as bar:
            ids = tuple(self._side(epoch, k, batches, bar) for k, batches in enumerate(words))
        self._last = (epoch, ids)
        return ids

    def _side(self, epoch: int, side: int, batches, bar) -> RaggedIds:
        """One side's ids of ``epoch``, cut to its limit."""
        rng = np.random.default_rng((self.seed, epoch, side))
        values, lengths = [], []
        for words, counts in batches:
            flat, each = self.sampler.sample(words, counts, rng)
            flat, each, _ = cut_flat(flat, each, self.limits[side], self.sampler.eos_token_id)
            values.append(np.asarray(flat, dtype=self.dtype))
            lengths.append(each)
            bar.update(len(counts))
        lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
        offsets = np.concatenate([[0], np.cumsum(lengths)])
        flat = np.concatenate(values) if values else np.zeros(0, self.dtype)
        return RaggedIds(flat, offsets)


__all__ = ["SampledPairs"]
