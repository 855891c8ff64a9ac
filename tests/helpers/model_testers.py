"""One tester per hfattn model family for the shared contract suite
(``tests/models/test_model_contracts_*.py``), and what the suite's modules share.

A tester describes a tiny model of its family and what the suite needs to exercise it: the
inputs of one forward, the output fields and their documented shapes, the LoRA targets, and,
for every contract the family legitimately lacks, one line saying why (``lacks``). A new
family gets the whole suite by adding one tester to :data:`TESTERS`. A contract test runs once
per tester (:data:`by_tester`) and is skipped, with the tester's reason, where the family lacks
the contract (:func:`skip_if_lacking`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

from hfattn import (
    BahdanauConfig,
    BahdanauForConditionalGeneration,
    CharRNNConfig,
    CharRNNForCausalLM,
    RNNClassifierConfig,
    RNNForSequenceClassification,
    VaswaniConfig,
    VaswaniForConditionalGeneration,
)
from hfattn.models import BahdanauModel, VaswaniModel

VOCAB = 20
PAD, UNK, BOS, EOS = 0, 1, 2, 3
LENGTHS = (7, 4, 6)
"""Real lengths of the rows of the test batch (padding fills the rest)."""

RNN_NO_SELF_ATTENTION = "an RNN has no attention layer whose kernel could be swapped"
NO_GENERATE = "a classifier does not generate"
RECURRENT_STATE_IS_THE_CACHE = (
    "the fixed-size recurrent state is the generation cache (RecurrentCache): no "
    "cache_implementation applies, and generate compiles no decoding step"
)
RNN_LENGTHS_ON_CPU = (
    "packed sequences take their lengths on the CPU (pack_padded_sequence), which a meta "
    "tensor cannot give"
)


@dataclass
class ModelTester:
    """A tiny model of one family and what the contract suite needs to know about it.

    Args:
        name: the pytest id.
        config_class / model_class: the config and the head model (the Auto class's target).
        auto_class: name of the ``transformers`` Auto class the head model is registered with.
        config_kwargs: the tiny configuration.
        kind: ``"causal-lm"``, ``"seq2seq"`` or ``"classification"``.
        base_model_class: the model without its head, when the family has one.
        padding_sides: sides on which a batch may be padded (a seq2seq source, a classifier
            input, a causal prompt).
        hidden_states: output field → (number of tensors, feature size of each); the sequence
            length follows the stack (source or target).
        attentions: output field → (number of maps, heads, query stack, key stack), with
            stacks ``"source"`` / ``"target"``.
        bad_config: a keyword argument the config refuses, and a fragment of its message.
        lora_targets: ``nn.Linear`` module names for PEFT LoRA.
        lacks: contract name → why the family does not have it (the test skips with it).
    """

    name: str
    config_class: type
    model_class: type
    auto_class: str
    config_kwargs: dict[str, Any]
    kind: str
    base_model_class: type | None = None
    padding_sides: tuple[str, ...] = ("right",)
    hidden_states: dict[str, tuple[int, list[int]]] = field(default_factory=dict)
    attentions: dict[str, tuple[int, int, str, str]] = field(default_factory=dict)
    bad_config: tuple[dict[str, Any], str] = ({}, "")
    lora_targets: list[str] = field(default_factory=list)
    lacks: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.name

    # ------------------------------------------------------------------ models and inputs

    def config(self, **overrides) -> Any:
        """The tiny config with ``overrides``."""
        return self.config_class(**{**self.config_kwargs, **overrides})

    def model(self, model_class: type | None = None, seed: int = 0, **overrides) -> Any:
        """A tiny model in eval mode whose weights (biases included) are all non-trivial."""
        torch.manual_seed(seed)
        model = (model_class or self.model_class)(self.config(**overrides)).eval()
        with torch.no_grad():
            for name, param in model.named_parameters():
                if "embed" not in name:
                    param.add_(0.2 * torch.randn_like(param))
        return model

    @property
    def model_classes(self) -> list[type]:
        """Every public model class of the family (head model first)."""
        return [self.model_class] + ([self.base_model_class] if self.base_model_class else [])

    def token_ids(self, lengths=LENGTHS, side: str = "right", seed: int = 1):
        """Rows of random ordinary tokens of ``lengths``, padded on ``side``; ``(ids, mask)``."""
        g = torch.Generator().manual_seed(seed)
        width = max(lengths)
        ids = torch.full((len(lengths), width), PAD)
        mask = torch.zeros(len(lengths), width, dtype=torch.long)
        for row, n in enumerate(lengths):
            span = slice(0, n) if side == "right" else slice(width - n, width)
            ids[row, span] = torch.randint(4, VOCAB, (n,), generator=g)
            mask[row, span] = 1
        return ids, mask

    def inputs(self, lengths=LENGTHS, side: str = "right", labels: bool = False) -> dict:
        """The keyword arguments of one forward over a padded batch (with ``labels`` when
        asked: the loss then comes first in the outputs)."""
        ids, mask = self.token_ids(lengths, side)
        batch = {"input_ids": ids, "attention_mask": mask}
        if self.kind == "seq2seq":
            target, _ = self.token_ids((5,) * len(lengths), seed=2)
            batch["decoder_input_ids"] = torch.cat(
                [torch.full((len(lengths), 1), BOS), target[:, :-1]], dim=1
            )
            if labels:
                batch["labels"] = target
        elif labels and self.kind == "causal-lm":
            batch["labels"] = ids.masked_fill(mask == 0, -100)
        elif labels:
            batch["labels"] = torch.arange(len(lengths)) % 2
        return batch

    def stack_lengths(self, batch: dict) -> dict[str, int]:
        """Sequence length of each stack of ``batch``."""
        lengths = {"source": batch["input_ids"].shape[1]}
        if "decoder_input_ids" in batch:
            lengths["target"] = batch["decoder_input_ids"].shape[1]
        return lengths

    @property
    def generates(self) -> bool:
        return self.kind != "classification"


def label_smoothed_loss(logits, labels, epsilon: float):
    """The reference loss of a decoder's ``logits`` against ``labels`` (``-100`` ignored): the
    mean over kept tokens of ``(1 - ε)·(-log p_y) + ε·mean_v(-log p_v)`` (Szegedy et al. 2016).
    Returns ``(loss, kept-token mask, the plain NLL per token)``."""
    logp = logits.log_softmax(-1)
    keep = labels != -100
    nll = -logp.gather(-1, labels.clamp_min(0)[..., None])[..., 0]
    loss = ((1 - epsilon) * nll - epsilon * logp.mean(-1))[keep].sum() / keep.sum()
    return loss, keep, nll


def _vaswani(name: str, **kw) -> ModelTester:
    layers = dict(encoder_layers=2, decoder_layers=2)
    d_model, heads = 16, 4
    return ModelTester(
        name=name,
        config_class=VaswaniConfig,
        model_class=VaswaniForConditionalGeneration,
        base_model_class=VaswaniModel,
        auto_class="AutoModelForSeq2SeqLM",
        kind="seq2seq",
        config_kwargs=dict(
            vocab_size=VOCAB,
            d_model=d_model,
            num_heads=heads,
            ffn_dim=32,
            dropout=0.0,
            max_position_embeddings=32,
            **layers,
            **kw,
        ),
        hidden_states={
            "encoder_hidden_states": (layers["encoder_layers"] + 1, [d_model]),
            "decoder_hidden_states": (layers["decoder_layers"] + 1, [d_model]),
        },
        attentions={
            "encoder_attentions": (layers["encoder_layers"], heads, "source", "source"),
            "decoder_attentions": (layers["decoder_layers"], heads, "target", "target"),
            "cross_attentions": (layers["decoder_layers"], heads, "target", "source"),
        },
        bad_config=({"norm_position": "middle"}, "norm_position"),
        lora_targets=["q_proj", "v_proj"],
        lacks={"left_padding": "positions count from the first column, as in Bart and Marian"},
    )


STEPWISE_ATTENTION = (
    "the attention runs inside the decoder's step loop (each step's context feeds the next "
    "step's recurrence), so the [tgt, src] map is assembled from the steps' weights after the "
    "loop: a copy that the loss does not read (Luong attention without input feeding returns "
    "the map itself)"
)


def _bahdanau(name: str, **kw) -> ModelTester:
    layers, hidden, embedding = 2, 8, 8
    attention = kw.get("attention", "bahdanau")
    stepwise = attention == "bahdanau" or kw.get("input_feeding", False)
    return ModelTester(
        name=name,
        config_class=BahdanauConfig,
        model_class=BahdanauForConditionalGeneration,
        base_model_class=BahdanauModel,
        auto_class="AutoModelForSeq2SeqLM",
        kind="seq2seq",
        config_kwargs=dict(
            vocab_size=VOCAB,
            embedding_dim=embedding,
            encoder_hidden_size=hidden,
            encoder_layers=layers,
            decoder_layers=layers,
            **kw,
        ),
        hidden_states={
            # embeddings, then each layer (a bidirectional encoder layer: both directions)
            "encoder_hidden_states": (layers + 1, [embedding] + [2 * hidden] * layers),
            "decoder_hidden_states": (layers + 1, [embedding] + [2 * hidden] * layers),
        },
        attentions={"cross_attentions": (1, 1, "target", "source")} if attention else {},
        bad_config=({"cell": "transformer"}, "cell"),
        lora_targets=["lm_head"] + (["key_proj"] if attention else []),
        lacks={
            "sdpa": RNN_NO_SELF_ATTENTION,
            "left_padding": "sources are packed by length and must be right-padded",
            "meta_device": RNN_LENGTHS_ON_CPU,
            "static_cache": RECURRENT_STATE_IS_THE_CACHE,
            **({"attention_gradients": STEPWISE_ATTENTION} if stepwise else {}),
        },
    )


def _char_rnn(name: str, cell: str) -> ModelTester:
    layers, hidden, embedding = 2, 16, 8
    return ModelTester(
        name=name,
        config_class=CharRNNConfig,
        model_class=CharRNNForCausalLM,
        auto_class="AutoModelForCausalLM",
        kind="causal-lm",
        config_kwargs=dict(
            vocab_size=VOCAB,
            embedding_dim=embedding,
            hidden_size=hidden,
            num_layers=layers,
            cell=cell,
        ),
        padding_sides=("right", "left"),
        hidden_states={"hidden_states": (layers + 1, [embedding] + [hidden] * layers)},
        bad_config=({"cell": "transformer"}, "cell"),
        lora_targets=["lm_head"],
        lacks={
            "sdpa": RNN_NO_SELF_ATTENTION,
            "attentions": "an RNN language model has none",
            "meta_device": RNN_LENGTHS_ON_CPU,
            "static_cache": RECURRENT_STATE_IS_THE_CACHE,
        },
    )


def _rnn_classifier(name: str) -> ModelTester:
    layers, hidden, embedding = 2, 6, 8
    return ModelTester(
        name=name,
        config_class=RNNClassifierConfig,
        model_class=RNNForSequenceClassification,
        auto_class="AutoModelForSequenceClassification",
        kind="classification",
        config_kwargs=dict(
            vocab_size=VOCAB,
            embedding_dim=embedding,
            hidden_size=hidden,
            cell="gru",
            num_layers=layers,
            bidirectional=True,
            pooling="attention",
        ),
        padding_sides=("right", "left"),
        hidden_states={"hidden_states": (layers + 1, [embedding] + [2 * hidden] * layers)},
        attentions={"attentions": (1, 1, None, "source")},
        bad_config=({"pooling": "median"}, "pooling"),
        lora_targets=["classifier"],
        lacks={
            "sdpa": RNN_NO_SELF_ATTENTION,
            "generate": NO_GENERATE,
            "tied_weights": "the head maps pooled features to labels: nothing to tie",
            "meta_device": RNN_LENGTHS_ON_CPU,
            "attention_gradients": (
                "the RNN reads each row's tokens packed at the front (compaction_order) and the "
                "pooling attends there; the returned map is gathered back to input order: a copy"
            ),
        },
    )


TESTERS = [
    _char_rnn("char-rnn-gru", "gru"),
    _char_rnn("char-rnn-lstm", "lstm"),
    _bahdanau("bahdanau-attention", cell="lstm"),
    _bahdanau("bahdanau-no-attention", cell="gru", attention=None),
    _vaswani("vaswani-post-sinusoidal", norm_position="post", position_embedding="sinusoidal"),
    _vaswani("vaswani-pre-learned", norm_position="pre", position_embedding="learned"),
    _rnn_classifier("rnn-classifier"),
]
"""The families (and variants) every contract runs on."""

BAHDANAU_LUONG_ONE_PASS = _bahdanau(
    "bahdanau-luong-one-pass", cell="gru", attention="luong", input_feeding=False
)
"""The one-pass decoder (no step loop in teacher forcing), for the contracts that differ there."""


# --------------------------------------------------------------------------- the suite's helpers
by_tester = pytest.mark.parametrize("tester", TESTERS, ids=str)
"""Run a contract test once per tester of :data:`TESTERS`."""


def skip_if_lacking(tester: ModelTester, contract: str) -> None:
    if contract in tester.lacks:
        pytest.skip(f"{tester.name}: {tester.lacks[contract]}")


def forward(model, batch: dict, **kwargs):
    with torch.no_grad():
        return model(**batch, **kwargs)


def assert_same_outputs(tester: ModelTester, a, b, atol: float = 1e-5) -> None:
    torch.testing.assert_close(a.logits, b.logits, atol=atol, rtol=1e-4 if atol else 0)


def without_labels(batch: dict) -> dict:
    return {k: v for k, v in batch.items() if k != "labels"}


def generation_inputs(tester: ModelTester) -> dict:
    """Prompts (causal LM: left-padded) or right-padded sources for ``generate``."""
    side = "left" if tester.kind == "causal-lm" else "right"
    ids, mask = tester.token_ids(side=side)
    return {"input_ids": ids, "attention_mask": mask}


def generate(model, inputs: dict, seed: int = 0, **kwargs) -> torch.Tensor:
    torch.manual_seed(seed)
    defaults = dict(max_new_tokens=6, min_new_tokens=6, pad_token_id=PAD, eos_token_id=EOS)
    with torch.no_grad():
        return model.generate(**inputs, **{**defaults, **kwargs})
