"""Tiny random "pretrained" model folders for the fine-tuning tests (the Hub is out of reach).

Each helper writes what ``save_pretrained`` writes for a real checkpoint (``config.json``,
``model.safetensors``, the tokenizer files) into a folder that a recipe names as
``model: <folder>`` (``--set model=<folder>``). The models are random, with the real
architecture class (``GPT2LMHeadModel``, ``DistilBertForMaskedLM``), so the recipes run the
exact code paths of ``openai-community/gpt2`` / ``distilbert-base-uncased``; the tokenizers are
trained here on a few Shakespeare plays with the same algorithm as the real ones (byte-level
BPE for GPT-2, lower-cased WordPiece for DistilBERT), small vocabularies.
"""

from __future__ import annotations

from pathlib import Path

from hfattn.data.shakespeare import play_text

TOKENIZER_PLAYS = ("hamlet", "king-lear", "twelfth-night")
"""Training plays the tiny tokenizers are trained on (none of them is held out)."""

GPT2_EOS = "<|endoftext|>"


def _plays_text(chars_per_play: int) -> list[str]:
    return [play_text(slug)[:chars_per_play] for slug in TOKENIZER_PLAYS]


def tiny_gpt2_tokenizer(vocab_size: int = 400, model_max_length: int = 128, chars: int = 60_000):
    """A byte-level BPE tokenizer trained on the plays, with GPT-2's single special token
    ``<|endoftext|>`` as bos / eos / unk and, like GPT-2, no pad token."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[GPT2_EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(_plays_text(chars), trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=GPT2_EOS,
        eos_token=GPT2_EOS,
        unk_token=GPT2_EOS,
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,
    )


def tiny_gpt2_folder(
    root: Path,
    *,
    name: str = "tiny-gpt2",
    n_layer: int = 2,
    n_head: int = 2,
    n_embd: int = 32,
    n_positions: int = 128,
    vocab_size: int = 400,
    initializer_range: float = 0.02,
    seed: int = 0,
) -> Path:
    """Write a random ``GPT2LMHeadModel`` (``GPT2Config`` of the given size) and its tokenizer
    into ``root/name``; returns the folder. A larger ``initializer_range`` than GPT-2's 0.02
    gives the frozen weights of a LoRA test enough scale for the adapter to move the logits."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    folder = Path(root) / name
    tokenizer = tiny_gpt2_tokenizer(vocab_size, model_max_length=n_positions)
    eos = tokenizer.eos_token_id
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=n_positions,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        initializer_range=initializer_range,
        bos_token_id=eos,
        eos_token_id=eos,
    )
    torch.manual_seed(seed)
    GPT2LMHeadModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def tiny_distilbert_tokenizer(vocab_size: int = 400, model_max_length: int = 128, chars=60_000):
    """A lower-cased WordPiece tokenizer trained on the plays, with BERT's special tokens and
    ``[CLS] text [SEP]`` (pairs: ``[CLS] a [SEP] b [SEP]``) templates."""
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    backend = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    backend.normalizer = normalizers.BertNormalizer(lowercase=True)
    backend.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    backend.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, special_tokens=specials, show_progress=False
    )
    backend.train_from_iterator(_plays_text(chars), trainer)
    cls, sep = backend.token_to_id("[CLS]"), backend.token_to_id("[SEP]")
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=model_max_length,
    )


def tiny_distilbert_folder(
    root: Path,
    *,
    name: str = "tiny-distilbert",
    n_layers: int = 2,
    n_heads: int = 2,
    dim: int = 32,
    hidden_dim: int = 64,
    max_position_embeddings: int = 128,
    vocab_size: int = 400,
    seed: int = 0,
) -> Path:
    """Write a random ``DistilBertForMaskedLM`` (as ``distilbert-base-uncased`` is saved) and
    its tokenizer into ``root/name``; returns the folder. A classification recipe loads it
    with ``AutoModelForSequenceClassification`` (a new head, as from the real checkpoint)."""
    import torch
    from transformers import DistilBertConfig, DistilBertForMaskedLM

    folder = Path(root) / name
    tokenizer = tiny_distilbert_tokenizer(vocab_size, model_max_length=max_position_embeddings)
    config = DistilBertConfig(
        vocab_size=len(tokenizer),
        max_position_embeddings=max_position_embeddings,
        n_layers=n_layers,
        n_heads=n_heads,
        dim=dim,
        hidden_dim=hidden_dim,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    DistilBertForMaskedLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


__all__ = [
    "TOKENIZER_PLAYS",
    "tiny_distilbert_folder",
    "tiny_distilbert_tokenizer",
    "tiny_gpt2_folder",
    "tiny_gpt2_tokenizer",
]
