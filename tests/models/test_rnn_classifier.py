"""The recurrent text classifier (``rnn-classifier``): presets against the seeds' parameter
counts, masking, pooling equations, losses, learning, pipeline, frozen embeddings. The
contracts every family keeps (saving, dtypes, output flags, export, checkpointing, PEFT,
remote code) are in ``test_model_contracts_*.py``."""

from __future__ import annotations

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from torch.nn import functional as F
from transformers import (
    AutoModelForSequenceClassification,
    PreTrainedTokenizerFast,
    pipeline,
)

from hfattn import RNNClassifierConfig, RNNForSequenceClassification
from hfattn.models.rnn_layers import RecurrentLayer

VOCAB, PAD, TARGET = 20, 0, 4
"""Toy task: ids 5..19 are filler words; a text is positive iff it contains id 4 ("great")."""
WORDS = ["<pad>", "<unk>", "<bos>", "<eos>", "great", *[f"w{i}" for i in range(5, VOCAB)]]
ID2LABEL = {0: "NEG", 1: "POS"}


def tiny(**kw) -> RNNForSequenceClassification:
    base = dict(vocab_size=VOCAB, embedding_dim=8, hidden_size=6, cell="gru")
    torch.manual_seed(0)
    return RNNForSequenceClassification(RNNClassifierConfig(**{**base, **kw})).eval()


def contains_target_data(n: int, generator: torch.Generator, max_len: int = 12):
    """Right-padded texts of 3..max_len filler ids; every other one gets ``TARGET`` at a
    random position (label 1)."""
    ids = torch.full((n, max_len), PAD)
    labels = torch.arange(n) % 2
    for i in range(n):
        length = int(torch.randint(3, max_len + 1, (1,), generator=generator))
        row = torch.randint(TARGET + 1, VOCAB, (length,), generator=generator)
        if labels[i]:
            row[torch.randint(0, length, (1,), generator=generator)] = TARGET
        ids[i, :length] = row
    return ids, (ids != PAD).long(), labels


def train(model, data, epochs: int = 4, lr: float = 1e-2, batch: int = 32):
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    ids, mask, labels = data
    model.train()
    for _ in range(epochs):
        for s in range(0, len(ids), batch):
            sl = slice(s, s + batch)
            loss = model(input_ids=ids[sl], attention_mask=mask[sl], labels=labels[sl]).loss
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return model.eval()


def accuracy(model, data) -> float:
    ids, mask, labels = data
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask).logits
    return (logits.argmax(-1) == labels).float().mean().item()


@pytest.fixture(scope="module")
def trained():
    """A tiny GRU classifier trained on the contains-"great" task, and its test split."""
    g = torch.Generator().manual_seed(0)
    train_data, test_data = contains_target_data(512, g), contains_target_data(256, g)
    model = tiny(hidden_size=16, id2label=ID2LABEL, label2id={v: k for k, v in ID2LABEL.items()})
    return train(model, train_data), test_data


def word_tokenizer() -> PreTrainedTokenizerFast:
    """A word-level fast tokenizer over :data:`WORDS` (ids = positions)."""
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", unk_token="<unk>", model_max_length=64
    )


# --------------------------------------------------------------------------- presets


def lstm_params(input_size: int, hidden: int) -> int:
    """PyTorch LSTM layer: 4 gates × (input and recurrent matrices + two bias vectors)."""
    return 4 * (hidden * (input_size + hidden) + 2 * hidden)


def gru_params(input_size: int, hidden: int) -> int:
    """PyTorch GRU layer (= Keras GRU with reset_after): 3 gates × (matrices + two biases)."""
    return 3 * (hidden * (input_size + hidden) + 2 * hidden)


def count(model, trainable: bool | None = None) -> int:
    return sum(
        p.numel() for p in model.parameters() if trainable is None or p.requires_grad == trainable
    )


def test_chollet_glove_preset_matches_the_seed_parameter_counts():
    # Seed 000, listing 5.10: Embedding 2,000,000 non-trainable; Bidirectional(LSTM(32))
    # 34,048 and Dense(1) 65 trainable = 34,113 (Keras: one bias per gate, one sigmoid unit).
    config = RNNClassifierConfig.from_preset("chollet-glove")
    assert (config.vocab_size, config.embedding_dim, config.hidden_size) == (20000, 100, 32)
    assert config.bidirectional and config.freeze_embeddings and config.dropout == 0.5
    model = RNNForSequenceClassification(config)
    assert count(model, trainable=False) == 2_000_000 == 20000 * 100
    keras_trainable = 34_113
    torch_extra = 2 * 4 * 32 + (64 + 1)  # a second bias vector per direction; a second logit
    assert count(model, trainable=True) == keras_trainable + torch_extra
    assert count(model, trainable=True) == 2 * lstm_params(100, 32) + (64 * 2 + 2)


@pytest.mark.parametrize(
    "preset, expected",
    [
        ("chollet", 20000 * 256 + 2 * lstm_params(256, 32) + 64 * 2 + 2),
        ("geron", 1000 * 128 + gru_params(128, 128) + 128 * 2 + 2),
    ],
)
def test_presets_match_the_seeds(preset, expected):
    model = RNNForSequenceClassification(RNNClassifierConfig.from_preset(preset))
    assert count(model) == expected
    assert count(model, trainable=False) == 0
    assert model.config.cell == {"chollet": "lstm", "geron": "gru"}[preset]


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"cell": "rnn"}, "cell must be one of gru, lstm"),
        ({"pooling": "mean"}, "pooling must be one of last, attention"),
        ({"attention_score": "cosinus"}, "attention_score must be one of dot, scaled_dot"),
        ({"attention_distribution": "max"}, "attention_distribution must be one of softmax"),
        ({"hidden_size": 0}, "hidden_size must be a positive integer"),
        ({"dropout": 1.0}, "dropout must be in [0, 1)"),
        ({"num_labels": 0}, "num_labels must be a positive integer"),
    ],
)
def test_bad_configs_name_the_field_and_the_allowed_values(kw, message):
    with pytest.raises(ValueError) as error:
        RNNClassifierConfig(**kw)
    assert message in str(error.value)


# --------------------------------------------------------------------------- masking


def padded(ids: list[int], total: int, side: str) -> tuple[torch.Tensor, torch.Tensor]:
    pads = [PAD] * (total - len(ids))
    row = ids + pads if side == "right" else pads + ids
    tensor = torch.tensor([row])
    return tensor, (tensor != PAD).long()


@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("pooling", ["last", "attention"])
def test_a_padded_text_gets_the_logits_it_gets_alone(cell, bidirectional, pooling):
    model = tiny(cell=cell, bidirectional=bidirectional, pooling=pooling, num_layers=2)
    text = [7, 9, 11, 5]
    others = [[8, 6, 12, 13, 14, 15, 16, 17], [10, 12]]
    with torch.no_grad():
        alone = model(input_ids=torch.tensor([text])).logits[0]
        for side in ("right", "left"):
            rows = [padded(t, 8, side) for t in (others[0], text, others[1])]
            ids, mask = torch.cat([r[0] for r in rows]), torch.cat([r[1] for r in rows])
            logits = model(input_ids=ids, attention_mask=mask).logits
            torch.testing.assert_close(logits[1], alone, rtol=0, atol=1e-6)
        # Reading the padding (no mask) changes the answer: what the seed's 50 % comes from.
        unmasked = model(input_ids=padded(text, 8, "right")[0]).logits[0]
    assert (unmasked - alone).abs().max() > 1e-4


def test_last_pooling_is_the_final_state_of_each_direction():
    model = tiny(cell="lstm", bidirectional=True, hidden_size=5)
    text = torch.tensor([[6, 8, 10, 12, 14]])
    ids, mask = padded(text[0].tolist(), 9, "left")
    with torch.no_grad():
        outputs, *_ = model.rnn[0](model.embeddings(text))  # the text alone, no padding code
        features = torch.cat([outputs[0, -1, :5], outputs[0, 0, 5:]])  # h→_T, h←_1
        expected = features @ model.classifier.weight.T + model.classifier.bias
        got = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    torch.testing.assert_close(got.logits[0], expected, rtol=0, atol=1e-6)
    embeds, states = got.hidden_states
    assert embeds.shape == (1, 9, 8) and states.shape == (1, 9, 10)
    assert states[0, :4].abs().sum() == 0  # the padding positions
    torch.testing.assert_close(states[0, 4:], outputs[0], rtol=0, atol=1e-6)


def test_attention_pooling_is_the_additive_formula_with_padding_masked():
    model = tiny(pooling="attention", bidirectional=True, attention_score="additive")
    text = [6, 9, 12]
    ids, mask = padded(text, 6, "right")
    score = model.pooler.energy
    with torch.no_grad():
        states, *_ = model.rnn[0](model.embeddings(torch.tensor([text])))
        h = states[0]  # [3, 12]
        u = model.pooler.query
        energies = torch.tanh(score.query_proj.weight @ u + h @ score.key_proj.weight.T
                              + score.key_proj.bias) @ score.v.weight[0]  # fmt: skip
        alpha = torch.softmax(energies, 0)
        pooled = alpha @ h
        expected = pooled @ model.classifier.weight.T + model.classifier.bias
        out = model(input_ids=ids, attention_mask=mask, output_attentions=True)
    torch.testing.assert_close(out.logits[0], expected, rtol=0, atol=1e-6)
    (weights,) = out.attentions
    assert weights.shape == (1, 1, 6)
    torch.testing.assert_close(weights[0, 0, :3], alpha, rtol=0, atol=1e-6)
    assert weights[0, 0, 3:].abs().sum() == 0


@pytest.mark.parametrize(
    "score, extra",
    [
        ("dot", {}),
        ("scaled_dot", {}),
        ("general", {}),
        ("cosine", {}),
        ("gaussian", {}),
        ("deep", {"attention_score_params": {"num_layers": 2}}),
        ("location", {"attention_score_params": {"max_length": 16}}),
        ("dot", {"attention_distribution": "sparsemax"}),
    ],
)
def test_any_score_by_name_pools_over_the_real_tokens_only(score, extra):
    model = tiny(pooling="attention", attention_score=score, **extra)
    ids, mask = padded([6, 9, 12, 7], 7, "left")
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, output_attentions=True)
        alone = model(input_ids=torch.tensor([[6, 9, 12, 7]])).logits
    (weights,) = out.attentions
    assert weights[0, 0, :3].abs().sum() == 0
    torch.testing.assert_close(weights[0, 0].sum(), torch.tensor(1.0), rtol=0, atol=1e-5)
    torch.testing.assert_close(out.logits, alone, rtol=0, atol=1e-6)


# --------------------------------------------------------------------------- losses


def test_loss_follows_the_problem_type():
    ids, mask = padded([6, 9, 12], 5, "right")
    ids, mask = ids.repeat(2, 1), mask.repeat(2, 1)
    model = tiny(num_labels=3)
    labels = torch.tensor([2, 0])
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    assert model.config.problem_type == "single_label_classification"
    log_p = out.logits.log_softmax(-1)
    expected = -(log_p[0, 2] + log_p[1, 0]) / 2
    torch.testing.assert_close(out.loss, expected)

    multi = tiny(num_labels=3, problem_type="multi_label_classification")
    targets = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    out = multi(input_ids=ids, attention_mask=mask, labels=targets)
    p = torch.sigmoid(out.logits)
    bce = -(targets * p.log() + (1 - targets) * (1 - p).log()).mean()
    torch.testing.assert_close(out.loss, bce)

    regression = tiny(num_labels=1)
    values = torch.tensor([0.5, -1.0])
    out = regression(input_ids=ids, attention_mask=mask, labels=values)
    torch.testing.assert_close(out.loss, ((out.logits[:, 0] - values) ** 2).mean())


def test_tuple_output_and_dropout_only_in_training():
    model = tiny(dropout=0.5, input_dropout=0.3)
    ids, mask = padded([6, 9, 12], 5, "right")
    labels = torch.tensor([1])
    loss, logits = model(input_ids=ids, attention_mask=mask, labels=labels, return_dict=False)
    assert logits.shape == (1, 2)
    torch.testing.assert_close(loss, F.cross_entropy(logits, labels))
    again = model(input_ids=ids, attention_mask=mask).logits
    torch.testing.assert_close(again, logits, rtol=0, atol=0)  # eval: deterministic
    model.train()
    torch.manual_seed(1)
    a = model(input_ids=ids, attention_mask=mask).logits
    b = model(input_ids=ids, attention_mask=mask).logits
    assert not torch.equal(a, b)


# --------------------------------------------------------------------------- learning


def test_tiny_gru_learns_whether_a_text_contains_a_word(trained):
    model, test_data = trained
    assert accuracy(model, test_data) >= 0.98  # chance: 0.5


def test_bilstm_with_attention_pooling_learns_the_same_task():
    g = torch.Generator().manual_seed(1)
    train_data, test_data = contains_target_data(384, g), contains_target_data(256, g)
    model = tiny(cell="lstm", bidirectional=True, pooling="attention", hidden_size=12)
    assert accuracy(model, test_data) < 0.7
    assert accuracy(train(model, train_data, epochs=5), test_data) >= 0.95


# --------------------------------------------------------------------------- HF integration


def test_text_classification_pipeline_with_a_word_level_tokenizer(trained):
    model, _ = trained
    tokenizer = word_tokenizer()
    texts = ["w5 w9 great w7", "w6 w8", "w12 w13 w14 w15 w16 w17 w18", "great", "w19 w11 w10"]
    expected = ["POS", "NEG", "NEG", "POS", "NEG"]
    classify = pipeline("text-classification", model=model, tokenizer=tokenizer, device="cpu")
    batched = classify(texts, batch_size=5)  # padded to the longest text
    single = [classify(text)[0] for text in texts]
    assert [r["label"] for r in batched] == expected == [r["label"] for r in single]
    encoded = tokenizer(texts[0], return_tensors="pt")
    with torch.no_grad():
        probs = model(**encoded).logits.softmax(-1)[0]
    assert batched[0]["score"] == pytest.approx(probs.max().item(), abs=1e-6)
    for a, b in zip(batched, single, strict=True):
        assert a["score"] == pytest.approx(b["score"], abs=1e-6)


# --------------------------------------------------------------------------- transformers contracts


def mixed_padding() -> tuple[torch.Tensor, torch.Tensor]:
    """Rows padded on the right, on the left, with a hole, and not at all (width 8)."""
    rows = [
        [7, 9, 11, 5, PAD, PAD, PAD, PAD],
        [PAD, PAD, PAD, 8, 6, 12, 13, 14],
        [10, PAD, 12, 15, 16, PAD, PAD, PAD],
        [5, 6, 7, 8, 9, 10, 11, 12],
    ]
    ids = torch.tensor(rows)
    return ids, (ids != PAD).long()


@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.parametrize("bidirectional", [False, True])
@torch.no_grad()
def test_a_recurrent_layer_skips_the_masked_positions_on_every_path(cell, bidirectional):
    """Fused (no padding), packed (right padding) and stepped (any mask; what torch.export
    and torch.compile run) give each row what it gets alone; a row with nothing to read keeps
    its initial state."""
    torch.manual_seed(0)
    layer = RecurrentLayer(cell, 3, 4, bidirectional=bidirectional).eval()
    ids, mask = mixed_padding()
    x = torch.randn(4, 8, 3)
    mask[0] = 0  # nothing to read
    directions = 2 if bidirectional else 1
    start = tuple(torch.randn(directions, 4, 4) for _ in range(2 if cell == "lstm" else 1))
    batched = layer(x, *start, mask=mask)
    stepped = layer._stepped(x, start, mask != 0)
    right = mask.sort(dim=1, descending=True, stable=True).values  # the same counts, right-padded
    packed, stepped_right = layer(x, *start, mask=right), layer._stepped(x, start, right != 0)
    for a, b in zip(packed, stepped_right, strict=True):
        torch.testing.assert_close(a, b)
    for row in range(4):
        keep = mask[row].bool()
        row_start = tuple(s[:, row : row + 1] for s in start)
        if keep.any():
            alone = layer(x[row : row + 1, keep], *row_start)
        else:  # the initial state, no outputs
            alone = (x.new_zeros(1, 0, 4 * directions), *row_start)
        for result in (batched, stepped):
            torch.testing.assert_close(result[0][row, keep], alone[0][0])
            assert torch.all(result[0][row, ~keep] == 0)
            for state, state_alone in zip(result[1:], alone[1:], strict=True):
                torch.testing.assert_close(state[:, row : row + 1], state_alone)


def test_from_pretrained_with_loading_info_keeps_the_embeddings_frozen(tmp_path):
    model = tiny(freeze_embeddings=True)
    model.save_pretrained(tmp_path)
    for loader in (RNNForSequenceClassification, AutoModelForSequenceClassification):
        loaded, info = loader.from_pretrained(tmp_path, output_loading_info=True)
        assert type(loaded) is RNNForSequenceClassification
        assert not info["missing_keys"] and not info["unexpected_keys"]
        assert not loaded.embeddings.weight.requires_grad
        assert all(
            p.requires_grad for n, p in loaded.named_parameters() if n != "embeddings.weight"
        )
    unfrozen = tiny()
    unfrozen.save_pretrained(tmp_path / "unfrozen")
    loaded = RNNForSequenceClassification.from_pretrained(tmp_path / "unfrozen")
    assert loaded.embeddings.weight.requires_grad


def test_the_per_layer_modules_compute_one_stacked_rnn():
    """The per-layer modules ``rnn.{k}`` compute what one stacked bidirectional ``nn.LSTM``
    with the same weights computes."""
    model = tiny(cell="lstm", num_layers=2, bidirectional=True)
    stacked = torch.nn.LSTM(8, 6, num_layers=2, bidirectional=True, batch_first=True)
    with torch.no_grad():
        for k, layer in enumerate(model.rnn):
            for name, param in layer.named_parameters():
                getattr(stacked, name.replace("_l0", f"_l{k}")).copy_(param)
        text = torch.tensor([[5, 9, 12, 7]])
        expected, _ = stacked(model.embeddings(text))
        got = model(input_ids=text, output_hidden_states=True).hidden_states[-1]
    torch.testing.assert_close(got, expected)
