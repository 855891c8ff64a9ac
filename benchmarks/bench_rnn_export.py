"""``torch.export`` for the RNN families (no CTranslate2 spec): is one exported, or
AOTInductor-compiled, decoding step faster than the eager step that ``generate()`` repeats?

What ``generate()`` does per new token is one cached forward: one new token given the state
(the :class:`~hfattn.models.recurrent_cache.RecurrentCache`). That step is timed here, at
batch 1 and batch 32, for

- ``char_rnn``: ``recipes/char_rnn_shakespeare.yaml``'s model (GRU, embedding 64, hidden 512,
  one layer), 84 characters;
- ``luong``: the model of ``recipes/bahdanau_bible_en_es.yaml`` with a decoder of 512 (biGRU
  encoder 2 × 256, GRU decoder 512, Luong attention with the general score, no input
  feeding, projection bridge, tied embeddings), a vocabulary of 8,000; the decoder step
  given the encoder outputs of right-padded sources of up to ``--src-len`` tokens (batch
  32: lengths from half to all of it) and the cache, as ``generate`` calls the model after
  its encoder pass;
- ``bahdanau``: the same size with ``attention: bahdanau`` (additive score; the decoder step
  attends with the previous state, then runs the GRU on ``[E y; c]``);

random weights (seed 0), in four variants run in one process on one thread
(``torch.set_num_threads``):

- ``eager``: the model's ``forward`` called as ``generate`` calls it (``use_cache=True``,
  ``cache=RecurrentCache``, the attention mask; for the char-RNN the growing all-ones mask);
- ``export``: ``torch.export.export(step)`` and its ``.module()``, the exported ATen graph run
  by the same kernels (no Python model code, no cache object);
- ``aoti``: AOTInductor, ``torch._inductor.aoti_compile_and_package(exported)`` loaded with
  ``torch._inductor.aoti_load_package`` (compiled C++; a failure is recorded in one line);
- ``compile``: ``torch.compile(step)`` (Inductor), for reference (``--variants`` drops it).

``step`` is a small ``nn.Module`` around the model taking and returning plain tensors,
``(input_ids, h) → (logits, h)`` (the seq2seq ones also take the annotations, the source
mask and the precomputed attention keys): a ``RecurrentCache`` (a ``transformers`` ``Cache``
object) is not an input ``torch.export`` accepts, and a served step would hold the state as
tensors anyway. The wrapper builds the cache inside and calls the same ``forward``. Shapes are
static: one export (and one compilation) per family and batch size. Before timing, every
variant's logits and new state are checked against eager's (``assert_close``) from the same
state.

Timing: after a warm-up, ``--rounds`` rounds; in each the variants take turns (the order
rotating from round to round), each running ``calls`` steps back to back, ``calls`` chosen so
that an eager round lasts about ``--round-ms``; the figure is the median over rounds of the
time per step. Ratios are eager / variant (above 1: the variant is faster), with the range of
the round-by-round ratios. For scale, each round also runs one greedy ``generate()`` of exactly
``--new-tokens`` tokens (``min_new_tokens = max_new_tokens``) from the same model, whose time
divided by the tokens is a column: what a new token costs a user today, the step plus
``generate``'s own per-token work (and the prompt / encoder pass, once); and, where AOTInductor
compiled, one bare greedy loop of as many tokens around the AOTInductor step (argmax, feed the
token and the state back; no prompt or encoder pass): what serving the exported step without
``generate()`` would cost per token.

Usage::

    .venv/bin/python -m benchmarks.bench_rnn_export [--rounds 31] [--round-ms 25]
        [--batches 1 32] [--families char_rnn luong bahdanau]
        [--variants eager export aoti compile] [--threads 1] [--src-len 32]
        [--new-tokens 64] [--quick] [--json PATH]

``--quick``: tiny models, batch 1 and 4, eager and export only, 3 rounds (checks that the
script runs, in a few seconds; measures nothing worth reporting). The default run compiles
AOTInductor and ``torch.compile`` programs for each family and batch: about 2-3 minutes on a
2-core CPU (less once Inductor's cache holds them). No target: the figures say whether shipping an
exported step is worth it
(``docs/serving.md``).
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from benchmarks.lib.benchlib import BenchReport, add_json_argument, load_average
from hfattn import CharRNNConfig, CharRNNForCausalLM
from hfattn.models.configuration_bahdanau import BahdanauConfig
from hfattn.models.modeling_bahdanau import (
    BahdanauEncoderOutput,
    BahdanauForConditionalGeneration,
)
from hfattn.models.recurrent_cache import RecurrentCache

CHARS = 84
"""The character vocabulary of the Shakespeare plays (``bench_char_rnn.py``'s)."""
CHAR_RNN = {"cell": "gru", "embedding_dim": 64, "hidden_size": 512, "num_layers": 1}
"""``recipes/char_rnn_shakespeare.yaml``'s network (its recurrent step, without the continuous
cache that the recipe adds at inference)."""
BPE = 8000
"""``recipes/bahdanau_bible_en_es.yaml``'s joint BPE vocabulary."""
BIBLE = {
    "attention": "luong",
    "score": "general",
    "input_feeding": False,
    "cell": "gru",
    "embedding_dim": 256,
    "encoder_hidden_size": 256,
    "bidirectional": True,
    "decoder_hidden_size": 512,
    "bridge": "projection",
    "tie_word_embeddings": True,
    "dropout": 0.1,
}
"""The Luong Bible model of ``recipes/bahdanau_bible_en_es.yaml`` with a decoder GRU of 512 (the
recipe's is 384) and dropout 0.1."""
FAMILIES = {
    "char_rnn": "char-RNN (GRU 64/512)",
    "luong": "Luong, general score (Bible recipe)",
    "bahdanau": "Bahdanau, additive score (Bible size)",
}
VARIANTS = ("eager", "export", "aoti", "compile")
GENERATE, LOOP = "generate", "aoti loop"
"""The extra column: greedy ``generate()`` time per new token (``--new-tokens``)."""
TINY_CHAR = {"embedding_dim": 8, "hidden_size": 16}
TINY_SEQ2SEQ = {"embedding_dim": 8, "encoder_hidden_size": 8, "decoder_hidden_size": 16}


class CharRNNStep(nn.Module):
    """One cached char-RNN step on plain tensors: ``(input_ids [batch, 1], h [layers, batch,
    hidden]) → (logits [batch, 1, vocab], h)``."""

    def __init__(self, model: CharRNNForCausalLM):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, h: torch.Tensor):
        cache = RecurrentCache({"h": h}, batch_dims={"h": 1})
        out = self.model(input_ids=input_ids, cache=cache, use_cache=True, return_dict=True)
        return out.logits, out.cache["h"]


class Seq2SeqStep(nn.Module):
    """One cached decoder step on plain tensors: ``(decoder_input_ids [batch, 1],
    annotations [batch, src, annotation], attention_mask [batch, src], h [batch, layers,
    hidden], keys) → (logits [batch, 1, vocab], h)``; ``keys`` are the attention's
    precomputed keys (constant per source, part of the cache)."""

    def __init__(self, model: BahdanauForConditionalGeneration):
        super().__init__()
        self.model = model

    def forward(self, decoder_input_ids, annotations, attention_mask, h, keys):
        cache = RecurrentCache({"h": h, "keys": keys})
        out = self.model(
            decoder_input_ids=decoder_input_ids,
            attention_mask=attention_mask,
            encoder_outputs=BahdanauEncoderOutput(last_hidden_state=annotations),
            cache=cache,
            use_cache=True,
            return_dict=True,
        )
        return out.logits, out.cache["h"]


@dataclass
class Case:
    """One family at one batch size: the eager call and the wrapped step with its inputs."""

    family: str
    batch: int
    eager: Callable[[], torch.Tensor]
    step: nn.Module
    inputs: tuple[torch.Tensor, ...]
    generate: Callable[[], torch.Tensor]
    """Greedy ``generate()`` of exactly ``--new-tokens`` tokens from the same start."""
    state_index: int
    """Where ``h`` is in ``inputs`` (the ids are ``inputs[0]``)."""
    reference: tuple[torch.Tensor, torch.Tensor] = field(init=False)

    def __post_init__(self):
        with torch.no_grad():
            self.reference = tuple(t.clone() for t in self.step(*self.inputs))


def generation_kwargs(new_tokens: int) -> dict:
    return {
        "max_new_tokens": new_tokens,
        "min_new_tokens": new_tokens,
        "do_sample": False,
        "num_beams": 1,
    }


def char_rnn_case(batch: int, quick: bool, new_tokens: int) -> Case:
    torch.manual_seed(0)
    fields = {**CHAR_RNN, **(TINY_CHAR if quick else {})}
    model = CharRNNForCausalLM(CharRNNConfig(vocab_size=CHARS, **fields)).eval()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, CHARS, (batch, 1), generator=g)
    h = torch.randn(fields["num_layers"], batch, fields["hidden_size"], generator=g) * 0.5
    seen = 16
    cache = RecurrentCache({"h": h.clone()}, seen, batch_dims={"h": 1})
    mask = torch.ones(batch, seen + 1, dtype=torch.long)

    def eager():  # what generate() calls per new character
        out = model(
            input_ids=ids, cache=cache, attention_mask=mask, use_cache=True, return_dict=True
        )
        return out.logits

    prompt = torch.randint(0, CHARS, (batch, seen), generator=g)

    def generate():
        return model.generate(
            prompt, attention_mask=torch.ones_like(prompt), **generation_kwargs(new_tokens)
        )

    case = Case("char_rnn", batch, eager, CharRNNStep(model), (ids, h), generate, 1)
    with torch.no_grad():  # eager from the same state gives the reference
        logits = eager()
    torch.testing.assert_close(logits, case.reference[0])
    torch.testing.assert_close(cache["h"], case.reference[1])
    return case


def seq2seq_case(family: str, batch: int, src_len: int, quick: bool, new_tokens: int) -> Case:
    torch.manual_seed(0)
    fields = {**BIBLE, **(TINY_SEQ2SEQ if quick else {})}
    if family == "bahdanau":
        fields.update(attention="bahdanau", score="additive")
    vocab = 64 if quick else BPE
    model = BahdanauForConditionalGeneration(BahdanauConfig(vocab_size=vocab, **fields)).eval()
    g = torch.Generator().manual_seed(1)
    lengths = torch.randint(max(1, src_len // 2), src_len + 1, (batch,), generator=g)
    lengths[0] = src_len
    mask = (torch.arange(src_len)[None] < lengths[:, None]).long()
    src = torch.randint(4, vocab, (batch, src_len), generator=g) * mask
    with torch.no_grad():
        encoded = model.get_encoder()(input_ids=src, attention_mask=mask, return_dict=True)
        state = model.model.decoder.initial_state(encoded)
    ids = torch.randint(4, vocab, (batch, 1), generator=g)
    h = state["h"] + 0.1 * torch.randn(state["h"].shape, generator=g)
    cache = RecurrentCache({"h": h.clone(), "keys": state["keys"]}, 8)

    def eager():  # what generate() calls per new token after its encoder pass
        out = model(
            decoder_input_ids=ids,
            attention_mask=mask,
            encoder_outputs=encoded,
            cache=cache,
            use_cache=True,
            return_dict=True,
        )
        return out.logits

    inputs = (ids, encoded.last_hidden_state, mask, h, state["keys"])

    def generate():
        return model.generate(src, attention_mask=mask, **generation_kwargs(new_tokens))

    case = Case(family, batch, eager, Seq2SeqStep(model), inputs, generate, 3)
    with torch.no_grad():
        logits = eager()
    torch.testing.assert_close(logits, case.reference[0])
    torch.testing.assert_close(cache["h"], case.reference[1])
    return case


def greedy_loop(case: Case, step: Callable, new_tokens: int) -> Callable[[], torch.Tensor]:
    """A bare greedy decoding loop of ``new_tokens`` steps around ``step`` (argmax, feed the
    token and the state back): what serving an exported step without ``generate()`` costs."""

    def loop():
        inputs = list(case.inputs)
        tokens = []
        for _ in range(new_tokens):
            logits, inputs[case.state_index] = step(*inputs)
            inputs[0] = logits[:, -1].argmax(-1, keepdim=True)
            tokens.append(inputs[0])
        return torch.cat(tokens, 1)

    return loop


def build_variants(case: Case, names: list[str], work: Path) -> tuple[dict, dict, dict]:
    """``({variant: () -> outputs}, {variant: build seconds}, {variant: why it failed})``;
    each built variant's outputs are checked against eager's reference."""
    calls = {"eager": case.eager}
    built, failed = {}, {}
    exported = None
    for name in names:
        if name == "eager":
            continue
        start = time.perf_counter()
        try:
            if name in ("export", "aoti") and exported is None:
                with torch.no_grad():
                    exported = torch.export.export(case.step, case.inputs)
            if name == "export":
                run = exported.module()
            elif name == "aoti":
                path = work / f"{case.family}-b{case.batch}.pt2"
                package = torch._inductor.aoti_compile_and_package(exported, package_path=str(path))
                run = torch._inductor.aoti_load_package(package)
            else:
                run = torch.compile(case.step)
            with torch.no_grad():
                outputs = run(*case.inputs)  # the compile happens here for torch.compile
            built[name] = time.perf_counter() - start
            torch.testing.assert_close(outputs[0], case.reference[0], rtol=1e-4, atol=1e-4)
            torch.testing.assert_close(outputs[1], case.reference[1], rtol=1e-4, atol=1e-4)
        except Exception as error:  # noqa: BLE001 - recorded in the report, in one line
            message = str(error).strip().splitlines()
            failed[name] = f"{type(error).__name__}: {message[0] if message else ''}"[:300]
            if os.environ.get("HFATTN_BENCH_TRACEBACK"):
                traceback.print_exc()
            continue
        calls[name] = functools.partial(run, *case.inputs)
    return calls, built, failed


def time_rounds(
    calls: dict, rounds: int, round_ms: float, decoders: dict[str, Callable], new_tokens: int
) -> dict[str, list[float]]:
    """Seconds per step of each variant in every round; the variants (and one call per round of
    each of ``decoders``, whose time is divided by ``new_tokens``) take turns, the order
    rotating every round."""
    with torch.no_grad():
        for call in calls.values():  # warm-up
            for _ in range(3):
                call()
        for decode in decoders.values():
            decode()
        start = time.perf_counter()
        for _ in range(10):
            calls["eager"]()
        eager_step = (time.perf_counter() - start) / 10
        repeat = max(3, round(round_ms / 1000 / eager_step))
        plan = {name: (call, repeat, repeat) for name, call in calls.items()}
        plan.update({name: (decode, 1, new_tokens) for name, decode in decoders.items()})
        order = list(plan)
        times: dict[str, list[float]] = {name: [] for name in plan}
        for index in range(rounds):
            shift = index % len(order)
            for name in order[shift:] + order[:shift]:
                call, count, steps = plan[name]
                start = time.perf_counter()
                for _ in range(count):
                    call()
                times[name].append((time.perf_counter() - start) / steps)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=31, help="timed rounds per case")
    parser.add_argument(
        "--round-ms", type=float, default=25.0, help="length of an eager round (ms)"
    )
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--families", nargs="+", choices=list(FAMILIES), default=list(FAMILIES))
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--src-len", type=int, default=32, help="longest source (tokens)")
    parser.add_argument(
        "--new-tokens",
        type=int,
        default=64,
        help="tokens of the timed generate() call (0: no generate column)",
    )
    parser.add_argument("--quick", action="store_true", help="tiny models, a few seconds")
    add_json_argument(parser)
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.batches, args.src_len, args.new_tokens = 3, [1, 4], 8, 8
        args.variants = [v for v in args.variants if v in ("eager", "export")]
    variants = ["eager", *(v for v in args.variants if v != "eager")]
    torch.set_num_threads(args.threads)
    report = BenchReport("rnn_export")
    before = load_average()
    started = time.perf_counter()
    rows = []
    failures: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="hfattn-bench-rnn-export-") as work:
        for family in args.families:
            for batch in args.batches:
                if family == "char_rnn":
                    case = char_rnn_case(batch, args.quick, args.new_tokens)
                else:
                    case = seq2seq_case(family, batch, args.src_len, args.quick, args.new_tokens)
                calls, built, failed = build_variants(case, variants, Path(work))
                for name, why in failed.items():
                    failures.setdefault(name, why)
                    print(f"{family} batch {batch}: {name} failed: {why}", flush=True)
                decoders = {}
                if args.new_tokens:
                    decoders[GENERATE] = case.generate
                    if "aoti" in calls:
                        decoders[LOOP] = greedy_loop(case, calls["aoti"].func, args.new_tokens)
                times = time_rounds(calls, args.rounds, args.round_ms, decoders, args.new_tokens)
                medians = {name: statistics.median(t) for name, t in times.items()}
                rows.append((family, batch, medians, built))
                for name in calls:
                    report.add(
                        f"{family}, batch {batch}, {name} step (ms)",
                        medians[name] * 1000,
                        "ms",
                        detail=f"built in {built[name]:.1f} s" if name in built else None,
                    )
                    if name != "eager":
                        ratios = sorted(
                            e / v for e, v in zip(times["eager"], times[name], strict=True)
                        )
                        report.add(
                            f"{family}, batch {batch}, eager / {name} (step time)",
                            medians["eager"] / medians[name],
                            "x",
                            detail=f"rounds {ratios[0]:.2f}–{ratios[-1]:.2f}",
                        )
                if LOOP in medians:
                    report.add(
                        f"{family}, batch {batch}, greedy loop around the AOTInductor step "
                        "per new token (ms)",
                        medians[LOOP] * 1000,
                        "ms",
                        detail=f"{args.new_tokens} new tokens, no prefill / encoder pass",
                    )
                    report.add(
                        f"{family}, batch {batch}, generate() / AOTInductor greedy loop "
                        "(time per token)",
                        medians[GENERATE] / medians[LOOP],
                        "x",
                    )
                if GENERATE in medians:
                    report.add(
                        f"{family}, batch {batch}, greedy generate() per new token (ms)",
                        medians[GENERATE] * 1000,
                        "ms",
                        detail=f"{args.new_tokens} new tokens, prefill / encoder pass included",
                    )
                print(
                    f"{family} batch {batch}: "
                    + ", ".join(f"{n} {m * 1000:.3f} ms" for n, m in medians.items()),
                    flush=True,
                )
    after = load_average()
    shown = [v for v in variants if any(v in medians for _, _, medians, _ in rows)]
    with_generate = any(GENERATE in medians for _, _, medians, _ in rows)
    header = [f"{v} (ms)" for v in shown] + [f"eager / {v}" for v in shown[1:]]
    with_loop = any(LOOP in medians for _, _, medians, _ in rows)
    if with_generate:
        header += [f"generate() (ms/token, {args.new_tokens} tokens)"]
    if with_loop:
        header += ["aoti greedy loop (ms/token)", "generate() / aoti loop"]
    lines = [
        f"One cached decoding step (ms, median of {args.rounds} rounds), {args.threads} "
        f"thread(s), torch {torch.__version__}"
        + (", tiny models (--quick)" if args.quick else "")
        + f"; load average before {before}, after {after}; "
        f"{time.perf_counter() - started:.0f} s.",
        "",
        "| family | batch | " + " | ".join(header) + " |",
        "|---|---:|" + "---:|" * len(header),
    ]
    for family, batch, medians, _ in rows:
        cells = [f"{medians[v] * 1000:.3f}" if v in medians else "–" for v in shown]
        cells += [
            f"{medians['eager'] / medians[v]:.2f}×" if v in medians else "–" for v in shown[1:]
        ]
        if with_generate:
            cells.append(f"{medians[GENERATE] * 1000:.3f}" if GENERATE in medians else "–")
        if with_loop:
            cells.append(f"{medians[LOOP] * 1000:.3f}" if LOOP in medians else "–")
            cells.append(
                f"{medians[GENERATE] / medians[LOOP]:.2f}×"
                if LOOP in medians and GENERATE in medians
                else "–"
            )
        lines.append(f"| {FAMILIES[family]} | {batch} | " + " | ".join(cells) + " |")
    for name, why in failures.items():
        lines += ["", f"{name} failed: {why}"]
    compile_times = [
        f"{family} b{batch}: "
        + ", ".join(f"{name} {seconds:.0f} s" for name, seconds in built.items())
        for family, batch, _, built in rows
        if built
    ]
    if compile_times:
        lines += [
            "",
            "Build times (export / compile, incl. the first call): " + "; ".join(compile_times),
        ]
    report.markdown.append("\n".join(lines))
    print()
    print("\n".join(lines))
    report.write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
