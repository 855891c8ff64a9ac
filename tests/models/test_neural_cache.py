"""The char-RNN's continuous cache (Grave et al. 2017): the mixture it defines, its memory
carried through calls and generate(), and the model left unchanged where it is off."""

import math

import pytest
import torch

from hfattn import CharRNNConfig, CharRNNForCausalLM
from hfattn.models.neural_cache import MEMORY_STATES

VOCAB = 12
CACHE = {"neural_cache_size": 5, "neural_cache_theta": 0.5, "neural_cache_lambda": 0.3}


def tiny(**kw):
    torch.manual_seed(0)
    cfg = {"vocab_size": VOCAB, "embedding_dim": 8, "hidden_size": 16, "num_layers": 2, **kw}
    return CharRNNForCausalLM(CharRNNConfig(**cfg)).eval()


def plain_log_probs(model, ids):
    """The model's own log-probabilities and top-layer hidden states, cache switched off."""
    size = model.config.neural_cache_size
    model.config.neural_cache_size = 0
    out = model(ids, output_hidden_states=True)
    model.config.neural_cache_size = size
    return out.logits.log_softmax(-1), out.hidden_states[-1]


@torch.no_grad()
def test_the_mixture_follows_its_definition_position_by_position():
    model = tiny(**CACHE)
    ids = torch.randint(4, VOCAB, (2, 14))
    got = model(ids).logits
    own, hidden = plain_log_probs(model, ids)
    size, theta, lam = 5, 0.5, 0.3
    for b in range(2):
        for t in range(14):
            earlier = range(max(0, t - size), t)
            if not earlier:  # nothing read yet: the model's own distribution
                torch.testing.assert_close(got[b, t], own[b, t])
                continue
            weights = torch.softmax(
                torch.stack([theta * hidden[b, t] @ hidden[b, j] for j in earlier]), 0
            )
            cache = torch.zeros(VOCAB)
            for w, j in zip(weights, earlier, strict=True):
                cache[ids[b, j + 1]] += w
            expected = ((1 - lam) * own[b, t].exp() + lam * cache).log()
            torch.testing.assert_close(got[b, t], expected)
    torch.testing.assert_close(got.exp().sum(-1), torch.ones(2, 14))


@torch.no_grad()
def test_memory_carried_in_the_cache_continues_the_text_exactly():
    model = tiny(**CACHE)
    ids = torch.randint(4, VOCAB, (3, 20))
    whole = model(ids, labels=ids)
    cache, parts = None, []
    for start in range(0, 20, 7):
        out = model(ids[:, start : start + 7], cache=cache, use_cache=True)
        cache, parts = out.cache, [*parts, out.logits]
    torch.testing.assert_close(torch.cat(parts, 1), whole.logits)
    assert [tuple(cache[name].shape) for name in MEMORY_STATES] == [(3, 5, 16), (3, 5), (3, 5)]
    assert torch.equal(cache["memory_ids"], ids[:, -5:])
    # the loss is the negative log-likelihood of the mixture
    nll = -whole.logits[:, :-1].gather(-1, ids[:, 1:, None]).mean()
    torch.testing.assert_close(whole.loss, nll)


@torch.no_grad()
def test_one_position_at_a_time_past_the_size_matches_one_call():
    """Calls of one position (as ``generate()`` makes) long after the memory is full, then a
    call of several, give the logits of one call over the whole text; padding read into the
    memory is no key and no value."""
    model = tiny(**CACHE)
    ids = torch.randint(4, VOCAB, (2, 23))
    mask = torch.ones_like(ids)
    mask[1, :4] = 0  # a left-padded row
    whole = model(ids, attention_mask=mask).logits
    out = model(ids[:, :3], attention_mask=mask[:, :3], use_cache=True)
    cache, parts = out.cache, [out.logits]
    for t in range(3, 15):
        out = model(ids[:, t : t + 1], attention_mask=mask[:, : t + 1], cache=cache)
        parts.append(out.logits)
    out = model(ids[:, 15:], attention_mask=mask, cache=cache, use_cache=True)
    torch.testing.assert_close(torch.cat([*parts, out.logits], 1), whole)
    assert torch.equal(out.cache["memory_ids"], ids[:, -5:])


@torch.no_grad()
def test_off_in_training_and_at_size_zero_and_a_copy_of_the_model_at_lambda_zero():
    ids = torch.randint(4, VOCAB, (2, 9))
    plain = tiny()(ids).logits.log_softmax(-1)
    trained = tiny(**CACHE).train()(ids).logits.log_softmax(-1)
    torch.testing.assert_close(trained, plain)
    torch.testing.assert_close(tiny(**{**CACHE, "neural_cache_lambda": 0.0})(ids).logits, plain)
    assert "memory_keys" not in tiny()(ids, use_cache=True).cache


@torch.no_grad()
def test_a_repeated_passage_is_predicted_better_the_second_time():
    model = tiny(**{**CACHE, "neural_cache_size": 40, "neural_cache_theta": 2.0})
    passage = torch.randint(4, VOCAB, (1, 15))
    ids = torch.cat([passage, passage], 1)
    with_cache = model(ids).logits[0, 15:-1].gather(-1, ids[0, 16:, None])
    own = plain_log_probs(model, ids)[0][0, 15:-1].gather(-1, ids[0, 16:, None])
    assert with_cache.mean() > own.mean() + 0.1


@torch.no_grad()
def test_generate_decodes_the_mixture_and_keeps_its_memory_per_row():
    model = tiny(**CACHE)
    prompt = torch.randint(4, VOCAB, (1, 6))
    greedy = model.generate(prompt, max_new_tokens=8, do_sample=False)
    # each new character is the argmax of the mixture over the whole text read so far
    for t in range(6, 14):
        assert greedy[0, t] == model(greedy[:, :t]).logits[0, -1].argmax()
    # a left-padded row decodes as it does alone (padding is no memory)
    short = torch.randint(4, VOCAB, (1, 3))
    batch = torch.cat([prompt, torch.cat([torch.zeros(1, 3, dtype=torch.long), short], 1)])
    mask = torch.ones_like(batch)
    mask[1, :3] = 0
    out = model.generate(
        batch, attention_mask=mask, max_new_tokens=5, do_sample=False, pad_token_id=0
    )
    assert torch.equal(out[0, 6:], greedy[0, 6:11])
    alone = model.generate(short, max_new_tokens=5, do_sample=False)
    assert torch.equal(out[1, 6:], alone[0, 3:])


@torch.no_grad()
def test_beam_search_reorders_the_memory_with_the_state():
    model = tiny(**CACHE)
    prompt = torch.randint(4, VOCAB, (1, 4))

    def log_prob(seq):
        return model(seq).logits[0, 3:-1].gather(1, seq[0, 4:, None]).sum()

    greedy = model.generate(prompt, max_new_tokens=6, do_sample=False)
    out = model.generate(
        prompt,
        max_new_tokens=6,
        num_beams=4,
        do_sample=False,
        length_penalty=0.0,
        output_scores=True,
        return_dict_in_generate=True,
    )
    assert log_prob(out.sequences) >= log_prob(greedy) - 1e-5
    # the beam's score is the mixture's log-likelihood of the sequence it returns
    assert math.isclose(out.sequences_scores.item(), log_prob(out.sequences).item(), abs_tol=1e-4)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("neural_cache_size", -1, "neural_cache_size must be an integer >= 0, got -1"),
        ("neural_cache_theta", 0, "neural_cache_theta must be a number > 0, got 0"),
        ("neural_cache_lambda", 1.0, r"neural_cache_lambda must be in \[0, 1\), got 1.0"),
    ],
)
def test_bad_cache_settings_name_the_field(field, value, message):
    with pytest.raises(ValueError, match=message):
        CharRNNConfig(**{field: value})


def test_the_settings_survive_save_and_load(tmp_path):
    model = tiny(**CACHE)
    model.save_pretrained(tmp_path)
    loaded = CharRNNForCausalLM.from_pretrained(tmp_path).eval()
    assert {k: getattr(loaded.config, k) for k in CACHE} == CACHE
    ids = torch.randint(4, VOCAB, (1, 9))
    torch.testing.assert_close(loaded(ids).logits, model(ids).logits)
    assert (tmp_path / "neural_cache.py").is_file()  # remote code imports it


def test_evaluation_reports_the_network_alone_beside_the_mixture():
    from hfattn.evaluation.language_modeling import evaluate_causal_lm

    ids = torch.randint(4, VOCAB, (400,))
    model = tiny(**{**CACHE, "neural_cache_size": 50})
    scores = evaluate_causal_lm(model, ids, batch_size=2, seq_len=16, zero_state_passages=2)
    alone = evaluate_causal_lm(tiny(), ids, batch_size=2, seq_len=16, zero_state_passages=0)
    assert list(scores)[:2] == ["loss", "loss_zero_state"]
    assert math.isclose(scores["loss_without_cache"], alone["loss"], rel_tol=1e-5)
    assert not math.isclose(scores["loss"], alone["loss"], rel_tol=1e-3)
    assert "loss_without_cache" not in alone


@torch.no_grad()
def test_head_logits_are_the_logits_before_the_mixture():
    for tied in (False, True):
        model = tiny(**CACHE, tie_word_embeddings=tied, embedding_dim=6)
        ids = torch.randint(4, VOCAB, (2, 9))
        out = model(ids, output_hidden_states=True)
        own, _ = plain_log_probs(model, ids)
        head = model.head_logits(out.hidden_states[-1]).log_softmax(-1)
        torch.testing.assert_close(head, own)


def test_evaluation_runs_the_recurrence_once_with_the_cache():
    from hfattn.evaluation.language_modeling import evaluate_causal_lm

    ids = torch.randint(4, VOCAB, (400,))
    runs = {}
    for name, kw in (("plain", {}), ("cache", {**CACHE, "neural_cache_size": 50})):
        model = tiny(**kw)
        calls = runs.setdefault(name, [])
        model.layers[0].register_forward_hook(lambda *_, calls=calls: calls.append(1))
        evaluate_causal_lm(model, ids, batch_size=2, seq_len=16, zero_state_passages=0)
    assert len(runs["cache"]) == len(runs["plain"]) > 0
