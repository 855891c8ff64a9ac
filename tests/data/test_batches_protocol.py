"""Every batcher implements :class:`hfattn.batching.protocol.Batches`, the one contract the
training loop relies on, and the engine asks it nothing else (no ``getattr`` / ``hasattr`` of
batches in ``hfattn/training``)."""

import re
from pathlib import Path

import pytest
import torch

from hfattn.batching.lm import PackedBlocks, StreamBatches, WindowBatches
from hfattn.batching.protocol import Batches
from hfattn.batching.seq2seq import LabelBatches, PairBatches
from hfattn.batching.token_buckets import BucketedBatches

SOURCES = [[3, 4, 5, 2], [6, 7, 2], [8, 9, 10, 11, 2], [12, 2]] * 4
TARGETS = [[13, 2], [14, 15, 16, 2], [17, 2], [18, 19, 2]] * 4
IDS = torch.arange(200) % 17


def batchers():
    return {
        "pairs": PairBatches(SOURCES, TARGETS, 4, pad_token_id=0),
        "pairs by size": PairBatches(SOURCES, TARGETS, 4, pad_token_id=0, max_tokens=12),
        "labels": LabelBatches(SOURCES, [0, 1, 0, 1] * 4, 4, pad_token_id=0),
        "buckets": BucketedBatches(
            SOURCES, TARGETS, token_budget=16, pad_token_id=0, num_buckets=2, row_multiple=2
        ),  # fmt: skip
        "streams": StreamBatches(IDS, 4, 8),
        "windows": WindowBatches(IDS, 4, 8),
        "blocks": PackedBlocks(IDS, 4, 8),
    }


@pytest.mark.parametrize("name", list(batchers()))
def test_each_batcher_keeps_the_contract(name):
    batches = batchers()[name]
    assert isinstance(batches, Batches)
    assert batches.to("cpu") is batches and batches.device == torch.device("cpu")
    assert 1 <= batches.min_rows <= batches.batch_size
    batches.round_widths(8)
    epoch = list(batches.epoch(0))
    assert len(epoch) == len(batches) and list(batches.epoch(0, start=1)) != []
    for batch in epoch:
        first = next(iter(batch.values())) if isinstance(batch, dict) else batch
        assert batches.min_rows <= first.shape[0] <= batches.batch_size or name == "buckets"
        if batches.shapes is not None:  # fixed shapes: every batch is one of them
            shape = (first.shape[0], batch["input_ids"].shape[1], batch["labels"].shape[1])
            assert shape in batches.shapes
    assert batches.stateful is (name == "streams")


def test_rounded_widths_pad_the_batches_built_from_lists():
    batches = PairBatches(SOURCES, TARGETS, 4, pad_token_id=0)
    batches.round_widths(8)
    assert {b["input_ids"].shape[1] % 8 for b in batches.epoch(0)} == {0}


def test_the_engine_does_not_probe_the_batches():
    training = Path(__file__).resolve().parents[2] / "hfattn" / "training"
    assert len(list(training.glob("*.py"))) > 10
    probes = [
        f"{path.name}: {line.strip()}"
        for path in training.glob("*.py")
        for line in path.read_text().splitlines()
        if re.search(r"(getattr|hasattr)\((job\.)?batch", line)
    ]
    assert probes == []
