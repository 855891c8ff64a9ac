"""The Vaswani Transformer: equations, masks, cache, generation, initialisation, presets,
positions and Seq2SeqTrainer. The contracts every family keeps (saving, dtypes, output flags,
export, checkpointing, PEFT, remote code) are in ``test_model_contracts_*.py``."""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch
from torch.nn import functional as F
from transformers import AutoModelForSeq2SeqLM
from transformers.cache_utils import StaticCache

from hfattn import VaswaniConfig, VaswaniForConditionalGeneration
from hfattn.models.modeling_vaswani import tfixup_scales
from hfattn.models.scores import SCORES
from tests.helpers.model_testers import label_smoothed_loss
from tests.helpers.seq2seq_tasks import copy_reverse_batch as reverse_task_batch
from tests.helpers.tiny_vaswani import PAD, VOCAB, tiny_config


def tiny(**kw) -> VaswaniForConditionalGeneration:
    torch.manual_seed(0)
    return VaswaniForConditionalGeneration(tiny_config(**kw)).eval()


def batch(lengths=(7, 4, 6), seed=1):
    """Right-padded sources of the given lengths and their attention mask."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.full((len(lengths), max(lengths)), PAD)
    for row, n in enumerate(lengths):
        ids[row, :n] = torch.randint(4, VOCAB, (n,), generator=g)
    return ids, (ids != PAD).long()


# --------------------------------------------------------------------------- equations


def reference_mha(x, kv, attn, keep=None):
    """softmax(Q Kᵀ / √d_k + mask) V W_O written from the paper, head by head."""
    h, d = attn.num_heads, attn.key_dim
    q = attn.q_proj(x).view(*x.shape[:2], h, d).transpose(1, 2)
    k = attn.k_proj(kv).view(*kv.shape[:2], h, d).transpose(1, 2)
    v = attn.v_proj(kv).view(*kv.shape[:2], h, d).transpose(1, 2)
    energies = q @ k.transpose(-1, -2) / math.sqrt(d)
    if keep is not None:
        energies = energies.masked_fill(~keep, float("-inf"))
    heads = torch.softmax(energies, -1) @ v
    return attn.o_proj(heads.transpose(1, 2).reshape(*x.shape[:2], h * d))


def reference_ffn(x, ffn):
    return F.linear(F.relu(F.linear(x, ffn.fc1.weight, ffn.fc1.bias)), ffn.fc2.weight, ffn.fc2.bias)


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_encoder_and_decoder_layers_match_the_paper(norm_position):
    model = tiny(norm_position=norm_position, head_dim=8)  # 4 heads × 8 ≠ d_model 16
    ids, mask = batch()
    tgt = torch.randint(4, VOCAB, (3, 5), generator=torch.Generator().manual_seed(2))
    enc, dec = model.model.encoder, model.model.decoder
    pad_keep = mask.bool()[:, None, None, :]

    def sublayer(x, norm, f):
        return norm(x + f(x)) if norm_position == "post" else x + f(norm(x))

    x = enc.embed_tokens(ids) * 4.0 + enc.embed_positions(torch.arange(ids.shape[1]))
    for layer in enc.layers:
        x = sublayer(
            x,
            layer.self_attn_layer_norm,
            lambda y, a=layer.self_attn: reference_mha(y, y, a, pad_keep),
        )
        x = sublayer(x, layer.final_layer_norm, lambda y, f=layer.feed_forward: reference_ffn(y, f))
    if norm_position == "pre":
        x = enc.layer_norm(x)
    memory = x
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    y = dec.embed_tokens(tgt) * 4.0 + dec.embed_positions(torch.arange(5))
    for layer in dec.layers:
        y = sublayer(
            y,
            layer.self_attn_layer_norm,
            lambda z, a=layer.self_attn: reference_mha(z, z, a, causal),
        )
        y = sublayer(
            y,
            layer.encoder_attn_layer_norm,
            lambda z, a=layer.encoder_attn: reference_mha(z, memory, a, pad_keep),
        )
        y = sublayer(y, layer.final_layer_norm, lambda z, f=layer.feed_forward: reference_ffn(z, f))
    if norm_position == "pre":
        y = dec.layer_norm(y)
    expected = model.lm_head(y)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, decoder_input_ids=tgt)
    real = mask.bool()
    torch.testing.assert_close(
        out.encoder_last_hidden_state[real], memory[real].detach(), rtol=1e-4, atol=1e-5
    )
    torch.testing.assert_close(out.logits, expected.detach(), rtol=1e-4, atol=1e-5)


def test_eager_and_sdpa_agree_and_output_attentions_works_with_either():
    ids, mask = batch()
    tgt = torch.randint(4, VOCAB, (3, 5))
    outputs = {}
    for implementation in ("eager", "sdpa"):
        model = tiny()
        model.set_attn_implementation(implementation)
        with torch.no_grad():
            outputs[implementation] = model(
                input_ids=ids, attention_mask=mask, decoder_input_ids=tgt, output_attentions=True
            )
    torch.testing.assert_close(
        outputs["eager"].logits, outputs["sdpa"].logits, rtol=1e-5, atol=1e-5
    )
    out = outputs["sdpa"]
    assert len(out.cross_attentions) == 2 and out.cross_attentions[0].shape == (3, 4, 5, 7)
    assert out.decoder_attentions[0].shape == (3, 4, 5, 5)
    assert out.encoder_attentions[0].shape == (3, 4, 7, 7)
    for maps in (out.cross_attentions, out.decoder_attentions, out.encoder_attentions):
        torch.testing.assert_close(maps[0].sum(-1), torch.ones(maps[0].shape[:-1]))
    # no weight on padded source positions, nothing above the decoder's diagonal
    assert out.cross_attentions[1][1, :, :, 4:].abs().max() == 0
    assert out.decoder_attentions[0].triu(1).abs().max() == 0


def test_loss_is_label_smoothed_cross_entropy_of_shifted_labels():
    model = tiny(label_smoothing=0.1)
    ids, mask = batch()
    labels = torch.randint(4, VOCAB, (3, 5))
    labels[1, 3:] = -100
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    start = torch.full((3, 1), model.config.decoder_start_token_id)
    shifted = torch.cat([start, labels[:, :-1].masked_fill(labels[:, :-1] == -100, PAD)], 1)
    logits = model(input_ids=ids, attention_mask=mask, decoder_input_ids=shifted).logits
    expected, keep, _ = label_smoothed_loss(logits, labels, 0.1)
    torch.testing.assert_close(out.loss, expected, rtol=1e-5, atol=1e-6)
    summed = model(input_ids=ids, attention_mask=mask, labels=labels, num_items_in_batch=40).loss
    torch.testing.assert_close(summed, expected * keep.sum() / 40, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- cache and generation


def test_the_cache_grows_by_one_row_per_token_and_projects_the_source_once():
    model = tiny()
    ids, mask = batch()
    with torch.no_grad():
        out = model(
            input_ids=ids,
            attention_mask=mask,
            decoder_input_ids=torch.full((3, 1), 2),
            use_cache=True,
        )
        cache = out.cache
        assert cache.get_seq_length() == 1
        cross_before = cache.cross_attention_cache.layers[0].keys.clone()
        step = model(
            encoder_outputs=(out.encoder_last_hidden_state,),
            attention_mask=mask,
            decoder_input_ids=torch.full((3, 1), 5),
            cache=cache,
            use_cache=True,
        )
        assert step.cache.get_seq_length() == 2
        assert torch.equal(cache.cross_attention_cache.layers[0].keys, cross_before)
        full = model(
            input_ids=ids, attention_mask=mask, decoder_input_ids=torch.tensor([[2, 5]] * 3)
        )
    torch.testing.assert_close(step.logits[:, -1], full.logits[:, -1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("num_beams", [1, 3])
def test_a_static_cache_generates_what_the_dynamic_cache_does(num_beams):
    """``cache_implementation="static"`` (preallocated keys and values, what a compiled
    decoding step needs: its shapes never change) gives the tokens of the default cache."""
    model = tiny()
    ids, mask = batch()
    settings = dict(num_beams=num_beams, max_new_tokens=7, min_new_tokens=7, do_sample=False)
    dynamic = model.generate(input_ids=ids, attention_mask=mask, **settings)
    static = model.generate(
        input_ids=ids,
        attention_mask=mask,
        cache_implementation="static",
        return_dict_in_generate=True,
        **settings,
    )
    assert isinstance(static.cache.self_attention_cache, StaticCache)
    assert torch.equal(static.sequences, dynamic)
    assert not torch.equal(dynamic[:, 1:], dynamic[:, :1].expand_as(dynamic[:, 1:]))


@pytest.mark.parametrize("position_embedding", ["sinusoidal", "learned"])
def test_a_compiled_static_cache_step_has_no_graph_break(position_embedding):
    """``generate`` compiles the decoding step when the cache is static (transformers does it
    by itself on a GPU; ``_compile_all_devices`` asks for it here): with ``fullgraph=True``
    any graph break (a branch reading the cache's length, kept on the device) raises. The
    ``eager`` backend stands in for Inductor: graph breaks are TorchDynamo's, found before any
    backend runs. The tokens are the dynamic cache's, the sinusoids extended past
    ``max_position_embeddings``."""
    from transformers import CompileConfig

    torch._dynamo.reset()
    model = tiny(position_embedding=position_embedding, max_position_embeddings=16)
    ids, mask = batch()
    new_tokens = 8 if position_embedding == "learned" else 20  # 1 + 20 > 16 positions
    settings = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)
    compiled = CompileConfig(fullgraph=True, dynamic=False, backend="eager")
    compiled._compile_all_devices = True
    static = model.generate(
        input_ids=ids,
        attention_mask=mask,
        cache_implementation="static",
        compile_config=compiled,
        **settings,
    )
    assert torch.equal(static, model.generate(input_ids=ids, attention_mask=mask, **settings))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] >= 1  # it did compile
    torch._dynamo.reset()


def test_sampling_is_reproducible_and_respects_length():
    model = tiny()
    ids, mask = batch()
    runs = []
    for _ in range(2):
        torch.manual_seed(3)
        runs.append(
            model.generate(
                input_ids=ids, attention_mask=mask, do_sample=True, top_k=5, max_new_tokens=6
            )
        )
    assert torch.equal(*runs) and runs[0].shape[1] <= 7


# --------------------------------------------------------------------------- scores and masks


@pytest.mark.parametrize("score", ["dot", "general", "additive", "cosine", "gaussian", "euclidean"])
def test_other_scores_run_through_the_generic_path_and_train(score):
    assert score in SCORES
    model = tiny(attention_score=score).train()
    ids, mask = batch()
    labels = torch.randint(4, VOCAB, (3, 5))
    loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
    loss.backward()
    assert torch.isfinite(loss)
    grad = model.model.encoder.layers[0].self_attn.q_proj.weight.grad
    assert grad is not None and grad.abs().sum() > 0


def test_sparsemax_distribution_gives_sparse_cross_attention():
    model = tiny(attention_distribution="sparsemax")
    ids, mask = batch()
    with torch.no_grad():
        out = model(
            input_ids=ids,
            attention_mask=mask,
            decoder_input_ids=torch.randint(4, VOCAB, (3, 4)),
            output_attentions=True,
        )
    weights = out.cross_attentions[0]
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))
    assert (weights == 0).float().mean() > 0.2


def test_chollet_cross_attention_quirk_is_opt_in():
    ids, mask = batch((6, 6, 6))
    tgt = torch.randint(4, VOCAB, (3, 6))
    with torch.no_grad():
        plain = tiny().forward(
            input_ids=ids, attention_mask=mask, decoder_input_ids=tgt, output_attentions=True
        )
        quirk = tiny(chollet_cross_attention_mask=True).forward(
            input_ids=ids, attention_mask=mask, decoder_input_ids=tgt, output_attentions=True
        )
    assert plain.cross_attentions[0].triu(1).abs().sum() > 0  # every source position visible
    assert quirk.cross_attentions[0].triu(1).abs().max() == 0  # target step i sees source j ≤ i


# --------------------------------------------------------------------------- init, presets, errors


def test_tfixup_removes_layer_norms_and_scales_xavier_weights():
    xavier = tiny(init_method="xavier")
    fixup = tiny(init_method="t-fixup")
    assert not any(isinstance(m, torch.nn.LayerNorm) for m in fixup.modules())
    assert any(isinstance(m, torch.nn.LayerNorm) for m in xavier.modules())
    encoder_scale, decoder_scale = tfixup_scales(fixup.config)
    assert encoder_scale == pytest.approx(0.67 * 2**-0.25)
    assert decoder_scale == pytest.approx(18**-0.25)
    x, f = xavier.model, fixup.model
    for name in ("v_proj", "o_proj"):
        torch.testing.assert_close(
            getattr(f.encoder.layers[1].self_attn, name).weight,
            getattr(x.encoder.layers[1].self_attn, name).weight * encoder_scale,
        )
        torch.testing.assert_close(
            getattr(f.decoder.layers[0].encoder_attn, name).weight,
            getattr(x.decoder.layers[0].encoder_attn, name).weight * decoder_scale,
        )
    torch.testing.assert_close(
        f.decoder.layers[1].feed_forward.fc2.weight,
        x.decoder.layers[1].feed_forward.fc2.weight * decoder_scale,
    )
    torch.testing.assert_close(
        f.encoder.layers[0].self_attn.q_proj.weight, x.encoder.layers[0].self_attn.q_proj.weight
    )
    torch.testing.assert_close(
        f.encoder.embed_tokens.weight, x.encoder.embed_tokens.weight * decoder_scale
    )
    assert x.encoder.embed_tokens.weight.std().item() == pytest.approx(16**-0.5, rel=0.15)


def test_presets_match_the_seeds():
    chollet = VaswaniForConditionalGeneration(
        VaswaniConfig.from_preset("chollet", vocab_size=15000)
    )
    assert sum(p.numel() for p in chollet.parameters()) == 19_960_216  # the seed's model.summary()
    attn = chollet.model.encoder.layers[0].self_attn
    assert (attn.num_heads, attn.key_dim, attn.q_proj.out_features) == (8, 256, 2048)
    assert chollet.config.head_dropout == 0.5 and chollet.config.position_embedding == "learned"
    geron = VaswaniConfig.from_preset("geron")
    assert (
        geron.encoder_layers,
        geron.d_model,
        geron.num_heads,
        geron.head_dim,
        geron.ffn_dim,
    ) == (2, 128, 8, 128, 128)
    base = VaswaniConfig.from_preset("paper-base", vocab_size=37000)
    assert (base.encoder_layers, base.d_model, base.head_dim, base.label_smoothing) == (
        6,
        512,
        64,
        0.1,
    )
    # fairseq's transformer_iwslt_de_en: 6+6, d 512, 4 heads of 128, FFN 1024, dropout 0.3,
    # attention and activation dropout 0.1, one embedding matrix for source, target and output
    iwslt = VaswaniConfig.from_preset("iwslt", vocab_size=10000)
    assert (iwslt.encoder_layers, iwslt.decoder_layers, iwslt.d_model, iwslt.num_heads,
            iwslt.head_dim, iwslt.ffn_dim) == (6, 6, 512, 4, 128, 1024)  # fmt: skip
    assert (iwslt.dropout, iwslt.attention_dropout, iwslt.activation_dropout) == (0.3, 0.1, 0.1)
    assert (iwslt.label_smoothing, iwslt.norm_position) == (0.1, "post")
    d, f, v = 512, 1024, 10000
    attention, ffn, norm = 4 * (d * d + d), d * f + f + f * d + d, 2 * d
    encoder_layer, decoder_layer = attention + ffn + 2 * norm, 2 * attention + ffn + 3 * norm
    expected = v * d + v + 6 * encoder_layer + 6 * decoder_layer  # embeddings tied, + out bias
    model = VaswaniForConditionalGeneration(iwslt)
    assert sum(p.numel() for p in model.parameters()) == expected == 36_673_296
    assert (
        type(AutoModelForSeq2SeqLM.from_config(tiny_config())).__name__
        == "VaswaniForConditionalGeneration"
    )


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"d_model": 18, "num_heads": 4}, r"d_model \(18\) must be divisible by num_heads \(4\)"),
        ({"activation": "swishy"}, "activation must be one of .*relu.*; got 'swishy'"),
        ({"norm_position": "middle"}, "norm_position must be one of post, pre; got 'middle'"),
        ({"position_embedding": "rotary"}, "position_embedding must be one of sinusoidal, learned"),
        ({"attention_score": "psychic"}, "attention_score must be one of"),
        ({"init_method": "lsuv"}, "init_method must be one of xavier, normal, t-fixup"),
        ({"dropout": 1.5}, r"^dropout must be in \[0, 1\), got 1.5$"),
        ({"embedding_dropout": 1.5}, r"^embedding_dropout must be in \[0, 1\), got 1.5$"),
        ({"head_dim": 0}, "^head_dim must be a positive integer, got 0$"),
    ],
)
def test_bad_configs_name_the_field_and_the_allowed_values(kw, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(**kw)


def test_learned_positions_refuse_long_inputs_and_sinusoidal_ones_extend():
    ids = torch.randint(4, VOCAB, (1, 40))
    learned = tiny(position_embedding="learned")
    with pytest.raises(
        ValueError,
        match="41 tokens is longer than the 32 learned positions|40 tokens is longer than the 32 learned positions",
    ):
        learned(input_ids=ids, decoder_input_ids=ids[:, :3])
    sinusoidal = tiny()
    with torch.no_grad():
        out = sinusoidal(input_ids=ids, decoder_input_ids=ids[:, :3])
    assert torch.isfinite(out.logits).all()


# --------------------------------------------------------------------------- training


copy_reverse_batch = partial(reverse_task_batch, size=64, length=6)


@pytest.mark.slow
def test_two_layer_model_learns_to_reverse_sequences_perfectly():
    torch.manual_seed(0)
    model = VaswaniForConditionalGeneration(tiny_config(d_model=32, ffn_dim=64)).train()
    # foreach: one kernel per update for all tensors (as on GPU), the same steps in less CPU
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, foreach=True)
    g = torch.Generator().manual_seed(0)
    for _ in range(300):
        src, labels = copy_reverse_batch(g)
        loss = model(input_ids=src, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    src, labels = copy_reverse_batch(g, size=200)
    model.eval()
    with torch.no_grad():
        out = model.generate(input_ids=src, max_new_tokens=7, do_sample=False)
    assert torch.equal(out[:, 1:8], labels)  # every token of 200 unseen sequences


def test_untied_model_saves_every_matrix(tmp_path):
    model = tiny(share_encoder_decoder_embeddings=False, tie_word_embeddings=False)
    assert model.lm_head.weight is not model.model.decoder.embed_tokens.weight
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path)
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[name], tensor, rtol=0, atol=0, msg=name)


def test_seq2seq_trainer_lowers_the_loss(tmp_path):
    from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments

    g = torch.Generator().manual_seed(0)
    src, labels = copy_reverse_batch(g, size=256)
    examples = [{"input_ids": src[i], "labels": labels[i]} for i in range(len(src))]
    model = tiny(d_model=32, ffn_dim=64).train()
    with torch.no_grad():
        before = model(input_ids=src, labels=labels).loss.item()
    args = Seq2SeqTrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=32,
        num_train_epochs=5,
        learning_rate=3e-3,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        seed=0,
    )
    Seq2SeqTrainer(model=model, args=args, train_dataset=examples).train()
    model.eval()
    with torch.no_grad():
        after = model(input_ids=src, labels=labels).loss.item()
    assert after < 0.6 * before


# --------------------------------------------------------------------------- positions,
# checkpointing


def test_contiguous_positions_are_table_slices_checked_on_the_shape():
    from hfattn.models.positional import LearnedPositionalEmbedding, SinusoidalPositionalEmbedding

    sinusoidal, learned = SinusoidalPositionalEmbedding(8, 4), LearnedPositionalEmbedding(8, 4)
    for module in (sinusoidal, learned):
        torch.testing.assert_close(
            module(past_length=3, length=4), module(torch.arange(3, 7)), rtol=0, atol=0
        )
    longer = sinusoidal(past_length=6, length=5)  # computed beyond the table
    torch.testing.assert_close(longer, sinusoidal(torch.arange(6, 11)), rtol=0, atol=0)
    with pytest.raises(ValueError, match="num_positions=8; got position 9"):
        learned(past_length=6, length=4)
    assert SinusoidalPositionalEmbedding(8, 4, dtype=torch.bfloat16).weight.dtype == torch.bfloat16


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_checkpointing_recomputes_every_layer_and_drops_the_cache_only_in_training():
    model = tiny().train()
    ids, mask = batch()
    labels = torch.randint(4, VOCAB, (3, 5))
    model.gradient_checkpointing_enable({"use_reentrant": False})
    layers = [*model.model.encoder.layers, *model.model.decoder.layers]
    recomputed = []
    for layer in layers:
        checkpoint = layer._gradient_checkpointing_func
        layer._gradient_checkpointing_func = partial(
            lambda f, *a, **k: recomputed.append(1) or f(*a, **k), checkpoint
        )
    out = model(input_ids=ids, attention_mask=mask, labels=labels, use_cache=True)
    out.loss.backward()
    assert len(recomputed) == len(layers)
    assert out.cache is None  # no cache while training with checkpointing (Bart)
    with torch.no_grad():
        eval_out = model.eval()(input_ids=ids, attention_mask=mask, decoder_input_ids=labels)
    assert eval_out.cache is not None
