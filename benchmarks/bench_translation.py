"""Score translation systems on the same held-out pairs, in one table.

    .venv/bin/python -m benchmarks.bench_translation runs/bahdanau_bible_en_es [more folders]
        [--ctranslate2 EXPORT_FOLDER ...] [--data bible] [--split test] [--num-beams 4]
        [--limit N] [--no-apertium] [--json PATH]

Rows: the rule-based Apertium system (Debian's ``apertium-eng-spa``, mode ``eng-spa``, when it
is installed) and every translation model folder given, each scored with the same sacrebleu
BLEU, chrF and exact match on the same sources and references (by default the Bible's test
books: Ruth, Jonah, Mark, Philippians, James). References are the raw target sentences, so a
model whose tokenizer lowercases or strips punctuation is scored as it writes.

``--ctranslate2`` adds a row per ``hfattn export`` folder, translated by CTranslate2
(:class:`hfattn.export.CTranslate2Translation`, the same beams and length limit), with the share
of sentences it translates exactly as the first model folder does (the export's agreement with
the PyTorch model it was exported from).

``--perturb`` scores every system a second time on the same sources lightly perturbed, as a
user types them (:func:`perturb`: lower-cased, punctuation removed, one typo per sentence,
seeded), and adds a table of each system's BLEU and chrF drop.

With ``--json`` each model's BLEU and chrF are records whose target is Apertium's score in the
same run (beat the rule-based baseline), and the table is kept as a markdown section. Where the
Bible's SWORD modules are missing, or no system can run, the JSON says ``not_run`` and why
(exit 0): ``make sword`` installs the Debian packages.
"""

from __future__ import annotations

import argparse
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.lib.benchlib import BenchReport, add_json_argument, report_not_run

APERTIUM_MODE = "eng-spa"
APERTIUM = "Apertium eng-spa (rule-based)"


NOT_WORD = re.compile(r"[^\w\s]")
"""Punctuation and symbols (what is neither a letter, a digit, ``_`` nor space)."""
TYPOS = ("swap", "drop", "double")


def perturb(text: str, rng: random.Random) -> str:
    """``text`` as typed in a hurry: lower-cased, punctuation removed, spaces collapsed, and
    one typo in one word of at least 3 letters chosen by ``rng``: two neighbouring letters
    swapped, a letter dropped or a letter doubled (:data:`TYPOS`). A text without such a
    word gets no typo."""
    words = NOT_WORD.sub(" ", text.lower()).split()
    candidates = [i for i, w in enumerate(words) if len(w) >= 3 and w.isalpha()]
    if candidates:
        index = rng.choice(candidates)
        word = words[index]
        at = rng.randrange(len(word) - 1)
        typo = rng.choice(TYPOS)
        if typo == "swap" and word[at] == word[at + 1]:
            typo = "drop"  # swapping two equal letters would change nothing
        if typo == "swap":
            word = word[:at] + word[at + 1] + word[at] + word[at + 2 :]
        elif typo == "drop":
            word = word[:at] + word[at + 1 :]
        else:
            word = word[: at + 1] + word[at] + word[at + 1 :]
        words[index] = word
    return " ".join(words)


def perturbed_sources(sources: list[str], seed: int = 0) -> list[str]:
    """:func:`perturb` of every source, the typo of source ``i`` drawn with seed
    ``seed + i`` (the same perturbed set whatever the order or the ``--limit``)."""
    return [perturb(text, random.Random(seed + i)) for i, text in enumerate(sources)]


def robustness_table(clean: list[dict], noisy: list[dict]) -> str:
    """Each system's BLEU and chrF on the clean and the perturbed sources, and the drop."""
    lines = [
        "| system | BLEU clean | BLEU perturbed | BLEU drop | chrF clean | chrF perturbed | chrF drop |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for a, b in zip(clean, noisy, strict=True):
        lines.append(
            f"| {a['system']} | {a['bleu']:.1f} | {b['bleu']:.1f} | {a['bleu'] - b['bleu']:.1f} "
            f"| {a['chrf']:.1f} | {b['chrf']:.1f} | {a['chrf'] - b['chrf']:.1f} |"
        )
    return "\n".join(lines)


def apertium_translate(sources: list[str], mode: str = APERTIUM_MODE) -> list[str]:
    """Translate with Apertium in one process call (one sentence per line; ``-u`` drops the
    unknown-word marks ``*``)."""
    text = "\n".join(s.replace("\n", " ") for s in sources) + "\n"
    out = subprocess.run(
        ["apertium", "-u", mode], input=text, capture_output=True, text=True, check=True
    ).stdout
    lines = out.rstrip("\n").split("\n")
    if len(lines) != len(sources):
        raise RuntimeError(f"apertium returned {len(lines)} lines for {len(sources)} sources")
    return [line.strip() for line in lines]


def model_translate(folder: str, sources: list[str], num_beams: int, batch_size: int):
    """Translate with a saved seq2seq folder (``hfattn.tasks.translation.inference``)."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    import hfattn.models  # noqa: F401  (registers the model types)
    from hfattn.tasks.translation.inference import translate_texts

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForSeq2SeqLM.from_pretrained(folder)
    if torch.cuda.is_available():
        model = model.cuda()
    return translate_texts(
        model, tokenizer, sources, num_beams=num_beams, batch_size=batch_size, max_new_tokens=160
    )


def export_translate(folder: str, sources: list[str], num_beams: int, batch_size: int):
    """Translate with a CTranslate2 export folder (``hfattn export``) as
    :func:`model_translate` does with a model folder."""
    from hfattn.export import CTranslate2Translation

    translator = CTranslate2Translation(folder)
    return translator.translate(
        sources, num_beams=num_beams, max_new_tokens=160, batch_size=batch_size
    )


def score_systems(systems: list, sources: list[str], references: list[str]) -> list[dict]:
    """Translate and score with every system: one dict of scores, seconds and predictions per
    system."""
    from hfattn.evaluation.translation import text_scores

    scored = []
    for name, translate in systems:
        start = time.perf_counter()
        predictions = translate(sources)
        seconds = time.perf_counter() - start
        scores = text_scores(predictions, references)
        scored.append({"system": name, **scores, "seconds": seconds, "predictions": predictions})
        print(f"{name}, e.g. {predictions[0][:80]!r}", file=sys.stderr)
    return scored


def mark_agreement(scored: list[dict], reference: str, exports: set[str]) -> None:
    """Give every row named in ``exports`` (``same_as``) the share of sentences translated
    exactly as the ``reference`` system does."""
    base = next(s for s in scored if s["system"] == reference)["predictions"]
    for s in scored:
        if s["system"] in exports:
            same = [a == b for a, b in zip(s["predictions"], base, strict=True)]
            s["same_as"] = sum(same) / len(same)


def markdown_table(scored: list[dict]) -> str:
    lines = [
        "| system | BLEU | chrF | exact match | seconds | same output as the model |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for s in scored:
        same = f"{100 * s['same_as']:.1f} %" if "same_as" in s else ""
        lines.append(
            f"| {s['system']} | {s['bleu']:.1f} | {s['chrf']:.1f} | {s['exact_match']:.3f} "
            f"| {s['seconds']:.1f} | {same} |"
        )
    return "\n".join(lines)


def to_report(scored: list[dict], heading: str) -> BenchReport:
    """Each system's BLEU and chrF; a model's target is Apertium's score of the same run."""
    report = BenchReport("translation")
    baseline = next((s for s in scored if s["system"] == APERTIUM), None)
    for s in scored:
        for metric, label in (("bleu", "BLEU"), ("chrf", "chrF")):
            target = None if baseline is None or s is baseline else baseline[metric]
            report.add(f"{s['system']}: {label}", s[metric], label, target)
        if "same_as" in s:
            report.add(f"{s['system']}: same output as the model", s["same_as"], "share", None)
    report.markdown.append(f"{heading}\n\n{markdown_table(scored)}")
    return report


def main(argv: list[str] | None = None) -> int:
    """Print the markdown table of every system's scores."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="*", help="translation model folders")
    parser.add_argument("--data", default="bible")
    parser.add_argument("--split", default="test")
    parser.add_argument("--num-beams", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--limit", type=int, help="score only the first N pairs")
    parser.add_argument("--no-apertium", action="store_true")
    parser.add_argument(
        "--ctranslate2",
        action="append",
        default=[],
        metavar="EXPORT_FOLDER",
        help="also score this `hfattn export` folder with CTranslate2 (repeatable)",
    )
    parser.add_argument(
        "--perturb",
        action="store_true",
        help="also score every system on the sources lower-cased, without punctuation and "
        "with one typo each, and report the drop",
    )
    add_json_argument(parser)
    args = parser.parse_args(argv)

    from hfattn.data.bible import BibleNotInstalledError
    from hfattn.data.translation import load_translation_splits

    try:
        rows = load_translation_splits(args.data)[args.split]["translation"][: args.limit]
    except BibleNotInstalledError as error:
        return report_not_run(
            "translation", f"the Bible is not installed ({error}; `make sword`)", args.json
        )
    sources = [r["en"] for r in rows]
    references = [r["es"] for r in rows]
    systems = []
    if not args.no_apertium:
        if shutil.which("apertium"):
            systems.append((APERTIUM, apertium_translate))
        else:
            print("apertium not installed (apt-get install apertium-eng-spa): row skipped")
    models = [f"`{Path(folder).name}` (beam {args.num_beams})" for folder in args.folders]
    exports = [f"CTranslate2 `{Path(f).name}` (beam {args.num_beams})" for f in args.ctranslate2]
    for name, folder in zip(models, args.folders, strict=True):
        systems.append(
            (name, lambda s, f=folder: model_translate(f, s, args.num_beams, args.batch_size))
        )
    for name, folder in zip(exports, args.ctranslate2, strict=True):
        systems.append(
            (name, lambda s, f=folder: export_translate(f, s, args.num_beams, args.batch_size))
        )
    if not systems:
        return report_not_run(
            "translation",
            "no system to score: apertium is not installed and no model folder was given",
            args.json,
        )
    heading = f"{len(sources)} {args.split} pairs of {args.data}"
    if not args.folders:
        heading += (
            " (no model folder given, so no model row: train one, e.g. `hfattn train "
            "recipes/bahdanau_bible_en_es.yaml`, and pass `runs/bahdanau_bible_en_es`; the "
            "figures of the trained runs are in docs/results/index.md)"
        )
    scored = score_systems(systems, sources, references)
    if models and exports:
        mark_agreement(scored, models[0], set(exports))
    print(f"\n{heading}\n\n{markdown_table(scored)}")
    report = to_report(scored, heading)
    if args.perturb:
        noisy = score_systems(systems, perturbed_sources(sources), references)
        table = robustness_table(scored, noisy)
        print(
            f"\nThe same sources perturbed (lower-cased, no punctuation, one typo each)\n\n{table}"
        )
        for a, b in zip(scored, noisy, strict=True):
            report.add(f"{a['system']}: BLEU, perturbed sources", b["bleu"], "BLEU", None)
            report.add(
                f"{a['system']}: BLEU drop, perturbed sources", a["bleu"] - b["bleu"], "BLEU", None
            )
        report.markdown.append(f"Perturbed sources (robustness)\n\n{table}")
    report.write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
