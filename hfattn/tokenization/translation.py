r"""Tokenizers for translation (seq2seq) models, built with the ``tokenizers`` library.

:func:`build_translation_tokenizer` returns a plain ``transformers`` fast tokenizer (only
``tokenizer.json`` + ``tokenizer_config.json`` once saved: ``AutoTokenizer.from_pretrained``
loads it without hfattn). One tokenizer object encodes both sides, as Marian's does::

    batch = tok(["I love you."], text_target=["te quiero."])   # input_ids, attention_mask, labels

Kinds:

- ``"word"``: like Keras ``TextVectorization``: lower-case, strip punctuation (``¿`` ``¡``
  included; ``[`` ``]`` kept for Chollet's ``[start]``/``[end]``), split on whitespace, the
  ``vocab_size`` most frequent words (ties alphabetical). Decoding joins words with spaces.
- ``"char"``: one token per character (spaces included), decoded fused.
- ``"bpe"``: byte-pair encoding (Sennrich et al. 2016) over ``Metaspace`` pieces (``▁`` marks
  a word start, and the decoder turns it back into a space).
- ``"unigram"``: a unigram language model over the same ``Metaspace`` pieces (Kudo 2018, the
  SentencePiece default): EM fits a probability :math:`p(x)` to every candidate piece and
  prunes the vocabulary to ``vocab_size``; a text is cut into the pieces
  :math:`\arg\max_{x_1 \dots x_M} \sum_i \log p(x_i)` (Viterbi). ``<`` and ``>`` are
  pieces of their own, so that no text reads as a special token.

``joint=True`` trains one vocabulary on both languages (``vocab_size`` in total).
``joint=False`` trains each language's own vocabulary (``vocab_size`` each, special tokens
included) and merges them into one id space: word/char = the union of the two vocabularies
(source-language tokens first, then the target's new ones), so the total is between
``vocab_size`` and ``2 * vocab_size - 4``; BPE = the union of the two vocabularies and the
source merges followed by the target merges not already present (a word is merged by the
source's rules first, then the target's); unigram = the source's pieces with their
log-probabilities, then the target's pieces not already present with theirs.

What comes back from ``decode(ids, skip_special_tokens=True)``:

- ``"word"``: the normalized words joined by single spaces; each out-of-vocabulary word is one
  ``<unk>`` (dropped when decoding).
- ``"char"``: the NFC-normalized text; each out-of-vocabulary character is one ``<unk>``.
- ``"bpe"`` and ``"unigram"``: the NFC-normalized text less one leading space (``▁`` opens
  every word, as in SentencePiece, and a literal ``▁`` reads as a space); each run of
  characters never seen in training, inside a word, is one ``<unk>``.

Text that spells a special token (``"<eos>"``) is read as ordinary text, never as that token
(``split_special_tokens``).

Special tokens: ``<pad>`` = 0, ``<unk>`` = 1, ``<bos>`` = 2, ``<eos>`` = 3 (the model configs'
defaults). Every encoded text, source or target, ends with ``<eos>`` (template ``$A <eos>``);
labels carry no ``<bos>``: the model's decoder starts from ``decoder_start_token_id`` =
``<bos>`` by shifting the labels right.
"""

from __future__ import annotations

import functools
import json
import sys
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from tokenizers.processors import TemplateProcessing
from transformers import PreTrainedTokenizerFast

from ..common.progress import progress_bar
from ..data.tatoeba import CHOLLET_STRIP_CHARS
from .characters import SPECIAL_TOKENS

KINDS = ("word", "char", "bpe", "unigram")
"""Tokenizer kinds of :func:`build_translation_tokenizer`."""

SUBWORD_KINDS = ("bpe", "unigram")
"""The kinds that cut words into pieces learned from the texts (``Metaspace`` word starts)."""

DEFAULT_VOCAB_SIZES = {"word": 15_000, "char": None, "bpe": 8_000, "unigram": 8_000}
"""Default ``vocab_size`` per kind (``None``: every character seen)."""

_SPECIALS = list(SPECIAL_TOKENS.values())  # <pad> <unk> <bos> <eos>, ids 0..3


def _pairs(pairs_or_dataset, source_lang: str, target_lang: str) -> list[tuple[str, str]]:
    """``[(source, target), ...]`` from pairs, a ``Dataset`` or ``DatasetDict`` (its ``train``)
    with a ``translation`` column."""
    import datasets

    data = pairs_or_dataset
    if isinstance(data, datasets.DatasetDict):
        data = data["train"]
    if hasattr(data, "column_names"):
        if "translation" not in data.column_names:
            raise ValueError(f"the dataset has no translation column ({data.column_names})")
        data = data["translation"]
    out = []
    for item in data:
        if isinstance(item, dict):
            try:
                out.append((item[source_lang], item[target_lang]))
            except KeyError as e:
                raise ValueError(
                    f"pair {item!r} has no {e.args[0]!r} side (source_lang={source_lang!r}, "
                    f"target_lang={target_lang!r})"
                ) from None
        else:
            source, target = item
            out.append((source, target))
    if not out:
        raise ValueError("no pairs to build the tokenizer from")
    return out


def _normalizer(lowercase: bool, strip_punctuation: bool):
    steps = [normalizers.NFC()]
    if lowercase:
        steps.append(normalizers.Lowercase())
    if strip_punctuation:
        steps.append(normalizers.Replace(Regex(f"[{_regex_class(CHOLLET_STRIP_CHARS)}]"), ""))
    return normalizers.Sequence(steps)


def _regex_class(chars: str) -> str:
    return "".join("\\" + c if c.isascii() and not c.isalnum() else c for c in chars)


def _top(counts: Counter, n: int | None, min_frequency: int) -> list[str]:
    items = sorted(
        (tok for tok, c in counts.items() if c >= min_frequency and tok not in _SPECIALS),
        key=lambda tok: (-counts[tok], tok),
    )
    return items if n is None else items[: max(0, n)]


def _count(backend: Tokenizer, texts: Iterable[str], kind: str, show_progress: bool) -> Counter:
    counts: Counter = Counter()
    texts = progress_bar(texts, desc=f"counting {kind}s", unit="text", shown=show_progress,
                         leave=False)  # fmt: skip
    for text in texts:
        normalized = backend.normalizer.normalize_str(text)
        if kind == "char":
            counts.update(normalized)
        else:
            counts.update(t for t, _ in backend.pre_tokenizer.pre_tokenize_str(normalized))
    return counts


def _bpe_model(
    texts: list[str], vocab_size: int, min_frequency: int, normalizer, pre_tok, show_progress
):
    backend = Tokenizer(models.BPE(unk_token=SPECIAL_TOKENS["unk_token"]))
    backend.normalizer = normalizer
    backend.pre_tokenizer = pre_tok
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=_SPECIALS,
        show_progress=show_progress,
    )
    backend.train_from_iterator(texts, trainer=trainer)
    model = json.loads(backend.to_str())["model"]
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    return model["vocab"], merges


SPECIAL_TOKEN_DELIMITERS = "<>"
"""Characters that a unigram tokenizer keeps as pieces of their own: every special token is
spelled between them, so no piece of text can match one (a unigram model scores its special
tokens as pieces of probability 1 and would otherwise read the text ``<eos>`` as ``<eos>``)."""


def _subword_pre_tokenizer(kind: str):
    """``Metaspace`` words; for ``"unigram"`` also :data:`SPECIAL_TOKEN_DELIMITERS` split off."""
    metaspace = pre_tokenizers.Metaspace()
    if kind != "unigram":
        return metaspace
    delimiters = Regex(f"[{_regex_class(SPECIAL_TOKEN_DELIMITERS)}]")
    return pre_tokenizers.Sequence([metaspace, pre_tokenizers.Split(delimiters, "isolated")])


class BatchEncoder:
    """Encodes batches of texts with a ``tokenizers.Tokenizer`` (:meth:`encode`), the ids those
    of ``backend`` itself, for less CPU where the texts allow it.

    Two steps of a tokenizer do nothing to most texts, yet cost a pass over every one: a unigram
    tokenizer's split of :data:`SPECIAL_TOKEN_DELIMITERS` off every word (a regex search a word)
    finds nothing in a text without them, and the ``NFC`` normalizer leaves a text that is
    already in NFC as it is. A twin of ``backend`` without those steps gives the same ids for such
    texts: a batch whose texts all qualify (one check of the batch joined by newlines, a
    starter that composes with nothing) is encoded by the twin, any other text by ``backend``,
    as is every text holding a delimiter (a special token can only be spelled with them).
    No character becomes a delimiter under the normalizers (checked over every code point by
    the tests); NFC is checked with :func:`unicodedata.is_normalized`, and a text holding a
    character that Python's Unicode data does not assign goes to ``backend`` (the stability of
    normalization holds for assigned characters only)."""

    def __init__(self, backend: Tokenizer):
        self.backend = backend
        spec = json.loads(backend.to_str())
        self.without_split = _is_unigram_pre_tokenizer(spec.get("pre_tokenizer"))
        self.without_nfc = _is_nfc_alone(spec.get("normalizer"))
        if self.without_split:
            spec["pre_tokenizer"] = spec["pre_tokenizer"]["pretokenizers"][0]
        if self.without_nfc:
            spec["normalizer"] = None
        exact = self.without_split or self.without_nfc
        self.twin = Tokenizer.from_str(json.dumps(spec)) if exact else None

    def encode(self, texts: list[str]) -> list[list[int]]:
        """The token ids of each of ``texts`` (special tokens added, in parallel in Rust)."""
        if self.twin is None:
            return _ids(self.backend, texts)
        if self.twin_gives_its_ids("\n".join(texts)):  # the common case: one check a batch
            return _ids(self.twin, texts)
        by_twin = [self.twin_gives_its_ids(text) for text in texts]
        ids: list[list[int]] = [[] for _ in texts]
        for tokenizer, chosen in ((self.twin, True), (self.backend, False)):
            rows = [i for i, twin in enumerate(by_twin) if twin is chosen]
            for i, row in zip(rows, _ids(tokenizer, [texts[i] for i in rows]), strict=True):
                ids[i] = row
        return ids

    def twin_gives_its_ids(self, text: str) -> bool:
        """Whether the twin encodes ``text`` as ``backend`` does: no delimiter (nothing to split
        off, and no special token spelled in the text, whose matching may differ between a
        tokenizer and its copy), already in NFC (when the twin skips NFC)."""
        if any(char in text for char in SPECIAL_TOKEN_DELIMITERS):
            return False
        if self.without_nfc:
            return not _has_unassigned(text) and unicodedata.is_normalized("NFC", text)
        return True


def _ids(tokenizer: Tokenizer, texts: list[str]) -> list[list[int]]:
    """The token ids of each of ``texts`` encoded by ``tokenizer`` (no offsets computed)."""
    return [encoding.ids for encoding in tokenizer.encode_batch_fast(texts)]


def _is_unigram_pre_tokenizer(spec: dict | None) -> bool:
    """Whether ``spec`` is the unigram pre-tokenizer of :func:`_subword_pre_tokenizer`:
    ``Metaspace`` then the delimiters' split."""
    steps = (spec or {}).get("pretokenizers") or []
    delimiters = f"[{_regex_class(SPECIAL_TOKEN_DELIMITERS)}]"
    return (
        (spec or {}).get("type") == "Sequence"
        and len(steps) == 2
        and steps[0].get("type") == "Metaspace"
        and steps[1].get("type") == "Split"
        and steps[1].get("pattern") == {"Regex": delimiters}
    )


def _is_nfc_alone(spec: dict | None) -> bool:
    """Whether the normalizer ``spec`` is NFC alone (``lowercase`` and ``strip_punctuation``
    off: :func:`_normalizer`)."""
    if (spec or {}).get("type") == "Sequence":
        return [step.get("type") for step in spec["normalizers"]] == ["NFC"]
    return (spec or {}).get("type") == "NFC"


@functools.cache
def _unassigned_table():
    """A boolean per code point: unassigned in Python's Unicode data (category ``Cn``)."""
    import numpy as np

    return np.array(
        [unicodedata.category(chr(cp)) == "Cn" for cp in range(sys.maxunicode + 1)], dtype=bool
    )


def _has_unassigned(text: str) -> bool:
    """Whether ``text`` holds a code point that Python's Unicode data leaves unassigned."""
    import numpy as np

    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    return bool(_unassigned_table()[codes].any())


def _unigram_pieces(texts: list[str], vocab_size: int, normalizer, pre_tok, show_progress):
    """``[(piece, log p(piece)), ...]`` of a unigram language model (Kudo 2018) trained on
    ``texts``, the special tokens first (ids 0..3, log-probability 0)."""
    backend = Tokenizer(models.Unigram())
    backend.normalizer = normalizer
    backend.pre_tokenizer = pre_tok
    trainer = trainers.UnigramTrainer(
        vocab_size=vocab_size,
        special_tokens=_SPECIALS,
        unk_token=SPECIAL_TOKENS["unk_token"],
        show_progress=show_progress,
    )
    backend.train_from_iterator(texts, trainer=trainer)
    return [(piece, score) for piece, score in json.loads(backend.to_str())["model"]["vocab"]]


def _merged_unigram_model(
    groups: list[list[str]], vocab_size: int, normalizer, pre_tok, show_progress: bool
):
    """The unigram model trained on each group of texts, merged into one id space (the first
    group's pieces, then the others' new ones, each with its own log-probability)."""
    pieces = {tok: 0.0 for tok in _SPECIALS}
    for texts in groups:
        for piece, score in _unigram_pieces(texts, vocab_size, normalizer, pre_tok, show_progress):
            pieces.setdefault(piece, score)
    return models.Unigram(list(pieces.items()), unk_id=_SPECIALS.index(SPECIAL_TOKENS["unk_token"]))


def _merged_bpe_model(
    groups: list[list[str]],
    vocab_size: int,
    min_frequency: int,
    normalizer,
    pre_tok,
    show_progress: bool,
):
    """The BPE model trained on each group of texts, merged into one id space (the union of
    the vocabularies; the first group's merges, then the others' new ones)."""
    vocab: dict[str, int] = {tok: i for i, tok in enumerate(_SPECIALS)}
    merges: list[tuple[str, str]] = []
    seen_merges: set[tuple[str, str]] = set()
    for texts in groups:
        group_vocab, group_merges = _bpe_model(
            texts, vocab_size, min_frequency, normalizer, pre_tok, show_progress
        )
        for tok, _ in sorted(group_vocab.items(), key=lambda kv: kv[1]):
            vocab.setdefault(tok, len(vocab))
        for merge in group_merges:
            if merge not in seen_merges:
                seen_merges.add(merge)
                merges.append(merge)
    unk = SPECIAL_TOKENS["unk_token"]
    return models.BPE(vocab=vocab, merges=merges, unk_token=unk, fuse_unk=True)


def build_translation_tokenizer(
    pairs_or_dataset,
    *,
    kind: str = "word",
    vocab_size: int | None = None,
    joint: bool = True,
    lowercase: bool | None = None,
    strip_punctuation: bool | None = None,
    source_lang: str = "en",
    target_lang: str = "es",
    min_frequency: int = 1,
    model_max_length: int = 512,
    show_progress: bool = False,
) -> PreTrainedTokenizerFast:
    """Build a seq2seq tokenizer from training pairs (see the module docstring). It logs
    nothing: its caller names what it built (a translation's tokenizer, a classifier's), in
    the caller's own log.

    Args:
        pairs_or_dataset: ``[{source_lang: ..., target_lang: ...}, ...]``, ``[(source,
            target), ...]``, a ``Dataset`` with a ``translation`` column, or a ``DatasetDict``
            (its ``train`` split is used: never build a vocabulary on held-out data).
        kind: ``"word"``, ``"char"``, ``"bpe"`` or ``"unigram"``.
        vocab_size: tokens in the vocabulary, the four special tokens included (per
            language when ``joint=False``); default :data:`DEFAULT_VOCAB_SIZES`.
        joint: one vocabulary for both languages, or one per language merged into one id
            space.
        lowercase, strip_punctuation: text normalization; default ``True`` for ``"word"``
            (Keras' ``lower_and_strip_punctuation``), ``False`` for the other kinds.
        source_lang, target_lang: the keys of the pairs.
        min_frequency: rarer tokens (words, characters, BPE pairs) are left out; must be 1
            for ``"unigram"``, which keeps pieces by likelihood, not count.
        model_max_length: the tokenizer's ``model_max_length`` (truncation length).
        show_progress: show the training's progress: the ``tokenizers`` trainer's own bar
            (``bpe``, ``unigram``; shown at once), a bar of the texts counted (``word``,
            ``char``; after :data:`~hfattn.common.progress.PROGRESS_DELAY_S`).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}; got {kind!r}")
    if min_frequency < 1:
        raise ValueError(f"min_frequency must be >= 1, got {min_frequency}")
    if kind == "unigram" and min_frequency != 1:
        raise ValueError(
            f"min_frequency must be 1 for a unigram tokenizer (it keeps pieces by likelihood, "
            f"not count), got {min_frequency}"
        )
    vocab_size = DEFAULT_VOCAB_SIZES[kind] if vocab_size is None else vocab_size
    if vocab_size is not None and vocab_size <= len(_SPECIALS):
        raise ValueError(f"vocab_size must be > {len(_SPECIALS)} (the special tokens)")
    lowercase = (kind == "word") if lowercase is None else lowercase
    strip_punctuation = (kind == "word") if strip_punctuation is None else strip_punctuation
    pairs = _pairs(pairs_or_dataset, source_lang, target_lang)
    sides = [[p[0] for p in pairs], [p[1] for p in pairs]]
    groups = [sides[0] + sides[1]] if joint else sides

    normalizer = _normalizer(lowercase, strip_punctuation)
    unk = SPECIAL_TOKENS["unk_token"]
    if kind in SUBWORD_KINDS:
        pre_tok = _subword_pre_tokenizer(kind)
        backend = Tokenizer(
            _merged_unigram_model(groups, vocab_size, normalizer, pre_tok, show_progress)
            if kind == "unigram"
            else _merged_bpe_model(
                groups, vocab_size, min_frequency, normalizer, pre_tok, show_progress
            )
        )
        backend.pre_tokenizer = pre_tok
        backend.decoder = decoders.Metaspace()
    else:
        probe = Tokenizer(models.WordLevel(vocab={unk: 0}, unk_token=unk))
        probe.normalizer = normalizer
        if kind == "char":
            pre_tok = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
        elif strip_punctuation:
            pre_tok = pre_tokenizers.WhitespaceSplit()
        else:
            pre_tok = pre_tokenizers.Whitespace()  # punctuation becomes its own word
        probe.pre_tokenizer = pre_tok
        vocab = {tok: i for i, tok in enumerate(_SPECIALS)}
        n_tokens = None if vocab_size is None else vocab_size - len(_SPECIALS)
        for texts in groups:
            for tok in _top(_count(probe, texts, kind, show_progress), n_tokens, min_frequency):
                vocab.setdefault(tok, len(vocab))
        backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token=unk))
        backend.pre_tokenizer = pre_tok
        if kind == "char":
            backend.decoder = decoders.Fuse()
    backend.normalizer = normalizer
    eos = SPECIAL_TOKENS["eos_token"]
    backend.post_processor = TemplateProcessing(
        single=f"$A {eos}", pair=f"$A {eos} $B {eos}", special_tokens=[(eos, _SPECIALS.index(eos))]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,
        split_special_tokens=True,
        **SPECIAL_TOKENS,
    )
    return tokenizer


def unknown_rate(tokenizer: PreTrainedTokenizerFast, texts: Sequence[str]) -> float:
    """Share of the tokens of ``texts`` (special tokens excluded) that are ``<unk>``."""
    ids = [i for t in texts for i in tokenizer(t, add_special_tokens=False)["input_ids"]]
    return sum(i == tokenizer.unk_token_id for i in ids) / max(1, len(ids))


__all__ = [
    "BatchEncoder",
    "DEFAULT_VOCAB_SIZES",
    "KINDS",
    "SPECIAL_TOKEN_DELIMITERS",
    "SUBWORD_KINDS",
    "build_translation_tokenizer",
    "unknown_rate",
]
