"""Token-budget batches in length buckets (:mod:`hfattn.data.token_buckets`): few shapes,
little padding, full batches, every pair trained, the same loss as lists padded per batch,
no device read to count tokens, the engine's compile of one static graph a bucket, and the
background prefetch."""

import functools
import random
import threading
import time

import numpy as np
import pytest
import torch
from torch._dynamo.utils import counters

from hfattn.data.seq2seq import IGNORE_INDEX, pad_pairs
from hfattn.data.token_buckets import BucketedBatches, TokenBatch, bucket_of, choose_buckets
from hfattn.models import (
    BahdanauConfig,
    BahdanauForConditionalGeneration,
    VaswaniConfig,
    VaswaniForConditionalGeneration,
)
from hfattn.recipes.schema import RecipeError
from hfattn.training import engine
from hfattn.training.compiling import CompileClock, compile_for_training, resolve_compile
from hfattn.training.prefetch import prefetched


def corpus(n=600, seed=0, vocab=30):
    """Pairs whose target is about 1.1 × the source long, ids in 3..vocab-1."""
    rng = random.Random(seed)
    sources, targets = [], []
    for _ in range(n):
        s = rng.randint(2, 40)
        t = max(2, min(48, round(s * 1.1) + rng.randint(-3, 3)))
        sources.append([rng.randrange(3, vocab) for _ in range(s)])
        targets.append([rng.randrange(3, vocab) for _ in range(t - 1)] + [2])
    return sources, targets


def padding_share(sources, targets, widths):
    """Padded positions over all positions of each pair in its bucket."""
    s = np.array([len(x) for x in sources])
    t = np.array([len(x) for x in targets])
    k = bucket_of(s, t, widths)
    table = np.array(widths)
    return (table[k, 0] - s).sum() / table[k, 0].sum(), (table[k, 1] - t).sum() / table[k, 1].sum()


def test_buckets_hold_every_pair_and_pad_less_than_quantile_cuts():
    sources, targets = corpus()
    widths = choose_buckets([len(s) for s in sources], [len(t) for t in targets], 6)
    assert 2 <= len(widths) <= 6
    assert widths == sorted(widths)
    assert widths[-1] == (max(map(len, sources)), max(map(len, targets)))
    source_pad, target_pad = padding_share(sources, targets, widths)
    # one bucket (the widest pair) pads far more
    one = padding_share(sources, targets, [widths[-1]])
    assert source_pad + target_pad < 0.5 * sum(one)
    assert max(source_pad, target_pad) < 0.2


def test_classification_buckets_are_source_widths():
    sources, _ = corpus()
    labels = [len(s) % 3 for s in sources]
    batches = BucketedBatches(sources, labels, token_budget=400, pad_token_id=0, num_buckets=4)
    assert all(t == 0 for _, t in batches.widths)
    batch = next(batches.epoch(0))
    assert batch["labels"].shape == (batch["input_ids"].shape[0],)
    assert batch.num_tokens == int(batch["attention_mask"].sum())


def test_batches_are_full_in_few_shapes_and_train_every_pair():
    sources, targets = corpus()
    batches = BucketedBatches(sources, targets, token_budget=320, pad_token_id=0, seed=5)
    shapes, seen = set(), np.zeros(len(sources), dtype=np.int64)
    for epoch in range(6):
        for k, positions in batches.order(epoch):
            assert len(positions) == batches.rows[k]
            np.add.at(seen, batches.members[k][positions], 1)
        for batch in batches.epoch(epoch):
            shapes.add((*batch["input_ids"].shape, batch["labels"].shape[1]))
    assert shapes == set(batches.shapes) and len(shapes) <= 8
    # the pairs a bucket leaves over go first in the next epoch: nothing is dropped, so over 6
    # epochs every pair is trained 6 times, or 5 when the last epoch left it over
    assert (int(seen.min()), int(seen.max())) == (5, 6)
    assert (seen == 5).sum() == sum(len(c) for c in batches._carried)
    assert all(
        r % 8 == 0 or r == len(m) for r, m in zip(batches.rows, batches.members, strict=True)
    )


def test_rows_follow_the_budget_over_the_mean_target_length():
    sources, targets = corpus(2000)
    batches = BucketedBatches(sources, targets, token_budget=3000, pad_token_id=0)
    tokens = [b.num_tokens for b in batches.epoch(0)]
    assert abs(sum(tokens) / len(tokens) / 3000 - 1) < 0.1
    for rows, members in zip(batches.rows, batches.members, strict=True):
        mean = sum(len(targets[i]) for i in members) / len(members)
        assert rows == min(len(members), max(8, round(3000 / (8 * mean)) * 8))


def test_order_is_a_function_of_seed_and_epoch():
    sources, targets = corpus()
    one = BucketedBatches(sources, targets, token_budget=320, pad_token_id=0, seed=3)
    two = BucketedBatches(sources, targets, token_budget=320, pad_token_id=0, seed=3)
    other = BucketedBatches(sources, targets, token_budget=320, pad_token_id=0, seed=4)
    late = [(k, p.tolist()) for k, p in two.order(4)]  # asked first, without epochs 0-3
    assert [(k, p.tolist()) for k, p in one.order(4)] == late
    assert [(k, p.tolist()) for k, p in other.order(4)] != late
    resumed = list(one.epoch(2, start=3))
    full = list(two.epoch(2))[3:]
    assert all(torch.equal(a["labels"], b["labels"]) for a, b in zip(resumed, full, strict=True))


def test_a_batch_holds_its_rows_right_padded_and_counts_its_tokens_on_the_host():
    sources, targets = corpus()
    batches = BucketedBatches(sources, targets, token_budget=320, pad_token_id=0)
    k, positions = batches.order(0)[0]
    batch = next(batches.epoch(0))
    assert isinstance(batch, TokenBatch)
    rows = batches.members[k][positions]
    expected = pad_pairs([sources[i] for i in rows], [targets[i] for i in rows], 0)
    width_s, width_t = expected["input_ids"].shape[1], expected["labels"].shape[1]
    assert torch.equal(batch["input_ids"][:, :width_s], expected["input_ids"])
    assert torch.equal(batch["attention_mask"][:, :width_s], expected["attention_mask"])
    assert torch.equal(batch["labels"][:, :width_t], expected["labels"])
    assert not batch["attention_mask"][:, width_s:].any()
    assert (batch["labels"][:, width_t:] == IGNORE_INDEX).all()
    assert batch.num_tokens == sum(len(targets[i]) for i in rows)
    assert engine.trained_tokens(batch) == batch.num_tokens
    # the engine reads the count it is given, not the (device) labels
    batch.num_tokens = 7
    assert engine.trained_tokens(batch) == 7


@pytest.mark.parametrize("family", ["vaswani", "bahdanau"])
def test_same_loss_as_lists_padded_per_batch(family):
    sources, targets = corpus(300, vocab=40)
    torch.manual_seed(0)
    ids = dict(vocab_size=40, pad_token_id=0, bos_token_id=1, eos_token_id=2,
               decoder_start_token_id=1)  # fmt: skip
    if family == "vaswani":
        model = VaswaniForConditionalGeneration(VaswaniConfig(
            encoder_layers=1, decoder_layers=1, d_model=16, num_heads=2, ffn_dim=24,
            dropout=0.0, max_position_embeddings=64, **ids))  # fmt: skip
    else:
        model = BahdanauForConditionalGeneration(BahdanauConfig(
            embedding_dim=8, encoder_hidden_size=6, bidirectional=True, decoder_hidden_size=12,
            dropout=0.0, **ids))  # fmt: skip
    model.eval()
    batches = BucketedBatches(sources, targets, token_budget=240, pad_token_id=0)
    for (k, positions), batch in list(zip(batches.order(0), batches.epoch(0), strict=True))[:4]:
        rows = batches.members[k][positions]
        tight = pad_pairs([sources[i] for i in rows], [targets[i] for i in rows], 0)
        assert batch["input_ids"].shape[1] >= tight["input_ids"].shape[1]
        torch.testing.assert_close(model(**batch).loss, model(**tight).loss, atol=1e-6, rtol=0)


def test_to_a_cpu_keeps_the_tensors_and_the_engine_does_not_copy_them():
    sources, targets = corpus()
    batches = BucketedBatches(sources, targets, token_budget=320, pad_token_id=0)
    assert batches.to("cpu") is batches and batches.device.type == "cpu"
    batch = next(batches.epoch(0))
    rows = engine._rows_of(batch, 0, 1, torch.device("cpu"))
    assert rows["labels"].data_ptr() == batch["labels"].data_ptr()
    assert not engine.on_device(batches)


def test_recipe_takes_a_budget_and_refuses_it_with_max_tokens():
    from hfattn.recipes import load_recipe

    recipe = "recipes/vaswani_dates_en_es.yaml"
    ok = load_recipe(recipe, ["training.token_budget=2000", "training.length_buckets=4"])
    assert (ok.training.token_budget, ok.training.length_buckets) == (2000, 4)
    with pytest.raises(RecipeError, match="training.max_tokens"):
        load_recipe(recipe, ["training.token_budget=2000", "training.max_tokens=4000"])
    with pytest.raises(RecipeError, match="training.length_buckets"):
        load_recipe(recipe, ["training.token_budget=2000", "training.length_buckets=0"])


def test_compile_auto_takes_the_transformer_on_cuda_only_with_buckets():
    assert resolve_compile("auto", "vaswani", "cuda", fixed_shapes=True)
    assert not resolve_compile("auto", "vaswani", "cuda")
    assert not resolve_compile("auto", "vaswani", "cpu", fixed_shapes=True)
    assert not resolve_compile("auto", "bahdanau", "cuda", fixed_shapes=True)
    assert resolve_compile("auto", "char-rnn", "cuda")


def test_compiled_step_makes_one_graph_a_bucket_and_none_in_a_second_epoch(monkeypatch):
    """TorchDynamo decides graphs, guards and breaks before any backend: ``aot_eager``
    stands in for inductor so that the test takes seconds."""
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="aot_eager"))
    sources, targets = corpus(200)
    batches = BucketedBatches(sources, targets, token_budget=200, pad_token_id=0, num_buckets=3)
    torch.manual_seed(0)
    model = VaswaniForConditionalGeneration(VaswaniConfig(
        vocab_size=30, encoder_layers=1, decoder_layers=1, d_model=16, num_heads=2, ffn_dim=24,
        pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1,
        max_position_embeddings=64))  # fmt: skip
    step = compile_for_training(model, len(batches.shapes))
    torch._dynamo.reset()
    counters.clear()
    graphs = []
    for epoch in (0, 1):
        for batch in batches.epoch(epoch):
            step(**batch).loss.backward()
        graphs.append(counters["stats"]["unique_graphs"])
    assert graphs == [len(batches.shapes)] * 2
    assert sum(counters["graph_break"].values()) == 0


def test_compile_clock_times_the_first_step_of_each_shape():
    clock = CompileClock("cpu")
    a, b = torch.zeros(2, 3), torch.zeros(4, 3)
    for batch, pause in ((a, 0.05), (a, 0.3), (b, 0.05), ({"input_ids": b}, 0.3)):
        with clock.timing(batch):
            time.sleep(pause)
    assert 0.1 <= clock.seconds < 0.3  # the first step of a and of b, not their second
    assert clock.shapes == {((2, 3),), ((4, 3),)}
    off = CompileClock("cpu", enabled=False)  # an eager run times nothing
    with off.timing(a):
        time.sleep(0.05)
    assert (off.seconds, off.shapes) == (0.0, set())


def test_prefetch_keeps_order_and_raises_the_producers_error():
    def made():
        for i in range(5):
            yield {"x": torch.full((2,), i)}

    assert [int(b["x"][0]) for b in prefetched(made(), pin=False)] == list(range(5))

    def broken():
        yield torch.zeros(1)
        raise ValueError("bad batch")

    out = prefetched(broken(), pin=False)
    next(out)
    with pytest.raises(ValueError, match="bad batch"):
        next(out)


def test_prefetch_stops_its_thread_when_the_run_stops_early():
    def endless():
        i = 0
        while True:
            i += 1
            yield torch.tensor([i])

    out = prefetched(endless(), depth=2, pin=False)
    assert int(next(out)[0]) == 1
    out.close()
    deadline = time.monotonic() + 5
    while any(t.name == "hfattn-prefetch" for t in threading.enumerate()):
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_a_run_with_a_token_budget_trains_about_the_budget_a_step(tmp_path):
    import json

    from tests.helpers.tiny_runs import build_translation_run

    run = build_translation_run(tmp_path / "run", model="vaswani", steps=12,
                                training={"token_budget": 600, "length_buckets": 4,
                                          "log_every": 4, "eval_every": None})  # fmt: skip
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["split"] == "train"]
    assert [r["step"] for r in train] == [4, 8, 12]
    assert abs(train[-1]["tokens"] / 12 / 600 - 1) < 0.15
    results = json.loads((run / "eval_results.json").read_text())
    assert results["training"]["train_tokens"] == train[-1]["tokens"]
