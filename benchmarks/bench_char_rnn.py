"""Char-RNN speed: the HF model against a bare PyTorch loop, and cached against uncached
generation.

1. Training throughput (tokens/s) of ``CharRNNForCausalLM`` against the same
   ``nn.Embedding`` + ``nn.GRU`` + ``nn.Linear`` written bare, same sizes, same loss and
   optimizer (AdamW), in one process, steps interleaved model/bare so that both see the
   same machine load. Ratio = model / bare (≥ 0.90 expected).
2. Generating 500 characters greedily with the recurrent state as the cache (one RNN step
   per new character) against ``use_cache=False`` (the model re-reads the whole growing
   text at each step). Ratio = uncached time / cached time (≥ 20× expected); both must
   produce the same text.

3. Chart series: the training step time of both against the batch size (``--batch-sizes``,
   ``--series-steps`` steps each), and the time to generate the first n characters, cached
   and uncached, read off the same two generations (a logits processor stamps each step).

Usage::

    .venv/bin/python -m benchmarks.bench_char_rnn [--steps 30] [--batch 64] [--new-chars 500]
        [--device cpu|cuda] [--json PATH]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from rich.console import Console
from rich.table import Table
from torch import nn
from torch.nn import functional as F
from transformers import LogitsProcessor, LogitsProcessorList

from benchmarks.lib.benchlib import BenchReport, add_device_argument, add_json_argument, synchronize
from hfattn import CharRNNConfig, CharRNNForCausalLM

VOCAB, EMBED, HIDDEN, BATCH, SEQ = 84, 64, 512, 64, 128  # the shipped recipe's sizes
TRAIN_TARGET, GENERATION_TARGET = 0.90, 20.0


class BareCharRNN(nn.Module):
    """The reference: the same layers with no Hugging Face machinery."""

    def __init__(self):
        super().__init__()
        self.embeddings = nn.Embedding(VOCAB, EMBED)
        self.rnn = nn.GRU(EMBED, HIDDEN, batch_first=True)
        self.lm_head = nn.Linear(HIDDEN, VOCAB)

    def forward(self, ids, state=None):
        hidden, state = self.rnn(self.embeddings(ids), state)
        return self.lm_head(hidden), state


def hf_step(model, window, state):
    out = model(input_ids=window[:, :-1], cache=state, use_cache=True)
    return out.logits, out.cache


def bare_step(model, window, state):
    return model(window[:, :-1], state)


def make_model(device: str) -> CharRNNForCausalLM:
    torch.manual_seed(0)
    config = CharRNNConfig(vocab_size=VOCAB, embedding_dim=EMBED, hidden_size=HIDDEN)
    return CharRNNForCausalLM(config).to(device)


def time_training(steps: int, batch: int = BATCH, device: str = "cpu", warmup: int = 3) -> dict:
    """Median seconds per optimizer step of each implementation (interleaved)."""
    hf = make_model(device)
    bare = BareCharRNN().to(device)
    runs = {"CharRNNForCausalLM": (hf, hf_step), "bare nn.GRU loop": (bare, bare_step)}
    optimizers = {name: torch.optim.AdamW(m.parameters(), lr=1e-3) for name, (m, _) in runs.items()}
    states = dict.fromkeys(runs)
    times = {name: [] for name in runs}
    for i in range(steps + warmup):
        window = torch.randint(0, VOCAB, (batch, SEQ + 1), device=device)
        for name, (model, step) in runs.items():
            synchronize(device)
            start = time.perf_counter()
            logits, state = step(model, window, states[name])
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), window[:, 1:].reshape(-1))
            optimizers[name].zero_grad()
            loss.backward()
            optimizers[name].step()
            states[name] = state.detach()
            synchronize(device)
            if i >= warmup:
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


class StepClock(LogitsProcessor):
    """Stamps the time of every generation step (it sees the scores, changes nothing)."""

    def __init__(self, device: str):
        self.device = device
        self.stamps: list[float] = []

    def __call__(self, input_ids, scores):
        synchronize(self.device)
        self.stamps.append(time.perf_counter())
        return scores


@torch.no_grad()
def time_generation(new_chars: int, device: str = "cpu") -> tuple[dict, dict]:
    """Seconds to generate ``new_chars`` greedily with and without the state cache, and the
    elapsed seconds after each generated character (the chart series)."""
    model = make_model(device).eval()
    prompt = torch.randint(4, VOCAB, (1, 20), device=device)
    kwargs = {"max_new_tokens": new_chars, "min_new_tokens": new_chars, "do_sample": False}
    out, seconds, elapsed = {}, {}, {}
    for name, use_cache in (("state cache", True), ("re-run on growing text", False)):
        clock = StepClock(device)
        synchronize(device)
        start = time.perf_counter()
        out[name] = model.generate(
            prompt, use_cache=use_cache, logits_processor=LogitsProcessorList([clock]), **kwargs
        )
        synchronize(device)
        seconds[name] = time.perf_counter() - start
        elapsed[name] = [stamp - start for stamp in clock.stamps]
    if not torch.equal(*out.values()):
        raise AssertionError("cached and uncached generation differ")
    return seconds, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--new-chars", type=int, default=500)
    parser.add_argument(
        "--batch", type=int, default=BATCH, help="rows of the timed training step (the recipe's)"
    )
    add_device_argument(parser)
    parser.add_argument(
        "--batch-sizes",
        type=int,
        nargs="*",
        default=[8, 16, 32, 64, 128],
        help="batch sizes of the time-against-batch series (none: skip it)",
    )
    parser.add_argument("--series-steps", type=int, default=5, help="timed steps per batch size")
    add_json_argument(parser)
    args = parser.parse_args()
    console = Console()
    console.print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.device}")
    report = BenchReport("char_rnn", args.device)

    batch = args.batch
    train = time_training(args.steps, batch, device=args.device)
    table = Table(
        title=f"Training step: batch {batch} x {SEQ} chars, GRU {HIDDEN}, embedding {EMBED}"
    )
    for col in ("implementation", "median s/step", "tokens/s"):
        table.add_column(col, justify="right")
    for name, seconds in train.items():
        table.add_row(name, f"{seconds:.4f}", f"{batch * SEQ / seconds:,.0f}")
    console.print(table)
    ratio = train["bare nn.GRU loop"] / train["CharRNNForCausalLM"]
    console.print(
        f"throughput ratio CharRNNForCausalLM / bare = {ratio:.3f} (target >= {TRAIN_TARGET:.2f})"
    )
    tokens = {name: batch * SEQ / seconds for name, seconds in train.items()}
    report.add(
        f"training tokens/s, CharRNNForCausalLM / bare nn.GRU loop (batch {batch} x {SEQ}, "
        f"GRU {HIDDEN}, AdamW, median of {args.steps})",
        ratio,
        "x",
        TRAIN_TARGET,
        detail=f"{tokens['CharRNNForCausalLM']:,.0f} vs {tokens['bare nn.GRU loop']:,.0f} tokens/s",
    )

    gen, elapsed = time_generation(args.new_chars, args.device)
    table = Table(title=f"Greedy generation of {args.new_chars} characters (same output)")
    table.add_column("method")
    table.add_column("seconds", justify="right")
    for name, seconds in gen.items():
        table.add_row(name, f"{seconds:.2f}")
    console.print(table)
    speedup = gen["re-run on growing text"] / gen["state cache"]
    console.print(
        f"generation speed-up of the state cache = {speedup:.1f}x (target >= {GENERATION_TARGET:.0f}x)"
    )
    report.add(
        f"greedy generation of {args.new_chars} characters: state cache vs use_cache=False",
        speedup,
        "x",
        GENERATION_TARGET,
        detail=f"{gen['state cache']:.2f} s vs {gen['re-run on growing text']:.2f} s",
    )
    every = max(1, args.new_chars // 25)
    points = list(range(every, args.new_chars + 1, every))
    report.add_series(
        "generation_length",
        f"char-RNN greedy generation: elapsed time against generated length ({args.device})",
        "seq_len",
        "generated characters",
        points,
        {name: [stamps[n - 1] for n in points] for name, stamps in elapsed.items()},
    )

    if args.batch_sizes:
        per_batch = {
            b: time_training(args.series_steps, b, args.device, 1) for b in args.batch_sizes
        }
        report.add_series(
            "training_batch",
            f"char-RNN training step ({SEQ} chars, GRU {HIDDEN}) against batch size ({args.device})",
            "batch",
            "batch size",
            args.batch_sizes,
            {name: [per_batch[b][name] for b in args.batch_sizes] for name in train},
        )
        console.print(
            "training s/step by batch: "
            + ", ".join(
                f"{b}: {t['CharRNNForCausalLM']:.3f} / {t['bare nn.GRU loop']:.3f}"
                for b, t in per_batch.items()
            )
        )
    report.write(args.json)


if __name__ == "__main__":
    main()
