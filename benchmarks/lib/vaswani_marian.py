"""The Vaswani Transformer and transformers' ``MarianMTModel`` built as the same network,
Marian holding a copy of hfattn's weights, with the inputs and generation settings both get
(``benchmarks/bench_vaswani.py``, ``bench_export.py`` and ``bench_space_load.py --engines``).

The Marian model is configured to the *same* network: the same layers, d_model, heads, FFN
size and vocabulary, post-LN, static sinusoidal positions, ReLU, embeddings × √d, one embedding
matrix shared by encoder, decoder and output layer, dropout 0.1 on the residuals and the
embeddings, ``attn_implementation="sdpa"`` in both; :func:`check_same_function` checks that the
two compute the same logits.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import GenerationConfig, MarianConfig, MarianMTModel

from hfattn import VaswaniConfig, VaswaniForConditionalGeneration

PAD, UNK, BOS, EOS = 0, 1, 2, 3


@dataclass(frozen=True)
class Size:
    """One model size and its training batch."""

    name: str
    layers: int
    d_model: int
    heads: int
    ffn: int
    batch: int


def make_models(size: Size, vocab: int, max_positions: int, device: str):
    """``(hfattn, marian)`` of the same architecture, Marian holding a copy of hfattn's weights."""
    torch.manual_seed(0)
    config = VaswaniConfig(
        vocab_size=vocab,
        encoder_layers=size.layers,
        decoder_layers=size.layers,
        d_model=size.d_model,
        num_heads=size.heads,
        ffn_dim=size.ffn,
        activation="relu",
        dropout=0.1,
        attention_dropout=0.0,
        activation_dropout=0.0,
        max_position_embeddings=max_positions,
        position_embedding="sinusoidal",
        norm_position="post",
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        label_smoothing=0.0,
        pad_token_id=PAD,
        eos_token_id=EOS,
        bos_token_id=BOS,
        decoder_start_token_id=BOS,
    )
    ours = VaswaniForConditionalGeneration._from_config(config, attn_implementation="sdpa")
    marian_config = MarianConfig(
        vocab_size=vocab,
        decoder_vocab_size=vocab,
        encoder_layers=size.layers,
        decoder_layers=size.layers,
        d_model=size.d_model,
        encoder_attention_heads=size.heads,
        decoder_attention_heads=size.heads,
        encoder_ffn_dim=size.ffn,
        decoder_ffn_dim=size.ffn,
        activation_function="relu",
        dropout=0.1,
        attention_dropout=0.0,
        activation_dropout=0.0,
        max_position_embeddings=max_positions,
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        pad_token_id=PAD,
        eos_token_id=EOS,
        bos_token_id=BOS,
        decoder_start_token_id=BOS,
        forced_eos_token_id=None,
    )
    marian = MarianMTModel._from_config(marian_config, attn_implementation="sdpa")
    copy_weights(ours, marian)
    ours.to(device)
    marian.to(device)
    return ours, marian


def copy_weights(ours: VaswaniForConditionalGeneration, marian: MarianMTModel) -> None:
    """Load hfattn's weights into Marian (names differ only in ``o_proj``/``out_proj`` and the
    ``feed_forward.`` prefix; the shared embedding, the output bias and the position tables)."""
    source = ours.state_dict()
    target = marian.state_dict()
    mapped = {}
    for name in target:
        if name in ("model.shared.weight", "lm_head.weight") or name.endswith(
            "embed_tokens.weight"
        ):
            mapped[name] = source["model.encoder.embed_tokens.weight"]
        elif name == "final_logits_bias":
            mapped[name] = source["lm_head.bias"][None]
        elif name.endswith("embed_positions.weight"):
            stack = name.split(".")[1]
            mapped[name] = ours.model.get_submodule(stack).embed_positions.weight
        else:
            mine = name.replace("out_proj", "o_proj")
            mine = mine.replace(".fc1.", ".feed_forward.fc1.").replace(
                ".fc2.", ".feed_forward.fc2."
            )
            mapped[name] = source[mine]
    with torch.no_grad():
        for name, value in mapped.items():
            target[name].copy_(value)
    used = {
        "lm_head.bias",
        "model.encoder.embed_tokens.weight",
        "model.decoder.embed_tokens.weight",
    }
    for name in mapped:
        mine = name.replace("out_proj", "o_proj")
        used.add(mine.replace(".fc1.", ".feed_forward.fc1.").replace(".fc2.", ".feed_forward.fc2."))
    missing = [n for n in source if n not in used and "embed_positions" not in n]
    if missing:
        raise RuntimeError(f"hfattn weights with no Marian counterpart: {missing}")


def make_batch(batch: int, src_len: int, tgt_len: int, vocab: int, device: str, seed: int = 0):
    """Right-padded sources of src_len/2 … src_len tokens (the first at full length) and
    full-length targets."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(src_len // 2, src_len + 1, (batch,), generator=g)
    lengths[0] = src_len
    ids = torch.randint(4, vocab, (batch, src_len), generator=g)
    mask = (torch.arange(src_len)[None] < lengths[:, None]).long()
    labels = torch.randint(4, vocab, (batch, tgt_len), generator=g)
    labels[:, -1] = EOS
    return (ids * mask).to(device), mask.to(device), labels.to(device)


def check_same_function(ours, marian, ids, mask, labels, autocast, bf16: bool) -> float:
    """Max |logit difference| of the two models in eval mode (raises if they differ)."""
    ours.eval()
    marian.eval()
    with torch.no_grad(), autocast():
        a = ours(input_ids=ids, attention_mask=mask, labels=labels).logits.float()
        b = marian(input_ids=ids, attention_mask=mask, labels=labels).logits.float()
    diff = (a - b).abs().max().item()
    tolerance = (0.1 if bf16 else 1e-4) * max(1.0, a.abs().max().item())
    if diff > tolerance:
        raise RuntimeError(f"hfattn and Marian logits differ by {diff}: not the same network")
    return diff


def generation_config(beams: int, new_tokens: int, use_cache: bool) -> GenerationConfig:
    """Deterministic decoding of exactly ``new_tokens`` tokens (``beams`` wide; greedy at
    1), with or without the cache, for either model (the same special tokens)."""
    return GenerationConfig(
        do_sample=False,
        num_beams=beams,
        min_new_tokens=new_tokens,
        max_new_tokens=new_tokens,
        use_cache=use_cache,
        pad_token_id=PAD,
        eos_token_id=EOS,
        bos_token_id=BOS,
        decoder_start_token_id=BOS,
        forced_eos_token_id=None,
        length_penalty=1.0,
        early_stopping=False,
    )
