"""The regularizers of the training step (issue 74): R-Drop (``training.r_drop_alpha``, Liang et
al. 2021) against its formula written out here, for each task's loss; word dropout
(``training.word_dropout``, Sennrich & Zhang 2019) replaces ordinary input tokens at its rate
and nothing else, on training batches only; a run with both resumes to the weights and log of
an uninterrupted one."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
import yaml
from torch.nn import functional as F

from hfattn import (
    CharRNNConfig,
    CharRNNForCausalLM,
    RNNClassifierConfig,
    RNNForSequenceClassification,
    VaswaniConfig,
    VaswaniForConditionalGeneration,
)
from hfattn.models.modeling_char_rnn import detach_state, state_tensors
from hfattn.orchestration.run import build_job, run_recipe
from hfattn.recipes import RecipeError, Run, check_recipe_values, load_recipe
from hfattn.storage.run_folder import recipe_path
from hfattn.tasks import get_task
from hfattn.tasks.base import model_loss
from hfattn.tasks.causal_lm.job import causal_lm_loss, dropped_characters
from hfattn.tasks.translation.job import dropped_words, translation_loss
from hfattn.tokenization.characters import build_char_tokenizer
from hfattn.training.regularization import WordDropout, training_loss
from tests.helpers.crash_runs import assert_same_weights, records, seq2seq_recipe
from tests.helpers.model_testers import label_smoothed_loss
from tests.helpers.recipe_helpers import small_recipe, write_recipe
from tests.helpers.tiny_runs import RECIPES

VOCAB, PAD, UNK, BOS, EOS = 20, 0, 1, 2, 3
SPECIALS = (PAD, UNK, BOS, EOS)


def _ids(rows: int, length: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(4, VOCAB, (rows, length), generator=g)


def _translation_case():
    """A tiny Vaswani Transformer with dropout and label smoothing, and a padded batch."""
    torch.manual_seed(0)
    config = VaswaniConfig(vocab_size=VOCAB, encoder_layers=1, decoder_layers=1, d_model=16,
                           num_heads=2, ffn_dim=32, dropout=0.3, label_smoothing=0.1,
                           max_position_embeddings=16, pad_token_id=PAD,
                           decoder_start_token_id=BOS)  # fmt: skip
    model = VaswaniForConditionalGeneration(config).train()
    sources, labels = _ids(3, 7, 1), _ids(3, 6, 2)
    sources[1, 4:], labels[1, 3:], labels[2, 5:] = PAD, -100, -100
    batch = {"input_ids": sources, "attention_mask": (sources != PAD).long(), "labels": labels}

    def cross_entropy(logits):
        return label_smoothed_loss(logits, labels, 0.1)[0]

    return translation_loss, model, batch, None, False, labels, cross_entropy


def _classification_case():
    """A tiny GRU classifier with input dropout, and a batch of three labelled rows."""
    torch.manual_seed(0)
    config = RNNClassifierConfig(vocab_size=VOCAB, embedding_dim=8, hidden_size=6, cell="gru",
                                 num_labels=3, input_dropout=0.3, dropout=0.3)  # fmt: skip
    model = RNNForSequenceClassification(config).train()
    ids, labels = _ids(3, 5, 3), torch.tensor([0, 2, 1])
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}
    return model_loss, model, batch, None, False, labels, lambda z: F.cross_entropy(z, labels)


def _stateful_char_rnn_case():
    """A tiny 2-layer LSTM char-RNN with dropout, a window and a carried state."""
    torch.manual_seed(0)
    config = CharRNNConfig(vocab_size=VOCAB, embedding_dim=8, hidden_size=16, num_layers=2,
                           cell="lstm", dropout=0.3)  # fmt: skip
    model = CharRNNForCausalLM(config).train()
    with torch.no_grad():  # peaked predictions: the passes' dropout masks tell
        model.get_output_embeddings().weight.mul_(10)
    window = _ids(2, 9, 4)
    state = (torch.randn(2, 2, 16), torch.randn(2, 2, 16))
    labels = window[:, 1:]

    def cross_entropy(logits):
        return F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1))

    return causal_lm_loss, model, window, state, True, labels, cross_entropy


CASES = {
    "translation": _translation_case,
    "classification": _classification_case,
    "stateful-char-rnn": _stateful_char_rnn_case,
}


def _logits(model, batch, state):
    """One pass of the model as the task's loss runs it (its logits and, for the char-RNN,
    the state after the window)."""
    if isinstance(batch, dict):
        return model(**batch).logits, None
    out = model(input_ids=batch[:, :-1], cache=state, use_cache=True)
    return out.logits, state_tensors(detach_state(out.cache))


@pytest.mark.parametrize("case", list(CASES))
def test_r_drop_loss_is_the_mean_cross_entropy_plus_alpha_times_the_symmetric_kl(case):
    compute_loss, model, batch, state, stateful, labels, cross_entropy = CASES[case]()
    alpha = 2.5
    torch.manual_seed(7)
    got = training_loss(compute_loss, model, batch, state, stateful, alpha)

    torch.manual_seed(7)  # the same dropout masks, in the same order
    (first, carried), (second, _) = _logits(model, batch, state), _logits(model, batch, state)
    log_p, log_q = first.log_softmax(-1), second.log_softmax(-1)
    kl_pq = F.kl_div(log_q, log_p, log_target=True, reduction="none").sum(-1)  # KL(P1 || P2)
    kl_qp = F.kl_div(log_p, log_q, log_target=True, reduction="none").sum(-1)  # KL(P2 || P1)
    kept = labels != -100
    symmetric = ((kl_pq + kl_qp) / 2)[kept].mean()
    expected = (cross_entropy(first) + cross_entropy(second)) / 2 + alpha * symmetric

    assert symmetric > 1e-3  # the two passes' dropout masks differ
    torch.testing.assert_close(got.loss, expected)
    mean_cross_entropy = (cross_entropy(first) + cross_entropy(second)) / 2
    torch.testing.assert_close(got.loss - mean_cross_entropy, alpha * symmetric, rtol=1e-4, atol=0)
    got.loss.backward()  # one graph through both passes
    if stateful:  # both passes start from the carried state, the first one's goes on
        torch.testing.assert_close(got.state, carried)


@pytest.mark.parametrize("case", list(CASES))
def test_r_drop_alpha_zero_is_the_plain_loss_of_one_pass(case):
    compute_loss, model, batch, state, stateful, _, _ = CASES[case]()
    calls = []

    def counted(*args):
        calls.append(1)
        return compute_loss(*args)

    torch.manual_seed(3)
    got = training_loss(counted, model, batch, state, stateful, 0.0)
    torch.manual_seed(3)
    plain = compute_loss(model, batch, state, stateful)
    assert len(calls) == 1
    torch.testing.assert_close(got.loss, plain.loss)


def test_word_dropout_replaces_ordinary_tokens_at_its_rate_and_never_a_special_one():
    torch.manual_seed(0)
    ids = torch.randint(0, VOCAB, (100, 1000))  # 100 k tokens, specials among them
    before = ids.clone()
    rate = 0.1
    dropped = WordDropout(rate, UNK, SPECIALS)(ids)
    assert torch.equal(ids, before)  # a new tensor
    special = torch.isin(ids, torch.tensor(SPECIALS))
    assert torch.equal(dropped[special], ids[special])
    changed = dropped != ids
    assert torch.all(dropped[changed] == UNK)
    ordinary = int((~special).sum())
    fraction = changed.sum().item() / ordinary
    sigma = math.sqrt(rate * (1 - rate) / ordinary)
    assert abs(fraction - rate) < 5 * sigma


def test_word_dropout_replaces_by_the_tokenizers_unk_and_keeps_its_special_tokens():
    tokenizer = build_char_tokenizer("to be or not to be")
    dropout = WordDropout.of_tokenizer(0.1, tokenizer)
    assert dropout == WordDropout(0.1, tokenizer.unk_token_id, (PAD, UNK, BOS, EOS))
    assert tokenizer.convert_ids_to_tokens(UNK) == "<unk>"
    without_unk = SimpleNamespace(unk_token_id=None, all_special_ids=[0])
    with pytest.raises(RecipeError, match="^training.word_dropout: needs a tokenizer with an "):
        WordDropout.of_tokenizer(0.1, without_unk)


def test_word_dropout_of_a_translation_batch_leaves_the_labels_and_specials():
    sources, labels = _ids(64, 12, 5), _ids(64, 10, 6)
    sources[:, -1], labels[:, 7] = EOS, EOS
    sources[:32, 9:], labels[:32, 8:] = PAD, -100
    batch = {"input_ids": sources, "attention_mask": (sources != PAD).long(), "labels": labels}
    torch.manual_seed(0)
    noised = dropped_words(batch, WordDropout(0.5, UNK, SPECIALS), PAD, BOS)

    assert noised["labels"] is labels and torch.equal(labels, batch["labels"])
    assert noised["attention_mask"] is batch["attention_mask"]
    teacher = torch.cat([torch.full((64, 1), BOS), labels[:, :-1]], 1).masked_fill(
        torch.cat([torch.zeros(64, 1, dtype=torch.bool), labels[:, :-1] == -100], 1), PAD
    )  # the decoder's inputs: the labels shifted right, start token first
    for name, clean in (("input_ids", sources), ("decoder_input_ids", teacher)):
        got = noised[name]
        special = torch.isin(clean, torch.tensor(SPECIALS))
        assert torch.equal(got[special], clean[special])  # padding, <bos>, <eos> stay
        assert torch.all((got == clean) | (got == UNK))
        share = (got != clean).sum().item() / int((~special).sum())
        assert 0.4 < share < 0.6, name

    # without replacements, the given decoder inputs are those the model derives itself
    model = _translation_case()[1].eval()
    unchanged = dropped_words(batch, WordDropout(0.0, UNK, SPECIALS), PAD, BOS)
    torch.testing.assert_close(translation_loss(model, unchanged, None, False).loss,
                               translation_loss(model, batch, None, False).loss)  # fmt: skip


def test_word_dropout_of_a_window_replaces_inputs_never_the_characters_to_predict():
    window = _ids(32, 65, 8)
    window[:, 10] = BOS  # a document separator
    torch.manual_seed(0)
    noised = dropped_characters(window, WordDropout(0.3, UNK, SPECIALS))
    assert torch.equal(noised["labels"], window[:, 1:])
    inputs = noised["input_ids"]
    assert torch.all(inputs[:, 10] == BOS)
    changed = inputs != window[:, :-1]
    assert torch.all(inputs[changed] == UNK) and 0.2 < changed.float().mean() < 0.4
    # the loss reads the inputs and labels it is given
    model = _stateful_char_rnn_case()[1].eval()
    loss = causal_lm_loss(model, {"input_ids": window[:, :-1], "labels": window[:, 1:]}, None,
                          False).loss  # fmt: skip
    torch.testing.assert_close(loss, causal_lm_loss(model, window, None, False).loss)


def _translation_recipe(folder, **training):
    """The tiny Bahdanau recipe of the crash tests (dropout 0.1), two steps, no validation."""
    base = yaml.safe_load(seq2seq_recipe(folder / "base").read_text())
    steps = {"max_steps": 2, "eval_every": None, "save_every": None}
    return write_recipe(folder, base=base, training={**steps, **training})


def test_word_dropout_acts_on_training_batches_only(tmp_path, monkeypatch):
    """The job's ``noise`` is the engine's alone: the validation scores and the sample of a job
    with word dropout equal those of a job without, for the same weights; a run calls it once
    per trained micro-batch, never for an evaluation's."""
    plain = build_job(load_recipe(_translation_recipe(tmp_path / "plain")))
    noisy_recipe = load_recipe(_translation_recipe(tmp_path / "noisy", word_dropout=0.9))
    noisy = build_job(noisy_recipe)
    assert plain.noise is None and noisy.noise is not None
    model = plain.model.eval()
    assert noisy.evaluate(model, "test") == plain.evaluate(model, "test")
    assert noisy.sample(model) == plain.sample(model)

    calls = []
    task = get_task("translation")
    real_build = task.build_job

    def counted_build(recipe):
        job = real_build(recipe)
        noise = job.noise

        def counted(batch):
            calls.append(batch["input_ids"].shape)
            return noise(batch)

        job.noise = counted
        return job

    monkeypatch.setattr(task, "build_job", counted_build)
    run_recipe(noisy_recipe)
    assert len(calls) == 2  # max_steps, one micro-batch each; no evaluation's batch


def crash_at(step: int):
    """A callback that ends the process's run once ``step`` is done and logged, before its
    checkpoint (what a SIGKILL leaves)."""

    def callback(progress):
        if progress.step == step:
            raise SystemExit(f"crashed at step {step}")

    return callback


def test_a_run_with_r_drop_and_word_dropout_resumes_to_the_uninterrupted_run(tmp_path):
    """A stateful char-RNN with dropout, R-Drop, word dropout and gradient accumulation: killed
    after its checkpoint of step 3 and resumed from its run folder's ``recipe.yaml`` (as
    ``hfattn train --resume RUN``), it ends with the weights and the log of the run that was
    never stopped; the fields are stored in ``recipe.yaml``."""
    sections = {
        "model": {"dropout": 0.2, "num_layers": 2},
        "training": {"mode": "stateful", "max_steps": 6, "log_every": 1, "eval_every": 3,
                     "save_every": 3, "load_best_at_end": False, "r_drop_alpha": 1.5,
                     "word_dropout": 0.1, "gradient_accumulation_steps": 2},
        "evaluation": {"splits": ["test"]},
    }  # fmt: skip
    reference = run_recipe(load_recipe(small_recipe(tmp_path / "a", **sections)))
    assert reference.progress.step == 6
    with pytest.raises(SystemExit):
        run_recipe(load_recipe(small_recipe(tmp_path / "b", **sections)), callbacks=[crash_at(5)])
    run = tmp_path / "b" / "run"
    stored = yaml.safe_load(recipe_path(run).read_text())["training"]
    assert (stored["r_drop_alpha"], stored["word_dropout"]) == (1.5, 0.1)

    resumed = load_recipe(recipe_path(run), run=Run(resume=True, folder=str(run)))
    assert (resumed.training.r_drop_alpha, resumed.training.word_dropout) == (1.5, 0.1)
    run_recipe(resumed, resume=True)
    assert records(run) == records(tmp_path / "a" / "run")
    assert_same_weights(tmp_path / "a" / "run", run)


@pytest.mark.parametrize(
    ("overrides", "refused"),
    [
        (["training.r_drop_alpha=-1"], "training.r_drop_alpha: must be >= 0"),
        (["training.word_dropout=1"], "training.word_dropout: must be in [0, 1)"),
        (["training.word_dropout=-0.1"], "training.word_dropout: must be in [0, 1)"),
    ],
)
def test_regularizer_fields_out_of_range_are_refused(tmp_path, overrides, refused):
    with pytest.raises(RecipeError) as err:
        load_recipe(_translation_recipe(tmp_path), overrides)
    assert str(err.value).startswith(refused)


@pytest.mark.parametrize(
    ("recipe", "no_dropout"),
    [
        ("bahdanau_date_normalization.yaml", ["model.dropout=0"]),
        ("vaswani_dates_en_es.yaml",
         ["model.dropout=0", "model.attention_dropout=0", "model.activation_dropout=0"]),
        ("char_rnn_shakespeare.yaml", ["model.dropout=0"]),
    ],
)  # fmt: skip
def test_r_drop_is_refused_for_a_model_without_dropout(recipe, no_dropout):
    """Two passes of a model without dropout agree: R-Drop would add a KL of 0 at twice the
    cost. Refused in one line naming the field and the rates; one rate above 0 is enough."""
    r_drop = ["training.r_drop_alpha=1", *no_dropout]
    with pytest.raises(RecipeError) as err:
        load_recipe(RECIPES / recipe, r_drop)
    assert str(err.value).startswith("training.r_drop_alpha: compares the outputs of two")
    assert "model.dropout=0.1" in str(err.value) and "\n" not in str(err.value)
    recipe = load_recipe(RECIPES / recipe, [*r_drop[:-1], f"{no_dropout[-1][:-1]}0.1"])
    assert recipe.training.r_drop_alpha == 1


@pytest.mark.parametrize(
    ("recipe", "refused"),
    [
        ("gpt2_shakespeare_lora.yaml",
         "training.word_dropout: applies to a model built from model.type"),
        ("rnn_classifier_genre.yaml", "training.word_dropout: not a field of training"),
    ],
)  # fmt: skip
def test_word_dropout_is_refused_where_no_unk_of_ours_replaces_inputs(recipe, refused):
    """A pretrained causal LM's tokenizer is its own, and the classification task takes no
    word dropout: each is refused in one line when the recipe loads, before torch."""
    with pytest.raises(RecipeError) as err:
        check_recipe_values(RECIPES / recipe, ["training.word_dropout=0.1"])
    assert str(err.value).startswith(refused) and "\n" not in str(err.value)
