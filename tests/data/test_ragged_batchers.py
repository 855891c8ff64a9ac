"""The batchers read ragged ids (:class:`~hfattn.storage.ragged.RaggedIds`, memory-mapped from
a prepared folder) and give the batches they gave when they held lists: the reference copies
below are the list implementations they replaced (pools sorted in Python, a size cut pair by
pair, each bucket padded once and indexed)."""

from __future__ import annotations

import pickle
import random

import numpy as np
import pytest
import torch

from hfattn.batching.seq2seq import IGNORE_INDEX, LabelBatches, PairBatches, pad_rows
from hfattn.batching.token_buckets import BucketedBatches, DeviceRagged
from hfattn.storage.ragged import RaggedIds, RaggedWriter


def corpus(n=500, seed=0):
    """Pairs of random lengths (sources 1..40, targets about as long), ids in 3..29."""
    rng = random.Random(seed)
    sources, targets = [], []
    for _ in range(n):
        s = rng.randint(1, 40)
        t = max(1, min(48, s + rng.randint(-4, 4)))
        sources.append([rng.randrange(3, 30) for _ in range(s)])
        targets.append([rng.randrange(3, 30) for _ in range(t)])
    return sources, targets


def mapped(folder, name, rows) -> RaggedIds:
    """``rows`` written as a ragged array (``uint16``, two batches) and mapped back."""
    with RaggedWriter(folder, name, np.uint16) as writer:
        writer.add(rows[: len(rows) // 2])
        writer.add(rows[len(rows) // 2 :])
        ids = writer.close()
    assert isinstance(ids.values, np.memmap)
    return ids


def old_pair_order(sources, targets, batch_size, seed, epoch, pool, max_tokens, group):
    """:meth:`PairBatches.order` as it was, on lists."""

    def length(i):
        if group == "target":
            return len(targets[i]), len(sources[i])
        return len(sources[i])

    def cut_by_size(pool_rows):
        batches, rows, width = [], [], (0, 0)
        for i in pool_rows:
            grown = (max(width[0], len(sources[i])), max(width[1], len(targets[i])))
            if rows and (len(rows) == batch_size or (len(rows) + 1) * sum(grown) > max_tokens):
                batches.append(rows)
                rows, grown = [], (len(sources[i]), len(targets[i]))
            rows.append(i)
            width = grown
        return batches + [rows]

    generator = torch.Generator().manual_seed(seed + epoch)
    shuffled = torch.randperm(len(sources), generator=generator).tolist()
    if max_tokens is None:
        shuffled = shuffled[: len(sources) // batch_size * batch_size]
    batches, carried = [], []
    for begin in range(0, len(shuffled), pool):
        rows = sorted(carried + shuffled[begin : begin + pool], key=length)
        if max_tokens is None:
            batches += [rows[k : k + batch_size] for k in range(0, len(rows), batch_size)]
        else:
            cut = cut_by_size(rows)
            batches += cut[:-1]
            carried = cut[-1]
    permutation = torch.randperm(len(batches), generator=generator).tolist()
    return [batches[k] for k in permutation]


def old_pad_pairs(sources, targets, rows, pad, multiple=None):
    """The padded batch of ``rows`` as the list batchers made it."""

    def width(seqs):
        w = max(map(len, seqs))
        return -(-w // multiple) * multiple if multiple else w

    src, tgt = [sources[i] for i in rows], [targets[i] for i in rows]
    ids, mask = pad_rows(src, width(src), pad)
    return {"input_ids": ids, "attention_mask": mask, "labels": pad_rows(tgt, width(tgt), -100)[0]}


def assert_same_batches(new, old):
    assert len(new) == len(old)
    for a, b in zip(new, old, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            assert a[key].dtype == b[key].dtype == torch.long
            assert torch.equal(a[key], b[key]), key


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"group_by_length": "target"},
        {"max_tokens": 400, "batch_size": 32},
        {"max_tokens": 300, "group_by_length": "target"},
        {"round": 8},
    ],
)
def test_pair_batches_from_a_map_are_the_list_batches(tmp_path, options):
    sources, targets = corpus()
    options = dict(options)
    multiple = options.pop("round", None)
    batch_size = options.pop("batch_size", 16)
    batches = PairBatches(
        mapped(tmp_path, "s", sources), mapped(tmp_path, "t", targets), batch_size,
        pad_token_id=0, seed=4, pool_batches=5, **options,
    )  # fmt: skip
    if multiple:
        batches.round_widths(multiple)
    for epoch in (0, 1):
        old = old_pair_order(sources, targets, batch_size, 4, epoch, batch_size * 5,
                             options.get("max_tokens"), options.get("group_by_length", "source"))  # fmt: skip
        assert [rows.tolist() for rows in batches.order(epoch)] == old
        expected = [old_pad_pairs(sources, targets, rows, 0, multiple) for rows in old]
        assert_same_batches(list(batches.epoch(epoch)), expected)
    assert list(batches.epoch(1, start=3))[0]["labels"].equal(expected[3]["labels"])


def test_label_batches_take_an_array_of_class_ids(tmp_path):
    sources, _ = corpus(300)
    labels = np.array([len(s) % 3 for s in sources])
    batches = LabelBatches(mapped(tmp_path, "s", sources), labels, 8, pad_token_id=0, seed=2)
    listed = LabelBatches(sources, labels.tolist(), 8, pad_token_id=0, seed=2)
    old = old_pair_order(sources, sources, 8, 2, 0, 8 * 50, None, "source")
    for new, rows, from_lists in zip(batches.epoch(0), old, listed.epoch(0), strict=True):
        ids, mask = pad_rows([sources[i] for i in rows], max(len(sources[i]) for i in rows), 0)
        assert torch.equal(new["input_ids"], ids) and torch.equal(new["attention_mask"], mask)
        assert new["labels"].tolist() == [int(labels[i]) for i in rows]
        assert all(torch.equal(new[k], from_lists[k]) for k in new)


def old_bucket_batch(sources, targets, rows, widths, classes):
    """A batch as the bucketed batcher made it: the bucket padded once to its widths, then
    its rows indexed."""
    ids, mask = pad_rows([sources[i] for i in rows], widths[0], 0)
    if classes:
        labels = torch.tensor([targets[i] for i in rows], dtype=torch.long)
    else:
        labels = pad_rows([targets[i] for i in rows], widths[1], IGNORE_INDEX)[0]
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


@pytest.mark.parametrize("classes", [False, True])
def test_bucketed_batches_from_a_map_are_the_padded_buckets(tmp_path, classes):
    sources, targets = corpus(800)
    labels = np.array([len(s) % 4 for s in sources])
    ragged_targets = labels if classes else mapped(tmp_path, "t", targets)
    batches = BucketedBatches(mapped(tmp_path, "s", sources), ragged_targets, token_budget=300,
                              pad_token_id=0, num_buckets=5, seed=7)  # fmt: skip
    listed = BucketedBatches(sources, labels.tolist() if classes else targets, token_budget=300,
                             pad_token_id=0, num_buckets=5, seed=7)  # fmt: skip
    assert batches.widths == listed.widths and batches.rows == listed.rows
    reference = labels.tolist() if classes else targets
    for epoch in (0, 1):
        order = batches.order(epoch)
        assert [(k, p.tolist()) for k, p in order] == [
            (k, p.tolist()) for k, p in listed.order(epoch)
        ]
        for (k, positions), batch in zip(order, batches.epoch(epoch), strict=True):
            rows = batches.members[k][positions]
            expected = old_bucket_batch(sources, reference, rows, batches.widths[k], classes)
            assert_same_batches([batch], [expected])
            counted = sources if classes else targets
            assert batch.num_tokens == sum(len(counted[i]) for i in rows)


def test_bucket_members_are_index_arrays_in_corpus_order():
    sources, targets = corpus(400)
    batches = BucketedBatches(sources, targets, token_budget=300, pad_token_id=0, num_buckets=4)
    assert sorted(np.concatenate(batches.members).tolist()) == list(range(400))
    for k, members in enumerate(batches.members):
        assert members.dtype == np.int64 and (np.diff(members) > 0).all()
        widths = batches.widths[k]
        assert all(len(sources[i]) <= widths[0] and len(targets[i]) <= widths[1] for i in members)


def test_the_device_gather_is_the_host_gather(tmp_path):
    """:class:`DeviceRagged` (here on the CPU) pads rows as :meth:`RaggedIds.padded` does, a
    view of a map included (offsets not starting at 0)."""
    sources, _ = corpus(200)
    ids = mapped(tmp_path, "s", sources)[50:150]
    on_device = DeviceRagged(ids, torch.device("cpu"))
    rows = np.array([0, 7, 99, 3, 3, 42])
    for width, fill in ((40, 0), (int(ids.lengths[rows].max()), -100)):
        want_ids, want_mask = ids.padded(rows, width, fill)
        got_ids, got_mask = on_device.padded(torch.from_numpy(rows), width, fill)
        assert torch.equal(got_ids, torch.from_numpy(want_ids))
        assert torch.equal(got_mask, torch.from_numpy(want_mask))


class ReadsForbidden(np.ndarray):
    """An array that fails any read by indexing: a map the gather must not touch."""

    def __getitem__(self, key):
        raise AssertionError(f"values[{key!r}] read through the map")


def test_a_mapped_gather_reads_the_file_not_the_map(tmp_path):
    """:meth:`RaggedIds.padded` / ``take`` of a map read the rows from the file (a view of
    the map included, and after a pickle round trip), equal to the rows in memory; a file
    cut short is an error, not garbage."""
    sources, _ = corpus(300)
    ids = mapped(tmp_path, "s", sources)[20:280]
    ids.values = np.asarray(ids.values).view(ReadsForbidden)
    rows = np.array([259, 0, 7, 7, 131, 42])
    values, mask = ids.padded(rows, 48, -1)
    for row, value, keep in zip(rows, values, mask, strict=True):
        assert value[keep == 1].tolist() == sources[20 + row]
        assert (value[keep == 0] == -1).all()
    assert ids.take(rows).tolist() == [sources[20 + row] for row in rows]
    restored = pickle.loads(pickle.dumps(mapped(tmp_path, "t", sources)))
    assert restored.gather(rows).tolist() == sum((sources[row] for row in rows), [])
    with open(tmp_path / "t.bin", "r+b") as cut:
        cut.truncate(2 * (sum(map(len, sources)) - 1))
    with pytest.raises(OSError, match="cut short"):
        restored.gather([len(sources) - 1])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("share", [1.0, 0.0])
def test_bucketed_batches_on_cuda_gather_on_the_device_or_pinned(tmp_path, monkeypatch, share):
    """With room on the device the split's ids go there and each batch is gathered there;
    without (``DEVICE_SHARE`` 0) each is gathered on the host into pinned memory. Either way
    the batches are those gathered on the host."""
    from hfattn.batching import token_buckets

    monkeypatch.setattr(token_buckets, "DEVICE_SHARE", share)
    sources, targets = corpus(600)
    make = lambda: BucketedBatches(mapped(tmp_path, "s", sources), mapped(tmp_path, "t", targets),  # noqa: E731
                                   token_budget=300, pad_token_id=0, num_buckets=4, seed=1)  # fmt: skip
    host, cuda = make(), make().to("cuda")
    assert cuda.device.type == ("cuda" if share else "cpu")
    for a, b in zip(cuda.epoch(0), host.epoch(0), strict=True):
        assert a.num_tokens == b.num_tokens
        for key in a:
            assert a[key].is_cuda == bool(share) and (share or a[key].is_pinned())
            assert torch.equal(a[key].cpu(), b[key])
