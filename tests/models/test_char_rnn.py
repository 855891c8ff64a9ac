"""CharRNNForCausalLM: loss, tying, presets, state cache, generate(), pipeline."""

import pytest
import torch
from torch.nn import functional as F
from transformers import AutoModelForCausalLM, pipeline

from hfattn import CharRNNConfig, CharRNNForCausalLM
from hfattn.tokenization.characters import build_char_tokenizer

VOCAB = 24


def tiny(cell="gru", **kw):
    torch.manual_seed(0)
    cfg = dict(vocab_size=VOCAB, embedding_dim=8, hidden_size=16, num_layers=2, cell=cell)
    return CharRNNForCausalLM(CharRNNConfig(**{**cfg, **kw})).eval()


@pytest.mark.parametrize("cell", ["gru", "lstm", "rnn"])
def test_loss_is_shifted_cross_entropy(cell):
    model = tiny(cell)
    x = torch.randint(4, VOCAB, (3, 11))
    out = model(x, labels=x)
    expected = F.cross_entropy(out.logits[:, :-1].reshape(-1, VOCAB), x[:, 1:].reshape(-1))
    torch.testing.assert_close(out.loss, expected)
    assert out.logits.shape == (3, 11, VOCAB)
    # the returned state continues the sequence exactly
    first = model(x[:, :6], use_cache=True)
    rest = model(x[:, 6:], cache=first.cache)
    torch.testing.assert_close(torch.cat([first.logits, rest.logits], 1), out.logits)


def test_padding_positions_do_not_change_the_state():
    model = tiny("lstm")
    x = torch.randint(4, VOCAB, (1, 5))
    padded = torch.cat([torch.zeros(1, 3, dtype=torch.long), x], 1)
    mask = torch.cat([torch.zeros(1, 3), torch.ones(1, 5)], 1).long()
    a = model(x, use_cache=True)
    b = model(padded, attention_mask=mask, use_cache=True)
    torch.testing.assert_close(b.logits[:, 3:], a.logits)
    for name in ("h", "c"):
        torch.testing.assert_close(b.cache[name], a.cache[name])


@pytest.mark.parametrize("hidden", [8, 16])
def test_tied_embeddings_share_storage_and_survive_save(tmp_path, hidden):
    model = tiny("gru", hidden_size=hidden, tie_word_embeddings=True)
    assert model.lm_head.weight.data_ptr() == model.embeddings.weight.data_ptr()
    assert (model.output_projection is None) == (hidden == 8)
    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert loaded.lm_head.weight.data_ptr() == loaded.embeddings.weight.data_ptr()
    x = torch.randint(4, VOCAB, (2, 7))
    torch.testing.assert_close(loaded(x).logits, model(x).logits)


@pytest.mark.parametrize("tied", [False, True])
def test_embeddings_start_at_unit_scale_and_the_head_near_zero(tied):
    """Embeddings N(0, 1), or N(0, 1/embedding_dim) when tied to the output layer; the head's
    weights N(0, initializer_range), so the first predictions are near uniform."""
    torch.manual_seed(0)
    config = CharRNNConfig(
        vocab_size=200, embedding_dim=64, hidden_size=64, tie_word_embeddings=tied
    )
    weight = CharRNNForCausalLM(config).embeddings.weight
    expected = 64**-0.5 if tied else 1.0
    assert weight.std().item() == pytest.approx(expected, rel=0.05)
    assert abs(weight.mean().item()) < 0.05 * expected
    if not tied:
        head = CharRNNForCausalLM(config).lm_head.weight
        assert head.std().item() == pytest.approx(config.initializer_range, rel=0.05)


def test_presets_and_bad_configs():
    geron = CharRNNConfig.from_preset("geron", vocab_size=40)
    assert (geron.embedding_dim, geron.hidden_size, geron.num_layers, geron.cell) == (
        16,
        128,
        1,
        "gru",
    )
    karpathy = CharRNNConfig.from_preset("karpathy")
    assert (karpathy.hidden_size, karpathy.num_layers, karpathy.cell) == (128, 2, "lstm")
    layers = CharRNNForCausalLM(karpathy).layers
    assert len(layers) == 2 and all(layer.mode == "LSTM" for layer in layers)
    with pytest.raises(ValueError, match="cell must be one of gru, lstm, rnn"):
        CharRNNConfig(cell="transformer")
    with pytest.raises(ValueError, match="hidden_size must be a positive integer"):
        CharRNNConfig(hidden_size=-2)
    with pytest.raises(ValueError, match="preset must be one of"):
        CharRNNConfig.from_preset("nope")


def test_each_new_character_costs_one_step():
    model = tiny()
    lengths = []
    model.layers[0].register_forward_hook(lambda m, args, out: lengths.append(args[0].shape[1]))
    model.generate(torch.randint(4, VOCAB, (1, 9)), max_new_tokens=6, do_sample=False)
    assert lengths == [9] + [1] * 5  # prefill once, then one step per new character


def test_beam_search_finds_a_sequence_at_least_as_likely_as_greedy():
    model = tiny()
    prompt = torch.randint(4, VOCAB, (1, 4))

    def logprob(seq):
        logits = model(seq).logits[0, 3:-1].log_softmax(-1)
        return logits.gather(1, seq[0, 4:, None]).sum()

    greedy = model.generate(prompt, max_new_tokens=6, do_sample=False)
    beam = model.generate(
        prompt, max_new_tokens=6, num_beams=4, do_sample=False, length_penalty=0.0
    )
    assert logprob(beam) >= logprob(greedy) - 1e-5


def test_left_padded_batch_matches_single_prompts():
    model = tiny()
    a, b = torch.randint(4, VOCAB, (1, 6)), torch.randint(4, VOCAB, (1, 3))
    batch = torch.cat([a, torch.cat([torch.zeros(1, 3, dtype=torch.long), b], 1)])
    mask = torch.ones_like(batch)
    mask[1, :3] = 0
    out = model.generate(
        batch, attention_mask=mask, max_new_tokens=5, do_sample=False, pad_token_id=0
    )
    assert torch.equal(out[0, 6:], model.generate(a, max_new_tokens=5, do_sample=False)[0, 6:])
    assert torch.equal(out[1, 6:], model.generate(b, max_new_tokens=5, do_sample=False)[0, 3:])


def test_text_generation_pipeline(tmp_path):
    text = "to be or not to be, that is the question\n"
    tok = build_char_tokenizer(text)
    model = CharRNNForCausalLM(CharRNNConfig(vocab_size=len(tok), embedding_dim=8, hidden_size=16))
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    generator = pipeline("text-generation", model=str(tmp_path), tokenizer=str(tmp_path))
    out = generator("to be", max_new_tokens=7, do_sample=False)[0]["generated_text"]
    ids = torch.tensor([tok("to be", add_special_tokens=False)["input_ids"]])
    direct = model.generate(ids, max_new_tokens=7, do_sample=False, pad_token_id=tok.pad_token_id)
    assert out == tok.decode(direct[0], skip_special_tokens=True)
    assert out.startswith("to be") and len(out) > len("to be")
