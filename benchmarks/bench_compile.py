"""``training.compile``: the training step of each model family, eager against compiled.

For each family, at the size of its shipped recipe (the model section, ``training.batch_size``,
the sequence lengths and ``training.mixed_precision`` of the recipe file):

- ``char_rnn``: ``recipes/char_rnn_shakespeare.yaml``, stateful (the state carried, detached,
  from step to step), windows of ``training.seq_len`` characters, 84 characters;
- ``bahdanau``: ``recipes/bahdanau_bible_en_es.yaml``, sources and targets of
  ``data.max_source_length`` / ``max_target_length`` BPE tokens (8000);
- ``vaswani``: ``recipes/vaswani_bible_en_es.yaml`` (bf16 autocast, as the recipe), the same
  shapes;
- ``rnn_classifier``: ``recipes/rnn_classifier_genre.yaml``, ``data.max_length`` words
  (12000), 4 classes.

One optimizer step (forward, loss, backward, gradient clipping, AdamW step) is timed on random
data of that shape, right-padded rows of random lengths between half and all of the width (the
first row full), for two copies of the model built from the same seed in one process and one
``Accelerator`` (as the engine prepares them): one eager, one through
:func:`hfattn.training.compiling.compile_for_training`, the loss step of ``training.compile``.
The copies alternate step by step on the same batches, after warm-up, so that both see the
same machine load; the report gives the median seconds per step of each and their ratio
(eager / compiled: above 1, compiling wins). The compiled copy's warm-up steps (where it
compiles: two graphs for the stateful char-RNN, with and without a carried state) are timed
apart, and, for the padded families, one step at a width 8 tokens narrower: what every new
batch length costs (a recompile with dynamic sizes for the Vaswani Transformer, once; a full
compile for the recurrent families, every new length, which is why ``training.compile``
refuses ``bahdanau`` and ``rnn-classifier`` models).

No target: the figures say where compiling pays on this machine (``docs/training.md``).

Usage::

    .venv/bin/python -m benchmarks.bench_compile [--threads 2] [--steps 20] [--warmup 3]
        [--families char_rnn bahdanau vaswani rnn_classifier] [--quick] [--json PATH]

``--quick``: tiny models and shapes, 2 timed steps (checks that the script runs, measures
nothing worth reporting). The full run compiles the shipped sizes from cold: several minutes
per family on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState, PartialState
from accelerate.utils import set_seed
from rich.console import Console
from rich.table import Table
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForSeq2SeqLM,
    AutoModelForSequenceClassification,
)

import hfattn.tasks  # noqa: F401  (registers the tasks whose recipes it loads)
from benchmarks.lib.benchlib import BenchReport, add_json_argument
from hfattn.recipes import load_recipe
from hfattn.tasks.base import model_loss
from hfattn.tasks.causal_lm.job import causal_lm_loss
from hfattn.training.compiling import compile_for_training
from hfattn.training.precision import resolve_mixed_precision

RECIPES = Path(__file__).resolve().parents[1] / "recipes"
CHARS = 84
"""The character vocabulary of the Shakespeare plays (``bench_char_rnn.py``'s)."""
NARROWER = 8
"""How many tokens narrower the batch of the new-length step is."""


@dataclass(frozen=True)
class Family:
    """One model family: its shipped recipe and how its batches look."""

    recipe: str
    auto_class: type
    kind: str
    """``lm`` (windows, carried state), ``seq2seq`` or ``classification``."""
    tiny: dict
    """Model fields of ``--quick``."""


FAMILIES = {
    "char_rnn": Family(
        "char_rnn_shakespeare.yaml",
        AutoModelForCausalLM,
        "lm",
        {"embedding_dim": 8, "hidden_size": 16},
    ),
    "bahdanau": Family(
        "bahdanau_bible_en_es.yaml",
        AutoModelForSeq2SeqLM,
        "seq2seq",
        {"embedding_dim": 8, "encoder_hidden_size": 8, "decoder_hidden_size": 16},
    ),
    "vaswani": Family(
        "vaswani_bible_en_es.yaml",
        AutoModelForSeq2SeqLM,
        "seq2seq",
        {"encoder_layers": 1, "decoder_layers": 1, "d_model": 16, "num_heads": 2, "ffn_dim": 32},
    ),
    "rnn_classifier": Family(
        "rnn_classifier_genre.yaml",
        AutoModelForSequenceClassification,
        "classification",
        {"embedding_dim": 8, "hidden_size": 8},
    ),
}


@dataclass
class Setup:
    """A family's model sizes and batch shape, read from its recipe (or tiny, ``--quick``)."""

    fields: dict
    vocab: int
    batch: int
    lengths: tuple[int, ...]
    """``(seq_len,)``, ``(source, target)`` or ``(max_length,)``."""
    mixed_precision: str
    max_grad_norm: float | None
    learning_rate: float

    def shape(self) -> str:
        return f"batch {self.batch} x {' / '.join(map(str, self.lengths))}"


def setup_of(family: Family, quick: bool) -> Setup:
    recipe = load_recipe(RECIPES / family.recipe)
    t = recipe.training
    if family.kind == "lm":
        vocab, lengths = CHARS, (t.seq_len,)
    elif family.kind == "seq2seq":
        vocab = recipe.tokenizer.vocab_size
        lengths = (recipe.data.max_source_length, recipe.data.max_target_length)
    else:
        vocab, lengths = recipe.tokenizer.vocab_size, (recipe.data.max_length,)
    fields = {k: v for k, v in recipe.model.items() if k != "type"}
    batch = t.batch_size
    if quick:
        fields, vocab, batch = {**fields, **family.tiny}, 64, 4
        lengths = tuple(NARROWER + 4 for _ in lengths)
    return Setup(fields, vocab, batch, lengths, t.mixed_precision, t.max_grad_norm,
                 t.learning_rate)  # fmt: skip


def build_model(family: Family, setup: Setup):
    model_type = load_recipe(RECIPES / family.recipe).model["type"]
    extra = {"num_labels": 4} if family.kind == "classification" else {}
    config = AutoConfig.for_model(model_type, vocab_size=setup.vocab, **extra, **setup.fields)
    set_seed(0)
    return family.auto_class.from_config(config)


def padded(batch: int, width: int, vocab: int, pad: int, generator) -> tuple:
    """Random ids right-padded to ``width``: row lengths in ``[width / 2, width]``, row 0
    full; returns ``(ids, mask)``."""
    lengths = torch.randint(max(1, width // 2), width + 1, (batch,), generator=generator)
    lengths[0] = width
    mask = (torch.arange(width)[None] < lengths[:, None]).long()
    ids = torch.randint(4, vocab, (batch, width), generator=generator)
    return ids * mask + pad * (1 - mask), mask


def make_batch(family: Family, setup: Setup, config, seed: int, narrower: int = 0):
    """One training batch of the family's shape (``narrower`` tokens less wide)."""
    g = torch.Generator().manual_seed(seed)
    pad = config.pad_token_id or 0
    widths = [n - narrower for n in setup.lengths]
    if family.kind == "lm":
        return torch.randint(0, setup.vocab, (setup.batch, widths[0] + 1), generator=g)
    ids, mask = padded(setup.batch, widths[0], setup.vocab, pad, g)
    if family.kind == "classification":
        labels = torch.randint(0, config.num_labels, (setup.batch,), generator=g)
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}
    targets, target_mask = padded(setup.batch, widths[1], setup.vocab, pad, g)
    labels = targets.masked_fill(target_mask == 0, -100)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


class Trainer:
    """One prepared copy of the model, eager or compiled, and its optimizer."""

    def __init__(self, accelerator, model, setup: Setup, stateful: bool, compiled: bool):
        optimizer = torch.optim.AdamW(model.parameters(), lr=setup.learning_rate)
        self.accelerator, self.setup, self.stateful = accelerator, setup, stateful
        self.model, self.optimizer = accelerator.prepare(model, optimizer)
        self.loss_model = compile_for_training(self.model) if compiled else self.model
        self.state = None

    def step(self, batch) -> float:
        """Seconds of one optimizer step on ``batch``."""
        start = time.perf_counter()
        if self.stateful:
            loss, self.state, *_ = causal_lm_loss(self.loss_model, batch, self.state, True)
        else:
            loss = model_loss(self.loss_model, batch, None, False).loss
        self.accelerator.backward(loss)
        if self.setup.max_grad_norm:
            self.accelerator.clip_grad_norm_(self.model.parameters(), self.setup.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad()
        return time.perf_counter() - start


def measure(name: str, family: Family, setup: Setup, steps: int, warmup: int) -> dict:
    """Median s/step eager and compiled (alternating), the compiled warm-up, a new length."""
    AcceleratorState._reset_state(reset_partial_state=False)
    precision = resolve_mixed_precision(setup.mixed_precision, PartialState().device)
    accelerator = Accelerator(mixed_precision=precision)
    stateful = family.kind == "lm"
    eager_model, compiled_model = build_model(family, setup), build_model(family, setup)
    config = eager_model.config
    eager = Trainer(accelerator, eager_model, setup, stateful, compiled=False)
    compiled = Trainer(accelerator, compiled_model, setup, stateful, compiled=True)
    batches = [make_batch(family, setup, config, seed) for seed in range(warmup + steps)]
    warm = [compiled.step(batch) for batch in batches[:warmup]]
    for batch in batches[:warmup]:
        eager.step(batch)
    times = {"eager": [], "compiled": []}
    for batch in batches[warmup:]:
        times["eager"].append(eager.step(batch))
        times["compiled"].append(compiled.step(batch))
    result = {name: statistics.median(t) for name, t in times.items()}
    result["warmup"] = sum(warm)
    result["first step"] = warm[0]
    if family.kind != "lm":
        result["new length"] = compiled.step(make_batch(family, setup, config, -1, NARROWER))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--steps", type=int, default=20, help="timed steps of each copy")
    parser.add_argument(
        "--warmup", type=int, default=3, help="untimed steps first (the compile happens there)"
    )
    parser.add_argument(
        "--families", nargs="+", choices=tuple(FAMILIES), default=list(FAMILIES), metavar="NAME"
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 2 steps: a smoke run")
    add_json_argument(parser)
    args = parser.parse_args()
    if args.quick:
        args.steps = min(args.steps, 2)
    torch.set_num_threads(args.threads)
    console = Console(width=150)  # the table's seven columns, in a log file too
    console.print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, cpu")
    report = BenchReport("compile")
    table = Table(title="Training step, eager vs torch.compile (training.compile: true)")
    for column in ("family", "shape", "eager s/step", "compiled s/step", "eager / compiled",
                   "compile (warm-up) s", "new length s"):  # fmt: skip
        table.add_column(column, justify="right")
    for name in args.families:
        family = FAMILIES[name]
        setup = setup_of(family, args.quick)
        console.print(f"{name}: {setup.shape()}, compiling ...")
        r = measure(name, family, setup, args.steps, args.warmup)
        ratio = r["eager"] / r["compiled"]
        new_length = r.get("new length")
        table.add_row(
            name,
            setup.shape(),
            f"{r['eager']:.4f}",
            f"{r['compiled']:.4f}",
            f"{ratio:.2f}",
            f"{r['warmup']:.1f}",
            "—" if new_length is None else f"{new_length:.1f}",
        )
        where = f"{family.recipe}, {setup.shape()}, {args.threads} threads"
        report.add(
            f"{name}: training step speed-up of training.compile, eager / compiled ({where}, "
            f"median of {args.steps})",
            ratio,
            "x",
            detail=f"{r['eager']:.4f} vs {r['compiled']:.4f} s/step",
        )
        report.add(
            f"{name}: compile time (the compiled copy's {args.warmup} warm-up steps)",
            r["warmup"],
            "s",
            detail=f"first step {r['first step']:.1f} s",
        )
        if new_length is not None:
            report.add(
                f"{name}: compiled step at a new batch length ({NARROWER} tokens narrower)",
                new_length,
                "s",
            )
    console.print(table)
    report.write(args.json)


if __name__ == "__main__":
    main()
