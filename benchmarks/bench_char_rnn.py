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

Usage::

    .venv/bin/python benchmarks/bench_char_rnn.py [--steps 30] [--new-chars 500]
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

from hfattn import CharRNNConfig, CharRNNForCausalLM

VOCAB, EMBED, HIDDEN, BATCH, SEQ = 84, 64, 512, 64, 128  # the shipped recipe's sizes


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
    out = model(input_ids=window[:, :-1], past_key_values=state, use_cache=True)
    return out.logits, out.past_key_values


def bare_step(model, window, state):
    return model(window[:, :-1], state)


def time_training(steps: int) -> dict:
    """Median seconds per optimizer step of each implementation (interleaved)."""
    torch.manual_seed(0)
    hf = CharRNNForCausalLM(
        CharRNNConfig(vocab_size=VOCAB, embedding_dim=EMBED, hidden_size=HIDDEN)
    )
    bare = BareCharRNN()
    runs = {"CharRNNForCausalLM": (hf, hf_step), "bare nn.GRU loop": (bare, bare_step)}
    optimizers = {name: torch.optim.AdamW(m.parameters(), lr=1e-3) for name, (m, _) in runs.items()}
    states = dict.fromkeys(runs)
    times = {name: [] for name in runs}
    for i in range(steps + 3):
        window = torch.randint(0, VOCAB, (BATCH, SEQ + 1))
        for name, (model, step) in runs.items():
            start = time.perf_counter()
            logits, state = step(model, window, states[name])
            loss = F.cross_entropy(logits.reshape(-1, VOCAB), window[:, 1:].reshape(-1))
            optimizers[name].zero_grad()
            loss.backward()
            optimizers[name].step()
            states[name] = state.detach()
            if i >= 3:  # warm-up
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


@torch.no_grad()
def time_generation(new_chars: int) -> dict:
    """Seconds to generate ``new_chars`` greedily with and without the state cache."""
    torch.manual_seed(0)
    model = CharRNNForCausalLM(
        CharRNNConfig(vocab_size=VOCAB, embedding_dim=EMBED, hidden_size=HIDDEN)
    )
    model.eval()
    prompt = torch.randint(4, VOCAB, (1, 20))
    kwargs = {"max_new_tokens": new_chars, "min_new_tokens": new_chars, "do_sample": False}
    out, seconds = {}, {}
    for name, use_cache in (("state cache", True), ("re-run on growing text", False)):
        start = time.perf_counter()
        out[name] = model.generate(prompt, use_cache=use_cache, **kwargs)
        seconds[name] = time.perf_counter() - start
    if not torch.equal(*out.values()):
        raise AssertionError("cached and uncached generation differ")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--new-chars", type=int, default=500)
    args = parser.parse_args()
    console = Console()
    console.print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")

    train = time_training(args.steps)
    table = Table(
        title=f"Training step: batch {BATCH} x {SEQ} chars, GRU {HIDDEN}, embedding {EMBED}"
    )
    for col in ("implementation", "median s/step", "tokens/s"):
        table.add_column(col, justify="right")
    for name, seconds in train.items():
        table.add_row(name, f"{seconds:.4f}", f"{BATCH * SEQ / seconds:,.0f}")
    console.print(table)
    ratio = train["bare nn.GRU loop"] / train["CharRNNForCausalLM"]
    console.print(f"throughput ratio CharRNNForCausalLM / bare = {ratio:.3f} (target >= 0.90)")

    gen = time_generation(args.new_chars)
    table = Table(title=f"Greedy generation of {args.new_chars} characters (same output)")
    table.add_column("method")
    table.add_column("seconds", justify="right")
    for name, seconds in gen.items():
        table.add_row(name, f"{seconds:.2f}")
    console.print(table)
    speedup = gen["re-run on growing text"] / gen["state cache"]
    console.print(f"generation speed-up of the state cache = {speedup:.1f}x (target >= 20x)")


if __name__ == "__main__":
    main()
