"""Token-budget batches in length buckets (:mod:`hfattn.batching.token_buckets`): few shapes,
little padding, full batches, every pair trained, the same loss as lists padded per batch,
no device read to count tokens, the engine's compile of one graph for all buckets, and the
background prefetch."""

import functools
import logging
import random
import re
import threading
import time

import numpy as np
import pytest
import torch
from torch._dynamo.utils import counters

from hfattn.batching.resampled import ResampledBatches
from hfattn.batching.seq2seq import IGNORE_INDEX, pad_pairs
from hfattn.batching.token_buckets import BucketedBatches, TokenBatch, bucket_of, choose_buckets
from hfattn.common import progress
from hfattn.models import (
    BahdanauConfig,
    BahdanauForConditionalGeneration,
    VaswaniConfig,
    VaswaniForConditionalGeneration,
)
from hfattn.models.modeling_vaswani import VaswaniEncoderLayer
from hfattn.recipes.schema import RecipeError
from hfattn.training import engine
from hfattn.training.compiling import CompileWatch, compile_for_training, resolve_compile
from hfattn.training.prefetch import prefetched
from hfattn.training.processes import rows_of


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


def test_resampled_batches_keep_one_layout_and_batch_each_epochs_own_ids():
    """Ids drawn anew every epoch (BPE-dropout) are batched in the buckets' shapes fixed once:
    chosen on epoch 0's ids, the last one as wide as the longest pair to come; epoch ``e``'s
    batches hold epoch ``e``'s ids, and a resumed batcher gives the same batches."""
    drawn = []

    def ids(epoch):
        drawn.append(epoch)
        return corpus(seed=epoch)

    first = BucketedBatches(*corpus(seed=0), token_budget=320, pad_token_id=0, seed=1)
    widths, rows = first.layout
    layout = (widths[:-1] + [(40, 48)], rows)  # corpus(): sources <= 40, targets <= 48

    def build(sources, targets):
        return BucketedBatches(sources, targets, token_budget=320, pad_token_id=0, seed=1,
                               layout=layout)  # fmt: skip

    batches = ResampledBatches(ids, build)
    assert batches.shapes == [(r, s, t) for r, (s, t) in zip(rows, layout[0], strict=True)]
    for epoch in range(3):
        sources, _ = corpus(seed=epoch)
        known = {tuple(s) for s in sources}
        for batch in batches.epoch(epoch):
            assert (*batch["input_ids"].shape, batch["labels"].shape[1]) in batches.shapes
            for row, mask in zip(batch["input_ids"], batch["attention_mask"], strict=True):
                assert tuple(row[mask.bool()].tolist()) in known
    assert drawn == [0, 1, 2]
    resumed = list(ResampledBatches(ids, build).epoch(2, start=3))
    full = list(batches.epoch(2))[3:]
    assert all(torch.equal(a["labels"], b["labels"]) for a, b in zip(resumed, full, strict=True))
    with pytest.raises(ValueError, match="fits no bucket of the layout"):
        BucketedBatches([[3] * 41], [[3, 2]], token_budget=320, pad_token_id=0, layout=layout)


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
    rows = rows_of(batch, 0, 1, torch.device("cpu"))
    assert rows["labels"].data_ptr() == batch["labels"].data_ptr()
    assert not engine.on_device(batches)


def test_recipe_takes_a_budget_and_refuses_it_with_max_tokens():
    from hfattn.recipes import load_recipe

    recipe = "recipes/vaswani_dates_en_es.yaml"
    budget = ["training.token_budget=2000", "training.batch_size=32"]  # its batch_size: 64
    ok = load_recipe(recipe, [*budget, "training.length_buckets=4"])
    assert (ok.training.token_budget, ok.training.length_buckets) == (2000, 4)
    with pytest.raises(RecipeError, match="training.max_tokens"):
        load_recipe(recipe, [*budget, "training.max_tokens=4000"])
    with pytest.raises(RecipeError, match="training.length_buckets"):
        load_recipe(recipe, [*budget, "training.length_buckets=0"])


def test_compile_auto_leaves_bucketed_transformers_eager():
    """Measured on an H100: one static graph a bucket cost minutes of compiles before the
    compiled steps paid any of it back, so ``auto`` does not compile the Transformer."""
    assert not resolve_compile("auto", "vaswani", "cuda")
    assert not resolve_compile("auto", "bahdanau", "cuda")
    assert resolve_compile("auto", "char-rnn", "cuda")
    assert resolve_compile(True, "vaswani", "cpu")


@pytest.mark.slow
def test_compiled_buckets_share_one_graph_and_a_second_epoch_compiles_none(monkeypatch):
    """TorchDynamo decides graphs, guards and breaks before any backend: ``aot_eager``
    stands in for inductor so that the test takes seconds. With the row and length
    dimensions marked dynamic, every bucket runs the first batch's graph."""
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="aot_eager"))
    sources, targets = corpus(200)
    batches = BucketedBatches(sources, targets, token_budget=200, pad_token_id=0, num_buckets=3)
    assert len({shape[1:] for shape in batches.shapes}) == 3
    step = compile_for_training(bucket_vaswani(1))
    watch = CompileWatch("cpu", num_shapes=len(batches.shapes))
    graphs, labels = two_epochs(step, watch, batches)
    assert graphs == [1, 1]
    assert watch.compiles == 1 and watch.seconds > 0
    assert labels[0] == "compiling one graph for 3 shapes" and set(labels[1:]) == {None}
    assert sum(counters["graph_break"].values()) == 0


def bucket_vaswani(layers: int) -> VaswaniForConditionalGeneration:
    torch.manual_seed(0)
    return VaswaniForConditionalGeneration(VaswaniConfig(
        vocab_size=30, encoder_layers=layers, decoder_layers=layers, d_model=16, num_heads=2,
        ffn_dim=24, pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1,
        max_position_embeddings=64, dropout=0.0))  # fmt: skip


def two_epochs(step, watch: CompileWatch, batches, eager=None) -> tuple[list[int], list]:
    """Forward and backward through ``step`` over two epochs of ``batches`` under ``watch``:
    the graphs compiled after each epoch and the bar's labels; every loss checked against
    ``eager``'s when given."""
    torch._dynamo.reset()
    counters.clear()
    graphs, labels = [], []
    for epoch in (0, 1):
        for batch in batches.epoch(epoch):
            labels.append(watch.compiling_label(batch))
            with watch.step(batch):
                loss = step(**batch).loss
            if eager is not None:
                torch.testing.assert_close(loss, eager(**batch).loss)
            loss.backward()
        graphs.append(counters["stats"]["unique_graphs"])
    return graphs, labels


@pytest.mark.slow
def test_a_regional_compile_compiles_each_layer_stack_once_whatever_the_depth(monkeypatch):
    """``training.compile: regional``: the encoder's and the decoder's layers compile once
    each however many there are, the buckets share the graphs (symbolic sizes from the first
    batch), the losses are eager's, and the model itself keeps its modules and keys. The
    ``eager`` backend runs TorchDynamo's graphs as they are captured."""
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="eager"))
    sources, targets = corpus(200)
    batches = BucketedBatches(sources, targets, token_budget=200, pad_token_id=0, num_buckets=3)
    graphs = {}
    for layers in (1, 2):
        model = bucket_vaswani(layers)
        keys = list(model.state_dict())
        step = compile_for_training(model, regional=True, dynamic_shapes=True)
        watch = CompileWatch("cpu", num_shapes=len(batches.shapes), regional=True)
        per_epoch, labels = two_epochs(step, watch, batches, eager=model)
        assert per_epoch[0] == per_epoch[1] == watch.compiles  # nothing after the first batch
        assert labels[0] == "compiling each layer stack once for 3 shapes"
        assert set(labels[1:]) == {None}
        assert list(model.state_dict()) == keys and type(model.model.encoder.layers[0]) is (
            VaswaniEncoderLayer
        )
        graphs[layers] = per_epoch[0]
    assert graphs[1] == graphs[2] > 1  # the layers, and the modules around them


def test_a_regional_compile_refuses_a_model_in_eval_mode():
    with pytest.raises(ValueError, match="training flag"):
        compile_for_training(bucket_vaswani(1).eval(), regional=True)


def test_compile_watch_counts_the_steps_that_compile(monkeypatch):
    """Shapes not marked dynamic: every new shape is expected to compile (the bar says which);
    a step counts as a compile only when TorchDynamo made a graph during it."""
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="eager"))
    step = torch.compile(lambda x: (x * 2).sum())
    torch._dynamo.reset()
    watch = CompileWatch("cpu")
    a, b = torch.zeros(2, 3), torch.zeros(4, 5)
    seen = []
    for batch in (a, a, b, b):
        seen.append(watch.compiling_label(batch))
        with watch.step(batch):
            step(batch)
        seen.append(watch.compiled_last)
    assert seen == ["compiling shape 1", True, None, False,
                    "compiling shape 2", True, None, False]  # fmt: skip
    assert watch.compiles == 2 and watch.shapes == {((2, 3),), ((4, 5),)}
    off = CompileWatch("cpu", enabled=False)  # an eager run counts nothing
    with off.step(a):
        step(a)
    assert (off.seconds, off.compiles, off.compiling_label(a)) == (0.0, 0, None)


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


def tiny_translation_recipe(folder, **training):
    """A Vaswani translation recipe of a few seconds on 300 generated dates, with a token budget
    (``training`` overrides fields of its ``training:`` section)."""
    from tests.helpers.recipe_helpers import write_recipe
    from tests.helpers.tiny_runs import TINY_TRANSLATION_MODELS

    return write_recipe(
        folder,
        base={},
        task="translation",
        model=TINY_TRANSLATION_MODELS["vaswani"],
        tokenizer={"type": "char"},
        data={"source": "date-normalization", "size": 300},
        training={"token_budget": 600, "max_steps": 2, "eval_every": None, **training},
        evaluation={"splits": ["test"], "max_new_tokens": 16},
    )


def test_a_budget_below_the_longest_pair_is_one_error_before_the_buckets(tmp_path, capsys):
    """Once ``token_budget=1`` (10, 30) trained steps of 8 whole pairs, 123 target tokens."""
    from hfattn.cli import main
    from tests.helpers.bad_input import one_error_line

    sources, targets = corpus()
    longest = max(map(len, targets))
    with pytest.raises(RecipeError) as refused:
        BucketedBatches(sources, targets, token_budget=longest - 1, pad_token_id=0)
    assert str(refused.value) == (
        f"training.token_budget: {longest - 1} is below the {longest} target tokens of the "
        f"longest training pair: a batch holds whole examples, so the budget must be at least "
        f"{longest}"
    )
    labels = [0] * len(sources)
    with pytest.raises(RecipeError, match="input tokens of the longest training text"):
        BucketedBatches(sources, labels, token_budget=39, pad_token_id=0)
    assert BucketedBatches(sources, targets, token_budget=longest, pad_token_id=0).rows

    recipe = tiny_translation_recipe(tmp_path)
    assert main(["train", str(recipe), "--set", "training.token_budget=10"]) == 2
    message = one_error_line(capsys)
    assert re.fullmatch(
        r"training\.token_budget: 10 is below the (\d+) target tokens of the longest training "
        r"pair: a batch holds whole examples, so the budget must be at least \1",
        message,
    ), message
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_more_buckets_than_lengths_are_cut_to_the_lengths_with_a_warning(caplog):
    """Once ``length_buckets=1000`` on 5,400 pairs took 56 s before the first step, silent."""
    sources, targets = corpus()
    distinct = len({len(t) for t in targets})
    with caplog.at_level(logging.WARNING, logger="hfattn"):
        many = BucketedBatches(sources, targets, token_budget=320, pad_token_id=0, num_buckets=1000)
    assert caplog.messages == [
        f"training.length_buckets=1000 is more than the {distinct} distinct target lengths of "
        f"the training split: {distinct} buckets are built"
    ]
    same = BucketedBatches(sources, targets, token_budget=320, pad_token_id=0, num_buckets=distinct)
    assert many.widths == same.widths and len(many.widths) <= distinct


def test_choosing_buckets_shows_a_bar_only_once_it_takes_a_while(monkeypatch, capsys):
    sources, targets = corpus()
    lengths = [len(s) for s in sources], [len(t) for t in targets]
    quick = choose_buckets(*lengths, 6)
    assert "length buckets" not in capsys.readouterr().err
    monkeypatch.setattr(progress, "PROGRESS_DELAY_S", 0)  # as if it took long
    assert choose_buckets(*lengths, 6) == quick
    assert "length buckets:" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("overrides", "refusal"),
    [
        (
            ["training.batch_size=64"],
            "training.batch_size: 64 is not used with training.token_budget=600: a batch holds "
            "about that many tokens, in rows of its length bucket; leave batch_size at its "
            "default (32)",
        ),
        (
            ["training.token_budget=null", "training.length_buckets=16"],
            "training.length_buckets: 16 is not used without training.token_budget: a batch is "
            "training.batch_size examples",
        ),
    ],
)
def test_an_unused_batching_field_is_refused_before_the_data_loads(
    tmp_path, capsys, monkeypatch, overrides, refusal
):
    """Once ``batch_size`` beside a ``token_budget`` and ``length_buckets`` without one were
    ignored without a word. The refusal comes before the data loads (here: fails)."""
    from hfattn.cli import main
    from hfattn.tasks import get_task

    def no_data(self, recipe):
        raise ValueError("the data would load here")

    monkeypatch.setattr(type(get_task("translation")), "build_job", no_data)
    recipe = tiny_translation_recipe(tmp_path)
    assert main(["train", str(recipe), *[f"--set={o}" for o in overrides]]) == 2
    assert capsys.readouterr().err == f"error: {refusal}\n"
    assert main(["train", str(recipe)]) == 2  # the recipe as written: accepted
    assert capsys.readouterr().err == "error: the data would load here\n"
