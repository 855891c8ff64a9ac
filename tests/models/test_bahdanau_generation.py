"""BahdanauForConditionalGeneration's RecurrentCache and ``generate()``: the cache's batch
operations, cached against uncached generation of every variant, continuing a sequence from the
cache, beam search against greedy, the alignment of every generated token.

The contracts every family keeps (saving, dtypes, output flags, export, checkpointing, PEFT,
Trainer, remote code) are in ``test_model_contracts_*.py``."""

import math

import pytest
import torch

from hfattn import RecurrentCache
from tests.helpers.tiny_bahdanau import EOS, VARIANTS, VOCAB, batch, tiny

# --------------------------------------------------------------------------- cache & generate


def test_recurrent_cache_batch_operations():
    h = torch.arange(12.0).view(3, 2, 2)  # batch-first
    c = torch.arange(12.0).view(2, 3, 2)  # batch on dim 1
    cache = RecurrentCache({"h": h.requires_grad_(), "c": c}, seen_tokens=4, batch_dims={"c": 1})
    assert cache.get_seq_length() == 4 and cache.batch_size == 3 and "h" in cache
    detached = cache.detach()
    assert not detached["h"].requires_grad and cache["h"].requires_grad
    cache.reorder_cache(torch.tensor([2, 2, 0]))
    assert torch.equal(cache["h"], h[[2, 2, 0]]) and torch.equal(cache["c"], c[:, [2, 2, 0]])
    cache.batch_repeat_interleave(2)
    assert cache.batch_size == 6 and torch.equal(cache["c"][:, 1], c[:, 2])
    cache.batch_select_indices(torch.tensor([0, 5]))
    assert torch.equal(cache["h"], h[[2, 0]])
    cache.update_states(2, h=torch.zeros(2, 2, 2), c=None)
    assert cache.get_seq_length() == 6 and "c" not in cache
    with pytest.raises(NotImplementedError, match="cannot be cropped"):
        cache.crop(3)
    cache.reset()
    assert cache.is_empty and cache.get_seq_length() == 0


@torch.no_grad()
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_cached_generation_equals_uncached(variant):
    model = tiny(**VARIANTS[variant])
    ids, mask = batch()
    for kwargs in (
        {"do_sample": False},
        {"num_beams": 3, "length_penalty": 0.7, "no_repeat_ngram_size": 2},
        {"do_sample": True, "top_k": 5, "num_return_sequences": 2},
    ):
        results = []
        for use_cache in (True, False):
            torch.manual_seed(7)
            results.append(
                model.generate(
                    input_ids=ids,
                    attention_mask=mask,
                    max_new_tokens=8,
                    use_cache=use_cache,
                    **kwargs,
                )
            )
        assert torch.equal(results[0], results[1]), kwargs


@torch.no_grad()
def test_the_cache_counts_tokens_and_continues_the_sequence():
    model = tiny(attention="luong", input_feeding=True)
    ids, mask = batch()
    y = torch.randint(4, VOCAB, (3, 6))
    full = model(input_ids=ids, attention_mask=mask, decoder_input_ids=y)
    first = model(input_ids=ids, attention_mask=mask, decoder_input_ids=y[:, :4], use_cache=True)
    cache = first.cache
    assert isinstance(cache, RecurrentCache) and cache.get_seq_length() == 4
    assert set(cache) == {"h", "c", "feed", "keys"}
    rest = model(input_ids=ids, attention_mask=mask, decoder_input_ids=y[:, 4:], cache=cache)
    torch.testing.assert_close(torch.cat([first.logits, rest.logits], 1), full.logits)
    assert cache.get_seq_length() == 6


def sequence_log_prob(model, ids, mask, sequence):
    """Σ_t log p(y_t | y_<t, x) of a generated sequence (start token first), up to its first EOS."""
    tokens = sequence[1:]
    logp = model(
        input_ids=ids, attention_mask=mask, decoder_input_ids=sequence[None, :-1]
    ).logits.log_softmax(-1)[0]
    total = 0.0
    for t, token in enumerate(tokens.tolist()):
        total += logp[t, token].item()
        if token == EOS:
            break
    return total


@torch.no_grad()
def test_beam_search_finds_a_sequence_greedy_cannot_beat():
    model = tiny(perturb=0.8, cell="gru")
    ids, mask = batch((7, 4, 6, 5, 3, 7), seed=3)
    common = dict(input_ids=ids, attention_mask=mask, max_new_tokens=6, length_penalty=0.0)
    greedy = model.generate(**common, do_sample=False)
    beam = model.generate(
        **common, num_beams=5, early_stopping=True, output_scores=True, return_dict_in_generate=True
    )
    strictly_better = 0
    for i in range(ids.shape[0]):
        row_ids, row_mask = ids[i : i + 1], mask[i : i + 1]
        g = sequence_log_prob(model, row_ids, row_mask, greedy[i])
        b = sequence_log_prob(model, row_ids, row_mask, beam.sequences[i])
        # with length_penalty 0 the beam score is the plain sum of log-probabilities
        assert math.isclose(beam.sequences_scores[i].item(), b, rel_tol=1e-4, abs_tol=1e-4)
        assert b >= g - 1e-4
        strictly_better += b > g + 1e-4
    assert strictly_better >= 1  # on these inputs beam search does find better sequences


@torch.no_grad()
def test_generate_returns_the_alignment_of_every_generated_token():
    model = tiny()
    ids, mask = batch((7, 4))
    out = model.generate(
        input_ids=ids,
        attention_mask=mask,
        max_new_tokens=5,
        min_new_tokens=5,
        output_attentions=True,
        return_dict_in_generate=True,
    )
    assert len(out.cross_attentions) == 5
    steps = torch.cat([step[0] for step in out.cross_attentions], 2)  # [batch, 1, 5, src]
    assert steps.shape == (2, 1, 5, 7)
    torch.testing.assert_close(steps.sum(-1), torch.ones(2, 1, 5))
    assert torch.all(steps[1, ..., 4:] == 0)
    # the alignment of a teacher-forced pass over the output is the same
    forced = model(
        input_ids=ids,
        attention_mask=mask,
        decoder_input_ids=out.sequences[:, :-1],
        output_attentions=True,
    )
    torch.testing.assert_close(forced.cross_attentions[0], steps)
