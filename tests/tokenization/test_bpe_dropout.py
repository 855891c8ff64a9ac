"""BPE-dropout (Provilkov et al. 2020) as :class:`~hfattn.tokenization.bpe_dropout.BPEDropout`
draws it: the tokenizer's own ids at rate 0, the paper's distribution of segmentations at a
rate above it, the same ids from the same seed, and the tokenizer itself left deterministic."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers
from tokenizers.processors import TemplateProcessing
from transformers import PreTrainedTokenizerFast

from hfattn.tokenization.bpe_dropout import BPEDropout
from hfattn.tokenization.translation import build_translation_tokenizer

PAIRS = [
    ("In the beginning God created the heavens.", "En el principio creó Dios los cielos."),
    ("Jesus wept.", "Jesús lloró."),
    ("Love is patient and is kind.", "El amor es sufrido, es benigno."),
    ("aaaa aaa aa a", "bbbb bbb"),
] * 10

TEXTS = [
    "God created the heavens and the earth.",
    "aaaaaaa aaaa",  # one merge applicable at several places: the leftmost first
    "Zoë says ☃ and ≠",  # characters the vocabulary lacks: <unk>
    "",
    "   ",
    "a <eos> spelled in the text",
    "Jesús wept; love is kind.",
]


def bpe_tokenizer(joint: bool = True):
    return build_translation_tokenizer(PAIRS, kind="bpe", vocab_size=70, joint=joint)


def sampled(sampler: BPEDropout, texts: list[str], rng) -> list[list[int]]:
    values, lengths = sampler.sample(*sampler.words(texts), rng)
    return [row.tolist() for row in np.split(values, np.cumsum(lengths)[:-1])]


@pytest.mark.parametrize("joint", [True, False])
def test_at_rate_zero_the_ids_are_the_tokenizers_own(joint):
    tokenizer = bpe_tokenizer(joint)
    sampler = BPEDropout(tokenizer, 0.0)
    texts = [source for source, _ in PAIRS[:4]] + [t for _, t in PAIRS[:4]] + TEXTS
    assert sampled(sampler, texts, np.random.default_rng(0)) == tokenizer(texts)["input_ids"]


def hand_made_tokenizer():
    """``▁ab`` is merged by ``▁ a`` (rank 0), then ``▁a b`` (rank 1)."""
    vocab = {"<pad>": 0, "<unk>": 1, "<bos>": 2, "<eos>": 3, "▁": 4, "a": 5, "b": 6, "▁a": 7,
             "▁ab": 8}  # fmt: skip
    backend = Tokenizer(models.BPE(vocab, [("▁", "a"), ("▁a", "b")], unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Metaspace()
    backend.post_processor = TemplateProcessing(single="$A <eos>", special_tokens=[("<eos>", 3)])
    return PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<eos>", pad_token="<pad>")


def test_segmentations_follow_the_papers_distribution():
    r"""``ab`` at rate :math:`p`: step 1 drops its one merge with probability :math:`p` (three
    pieces), else step 2 drops the next one with :math:`p` (two pieces), else one piece:
    :math:`p`, :math:`(1-p)p`, :math:`(1-p)^2`."""
    p, n = 0.3, 20_000
    sampler = BPEDropout(hand_made_tokenizer(), p)
    lengths = [len(ids) - 1 for ids in sampled(sampler, ["ab"] * n, np.random.default_rng(7))]
    shares = np.bincount(lengths, minlength=4)[1:] / n
    expected = [(1 - p) ** 2, (1 - p) * p, p]  # one, two, three pieces
    assert shares == pytest.approx(expected, abs=4 * np.sqrt(0.25 / n))


def test_sampled_ids_vary_spell_the_text_and_repeat_with_the_seed():
    tokenizer = bpe_tokenizer()
    sampler = BPEDropout(tokenizer, 0.1)
    texts = [source for source, _ in PAIRS] * 3
    first = sampled(sampler, texts, np.random.default_rng((0, 1)))
    again = sampled(sampler, texts, np.random.default_rng((0, 1)))
    other = sampled(sampler, texts, np.random.default_rng((0, 2)))
    assert first == again and first != other
    assert len({tuple(ids) for ids in first[::4]}) > 1  # the same text cut differently
    deterministic = tokenizer(texts)["input_ids"]
    for ids, own, text in zip(first, deterministic, texts, strict=True):
        assert len(ids) >= len(own)
        assert tokenizer.decode(ids, skip_special_tokens=True) == text
    # rate 0.99: almost every word stays in characters
    chars = sampled(BPEDropout(tokenizer, 0.99), ["Jesus wept."], np.random.default_rng(0))
    assert len(chars[0]) >= len("▁Jesus▁wept.") - 2


def test_the_tokenizer_is_left_deterministic():
    tokenizer = bpe_tokenizer()
    BPEDropout(tokenizer, 0.5)
    assert json.loads(tokenizer.backend_tokenizer.to_str())["model"]["dropout"] is None
    text = "In the beginning God created the heavens."
    assert len({tuple(tokenizer(text)["input_ids"]) for _ in range(20)}) == 1


def test_rates_outside_the_range_and_other_models_are_refused():
    with pytest.raises(ValueError, match=r"must be in \[0, 1\), got 1"):
        BPEDropout(bpe_tokenizer(), 1)
    unigram = build_translation_tokenizer(PAIRS, kind="unigram", vocab_size=70)
    with pytest.raises(ValueError, match="needs a BPE tokenizer, not Unigram"):
        BPEDropout(unigram, 0.1)
