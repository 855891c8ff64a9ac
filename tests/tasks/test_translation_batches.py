"""The translation task's pair batches (:class:`~hfattn.batching.seq2seq.PairBatches`): each
pair once an epoch, grouped by source or target length, cut by count or by a token budget, and
each process's share of a batch. The other concerns of the task are in the other
``test_translation_*.py`` modules."""

from __future__ import annotations

import pytest
import torch

from hfattn.batching.seq2seq import IGNORE_INDEX, PairBatches


def listed(order) -> list[list[int]]:
    """The batches of :meth:`PairBatches.order` (arrays of pair indices) as lists."""
    return [rows.tolist() for rows in order]


def test_pair_batches_cover_each_pair_once_grouped_by_length():
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, 40, (1000,), generator=gen).tolist()
    sources = [[5] * n for n in lengths]
    targets = [[6] * (n % 7 + 1) for n in lengths]
    batches = PairBatches(sources, targets, 32, pad_token_id=0, seed=3, pool_batches=8)
    assert len(batches) == 1000 // 32
    order = batches.order(0)
    flat = [i for rows in order for i in rows]
    gen_order = torch.randperm(len(flat), generator=gen).tolist()
    assert len(flat) == len(set(flat)) == len(batches) * 32
    assert listed(batches.order(0)) == listed(order) != listed(batches.order(1))  # per epoch
    assert [b["input_ids"].tolist() for b in batches.epoch(0, start=5)] == [
        b["input_ids"].tolist() for b in list(batches.epoch(0))[5:]
    ]
    padded_share = []
    for rows, batch in zip(order, batches.epoch(0), strict=True):
        want = [lengths[i] for i in rows]
        assert batch["attention_mask"].sum(1).tolist() == want
        assert (batch["input_ids"][batch["attention_mask"] == 0] == 0).all()
        label_lengths = (batch["labels"] != IGNORE_INDEX).sum(1).tolist()
        assert label_lengths == [n % 7 + 1 for n in want]
        padded_share.append(1 - sum(want) / (len(want) * max(want)))
    # length grouping pads far less than batches of the same pairs in random order
    flat_batches = [[flat[j] for j in gen_order[k : k + 32]] for k in range(0, len(flat), 32)]
    random_share = [
        1 - sum(lengths[i] for i in b) / (32 * max(lengths[i] for i in b)) for b in flat_batches
    ]
    assert sum(padded_share) / len(padded_share) < 0.5 * sum(random_share) / len(random_share)


def test_pair_batches_cut_by_size_stay_within_max_tokens_and_rows():
    """``max_tokens``: every batch's padded size rows × (widest source + widest target) is
    within the budget and its rows within ``batch_size``; a batch closes only when the next
    pair of its pool would not fit; short pairs come many to a batch; every pair but those of
    the epoch's dropped last batch is trained on once."""
    gen = torch.Generator().manual_seed(1)
    lengths = torch.randint(2, 60, (3000,), generator=gen).tolist()
    sources = [[5] * n for n in lengths]
    targets = [[6] * (n // 2 + 1) for n in lengths]
    budget, cap = 600, 64
    batches = PairBatches(
        sources, targets, cap, pad_token_id=0, seed=3, pool_batches=4, max_tokens=budget
    )
    widest = max(lengths) + max(lengths) // 2 + 1
    assert batches.min_rows == budget // widest
    for epoch in (0, 1):
        order = batches.order(epoch)
        flat = [i for rows in order for i in rows]
        assert len(flat) == len(set(flat))
        assert len(sources) - len(flat) <= cap  # only the epoch's last batch is dropped
        for rows in order:
            size = len(rows) * (
                max(lengths[i] for i in rows) + max(lengths[i] // 2 + 1 for i in rows)
            )
            assert size <= budget and batches.min_rows <= len(rows) <= cap
    order = batches.order(0)
    assert len(batches) == len(order)
    assert listed(batches.order(0)) == listed(order) != listed(batches.order(1))
    for rows, batch in zip(order, batches.epoch(0), strict=True):
        assert batch["attention_mask"].sum(1).tolist() == [lengths[i] for i in rows]
        assert (
            batch["input_ids"].shape[0] * (batch["input_ids"].shape[1] + batch["labels"].shape[1])
            <= budget
        )
    rows_by_width = sorted((max(lengths[i] for i in rows), len(rows)) for rows in order)
    assert rows_by_width[0][1] > 4 * rows_by_width[-1][1]  # short pairs: many rows a batch
    # by count, every batch holds the same rows whatever the length of its pairs
    fixed = PairBatches(sources, targets, 16, pad_token_id=0, seed=3, pool_batches=4)
    assert {len(rows) for rows in fixed.order(0)} == {16}


def test_pair_batches_grouped_by_target_length_pad_the_labels_least():
    """``group_by_length="target"`` sorts each pool by target length (ties by source length):
    the same pairs, each once, in batches whose labels pad far less than when the pools are
    sorted by source length, and whose sources pad more; an epoch is still seeded."""
    gen = torch.Generator().manual_seed(2)
    source_lengths = torch.randint(1, 40, (2000,), generator=gen).tolist()
    target_lengths = torch.randint(1, 40, (2000,), generator=gen).tolist()
    sources = [[5] * n for n in source_lengths]
    targets = [[6] * n for n in target_lengths]

    def padded_share(batches, key):
        real = padded = 0
        for batch in batches.epoch(0):
            mask = batch[key] != (0 if key == "input_ids" else IGNORE_INDEX)
            real, padded = real + int(mask.sum()), padded + mask.numel()
        return 1 - real / padded

    by = {
        group: PairBatches(sources, targets, 32, pad_token_id=0, seed=3, group_by_length=group)
        for group in ("source", "target")
    }
    flat = sorted(i for rows in by["target"].order(0) for i in rows)
    assert len(flat) == len(set(flat)) == len(by["target"]) * 32
    assert listed(by["target"].order(0)) == listed(by["target"].order(0))
    assert listed(by["target"].order(0)) != listed(by["target"].order(1))
    source_labels = padded_share(by["source"], "labels")
    target_labels = padded_share(by["target"], "labels")
    assert target_labels < 0.2 * source_labels
    assert padded_share(by["target"], "input_ids") > padded_share(by["source"], "input_ids")
    with pytest.raises(ValueError, match="group_by_length must be one of source, target"):
        PairBatches(sources, targets, 32, pad_token_id=0, group_by_length="both")


def test_pair_batches_refuse_a_budget_below_the_longest_pair():
    with pytest.raises(
        ValueError,
        match=r"training.max_tokens=20 is smaller than the longest source plus the longest target \(21 tokens\)",
    ):
        PairBatches([[1] * 12, [1] * 3], [[2] * 9, [2] * 2], 1, pad_token_id=0, max_tokens=20)


def test_process_shares_of_a_batch_cover_its_rows_once():
    """Each process takes rows ⌊i·B/P⌋ to ⌊(i+1)·B/P⌋ of a global batch: equal shares when P
    divides B (a batch by count), nearly equal otherwise (a batch cut by size)."""
    from hfattn.training.processes import check_rows_per_process, rows_of

    batch = {"input_ids": torch.arange(7)[:, None].repeat(1, 3), "labels": torch.arange(7)}
    shares = [rows_of(batch, i, 3, "cpu") for i in range(3)]
    assert [s["labels"].tolist() for s in shares] == [[0, 1], [2, 3], [4, 5, 6]]
    assert all(torch.equal(s["input_ids"][:, 0], s["labels"]) for s in shares)
    by_size = PairBatches(
        [[1] * 40, [1] * 3], [[2] * 40, [2] * 2], 8, pad_token_id=0, max_tokens=100
    )
    assert by_size.min_rows == 1
    check_rows_per_process(by_size, 1)
    with pytest.raises(ValueError, match="fits only 1 pair.* fewer than the 2 processes"):
        check_rows_per_process(by_size, 2)
    window = torch.arange(8)[:, None].repeat(1, 5)
    assert [rows_of(window, i, 2, "cpu")[:, 0].tolist() for i in range(2)] == [
        [0, 1, 2, 3],
        [4, 5, 6, 7],
    ]
