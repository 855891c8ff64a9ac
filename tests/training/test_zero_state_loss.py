"""The zero-state loss (:func:`hfattn.evaluation.language_modeling.zero_state_loss`): a
recurrent model is also scored on passages read from the all-zero state that ``generate``
starts from, and that loss is reported beside the state-carried one in ``eval_results.json``,
``hfattn evaluate``'s table and the model card.

The model whose carried loss is good and zero-state loss bad is a real ``CharRNNForCausalLM``
with hand-set weights: a one-unit GRU that latches to 1 on a trigger character and then keeps
its value, and a head that, latched, bets a little against a never-seen token (better than
uniform) and, unlatched, puts a large logit ``M`` on it. Its expected losses are simulated here,
token by
token, from the stream and passage layouts: those of the whole split, and those of the first
windows that ``evaluation.max_examples`` bounds a scoring to."""

from __future__ import annotations

import json
import math
import random
import re
import statistics

import numpy as np
import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from hfattn import CharRNNConfig, CharRNNForCausalLM
from hfattn.cli import main
from hfattn.evaluation.language_modeling import (
    evaluate_causal_lm,
    passage_starts,
    scored_prefix,
    zero_state_loss,
)
from hfattn.hub import inspect_folder, render_model_card

VOCAB, TRIGGER, NEVER, M, C = 8, 4, 0, 10.0, 5.0
"""Vocabulary size, the latch's trigger token, the token the unlatched head bets on (a target
never), that bet's logit, and the latched head's logit against it (``-C``)."""
UNIFORM = math.log(VOCAB)
LATCHED = math.log(math.exp(-C) + VOCAB - 1)  # any target once latched: below uniform
UNLATCHED = math.log(math.exp(M) + VOCAB - 1)  # any target while the bet is on NEVER


def latch_model() -> CharRNNForCausalLM:
    """The latch char-RNN of the module docstring (GRU gates saturate to exactly 0 / 1 in
    float32: z = σ(±30), n = tanh(±30))."""
    model = CharRNNForCausalLM(
        CharRNNConfig(vocab_size=VOCAB, embedding_dim=1, hidden_size=1, cell="gru")
    )
    gru = model.layers[0]
    with torch.no_grad():
        for param in model.parameters():
            param.zero_()
        model.embeddings.weight[TRIGGER, 0] = 1.0
        # torch GRU gate order r, z, n: z = σ(-60x + 30), n = tanh(60x - 30)
        gru.weight_ih_l0[:, 0] = torch.tensor([0.0, -60.0, 60.0])
        gru.bias_ih_l0[:] = torch.tensor([0.0, 30.0, -30.0])
        model.lm_head.weight[NEVER, 0] = -(M + C)  # logit M - (M + C)·h on NEVER, 0 elsewhere
        model.lm_head.bias[NEVER] = M
    return model.eval()


def token_losses(inputs: list[int]) -> list[float]:
    """The latch model's loss on each next token after ``inputs`` read from a zero state."""
    latched, losses = False, []
    for token in inputs:
        latched = latched or token == TRIGGER
        losses.append(LATCHED if latched else UNLATCHED)
    return losses


def corpus(n: int, triggers: list[int], seed: int = 0) -> torch.LongTensor:
    rng = random.Random(seed)
    ids = [rng.randrange(TRIGGER + 1, VOCAB) for _ in range(n)]
    for position in triggers:
        ids[position] = TRIGGER
    return torch.tensor(ids)


def test_good_carried_loss_and_bad_zero_state_loss_are_both_reported():
    # 4 streams of 5,000 tokens, each with a trigger in its first 60 tokens: carried, the
    # latch is set almost everywhere; 20 passages of 1,000 tokens mostly never meet a trigger
    streams, stream_len, passages, length = 4, 5000, 20, 1000
    n = streams * stream_len + 1
    ids = corpus(n, [i * stream_len + 7 + 17 * i for i in range(streams)])
    scores = evaluate_causal_lm(latch_model(), ids, batch_size=streams, seq_len=100)

    carried = [
        loss
        for i in range(streams)
        for loss in token_losses(ids[i * stream_len : (i + 1) * stream_len].tolist())
    ]
    starts = [p * (n - length - 1) // (passages - 1) for p in range(passages)]
    per_passage = [statistics.fmean(token_losses(ids[s : s + length].tolist())) for s in starts]
    assert scores["loss"] == pytest.approx(statistics.fmean(carried), rel=1e-5)
    assert scores["loss_zero_state"] == pytest.approx(statistics.fmean(per_passage), rel=1e-5)
    median = statistics.median(per_passage)
    assert scores["loss_zero_state_median"] == pytest.approx(median, rel=1e-5)
    assert (scores["zero_state_passages"], scores["zero_state_tokens"]) == (passages, length)
    above = sum(loss > UNIFORM for loss in per_passage)
    assert scores["zero_state_above_uniform"] == above == 19  # the first latches at token 8
    # the numbers tell the story: better than uniform carried, about M nats from a zero state
    assert scores["loss"] < UNIFORM and scores["loss_zero_state"] > M - 2
    assert list(scores)[:2] == ["loss", "loss_zero_state"]  # side by side


def test_without_carried_state_the_two_losses_agree():
    # one window per stream and passages at the same places: nothing is carried, so the
    # stateless GPT-2 and the latch char-RNN score the same both ways
    passages, length = 4, 32
    ids = corpus(passages * length + 1, [40, 100])
    assert passage_starts(len(ids), passages, length) == ([0, 32, 64, 96], length)
    torch.manual_seed(0)
    gpt2 = GPT2LMHeadModel(
        GPT2Config(vocab_size=VOCAB, n_layer=1, n_embd=16, n_head=2, n_positions=64)
    ).eval()
    for model in (gpt2, latch_model()):
        carried = evaluate_causal_lm(model, ids, batch_size=passages, seq_len=length)["loss"]
        zero = zero_state_loss(model, ids, passages=passages, length=length)
        assert zero["loss_zero_state"] == pytest.approx(carried, rel=1e-5)
    # a stateless model reads every window from scratch: its loss is the zero-state loss
    assert "loss_zero_state" not in evaluate_causal_lm(gpt2, ids, batch_size=2, seq_len=8)


def read_windows(model) -> tuple[list, object]:
    """``(shapes, hook)``: the shape of every ``input_ids`` ``model`` is called with, recorded
    from now on (remove the hook when done)."""
    shapes = []
    hook = model.register_forward_pre_hook(
        lambda module, args, kwargs: shapes.append(tuple(kwargs["input_ids"].shape)),
        with_kwargs=True,
    )
    return shapes, hook


def test_a_cap_scores_the_first_windows_as_streams_with_the_passages_over_them(monkeypatch, capsys):
    """``max_examples: 6`` windows of 100 tokens: the first 600 predicted tokens, read as 4
    streams of 150, and 3 zero-state passages spread over those 601 ids; the rest of the
    split (a trigger at 3,000 included) is never read. Each pass shows its bar (its delay set
    to 0 here) with its count and rate."""
    import hfattn.common.progress as progress

    monkeypatch.setattr(progress, "PROGRESS_DELAY_S", 0.0)
    ids = corpus(5000, [30, 420, 3000])
    model = latch_model()
    shapes, hook = read_windows(model)
    try:
        scores = evaluate_causal_lm(model, ids, batch_size=4, seq_len=100, max_examples=6,
                                    zero_state_passages=3, zero_state_len=50,
                                    progress="validation")  # fmt: skip
    finally:
        hook.remove()
    carried = [
        loss for i in range(4) for loss in token_losses(ids[i * 150 : (i + 1) * 150].tolist())
    ]
    starts = [p * (601 - 50 - 1) // 2 for p in range(3)]  # 0, 275, 550
    per_passage = [statistics.fmean(token_losses(ids[s : s + 50].tolist())) for s in starts]
    assert scores["loss"] == pytest.approx(statistics.fmean(carried), rel=1e-5)
    assert scores["loss_zero_state"] == pytest.approx(statistics.fmean(per_passage), rel=1e-5)
    assert (scores["num_tokens"], scores["num_chars"], scores["num_examples"]) == (600, 600, 6)
    assert shapes == [(4, 100), (4, 50), (3, 50)]  # two windows of each stream, the passages
    err = capsys.readouterr().err
    assert re.search(r"validation: loss: .*/600 .*token/s", err), err
    assert re.search(r"validation: zero-state loss: .*/3 .*passage/s", err), err


def test_a_cap_below_the_batch_size_scores_its_windows_in_one_batch():
    ids = corpus(5000, [150])
    model = latch_model()
    shapes, hook = read_windows(model)
    try:
        scores = evaluate_causal_lm(model, ids, batch_size=32, seq_len=100, max_examples=2,
                                    zero_state_passages=0)  # fmt: skip
    finally:
        hook.remove()
    assert shapes == [(2, 100)]
    losses = token_losses(ids[:100].tolist()) + token_losses(ids[100:200].tolist())
    assert scores["loss"] == pytest.approx(statistics.fmean(losses), rel=1e-5)
    assert (scores["num_tokens"], scores["num_examples"]) == (200, 2)
    assert scores["accuracy"] == 0.0  # the latch never predicts the random tokens (never 0)


def test_the_scored_prefix_is_a_slice_of_the_mapped_split(tmp_path):
    path = tmp_path / "ids.bin"
    np.arange(100_000, dtype=np.uint16).tofile(path)
    mapped = np.memmap(path, dtype=np.uint16, mode="r")
    prefix = scored_prefix(mapped, 100, 6)
    assert np.shares_memory(prefix, mapped) and not prefix.flags.owndata  # a view, no copy
    assert prefix.tolist() == list(range(601))
    whole = scored_prefix(mapped, 100, None)
    assert np.shares_memory(whole, mapped) and len(whole) == 100_000
    assert len(scored_prefix(mapped, 100, 10_000)) == 100_000  # a cap above the split: all


def test_passages_fit_the_split():
    starts, length = passage_starts(10_001, 20, 1000)
    assert (len(starts), length, starts[0], starts[-1]) == (10, 1000, 0, 9000)  # no overlap
    assert passage_starts(301, 20, 1000) == ([0], 300)  # shorter than one passage
    with pytest.raises(ValueError, match="at least 2 ids, the split has 1"):
        passage_starts(1, 20, 1000)
    with pytest.raises(ValueError, match="must be >= 1, got 0 and 1000"):
        passage_starts(100, 0, 1000)


def test_a_run_reports_it_in_eval_results_evaluate_and_card(char_rnn_run, capsys):
    recorded = json.loads((char_rnn_run / "eval_results.json").read_text())
    rows = [r for r in recorded["results"] if r["split"] == "test"]
    assert [r["metric_type"] for r in rows][:2] == ["loss", "loss_zero_state"]
    assert [r["metric_name"] for r in rows][:2] == [
        "Loss (nats/char), state carried",
        "Loss (nats/char), from a zero state",
    ]
    test = recorded["all_metrics"]["test"]
    assert rows[1]["value"] == test["loss_zero_state"]
    assert test["zero_state_passages"] >= 1 and test["zero_state_tokens"] == 1000
    assert 0 <= test["zero_state_above_uniform"] <= test["zero_state_passages"]

    assert main(["evaluate", str(char_rnn_run), "--split", "test"]) == 0
    out = capsys.readouterr().out
    for name in ("loss", "loss_zero_state", "loss_zero_state_median"):
        assert f"{test[name]:.4f}" in out, name
    assert "zero-state loss is the mean loss of passages of 1,000 tokens" in " ".join(out.split())
    worse = f"test {test['zero_state_above_uniform']} of {test['zero_state_passages']}."
    assert f"worse than guessing uniformly over the vocabulary: {worse}" in " ".join(out.split())

    card = render_model_card(inspect_folder(char_rnn_run), "me/char-rnn").text
    value = f"{test['loss_zero_state']:.4g}"
    assert f"| test | Loss (nats/char), from a zero state | {value} |" in card
    note = card.index("The zero-state loss is the mean loss of passages")
    assert card.index("| test | Loss (nats/char), state carried |") < note
    assert note < card.index("## Samples") < card.index("## Intended use")
