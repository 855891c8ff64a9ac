"""Inference speed of the CTranslate2 export of the Vaswani Transformer (``hfattn export``)
against hfattn's own ``generate``, and against CTranslate2's own conversion of a
``MarianMTModel`` of the same network.

    .venv/bin/python -m benchmarks.bench_export [--repeats 5] [--engine-repeats 25]
        [--threads 1] [--batch 32] [--new-tokens 64] [--latency-sentences 16] [--json PATH]

The model has the Bible recipe's layers (``recipes/vaswani_bible_en_es.yaml``: 2+2 post-LN
layers, d 256, 4 heads, FFN 1024, sinusoidal positions) and a vocabulary of 8,000 shared by
source, target and output layer, random weights. The Marian model is ``vaswani_marian.make_models``'
``MarianMTModel`` configured to the same network and holding a copy of the same weights,
converted with ``ctranslate2.converters.TransformersConverter`` (CTranslate2's own Marian
loader), in fp32 and int8 like hfattn's export. Everything runs in one process, with the same
threads everywhere (torch and CTranslate2's ``intra_threads``, default 1: on a shared 2-core
CPU two threads that wait for each other are slowed far more than one).

Measures, on 32 right-padded sources of 16-32 tokens, with exactly 64 new tokens on every side
(``min_new_tokens = max_new_tokens = 64`` / ``min_decoding_length = max_decoding_length =
64``), greedy and beam 4: generated tokens/s (batch × 64 / the median time of ``--repeats``
runs; the systems take turns in an order shuffled every round, after one warm-up each; the
four CTranslate2 models then run ``--engine-repeats`` more rounds among themselves, since
their ±15% run-to-run noise on a shared CPU would otherwise swamp a 5% comparison), and
batch-1 latency (ms per sentence, greedy, the median over ``--latency-sentences`` sentences).
CTranslate2 is timed on ``Translator.translate_batch`` with token strings (both exports alike),
hfattn on ``generate`` with padded id tensors. Targets (issue 23): export / ``generate``
≥ 1.5× greedy and ≥ 2× beam 4 in fp32, ≥ 2.2× / ≥ 2.4× in int8; export / Marian conversion
≥ 0.95 (within 5%). Also checked: the fp32 export generates the same tokens as ``generate``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from benchmarks.lib.benchlib import BenchReport, add_json_argument, load_average
from benchmarks.lib.vaswani_marian import PAD, Size, generation_config, make_batch, make_models
from hfattn.export import DecodingSettings, export_ctranslate2, require_ctranslate2

BIBLE = Size("bible", layers=2, d_model=256, heads=4, ffn=1024, batch=32)
"""``recipes/vaswani_bible_en_es.yaml``'s layers (``batch``: the generation batch)."""
VOCAB, MAX_POSITIONS = 8000, 128
SYSTEMS = ("hfattn", "export fp32", "export int8", "marian fp32", "marian int8")
TARGETS = {  # (system, mode) -> export / hfattn generate tokens/s
    ("export fp32", "greedy"): 1.5,
    ("export fp32", "beam4"): 2.0,
    ("export int8", "greedy"): 2.2,
    ("export int8", "beam4"): 2.4,
}
MARIAN_TARGET = 0.95
"""Export / Marian conversion tokens/s: within 5% (or faster)."""


def word_tokenizer(vocab: int, pad_last: bool = False, words: Sequence[str] = ()):
    """A word-level tokenizer of ``vocab`` tokens (``<pad> <unk> <bos> <eos>``, then
    ``words``, then ``t<i>`` up to ``vocab``) whose encodings end with ``<eos>``: what a saved
    model folder carries. ``pad_last``: the last id is named ``<pad>`` (id 0 ``<unused>``), the
    layout of Marian vocabularies, which CTranslate2's Marian loader expects (it drops the last
    row of the embeddings)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    tokens = ["<pad>", "<unk>", "<bos>", "<eos>", *words]
    tokens += [f"t{i}" for i in range(len(tokens), vocab)]
    if pad_last:
        tokens[0], tokens[-1] = "<unused>", "<pad>"
    backend = Tokenizer(models.WordLevel({t: i for i, t in enumerate(tokens)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(
        single="$A <eos>", special_tokens=[("<eos>", 3)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        unk_token="<unk>",
        bos_token="<bos>",
        eos_token="<eos>",
    )


def build_translators(work: Path, threads: int):
    """``(hfattn model, tokenizer, {system: ctranslate2.Translator})``: hfattn's exports and
    CTranslate2's conversions of the Marian twin, fp32 and int8."""
    import ctranslate2
    from ctranslate2.converters import TransformersConverter

    ours, marian = make_models(BIBLE, VOCAB, MAX_POSITIONS, "cpu")
    ours.eval()
    tokenizer = word_tokenizer(VOCAB)
    marian_dir = work / "marian"
    marian.save_pretrained(marian_dir)
    word_tokenizer(VOCAB, pad_last=True).save_pretrained(marian_dir)
    folders = {}
    for quantization in ("float32", "int8"):
        label = "fp32" if quantization == "float32" else quantization
        folders[f"export {label}"] = export_ctranslate2(
            ours, tokenizer, work / f"export-{label}", quantization=quantization
        )
        folders[f"marian {label}"] = TransformersConverter(str(marian_dir)).convert(
            str(work / f"marian-{label}"), quantization=quantization
        )
    translators = {
        name: ctranslate2.Translator(str(folder), device="cpu", intra_threads=threads)
        for name, folder in folders.items()
    }
    return ours, tokenizer, translators


def runners(model, tokenizer, translators, sources: list[list[int]], beams: int, new_tokens: int):
    """``{system: () -> list of generated id rows}``, each decoding ``sources`` with exactly
    ``new_tokens`` new tokens and ``beams`` beams."""
    from hfattn.batching.seq2seq import pad_sources

    batch = pad_sources(sources, PAD)
    config = generation_config(beams, new_tokens, use_cache=True)
    tokens = [tokenizer.convert_ids_to_tokens(ids) for ids in sources]
    options = DecodingSettings(
        num_beams=beams, max_new_tokens=new_tokens, min_new_tokens=new_tokens
    ).ctranslate2_options()

    def hfattn():
        with torch.no_grad():
            out = model.generate(**batch, generation_config=config)
        return [row[1:].tolist() for row in out]

    def engine(translator):
        def run():
            results = translator.translate_batch(tokens, max_input_length=0, **options)
            return [tokenizer.convert_tokens_to_ids(r.hypotheses[0]) for r in results]

        return run

    return {"hfattn": hfattn, **{name: engine(t) for name, t in translators.items()}}


def timed_rounds(
    calls: dict, repeats: int, warm_up: bool = True, seed: int = 0
) -> tuple[dict[str, list[float]], dict]:
    """One warm-up call each, then ``repeats`` rounds in which every call runs once, in an
    order shuffled every round (seeded): which model ran just before, whose weights then fill
    the caches, changes a 0.2 s run by 10-20%, so no system may always follow the same one.
    Returns ``(seconds per system, last outputs)``."""
    outputs = {name: call() for name, call in calls.items()} if warm_up else {}
    times: dict[str, list[float]] = {name: [] for name in calls}
    order = list(calls)
    shuffle = random.Random(seed).shuffle
    for _ in range(repeats):
        shuffle(order)
        for name in order:
            start = time.perf_counter()
            outputs[name] = calls[name]()
            times[name].append(time.perf_counter() - start)
    return times, outputs


def paired(ours: list[float], reference: list[float]) -> str:
    """The range of the round-by-round ratios ``reference time / our time``."""
    ratios = sorted(r / o for o, r in zip(ours, reference, strict=True))
    return f"rounds {ratios[0]:.2f}–{ratios[-1]:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds per decoding mode")
    parser.add_argument(
        "--engine-repeats",
        type=int,
        default=25,
        help="more rounds of the four CTranslate2 models alone (cheap; export vs Marian)",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch and CTranslate2 threads")
    parser.add_argument("--batch", type=int, default=BIBLE.batch)
    parser.add_argument("--src-len", type=int, default=32, help="longest source (tokens)")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--beams", type=int, default=4)
    parser.add_argument("--latency-sentences", type=int, default=16)
    add_json_argument(parser)
    args = parser.parse_args(argv)
    report = BenchReport("export")
    try:
        ctranslate2 = require_ctranslate2()  # int8 products as hfattn serves them
    except ImportError:
        report.not_run = "ctranslate2 is not installed: pip install 'hfattn[serve]'"
        report.write(args.json)
        print(report.not_run)
        return 0
    torch.set_num_threads(args.threads)
    before = load_average()
    started = time.perf_counter()
    ids, mask, _ = make_batch(args.batch, args.src_len, 2, VOCAB, "cpu", seed=1)
    sources = [row[row_mask.bool()].tolist() for row, row_mask in zip(ids, mask, strict=True)]
    with tempfile.TemporaryDirectory(prefix="hfattn-bench-export-") as work:
        model, tokenizer, translators = build_translators(Path(work), args.threads)
        tokens = args.batch * args.new_tokens
        table = {}
        agreement = {}
        for mode, beams in (("greedy", 1), (f"beam{args.beams}", args.beams)):
            calls = runners(model, tokenizer, translators, sources, beams, args.new_tokens)
            times, outputs = timed_rounds(calls, args.repeats)
            engines = {name: call for name, call in calls.items() if name != "hfattn"}
            for name, more in timed_rounds(engines, args.engine_repeats, False)[0].items():
                times[name] += more
            table[mode] = {name: tokens / statistics.median(times[name]) for name in SYSTEMS}
            assert all(len(row) == args.new_tokens for row in outputs["export fp32"])
            same = [
                a == b[: args.new_tokens]
                for a, b in zip(outputs["export fp32"], outputs["hfattn"], strict=True)
            ]
            agreement[mode] = sum(same) / len(same)
            for system in ("export fp32", "export int8"):
                ratio = table[mode][system] / table[mode]["hfattn"]
                report.add(
                    f"{system} / hfattn generate, {mode} (tokens/s)",
                    ratio,
                    "x",
                    TARGETS.get((system, mode)),
                    detail=f"{table[mode][system]:,.0f} vs {table[mode]['hfattn']:,.0f} tokens/s; "
                    + paired(times[system][: args.repeats], times["hfattn"]),
                )
            for label in ("fp32", "int8"):
                ours, theirs = f"export {label}", f"marian {label}"
                report.add(
                    f"{ours} / Marian conversion {label}, {mode} (tokens/s)",
                    table[mode][ours] / table[mode][theirs],
                    "x",
                    MARIAN_TARGET,
                    detail=f"{table[mode][ours]:,.0f} vs {table[mode][theirs]:,.0f} tokens/s; "
                    + paired(times[ours], times[theirs]),
                )
            report.add(
                f"identical sequences, export fp32 vs hfattn generate, {mode}", agreement[mode]
            )
        latency = {name: [] for name in SYSTEMS}
        for number, sentence in enumerate(sources[: args.latency_sentences]):
            calls = runners(model, tokenizer, translators, [sentence], 1, args.new_tokens)
            times, _ = timed_rounds(calls, 1, warm_up=number == 0)
            for name in SYSTEMS:
                latency[name].append(times[name][0] * 1000)
        for name in SYSTEMS:
            report.add(f"batch-1 latency, greedy, {name}", statistics.median(latency[name]), "ms")
        for name in ("export fp32", "export int8"):
            report.add(
                f"batch-1 latency, hfattn generate / {name}",
                statistics.median(latency["hfattn"]) / statistics.median(latency[name]),
                "x",
            )
    after = load_average()
    lines = [
        f"Bible recipe size (2+2 layers, d 256, 4 heads, FFN 1024, vocab {VOCAB:,}), batch "
        f"{args.batch}, exactly {args.new_tokens} new tokens, {args.threads} thread(s), "
        f"{args.repeats} rounds, ctranslate2 {ctranslate2.__version__}, torch "
        f"{torch.__version__}; load average before {before}, after {after}; "
        f"{time.perf_counter() - started:.0f} s.",
        "",
        "| system | greedy tokens/s | beam tokens/s | batch-1 latency (ms/sentence, greedy) |",
        "|---|---:|---:|---:|",
    ]
    beam_mode = f"beam{args.beams}"
    for name in SYSTEMS:
        lines.append(
            f"| {name} | {table['greedy'][name]:,.0f} | {table[beam_mode][name]:,.0f} | "
            f"{statistics.median(latency[name]):.1f} |"
        )
    report.markdown.append("\n".join(lines))
    print("\n".join(lines))
    print()
    for record in report.records:
        target = (
            ""
            if record["target"] is None
            else f" (target {record['target']}, met: {record['met']})"
        )
        print(
            f"{record['name']}: {record['value']:.3f} {record['unit']}{target}  {record.get('detail', '')}"
        )
    report.write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
